use std::net::SocketAddr;

use ferry_compile::conntrack::Frontend;
use ferry_model::fixtures::*;
use ferry_model::{IpFamily, Object, TrafficPolicy};

use super::*;

fn context() -> NodeContext {
    NodeContext {
        node_name: "k8s-node2".into(),
        family: IpFamily::V4,
    }
}

fn dns() -> ServiceName {
    ServiceName::new("dev", "dns")
}

/// A UDP NodePort service dev/dns 10.96.0.10:53 (node port 30053) with `endpoints`, and a TCP
/// service next to it.
fn state(endpoints: &[&str]) -> ClusterState {
    let mut svc = with_node_port(
        mk_service("dev", "dns", "10.96.0.10", 53),
        30053,
        TrafficPolicy::Cluster,
    );
    svc.ports[0].protocol = Protocol::Udp;
    let eps = endpoints
        .iter()
        .map(|a| mk_endpoint(a, "k8s-node2"))
        .collect();
    let mut slice = mk_slice("dev", "dns", 5353, eps);
    slice.ports[0].protocol = Protocol::Udp;
    let mut state = ClusterState::new();
    for obj in [
        Object::from(svc),
        Object::from(mk_service("dev", "web", "10.96.0.20", 80)),
        Object::from(slice),
    ] {
        state.apply(obj);
    }
    state
}

fn frontends(filters: &[StaleFlowFilter]) -> Vec<Frontend> {
    filters.iter().map(|f| f.frontend).collect()
}

fn cluster_ip() -> Frontend {
    Frontend::Address(SocketAddr::from(([10, 96, 0, 10], 53)))
}

#[test]
fn a_full_sync_checks_every_udp_frontend_and_an_incremental_one_only_what_changed() {
    let mut flows = StaleFlows::default();
    let none = BTreeSet::new();
    flows.synced(&state(&["10.0.1.1", "10.0.1.2"]), &context(), true, &none);
    let first = flows.take();
    assert_eq!(frontends(&first), [cluster_ip(), Frontend::NodePort(30053)]);
    assert!(flows.take().is_empty(), "taken once");

    // An incremental sync of another service leaves the UDP service alone.
    let web = BTreeSet::from([ServiceName::new("dev", "web")]);
    flows.synced(&state(&["10.0.1.1", "10.0.1.2"]), &context(), false, &web);
    assert!(flows.take().is_empty());

    // Endpoint 10.0.1.1 goes away: flows to either frontend not answered by 10.0.1.2 go.
    let dirty = BTreeSet::from([dns()]);
    flows.synced(&state(&["10.0.1.2"]), &context(), false, &dirty);
    let after = flows.take();
    assert_eq!(frontends(&after), [cluster_ip(), Frontend::NodePort(30053)]);
    let endpoint = |a: &str| SocketAddr::new(ip(a), 5353);
    let flow_to_removed = (
        SocketAddr::from(([10, 96, 0, 10], 53)),
        endpoint("10.0.1.1"),
    );
    assert!(after[0].matches(flow_to_removed.0, flow_to_removed.1));
    assert!(!after[0].matches(flow_to_removed.0, endpoint("10.0.1.2")));
}

#[test]
fn a_failed_cleanup_makes_the_next_sync_check_everything() {
    let mut flows = StaleFlows::default();
    let s = state(&["10.0.1.1"]);
    flows.synced(&s, &context(), true, &BTreeSet::new());
    flows.take();
    flows.failed();
    flows.synced(&s, &context(), false, &BTreeSet::new());
    assert_eq!(frontends(&flows.take()).len(), 2);
    flows.synced(&s, &context(), false, &BTreeSet::new());
    assert!(flows.take().is_empty(), "only once");
}

#[test]
fn filters_not_taken_yet_are_kept_until_taken() {
    let mut flows = StaleFlows::default();
    let dirty = BTreeSet::from([dns()]);
    flows.synced(&state(&[]), &context(), false, &dirty);
    assert!(
        flows.take().is_empty(),
        "a new service without endpoints: nothing to clean"
    );
    flows.synced(&state(&["10.0.1.1"]), &context(), false, &dirty);
    flows.synced(&state(&["10.0.1.1"]), &context(), false, &BTreeSet::new());
    let got = flows.take();
    assert_eq!(frontends(&got), [cluster_ip(), Frontend::NodePort(30053)]);
    assert!(got
        .iter()
        .all(|f| f.keep == BTreeSet::from([SocketAddr::new(ip("10.0.1.1"), 5353)])));
}
