use std::collections::BTreeMap;

use ferry_model::fixtures::*;
use ferry_model::{
    ClusterState, IpFamily, NodeContext, NodeView, Object, ServiceName, TrafficPolicy,
};

use super::*;
use crate::config::{CompileConfig, LocalDetector};
use crate::plan::Plan;

fn seed_state(policy: TrafficPolicy, endpoints: &[&str]) -> ClusterState {
    let mut state = ClusterState::new();
    let svc = with_node_port(
        mk_service("dev", "url-analysis", "10.96.198.86", 8080),
        32223,
        policy,
    );
    state.apply(Object::Service(svc));
    let eps = endpoints
        .iter()
        .map(|a| mk_endpoint(a, "k8s-node2"))
        .collect();
    state.apply(Object::EndpointSlice(mk_slice(
        "dev",
        "url-analysis",
        56010,
        eps,
    )));
    state.apply(Object::Node(mk_node(
        "k8s-node2",
        "10.1.1.9",
        "192.168.169.128/26",
    )));
    state
}

fn cfg() -> CompileConfig {
    CompileConfig {
        local_detector: LocalDetector::ClusterCidr(vec!["192.168.0.0/16".parse().expect("cidr")]),
        ..CompileConfig::default()
    }
}

fn ruleset(state: &ClusterState, node: &str) -> Ruleset {
    let ctx = NodeContext {
        node_name: node.into(),
        family: IpFamily::V4,
    };
    render(&Plan::build(&NodeView::build(state, &ctx), &cfg()))
}

fn svc() -> ServiceName {
    ServiceName::new("dev", "url-analysis")
}

#[test]
fn chain_names_carry_a_hash_and_the_readable_service_port() {
    let name = ferry_model::ServicePortName {
        service: ServiceName::new("ns1", "svc1"),
        port: "p80".into(),
        protocol: ferry_model::Protocol::Tcp,
    };
    let base = chain_base(&name);
    assert!(base.ends_with("-ns1/svc1/tcp/p80"), "{base}");
    assert_eq!(base.len(), 8 + "-ns1/svc1/tcp/p80".len());
}

#[test]
fn rendering_is_deterministic() {
    let state = seed_state(
        TrafficPolicy::Cluster,
        &["192.168.169.166", "192.168.169.168"],
    );
    assert_eq!(
        ruleset(&state, "k8s-node2").to_string(),
        ruleset(&state, "k8s-node2").to_string()
    );
}

#[test]
fn an_endpoint_change_rewrites_one_chain_and_no_maps() {
    let before = ruleset(
        &seed_state(
            TrafficPolicy::Cluster,
            &["192.168.169.166", "192.168.169.168"],
        ),
        "k8s-node1",
    );
    let after = ruleset(
        &seed_state(TrafficPolicy::Cluster, &["192.168.169.166"]),
        "k8s-node1",
    );
    let changes = BTreeMap::from([(svc(), after.services.get(&svc()).cloned())]);
    let tx = Transaction::delta(&before, &changes);
    assert_eq!(tx.chains_written, 1, "{}", tx.text);
    assert!(!tx.text.contains("service-ips"), "{}", tx.text);
    assert!(
        tx.text
            .contains("delete element ip ferry hairpin { 192.168.169.168 . 192.168.169.168 }"),
        "{}",
        tx.text
    );
    assert!(
        !tx.text.contains("add chain"),
        "no new chain, so no jump to validate: {}",
        tx.text
    );
}

#[test]
fn removing_a_service_deletes_its_elements_before_its_chains() {
    let before = ruleset(
        &seed_state(TrafficPolicy::Cluster, &["192.168.169.166"]),
        "k8s-node1",
    );
    let tx = Transaction::delta(&before, &BTreeMap::from([(svc(), None)]));
    let del_el = tx
        .text
        .find("delete element ip ferry service-ips")
        .expect("element deleted");
    let del_chain = tx.text.find("delete chain").expect("chain deleted");
    assert!(del_el < del_chain, "{}", tx.text);
}

#[test]
fn shared_elements_stay_while_another_service_uses_them() {
    let mut state = seed_state(TrafficPolicy::Cluster, &["192.168.169.166"]);
    let other = mk_service("dev", "other", "10.96.0.20", 80);
    state.apply(Object::Service(other));
    state.apply(Object::EndpointSlice(mk_slice(
        "dev",
        "other",
        56010,
        vec![mk_endpoint("192.168.169.166", "k8s-node2")],
    )));
    let before = ruleset(&state, "k8s-node1");
    assert_eq!(
        before.shared_count("hairpin", "192.168.169.166 . 192.168.169.166"),
        2
    );
    let tx = Transaction::delta(&before, &BTreeMap::from([(svc(), None)]));
    assert!(
        !tx.text.contains("hairpin"),
        "still used by dev/other: {}",
        tx.text
    );
}

#[test]
fn a_delta_to_the_same_rules_is_empty() {
    let before = ruleset(
        &seed_state(TrafficPolicy::Local, &["192.168.169.166"]),
        "k8s-node2",
    );
    let same = BTreeMap::from([(svc(), before.services.get(&svc()).cloned())]);
    assert!(Transaction::delta(&before, &same).is_empty());
}
