//! Lab cases about what Ferry owns: `ferry cleanup` removes exactly Ferry's rules, and rules
//! removed by hand come back. Shared by every mode, like the matrix.

use ferry_lab::spec::NODE1;
use ferry_lab::Host;

use crate::seed::*;

#[path = "ipvs_ownership.rs"]
mod ipvs_ownership;

/// Ferry owns only its rules: another table (nftables) or another chain and rule (iptables)
/// survive its syncs, and `ferry cleanup` removes Ferry's rules and nothing else.
pub fn cleanup_removes_only_ferrys_rules(mode: Mode) {
    match mode.iptables() {
        _ if mode == Mode::Ipvs => ipvs_ownership::cleanup_removes_only_ferrys_ipvs_objects(),
        None => cleanup_removes_only_ferrys_table(mode),
        Some(iptables) => cleanup_removes_only_ferrys_chains(mode, iptables),
    }
}

fn cleanup_removes_only_ferrys_chains(mode: Mode, iptables: &str) {
    let mut seed = SeedLab::start(mode, "Cluster");
    let save = format!("{iptables}-save");
    for args in [
        vec!["-t", "nat", "-N", "OTHER"],
        vec!["-t", "nat", "-A", "OTHER", "-j", "RETURN"],
        vec!["-t", "nat", "-I", "PREROUTING", "-j", "OTHER"],
        vec!["-A", "INPUT", "-p", "tcp", "--dport", "9", "-j", "ACCEPT"],
    ] {
        seed.lab
            .exec(NODE1, std::iter::once(iptables).chain(args))
            .expect("add foreign rules");
    }
    let foreign = [
        ":OTHER - [0:0]",
        "-A PREROUTING -j OTHER",
        "-A INPUT -p tcp -m tcp --dport 9 -j ACCEPT",
    ];
    seed.change(|m| m.endpoints[1].1 = false);
    let rules = seed.lab.exec(NODE1, [save.as_str()]).expect("save");
    for needle in foreign
        .iter()
        .chain(&[":KUBE-SERVICES - [0:0]", "-j KUBE-POSTROUTING"])
    {
        assert!(rules.contains(needle), "{needle}:\n{rules}");
    }
    seed.ferry(NODE1).stop().expect("stop ferry");
    let rules = seed.lab.exec(NODE1, [save.as_str()]).expect("save");
    assert!(
        rules.contains(":KUBE-SERVICES"),
        "stopping leaves the rules in place: {rules}"
    );
    seed.lab
        .exec(NODE1, [FERRY, "cleanup"])
        .expect("ferry cleanup");
    let rules = seed.lab.exec(NODE1, [save.as_str()]).expect("save");
    assert!(!rules.contains("KUBE-"), "{rules}");
    for needle in foreign {
        assert!(rules.contains(needle), "{needle}:\n{rules}");
    }
}

/// Emptying Ferry's service dispatch by hand (`iptables -t nat -F KUBE-SERVICES`, or the
/// nftables `services` chain) is repaired by the periodic full resync, within one sync period.
pub fn flushed_chains_are_repaired_within_one_sync_period(mode: Mode) {
    let mut seed = SeedLab::start_with(mode, "Cluster", &["--sync-period", "3s"]);
    // What to flush, how to list it, and a rule it holds.
    let (flush, list, rule): (Vec<&str>, Vec<&str>, &str) = match mode.iptables() {
        Some(ipt) => (
            vec![ipt, "-t", "nat", "-F", "KUBE-SERVICES"],
            vec![ipt, "-t", "nat", "-S", "KUBE-SERVICES"],
            // IPVS mode's KUBE-SERVICES matches upstream's set instead of each ClusterIP.
            if mode == Mode::Ipvs {
                "--match-set KUBE-CLUSTER-IP dst,dst"
            } else {
                CLUSTER_IP
            },
        ),
        None if mode == Mode::Userspace => (
            vec!["nft", "flush", "chain", "ip", "ferry", "portals-container"],
            vec!["nft", "list", "chain", "ip", "ferry", "portals-container"],
            "map @portals",
        ),
        None => (
            vec!["nft", "flush", "chain", "ip", "ferry", "services"],
            vec!["nft", "list", "chain", "ip", "ferry", "services"],
            "vmap @service-ips",
        ),
    };
    // (Not asserting the flushed state: a periodic resync may already have repaired it.)
    seed.lab.exec(NODE1, &flush).expect("flush by hand");
    // Counted after the flush: the full sync waited for cannot be one that ran before it.
    let before = seed.full_syncs(NODE1);
    seed.wait_full_synced(NODE1, before + 1);
    assert!(seed.lab.exec(NODE1, &list).expect("list").contains(rule));
    seed.hello(&Host::node(NODE1), &cluster_url());
}

