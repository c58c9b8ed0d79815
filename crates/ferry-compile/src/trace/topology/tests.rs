//! `ferry explain` on topology: the chosen set, the hint decision and each exclusion.

use std::collections::BTreeMap;

use ferry_model::fixtures::*;
use ferry_model::{
    ClusterState, Endpoint, IpFamily, NodeContext, NodeView, Object, Protocol, TrafficDistribution,
};

use crate::config::{CompileConfig, LocalDetector};
use crate::trace::{trace, Packet, Target, Trace, Verdict};
use crate::Plan;

fn hinted(addr: &str, node: &str, zone: Option<&str>) -> Endpoint {
    let zones: Vec<&str> = zone.into_iter().collect();
    ferry_model::fixtures::with_hints(mk_endpoint(addr, node), &zones, &[])
}

/// `shop/web` (PreferClose) with one endpoint per zone; node-a1 is in zone-a.
fn explain(eps: Vec<Endpoint>) -> Trace {
    let mut state = ClusterState::new();
    let mut svc = mk_service("shop", "web", "172.30.1.10", 80);
    svc.traffic_distribution = Some(TrafficDistribution::PreferClose);
    state.apply(Object::from(svc));
    state.apply(Object::from(mk_slice("shop", "web", 8080, eps)));
    let mut node = mk_node("node-a1", "192.168.0.2", "10.0.1.0/24");
    node.labels = BTreeMap::from([("topology.kubernetes.io/zone".into(), "zone-a".into())]);
    state.apply(Object::from(node));
    let ctx = NodeContext {
        node_name: "node-a1".into(),
        family: IpFamily::V4,
    };
    let view = NodeView::build(&state, &ctx);
    let cfg = CompileConfig {
        local_detector: LocalDetector::ClusterCidr(vec!["10.0.0.0/16".parse().expect("cidr")]),
        ..CompileConfig::default()
    };
    let plan = Plan::build(&view, &cfg);
    let ruleset = crate::nft::render(&plan);
    let packet = Packet {
        src: ip("10.0.1.99"),
        dst: ip("172.30.1.10"),
        port: 80,
        protocol: Protocol::Tcp,
    };
    trace(&view, &plan, &ruleset, packet)
}

#[test]
fn zone_hints_used_are_named_with_each_left_out_endpoint() {
    let t = explain(vec![
        hinted("10.0.1.10", "node-a1", Some("zone-a")),
        hinted("10.0.2.10", "node-b1", Some("zone-b")),
    ]);
    let text = t.to_text();
    assert_eq!(
        t.verdict,
        Verdict::Forwarded {
            targets: vec![Target {
                addr: "10.0.1.10:8080".parse().expect("addr"),
                masquerade: None,
            }]
        }
    );
    assert!(
        text.contains("DNAT to a ready endpoint hinted for zone zone-a: one of 1"),
        "{text}"
    );
    assert!(
        text.contains(
            "topology: zone zone-a hints used (every ready endpoint has a zone hint; 1 of 2"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "- 10.0.2.10:8080 on node-b1: hinted for zone zone-b, not this node's zone zone-a"
        ),
        "{text}"
    );
}

#[test]
fn an_endpoint_without_a_hint_is_named_as_the_reason_hints_are_ignored() {
    let t = explain(vec![
        hinted("10.0.1.10", "node-a1", Some("zone-a")),
        hinted("10.0.2.10", "node-b1", None),
    ]);
    let text = t.to_text();
    assert!(
        text.contains("DNAT to any ready endpoint in the cluster: one of 2"),
        "{text}"
    );
    assert!(
        text.contains("topology hints ignored: endpoint 10.0.2.10:8080 has none"),
        "{text}"
    );
}

#[test]
fn traffic_distribution_without_hints_says_the_hints_are_missing() {
    let t = explain(vec![
        hinted("10.0.1.10", "node-a1", None),
        hinted("10.0.2.10", "node-b1", None),
    ]);
    let text = t.to_text();
    assert!(
        text.contains("trafficDistribution PreferClose is set but no ready endpoint carries hints"),
        "{text}"
    );
}
