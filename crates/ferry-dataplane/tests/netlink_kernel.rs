//! The netlink element path against the real kernel, in a private network namespace (the test
//! thread `unshare`s one; it disappears with the thread). Skipped unless root.

mod support;
use support::{in_new_netns, nft};

use std::collections::BTreeMap;
use std::process::Command;

use ferry_compile::config::LocalDetector;
use ferry_compile::nft::{render, Ruleset};
use ferry_compile::{CompileConfig, Plan};
use ferry_dataplane::nft::NftDataplane;
use ferry_dataplane::SyncKind;
use ferry_model::fixtures::{mk_endpoint, mk_node, mk_service, mk_slice, with_node_port};
use ferry_model::{
    ClusterState, IpFamily, NodeContext, NodeView, Object, ServiceName, TrafficPolicy,
};

fn ruleset(endpoints: &[&str]) -> Ruleset {
    ruleset_with(endpoints, TrafficPolicy::Cluster, &CompileConfig::default())
}

fn ruleset_with(endpoints: &[&str], policy: TrafficPolicy, cfg: &CompileConfig) -> Ruleset {
    let (ips, node_ip, pod_cidr) = match cfg.family {
        IpFamily::V4 => (["10.96.0.10", "10.96.0.11"], "10.1.1.9", "10.0.0.0/24"),
        IpFamily::V6 => (
            ["fd00:10:96::10", "fd00:10:96::11"],
            "fd00:10:1::9",
            "fd00:10:244:1::/64",
        ),
    };
    let mut state = ClusterState::new();
    for ((name, np), ip) in [("web", 30080), ("api", 30081)].into_iter().zip(ips) {
        let svc = with_node_port(mk_service("dev", name, ip, 80), np, policy);
        state.apply(Object::from(svc));
        let eps = endpoints.iter().map(|a| mk_endpoint(a, "n1")).collect();
        let mut slice = mk_slice("dev", name, 8080, eps);
        slice.family = cfg.family;
        state.apply(Object::from(slice));
    }
    state.apply(Object::from(mk_node("n1", node_ip, pod_cidr)));
    let ctx = NodeContext {
        node_name: "n1".into(),
        family: cfg.family,
    };
    render(&Plan::build(&NodeView::build(&state, &ctx), cfg))
}

/// The chain blocks of a table listing (`chain NAME { … }`), sets and elements left out.
/// Fixed chains (written by nft from the same text) are reduced to their names: nft prints
/// some of their rules normalised (`priority srcnat`, `== 0x00000000`).
fn chains(listing: &str) -> Vec<String> {
    const FIXED: [&str; 19] = [
        "filter-prerouting",
        "filter-prerouting-post-dnat",
        "affinity-record",
        "firewall-check",
        "firewall-allow-check",
        "filter-input",
        "filter-forward",
        "filter-output",
        "filter-output-post-dnat",
        "nat-prerouting",
        "nat-output",
        "nat-postrouting",
        "cluster-ips-check",
        "mark-for-masquerade",
        "masquerading",
        "nodeport-endpoints-check",
        "reject-chain",
        "service-endpoints-check",
        "services",
    ];
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    for line in listing.lines() {
        if line.starts_with("\tchain ") {
            current = Some(String::new());
        }
        if let Some(c) = current.as_mut() {
            c.push_str(line.trim());
            c.push('\n');
            if line == "\t}" {
                out.extend(current.take().map(|c| {
                    let name = c["chain ".len()..].split(' ').next().unwrap_or_default();
                    if FIXED.contains(&name) {
                        format!("chain {name}")
                    } else {
                        c
                    }
                }));
            }
        }
    }
    out.sort();
    out
}

fn list() -> String {
    list_family("ip")
}

fn list_family(family: &str) -> String {
    nft(&["list", "table", family, "ferry"])
}

