//! loadBalancerSourceRanges against the real kernel, in a private network namespace (the test
//! thread `unshare`s one; it disappears with the thread). Skipped unless root.
//!
//! A change of ranges is elements of the `firewall-allow` interval set only: a partial sync
//! (through `nft -f`, since interval elements are not sent over netlink), no chain written.

mod support;
use support::{in_new_netns, nft};

use std::collections::BTreeMap;

use ferry_compile::nft::{render, Ruleset};
use ferry_compile::{CompileConfig, Plan};
use ferry_dataplane::nft::NftDataplane;
use ferry_dataplane::SyncKind;
use ferry_model::fixtures::{ip, mk_endpoint, mk_node, mk_service, mk_slice, with_node_port};
use ferry_model::{
    ClusterState, IpFamily, NodeContext, NodeView, Object, ServiceName, ServiceType, TrafficPolicy,
};

fn ruleset(ranges: &[&str]) -> Ruleset {
    let mut state = ClusterState::new();
    let mut svc = with_node_port(
        mk_service("dev", "web", "10.96.0.10", 80),
        30080,
        TrafficPolicy::Cluster,
    );
    svc.service_type = ServiceType::LoadBalancer;
    svc.load_balancer_ips = vec![ip("203.0.113.10")];
    svc.load_balancer_source_ranges = ranges.iter().map(|r| r.parse().expect("cidr")).collect();
    state.apply(Object::from(svc));
    let eps = vec![mk_endpoint("10.0.0.5", "n1")];
    state.apply(Object::from(mk_slice("dev", "web", 8080, eps)));
    state.apply(Object::from(mk_node("n1", "10.1.1.9", "10.0.0.0/24")));
    let ctx = NodeContext {
        node_name: "n1".into(),
        family: IpFamily::V4,
    };
    render(&Plan::build(
        &NodeView::build(&state, &ctx),
        &CompileConfig::default(),
    ))
}

fn list_set(name: &str) -> String {
    nft(&["list", "set", "ip", "ferry", name])
}

#[test]
#[ignore = "needs root: network namespaces"]
fn source_range_changes_are_element_only_partial_syncs() {
    in_new_netns(|| {
        let mut dp = NftDataplane::new();
        dp.apply_full(ruleset(&["198.51.100.0/24", "10.1.1.0/24"]))
            .expect("full");
        let allow = list_set("firewall-allow");
        // 10.1.1.0/24 holds the node's IP: the load-balancer IP itself is allowed too.
        for want in [
            "203.0.113.10 . tcp . 80 . 198.51.100.0/24",
            "203.0.113.10 . tcp . 80 . 10.1.1.0/24",
            "203.0.113.10 . tcp . 80 . 203.0.113.10",
        ] {
            assert!(allow.contains(want), "{want}: {allow}");
        }
        assert!(list_set("firewall-ips").contains("203.0.113.10 . tcp . 80"));

        let web = ServiceName::new("dev", "web");
        let after = ruleset(&["192.0.2.0/24", "192.0.2.7/32"]);
        let changes = BTreeMap::from([(web.clone(), after.services.get(&web).cloned())]);
        let r = dp.apply_changes(changes).expect("partial");
        assert_eq!((r.kind, r.chains_written), (SyncKind::Partial, 0), "{r:?}");
        let allow = list_set("firewall-allow");
        assert!(
            allow.contains("203.0.113.10 . tcp . 80 . 192.0.2.0/24"),
            "{allow}"
        );
        assert!(!allow.contains("198.51.100.0/24"), "{allow}");
        assert!(
            !allow.contains(". 203.0.113.10"),
            "node IP no longer in a range: {allow}"
        );

        // No ranges left: no firewall for the service at all.
        let open = ruleset(&[]);
        let changes = BTreeMap::from([(web.clone(), open.services.get(&web).cloned())]);
        let r = dp.apply_changes(changes).expect("partial");
        assert_eq!(r.kind, SyncKind::Partial, "{r:?}");
        assert!(!list_set("firewall-ips").contains("203.0.113.10"));
        assert!(!list_set("firewall-allow").contains("203.0.113.10"));
    });
}
