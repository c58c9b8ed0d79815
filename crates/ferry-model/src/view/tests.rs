use super::*;
use crate::fixtures::*;
use crate::{Object, TrafficPolicy};

fn ctx(node: &str) -> NodeContext {
    NodeContext {
        node_name: node.into(),
        family: IpFamily::V4,
    }
}

fn state_with(svc: Service, eps: Vec<crate::Endpoint>) -> ClusterState {
    let mut state = ClusterState::new();
    let port = 56010;
    state.apply(Object::from(mk_slice(
        &svc.name.namespace,
        &svc.name.name,
        port,
        eps,
    )));
    state.apply(Object::from(svc));
    state
}

fn addrs(list: &[&str]) -> Vec<SocketAddr> {
    list.iter().map(|a| SocketAddr::new(ip(a), 56010)).collect()
}

fn only_view(state: &ClusterState, node: &str) -> ServicePortView {
    let view = NodeView::build(state, &ctx(node));
    assert_eq!(view.services.len(), 1);
    view.services.into_values().next().expect("one service")
}

#[test]
fn ready_endpoints_are_used_cluster_wide() {
    let svc = mk_service("dev", "web", "10.96.0.10", 8080);
    let state = state_with(
        svc,
        vec![
            mk_endpoint("192.168.169.166", "k8s-node2"),
            mk_endpoint("192.168.169.168", "k8s-node2"),
        ],
    );
    let v = only_view(&state, "k8s-master");
    assert_eq!(
        v.cluster_endpoints(),
        addrs(&["192.168.169.166", "192.168.169.168"])
    );
    assert!(
        v.local_endpoints().is_empty(),
        "ClusterIP-only service never uses the local set"
    );
    assert!(v.has_endpoints());
}

#[test]
fn not_ready_endpoints_are_never_used() {
    let svc = mk_service("dev", "web", "10.96.0.10", 8080);
    let state = state_with(
        svc,
        vec![
            mk_endpoint("192.168.169.166", "k8s-node2"),
            mk_endpoint_with("192.168.169.168", "k8s-node2", false, false, false),
        ],
    );
    let v = only_view(&state, "k8s-master");
    assert_eq!(v.cluster_endpoints(), addrs(&["192.168.169.166"]));
    assert_eq!(v.endpoints[1].cluster, Err(Exclusion::NotReady));
}

#[test]
fn serving_terminating_endpoints_are_a_fallback_only_without_ready_ones() {
    let svc = mk_service("dev", "web", "10.96.0.10", 8080);
    let with_ready = state_with(
        svc.clone(),
        vec![
            mk_endpoint("192.168.169.166", "k8s-node2"),
            mk_endpoint_with("192.168.169.168", "k8s-node2", false, true, true),
        ],
    );
    let v = only_view(&with_ready, "k8s-master");
    assert_eq!(v.cluster_endpoints(), addrs(&["192.168.169.166"]));
    assert_eq!(v.endpoints[1].cluster, Err(Exclusion::Terminating));

    let only_terminating = state_with(
        svc,
        vec![
            mk_endpoint_with("192.168.169.166", "k8s-node2", false, false, true),
            mk_endpoint_with("192.168.169.168", "k8s-node2", false, true, true),
        ],
    );
    let v = only_view(&only_terminating, "k8s-master");
    assert_eq!(v.cluster_endpoints(), addrs(&["192.168.169.168"]));
    assert!(v.has_endpoints());
}

#[test]
fn local_policy_uses_only_this_nodes_endpoints() {
    let svc = with_node_port(
        mk_service("dev", "web", "10.96.0.10", 8080),
        32223,
        TrafficPolicy::Local,
    );
    let state = state_with(
        svc,
        vec![
            mk_endpoint("192.168.169.166", "k8s-node2"),
            mk_endpoint("192.168.36.70", "k8s-node1"),
        ],
    );
    let on_node2 = only_view(&state, "k8s-node2");
    assert_eq!(on_node2.external_endpoints(), addrs(&["192.168.169.166"]));
    assert_eq!(
        on_node2.internal_endpoints(),
        addrs(&["192.168.36.70", "192.168.169.166"]),
        "sorted by address"
    );

    let on_master = only_view(&state, "k8s-master");
    assert!(on_master.external_endpoints().is_empty());
    assert!(
        on_master.has_endpoints(),
        "cluster-wide endpoints still exist"
    );
    assert!(on_master
        .endpoints
        .iter()
        .all(|e| e.local == Err(Exclusion::OtherNode)));
}

