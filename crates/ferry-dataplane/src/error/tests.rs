//! The chain a sync-failure log line prints: each cause once.

use std::io;

use nix::errno::Errno;

use super::*;

/// Fails when an error's message already holds its source's message: the log would repeat it.
fn assert_each_cause_once(e: &Error) {
    let mut link: &dyn std::error::Error = e;
    while let Some(source) = link.source() {
        let (outer, inner) = (link.to_string(), source.to_string());
        assert!(
            !outer.contains(&inner),
            "{outer:?} prints its source {inner:?} too"
        );
        link = source;
    }
}

#[test]
fn a_netlink_socket_failure_names_its_errno_once() {
    let e = Error::from(NetlinkError::from(Errno::EPERM));
    assert_eq!(
        e.with_causes(),
        "netlink batch failed: nfnetlink socket: EPERM: Operation not permitted"
    );
    assert_each_cause_once(&e);
}

#[test]
fn a_tool_that_cannot_start_names_the_os_error_once() {
    let e = Error::Spawn {
        program: "iptables-nft-restore".into(),
        source: io::Error::from_raw_os_error(2),
    };
    assert_eq!(
        e.with_causes(),
        "could not run iptables-nft-restore: No such file or directory (os error 2)"
    );
    assert_each_cause_once(&e);
}

#[test]
fn every_wrapped_cause_appears_once_in_the_chain() {
    let os = || io::Error::from_raw_os_error(17);
    let errors = [
        Error::from(IpvsError::Link {
            what: "add 172.30.0.10 to kube-ipvs0".into(),
            error: os(),
        }),
        Error::from(IpvsError::Kernel(os())),
        Error::from(IpvsError::NoIpvs(os())),
        Error::from(IpvsError::Socket(os())),
        Error::from(IpvsError::Sysctl(os())),
        Error::from(NetlinkError::Rejected(Errno::EINVAL)),
        Error::Addresses(Errno::EACCES),
    ];
    for e in &errors {
        assert_each_cause_once(e);
        let chain = e.with_causes();
        assert_eq!(
            chain.matches("File exists").count() + chain.matches("EINVAL").count(),
            usize::from(!matches!(e, Error::Addresses(_))),
            "{chain}"
        );
    }
    assert_eq!(
        errors[0].with_causes(),
        "add 172.30.0.10 to kube-ipvs0: File exists (os error 17)"
    );
}