#[test]
#[ignore = "needs root: network namespaces"]
fn endpoint_changes_go_over_netlink_and_nft_lists_them() {
    in_new_netns(|| {
        let mut dp = NftDataplane::new();
        dp.apply_full(ruleset(&["10.0.0.5", "10.0.0.6"]))
            .expect("full");
        assert!(list().contains("10.96.0.10 . tcp . 80 . 1 : 10.0.0.6 . 8080"));

        // Replace an endpoint of dev/web: element-only, over netlink.
        let after = ruleset(&["10.0.0.5", "10.0.0.7"]);
        let web = ServiceName::new("dev", "web");
        let changes = BTreeMap::from([(web.clone(), after.services.get(&web).cloned())]);
        let r = dp.apply_changes(changes).expect("incremental");
        assert!(r.netlink && r.kind == SyncKind::Partial, "{r:?}");
        let listed = list();
        assert!(
            listed.contains("10.96.0.10 . tcp . 80 . 1 : 10.0.0.7 . 8080"),
            "{listed}"
        );
        assert!(
            listed.contains("tcp . 30080 . 1 : 10.0.0.7 . 8080"),
            "{listed}"
        );
        assert!(listed.contains("10.0.0.7 . 10.0.0.7"), "hairpin: {listed}");
        assert!(
            listed.contains("10.96.0.11 . tcp . 80 . 1 : 10.0.0.6 . 8080"),
            "dev/api untouched: {listed}"
        );

        // dev/api drops to one endpoint: its dispatch element moves to a new chain, created
        // with its rules in the same batch.
        let one = ruleset(&["10.0.0.5"]);
        let api = ServiceName::new("dev", "api");
        let changes = BTreeMap::from([(api.clone(), one.services.get(&api).cloned())]);
        let r = dp.apply_changes(changes).expect("count change");
        assert!(r.netlink && r.kind == SyncKind::Partial, "{r:?}");
        assert!(r.chains_written > 0, "{r:?}");
        let listed = list();
        assert!(
            listed
                .contains("10.96.0.11 . tcp . 80 comment \"dev/api:http\" : goto cluster-ip-cluster-1-no-masquerade"),
            "{listed}"
        );

        // dev/web follows to one endpoint: the chain exists, so netlink again, with the
        // verdict element and its comment.
        let changes = BTreeMap::from([(web.clone(), one.services.get(&web).cloned())]);
        let r = dp.apply_changes(changes).expect("count change");
        assert!(r.netlink, "{r:?}");
        let listed = list();
        assert!(
            listed
                .contains("10.96.0.10 . tcp . 80 comment \"dev/web:http\" : goto cluster-ip-cluster-1-no-masquerade"),
            "{listed}"
        );
        // cluster-ip-cluster-2 lost its last user: deleted in the same batch.
        assert!(!listed.contains("chain cluster-ip-cluster-2 "), "{listed}");
        assert_eq!(
            chains(&listed),
            chains(&dp.installed().expect("installed").to_string())
        );
    });
}

/// Every kind of dispatch rule, written over netlink, lists exactly as `ferry rules` renders it;
/// a resync replaces a changed table in place and deletes chains nobody uses any more.
#[test]
#[ignore = "needs root: network namespaces"]
fn netlink_rules_list_as_rendered_and_full_syncs_replace_in_place() {
    in_new_netns(|| {
        let cidr = |s: &str| s.parse().expect("cidr");
        let detector = |nets| CompileConfig {
            local_detector: LocalDetector::ClusterCidr(nets),
            ..CompileConfig::default()
        };
        let mut dp = NftDataplane::new();
        for (policy, cfg) in [
            (TrafficPolicy::Local, detector(vec![cidr("10.0.0.0/16")])),
            (TrafficPolicy::Cluster, detector(vec![cidr("10.0.0.0/12")])),
            (
                TrafficPolicy::Local,
                detector(vec![cidr("10.0.0.0/16"), cidr("172.16.0.0/12")]),
            ),
            (TrafficPolicy::Cluster, detector(vec![cidr("0.0.0.0/0")])),
            (
                TrafficPolicy::Local,
                detector(vec![cidr("10.0.0.0/16"), cidr("255.0.0.0/8")]),
            ),
            (TrafficPolicy::Cluster, CompileConfig::default()),
        ] {
            let desired = ruleset_with(&["10.0.0.5", "10.0.0.6", "10.0.0.7"], policy, &cfg);
            let rendered = desired.to_string();
            let r = dp.apply_full(desired).expect("full");
            assert!(r.netlink && r.kind == SyncKind::Full, "{r:?}");
            let listed = list();
            assert_eq!(chains(&listed), chains(&rendered), "{listed}");
            assert!(
                listed.contains("10.96.0.10 . tcp . 80 . 2 : 10.0.0.7 . 8080"),
                "{listed}"
            );
        }
    });
}

