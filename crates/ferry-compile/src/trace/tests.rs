use ferry_model::fixtures::*;
use ferry_model::{ClusterState, IpFamily, NodeContext, NodeView, Object, Protocol, TrafficPolicy};

use super::*;
use crate::config::{CompileConfig, LocalDetector};

fn seed(policy: TrafficPolicy) -> ClusterState {
    let mut state = ClusterState::new();
    let svc = with_node_port(
        mk_service("dev", "url-analysis", "10.96.198.86", 8080),
        32223,
        policy,
    );
    state.apply(Object::Service(svc));
    let eps = vec![
        mk_endpoint("192.168.169.166", "k8s-node2"),
        mk_endpoint("192.168.169.168", "k8s-node2"),
    ];
    state.apply(Object::EndpointSlice(mk_slice(
        "dev",
        "url-analysis",
        56010,
        eps,
    )));
    state.apply(Object::Service(mk_service(
        "dev",
        "empty",
        "10.96.0.50",
        80,
    )));
    for (n, ip, cidr) in [
        ("k8s-master", "10.1.1.12", "192.168.235.192/26"),
        ("k8s-node1", "10.1.1.17", "192.168.36.64/26"),
        ("k8s-node2", "10.1.1.9", "192.168.169.128/26"),
    ] {
        state.apply(Object::Node(mk_node(n, ip, cidr)));
    }
    state
}

fn explain(policy: TrafficPolicy, node: &str, src: &str, dst: &str, port: u16) -> Trace {
    let state = seed(policy);
    let view = NodeView::build(
        &state,
        &NodeContext {
            node_name: node.into(),
            family: IpFamily::V4,
        },
    );
    let cfg = CompileConfig {
        local_detector: LocalDetector::ClusterCidr(vec!["192.168.0.0/16".parse().expect("cidr")]),
        ..CompileConfig::default()
    };
    let plan = Plan::build(&view, &cfg);
    let ruleset = crate::nft::render(&plan);
    trace(
        &view,
        &plan,
        &ruleset,
        Packet {
            src: ip(src),
            dst: ip(dst),
            port,
            protocol: Protocol::Tcp,
        },
    )
}

#[test]
fn the_seed_question_local_policy_on_a_node_without_pods_drops() {
    let t = explain(
        TrafficPolicy::Local,
        "k8s-node1",
        "10.1.1.100",
        "10.1.1.17",
        32223,
    );
    assert_eq!(t.frontend, Some(Frontend::NodePort));
    assert_eq!(t.origin, Origin::Outside);
    assert_eq!(t.verdict, Verdict::Dropped);
    assert!(t
        .candidates
        .iter()
        .all(|c| c.excluded.as_deref() == Some("on another node (k8s-node2)")));
    assert!(
        t.to_text()
            .contains("no-endpoint-nodeports element tcp . 32223 : drop"),
        "{}",
        t.to_text()
    );
}

#[test]
fn the_seed_question_cluster_policy_forwards_masqueraded() {
    let t = explain(
        TrafficPolicy::Cluster,
        "k8s-node1",
        "10.1.1.100",
        "10.1.1.17",
        32223,
    );
    assert_eq!(t.verdict_word(), "forwarded");
    assert!(t.masquerade.is_some());
    let Verdict::Forwarded { targets } = &t.verdict else {
        panic!("forwarded")
    };
    assert_eq!(targets.len(), 2);
}

#[test]
fn local_policy_on_the_node_with_pods_keeps_the_client_ip() {
    let t = explain(
        TrafficPolicy::Local,
        "k8s-node2",
        "10.1.1.100",
        "10.1.1.9",
        32223,
    );
    assert_eq!(t.verdict_word(), "forwarded");
    assert_eq!(t.masquerade, None);
}

#[test]
fn pods_and_the_node_short_circuit_the_local_policy() {
    let pod = explain(
        TrafficPolicy::Local,
        "k8s-master",
        "192.168.235.200",
        "10.1.1.12",
        32223,
    );
    assert_eq!(
        pod.origin,
        Origin::Pod("192.168.0.0/16".parse().expect("net"))
    );
    assert_eq!(pod.verdict_word(), "forwarded");
    assert_eq!(pod.masquerade, None);
    let node = explain(
        TrafficPolicy::Local,
        "k8s-master",
        "10.1.1.12",
        "10.1.1.12",
        32223,
    );
    assert_eq!(node.origin, Origin::ThisNode);
    assert_eq!(node.verdict_word(), "forwarded");
    assert!(node.masquerade.is_some());
}

#[test]
fn cluster_ip_from_the_node_is_masqueraded_and_from_a_pod_is_not() {
    let node = explain(
        TrafficPolicy::Cluster,
        "k8s-master",
        "10.1.1.12",
        "10.96.198.86",
        8080,
    );
    assert!(node.masquerade.is_some());
    let pod = explain(
        TrafficPolicy::Cluster,
        "k8s-master",
        "192.168.235.200",
        "10.96.198.86",
        8080,
    );
    assert_eq!(pod.masquerade, None);
    assert_eq!(pod.frontend, Some(Frontend::ClusterIp));
}

#[test]
fn hairpin_is_explained() {
    let t = explain(
        TrafficPolicy::Cluster,
        "k8s-node2",
        "192.168.169.166",
        "10.96.198.86",
        8080,
    );
    assert!(t.to_text().contains("hairpin"), "{}", t.to_text());
}

#[test]
fn services_without_endpoints_reject_and_unknown_ports_too() {
    let t = explain(
        TrafficPolicy::Cluster,
        "k8s-master",
        "192.168.235.200",
        "10.96.0.50",
        80,
    );
    assert_eq!(t.verdict, Verdict::Rejected);
    let wrong_port = explain(
        TrafficPolicy::Cluster,
        "k8s-master",
        "192.168.235.200",
        "10.96.198.86",
        9999,
    );
    assert_eq!(wrong_port.verdict, Verdict::Rejected);
    let nothing = explain(
        TrafficPolicy::Cluster,
        "k8s-master",
        "192.168.235.200",
        "8.8.8.8",
        53,
    );
    assert_eq!(nothing.verdict, Verdict::NotAService);
}

#[test]
fn mermaid_draws_client_node_chain_and_endpoints() {
    let t = explain(
        TrafficPolicy::Cluster,
        "k8s-node1",
        "10.1.1.100",
        "10.1.1.17",
        32223,
    );
    let m = t.to_mermaid();
    assert!(m.starts_with("flowchart LR"), "{m}");
    assert!(m.contains("192.168.169.166:56010"), "{m}");
    assert!(m.contains("DNAT + SNAT"), "{m}");
}
