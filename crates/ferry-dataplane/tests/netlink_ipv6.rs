//! The IPv6 table (`ip6 ferry`) against the real kernel, in a private network namespace:
//! a full load through `nft -f`, then an IPv6 endpoint change over netlink (16-byte addresses in
//! the concatenated keys and values). Skipped unless root.

mod support;
use support::{in_new_netns, nft};

use std::collections::BTreeMap;

use ferry_compile::nft::{render, Ruleset};
use ferry_compile::{CompileConfig, Plan};
use ferry_dataplane::nft::NftDataplane;
use ferry_dataplane::SyncKind;
use ferry_model::fixtures::{mk_endpoint, mk_node, mk_service, mk_slice, with_node_port};
use ferry_model::{
    ClusterState, IpFamily, NodeContext, NodeView, Object, ServiceName, TrafficPolicy,
};

fn ruleset(endpoints: &[&str]) -> Ruleset {
    let mut state = ClusterState::new();
    let svc = with_node_port(
        mk_service("dev", "web", "fd00:10:96::10", 80),
        30080,
        TrafficPolicy::Cluster,
    );
    state.apply(Object::from(svc));
    let mut slice = mk_slice(
        "dev",
        "web",
        8080,
        endpoints.iter().map(|a| mk_endpoint(a, "n1")).collect(),
    );
    slice.family = IpFamily::V6;
    state.apply(Object::from(slice));
    state.apply(Object::from(mk_node(
        "n1",
        "fd00:10:1::9",
        "fd00:10:244:1::/64",
    )));
    let ctx = NodeContext {
        node_name: "n1".into(),
        family: IpFamily::V6,
    };
    let cfg = CompileConfig {
        family: IpFamily::V6,
        ..CompileConfig::default()
    };
    render(&Plan::build(&NodeView::build(&state, &ctx), &cfg))
}

fn list() -> String {
    nft(&["list", "table", "ip6", "ferry"])
}

#[test]
#[ignore = "needs root: network namespaces"]
fn ipv6_endpoint_changes_go_over_netlink_and_nft_lists_them() {
    in_new_netns(|| {
        let mut dp = NftDataplane::new();
        dp.apply_full(ruleset(&["fd00:10:244:1::5", "fd00:10:244:1::6"]))
            .expect("full");
        let listed = list();
        assert!(
            listed.contains("fd00:10:96::10 . tcp . 80 . 1 : fd00:10:244:1::6 . 8080"),
            "{listed}"
        );

        let after = ruleset(&["fd00:10:244:1::5", "fd00:10:244:1::7"]);
        let web = ServiceName::new("dev", "web");
        let changes = BTreeMap::from([(web.clone(), after.services.get(&web).cloned())]);
        let r = dp.apply_changes(changes).expect("incremental");
        assert!(r.netlink && r.kind == SyncKind::Partial, "{r:?}");
        let listed = list();
        for want in [
            "fd00:10:96::10 . tcp . 80 . 1 : fd00:10:244:1::7 . 8080",
            "tcp . 30080 . 1 : fd00:10:244:1::7 . 8080",
            "fd00:10:244:1::7 . fd00:10:244:1::7",
        ] {
            assert!(listed.contains(want), "{want}: {listed}");
        }
        assert!(!listed.contains("fd00:10:244:1::6"), "{listed}");
        // The IPv4 table is not involved.
        assert_eq!(nft(&["list", "tables"]).trim(), "table ip6 ferry");
    });
}
