use std::net::IpAddr;

use ferry_model::{IpFamily, Protocol};

use super::sets::{self, IpSets, SetEntry};
use super::*;

fn ip(s: &str) -> IpAddr {
    s.parse().expect("ip")
}

#[test]
fn schedulers_parse_as_upstream_names_them_and_empty_means_rr() {
    assert_eq!("".parse::<Scheduler>(), Ok(Scheduler::Rr));
    for s in Scheduler::ALL {
        assert_eq!(s.as_str().parse::<Scheduler>(), Ok(s));
    }
    let err = "fastest".parse::<Scheduler>().expect_err("unknown");
    assert!(err.contains("fastest") && err.contains("wlc"), "{err}");
}

#[test]
fn ipv6_sets_are_named_kube_6() {
    assert_eq!(sets::CLUSTER_IP.name_in(IpFamily::V6), "KUBE-6-CLUSTER-IP");
    // The kernel takes 31 characters; upstream cuts the longer IPv6 names.
    assert_eq!(
        sets::LOAD_BALANCER_SOURCE_CIDR.name_in(IpFamily::V6),
        "KUBE-6-LOAD-BALANCER-SOURCE-CID"
    );
    for kind in sets::ALL {
        assert!(kind.name_in(IpFamily::V6).len() <= sets::MAX_SET_NAME);
    }
    assert_eq!(
        sets::NODE_PORT_TCP.create_line(IpFamily::V4),
        "create KUBE-NODE-PORT-TCP bitmap:port range 0-65535"
    );
    assert_eq!(
        sets::CLUSTER_IP.create_line(IpFamily::V6),
        "create KUBE-6-CLUSTER-IP hash:ip,port family inet6 hashsize 1024 maxelem 65536"
    );
}

#[test]
fn entries_print_as_ipset_save_prints_them() {
    let e = SetEntry::IpPortIp(ip("10.0.0.5"), Protocol::Tcp, 8080, ip("10.0.0.5"));
    assert_eq!(e.to_string(), "10.0.0.5,tcp:8080,10.0.0.5");
    let host = SetEntry::IpPortNet(
        ip("203.0.113.7"),
        Protocol::Sctp,
        80,
        "10.1.1.9/32".parse().expect("net"),
    );
    assert_eq!(host.to_string(), "203.0.113.7,sctp:80,10.1.1.9");
    assert_eq!(SetEntry::Port(32223).to_string(), "32223");
}

#[test]
fn every_upstream_set_exists_even_when_empty() {
    let text = IpSets::new(IpFamily::V4).to_string();
    assert_eq!(text.lines().count(), sets::ALL.len());
    assert!(text.contains("create KUBE-LOOP-BACK hash:ip,port,ip family inet"));
}

#[test]
fn ipvsadm_lines_match_seed_004() {
    let va = VirtualAddress {
        protocol: Protocol::Tcp,
        ip: ip("10.96.198.86"),
        port: 8080,
    };
    let vs = VirtualServer::new(Scheduler::Rr, None, IpFamily::V4);
    assert_eq!(service_line(&va, &vs), "TCP  10.96.198.86:8080 rr");
    let line = real_server_line(&RealServerLine {
        address: "192.168.169.166:56010".parse().expect("addr"),
        forward: Forward::Masq,
        weight: 1,
        active: 0,
        inactive: 0,
    });
    assert_eq!(
        line,
        "  -> 192.168.169.166:56010        Masq    1      0          0"
    );
    let sticky = VirtualServer::new(Scheduler::Mh, Some(10800), IpFamily::V4);
    assert_eq!(
        service_line(&va, &sticky),
        "TCP  10.96.198.86:8080 mh (mh-port) persistent 10800"
    );
}