/// Deleting all of Ferry's rules by hand (iptables: flushing and deleting every chain of
/// filter, nat and mangle, as a firewall reload does, canaries included) is noticed at the next
/// sync, which is then a full one: in iptables mode at once, because the canary is gone; in
/// nftables mode the partial sync fails and is retried as a full one.
pub fn deleting_all_of_ferrys_rules_is_repaired_at_the_next_sync(mode: Mode) {
    let mut seed = SeedLab::start(mode, "Cluster");
    let before = seed.full_syncs(NODE1);
    let cmds: Vec<Vec<&str>> = match mode.iptables() {
        Some(ipt) => ["filter", "nat", "mangle"]
            .iter()
            .flat_map(|t| [vec![ipt, "-t", t, "-F"], vec![ipt, "-t", t, "-X"]])
            .collect(),
        None => vec![vec!["nft", "delete", "table", "ip", "ferry"]],
    };
    for cmd in &cmds {
        seed.lab.exec(NODE1, cmd).expect("delete by hand");
    }
    seed.change(|m| m.endpoints[1].1 = false);
    seed.wait_full_synced(NODE1, before + 1);
    if mode.iptables().is_some() {
        let log = seed.ferry(NODE1).log();
        assert!(
            !log.contains("sync failed"),
            "the canary, not a failure:\n{log}"
        );
        let canary = if mode == Mode::Ipvs {
            "chain KUBE-IPVS-FILTER is gone"
        } else {
            "canary chain KUBE-PROXY-CANARY is gone"
        };
        assert!(log.contains(canary), "{log}");
    }
    for _ in 0..10 {
        let h = seed.hello(&Host::node(NODE1), &cluster_url());
        assert_eq!(h.server_ip, POD_A.1, "the change is in place too");
    }
}

/// nftables: another table survives Ferry's syncs, and `ferry cleanup` removes Ferry's table
/// and nothing else.
fn cleanup_removes_only_ferrys_table(mode: Mode) {
    let mut seed = SeedLab::start(mode, "Cluster");
    seed.lab
        .exec(NODE1, ["nft", "add table ip other; add chain ip other keep { type filter hook input priority 0; }"])
        .expect("add a foreign table");
    seed.change(|m| m.endpoints[1].1 = false);
    let tables = seed
        .lab
        .exec(NODE1, ["nft", "list", "tables"])
        .expect("list tables");
    assert!(
        tables.contains("table ip other") && tables.contains("table ip ferry"),
        "{tables}"
    );
    seed.ferry(NODE1).stop().expect("stop ferry");
    let tables = seed
        .lab
        .exec(NODE1, ["nft", "list", "tables"])
        .expect("list tables");
    assert!(
        tables.contains("table ip ferry"),
        "stopping leaves the rules in place: {tables}"
    );
    seed.lab
        .exec(NODE1, [FERRY, "cleanup"])
        .expect("ferry cleanup");
    let tables = seed
        .lab
        .exec(NODE1, ["nft", "list", "tables"])
        .expect("list tables");
    assert!(!tables.contains("table ip ferry"), "{tables}");
    assert!(tables.contains("table ip other"), "{tables}");
}
