//! `conntrack.*` applied at start-up as kube-proxy applies them, in a network namespace of the
//! test's own (its conntrack timeouts are its own; `nf_conntrack_max` is read-only outside the
//! first namespace, so Ferry warns and goes on, and the machine's hash size is never touched):
//! the timeouts are written and logged, `ferry status` shows them, and with
//! `nf_conntrack_tcp_be_liberal` on, iptables mode drops no packet conntrack marks invalid.

#[path = "support/node_ns.rs"]
mod node_ns;

use node_ns::{seed, wait_log, NodeNs};

fn sysctl(ns: &NodeNs, name: &str) -> String {
    let out = ns.run("cat", &[&format!("/proc/sys/net/netfilter/{name}")]);
    assert!(out.status.success(), "{name}: {out:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

/// Loads nf_conntrack, whose settings appear with it (a node's CNI or runtime has loaded it
/// long before its proxy starts).
fn load_conntrack(ns: &NodeNs) {
    for cmd in [
        "add table ip t",
        "add chain ip t c { type filter hook output priority 0; }",
        "add rule ip t c ct state new accept",
    ] {
        let out = ns.run("nft", &[cmd]);
        assert!(out.status.success(), "nft {cmd}: {out:?}");
    }
}

#[test]
#[ignore = "needs root: network namespaces"]
fn conntrack_timeouts_are_set_logged_and_shown_and_a_read_only_max_is_a_warning() {
    let ns = NodeNs::new("cttime");
    load_conntrack(&ns);
    let before = sysctl(&ns, "nf_conntrack_tcp_timeout_established");
    let max: u64 = sysctl(&ns, "nf_conntrack_max")
        .parse()
        .expect("nf_conntrack_max");
    let ferry = ns.spawn_ferry(
        &seed(),
        &[
            // 1 048 576 (the cap) as soon as the machine has a CPU.
            "--conntrack-max-per-core=1048576",
            "--conntrack-tcp-timeout-established=2h",
            "--conntrack-tcp-timeout-close-wait=30m",
            "--conntrack-udp-timeout=45s",
            "--conntrack-udp-timeout-stream=2m30s",
        ],
        None,
        &[],
    );
    let log = wait_log(&ferry, "synced rules", 1);
    assert_eq!(sysctl(&ns, "nf_conntrack_tcp_timeout_established"), "7200");
    assert_eq!(sysctl(&ns, "nf_conntrack_tcp_timeout_close_wait"), "1800");
    assert_eq!(sysctl(&ns, "nf_conntrack_udp_timeout"), "45");
    assert_eq!(sysctl(&ns, "nf_conntrack_udp_timeout_stream"), "150");
    let set = format!(
        "conntrack: net.netfilter.nf_conntrack_tcp_timeout_established = 7200 (was {before}; \
         conntrack.tcpEstablishedTimeout)"
    );
    assert!(
        log.lines().any(|l| l.contains("INFO") && l.contains(&set)),
        "{log}"
    );
    // nf_conntrack_max is read-only here: unless the machine's is already that high, the
    // raise fails with a warning, and the hash size is left alone.
    let warned = log.lines().any(|l| {
        l.contains("WARN")
            && l.contains("cannot set net.netfilter.nf_conntrack_max to 1048576")
            && l.contains("`conntrack.maxPerCore: 0`")
    });
    assert_eq!(warned, max < 1_048_576, "nf_conntrack_max {max}:\n{log}");
    assert!(!log.contains("hashsize"), "{log}");
    let (code, status, err) = ns.ferry(&["status"]);
    assert_eq!(code, 0, "{err}");
    assert!(status.contains(&set), "{status}");
}

#[test]
#[ignore = "needs root: network namespaces"]
fn with_liberal_tcp_iptables_mode_drops_no_invalid_packets() {
    let drop = "-A KUBE-FORWARD -m conntrack --ctstate INVALID";
    for (liberal, tag) in [(false, "ctstrict"), (true, "ctlib")] {
        let ns = NodeNs::new(tag);
        load_conntrack(&ns);
        let mut extra = vec!["--proxy-mode", "iptables", "--iptables-backend", "nft"];
        if liberal {
            extra.push("--conntrack-tcp-be-liberal");
        }
        let ferry = ns.spawn_ferry(&seed(), &extra, None, &[]);
        let log = wait_log(&ferry, "synced rules", 1);
        assert_eq!(
            sysctl(&ns, "nf_conntrack_tcp_be_liberal"),
            if liberal { "1" } else { "0" }
        );
        let out = ns.run("iptables-nft-save", &["-t", "filter"]);
        let saved = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            saved.contains(drop),
            !liberal,
            "liberal {liberal}:\n{saved}"
        );
        assert_eq!(
            log.contains("nf_conntrack_tcp_be_liberal is on: no rule drops packets"),
            liberal,
            "{log}"
        );
    }
}