/// The same for the `ip6 ferry` table: 16-byte addresses in the payload loads, prefix matches,
/// interval sets, DNAT keys and values (whose fields span several 32-bit registers).
#[test]
#[ignore = "needs root: network namespaces"]
fn ipv6_netlink_rules_list_as_rendered() {
    in_new_netns(|| {
        let cidr = |s: &str| s.parse().expect("cidr");
        let detector = |nets| CompileConfig {
            family: IpFamily::V6,
            local_detector: LocalDetector::ClusterCidr(nets),
            ..CompileConfig::default()
        };
        let mut dp = NftDataplane::new();
        for (policy, cfg) in [
            (
                TrafficPolicy::Local,
                detector(vec![cidr("fd00:10:244::/48")]),
            ),
            (
                TrafficPolicy::Cluster,
                detector(vec![cidr("fd00:10:240::/44")]),
            ),
            (
                TrafficPolicy::Local,
                detector(vec![cidr("fd00:10:244::/48"), cidr("fd00:20::/32")]),
            ),
            (TrafficPolicy::Cluster, detector(vec![cidr("::/0")])),
            (
                TrafficPolicy::Local,
                detector(vec![cidr("fd00:10:244::/48"), cidr("ff00::/8")]),
            ),
            (
                TrafficPolicy::Cluster,
                CompileConfig {
                    family: IpFamily::V6,
                    ..CompileConfig::default()
                },
            ),
        ] {
            let eps = ["fd00:10:244:1::5", "fd00:10:244:1::6", "fd00:10:244:1::7"];
            let desired = ruleset_with(&eps, policy, &cfg);
            let rendered = desired.to_string();
            let r = dp.apply_full(desired).expect("full");
            assert!(r.netlink && r.kind == SyncKind::Full, "{r:?}");
            let listed = list_family("ip6");
            assert_eq!(chains(&listed), chains(&rendered), "{listed}");
            assert!(
                listed.contains("fd00:10:96::10 . tcp . 80 . 2 : fd00:10:244:1::7 . 8080"),
                "{listed}"
            );
        }
    });
}

/// A full sync writes nothing but the skeleton through nft: a table left by a run that used a
/// different chain set keeps working until the batch swaps everything at once.
#[test]
#[ignore = "needs root: network namespaces"]
fn a_full_sync_over_an_existing_table_removes_stale_chains() {
    in_new_netns(|| {
        let mut first = NftDataplane::new();
        first
            .apply_full(ruleset(&["10.0.0.5", "10.0.0.6"]))
            .expect("first");
        // A new process (restart) with fewer endpoints: cluster-ip-…-2 chains are stale.
        let mut second = NftDataplane::new();
        let desired = ruleset(&["10.0.0.5"]);
        let rendered = desired.to_string();
        second.apply_full(desired).expect("restart");
        let listed = list();
        assert_eq!(chains(&listed), chains(&rendered), "{listed}");
        assert!(!listed.contains("10.0.0.6"), "old elements gone: {listed}");
    });
}

/// A table whose declarations conflict with Ferry's (a set of another type, as an older version
/// might have left) is recreated in one nft run rather than left half-synced.
#[test]
#[ignore = "needs root: network namespaces"]
fn conflicting_declarations_fall_back_to_recreating_the_table() {
    in_new_netns(|| {
        let out = Command::new("nft")
            .args(["add table ip ferry; add set ip ferry cluster-ips { type inet_service; }"])
            .output()
            .expect("nft");
        assert!(out.status.success(), "{out:?}");
        let mut dp = NftDataplane::new();
        let desired = ruleset(&["10.0.0.5"]);
        let rendered = desired.to_string();
        let r = dp.apply_full(desired).expect("full");
        assert!(!r.netlink, "recreated with nft: {r:?}");
        let listed = list();
        assert_eq!(chains(&listed), chains(&rendered), "{listed}");
        assert!(listed.contains("type ipv4_addr\n"), "{listed}");
    });
}