#[test]
fn local_policy_falls_back_to_local_terminating_endpoints() {
    let svc = with_node_port(
        mk_service("dev", "web", "10.96.0.10", 8080),
        32223,
        TrafficPolicy::Local,
    );
    let state = state_with(
        svc,
        vec![
            mk_endpoint_with("192.168.169.166", "k8s-node2", false, true, true),
            mk_endpoint("192.168.36.70", "k8s-node1"),
        ],
    );
    let v = only_view(&state, "k8s-node2");
    assert_eq!(v.local_endpoints(), addrs(&["192.168.169.166"]));
    assert_eq!(v.cluster_endpoints(), addrs(&["192.168.36.70"]));
}

#[test]
fn endpoints_match_the_service_port_by_name_and_protocol() {
    let mut svc = mk_service("dev", "web", "10.96.0.10", 8080);
    svc.ports[0].name = "metrics".into();
    let state = state_with(svc, vec![mk_endpoint("192.168.169.166", "k8s-node2")]);
    let v = only_view(&state, "k8s-master");
    assert!(
        v.endpoints.is_empty(),
        "slice port is named http, service port metrics"
    );
    assert!(!v.has_endpoints());
}

#[test]
fn duplicate_addresses_across_slices_count_once() {
    let svc = mk_service("dev", "web", "10.96.0.10", 8080);
    let mut state = state_with(svc, vec![mk_endpoint("192.168.169.166", "k8s-node2")]);
    let mut second = mk_slice(
        "dev",
        "web",
        56010,
        vec![mk_endpoint("192.168.169.166", "k8s-node2")],
    );
    second.name = "web-def".into();
    state.apply(Object::from(second));
    assert_eq!(only_view(&state, "k8s-master").cluster_endpoints().len(), 1);
}

#[test]
fn a_reused_address_is_the_running_pods_not_the_terminating_ones() {
    let svc = mk_service("dev", "web", "10.96.0.10", 8080);
    let terminating = || mk_endpoint_with("192.168.169.166", "k8s-node2", false, true, true);
    let running = || mk_endpoint("192.168.169.166", "k8s-node2");
    // Either slice first (`web-def` sorts after the fixture's slice): the running pod's wins.
    for (first, later) in [(terminating(), running()), (running(), terminating())] {
        let mut state = state_with(svc.clone(), vec![first]);
        let mut second = mk_slice("dev", "web", 56010, vec![later]);
        second.name = "web-def".into();
        state.apply(Object::from(second));
        let v = only_view(&state, "k8s-master");
        assert_eq!(v.endpoints.len(), 1);
        assert!(
            v.endpoints[0].conditions.ready && !v.endpoints[0].conditions.terminating,
            "{:?}",
            v.endpoints[0].conditions
        );
    }
}

#[test]
fn services_without_a_cluster_ip_of_the_family_are_skipped() {
    let svc = mk_service("dev", "web", "fd00::10", 8080);
    let state = state_with(svc, vec![]);
    assert!(NodeView::build(&state, &ctx("k8s-master"))
        .services
        .is_empty());
}

#[test]
fn externally_accessible_services_always_have_a_cluster_set_for_the_short_circuit() {
    let mut svc = with_node_port(
        mk_service("dev", "web", "10.96.0.10", 8080),
        32223,
        TrafficPolicy::Local,
    );
    svc.internal_traffic_policy = TrafficPolicy::Local;
    let state = state_with(svc, vec![mk_endpoint("192.168.36.70", "k8s-node1")]);
    let v = only_view(&state, "k8s-master");
    assert_eq!(v.cluster_endpoints(), addrs(&["192.168.36.70"]));
    assert!(v.local_endpoints().is_empty());
}
