//! Endpoint selection with topology, table-driven: one row per rule of upstream's
//! `CategorizeEndpoints` (the cases of pkg/proxy/topology_test.go, in our words), run through
//! [`NodeView::build`] so conversion of hints, the node's zone label and the policies all take
//! part.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use crate::fixtures::*;
use crate::view::{NodeContext, NodeView, Topology};
use crate::{ClusterState, Endpoint, EndpointConditions, IpFamily, Object, TrafficPolicy};

mod cases;

use cases::cases;

const THIS_NODE: &str = "node-a1";
const PORT: u16 = 80;

/// The service's shape: which sets its policies use.
#[derive(Clone, Copy)]
enum Shape {
    /// ClusterIP, both policies Cluster: only the cluster-wide set.
    ClusterIp,
    /// NodePort with `externalTrafficPolicy: Local`: both sets.
    ExternalLocal,
    /// NodePort with `internalTrafficPolicy: Local` (external Cluster): both sets.
    InternalLocalNodePort,
    /// ClusterIP with `internalTrafficPolicy: Local`: only the node-local set.
    InternalLocal,
}

/// Endpoint states.
#[derive(Clone, Copy)]
enum State {
    Ready,
    NotReady,
    /// `ready: false, serving: true, terminating: true`.
    ServingTerminating,
}

struct Ep {
    addr: &'static str,
    local: bool,
    state: State,
    zones: &'static [&'static str],
    nodes: &'static [&'static str],
}

const fn ep(addr: &'static str, zones: &'static [&'static str]) -> Ep {
    Ep {
        addr,
        local: false,
        state: State::Ready,
        zones,
        nodes: &[],
    }
}

impl Ep {
    const fn local(mut self) -> Ep {
        self.local = true;
        self
    }
    const fn state(mut self, state: State) -> Ep {
        self.state = state;
        self
    }
    const fn nodes(mut self, nodes: &'static [&'static str]) -> Ep {
        self.nodes = nodes;
        self
    }
}

struct Case {
    name: &'static str,
    /// This node's `topology.kubernetes.io/zone` label: `None` = no label.
    zone: Option<&'static str>,
    shape: Shape,
    eps: Vec<Ep>,
    cluster: &'static [&'static str],
    local: &'static [&'static str],
    topology: Topology,
}

fn run(case: &Case) -> (Vec<SocketAddr>, Vec<SocketAddr>, Topology, bool) {
    let mut svc = mk_service("dev", "web", "172.30.0.10", PORT);
    match case.shape {
        Shape::ClusterIp => {}
        Shape::ExternalLocal => svc = with_node_port(svc, 30080, TrafficPolicy::Local),
        Shape::InternalLocalNodePort => {
            svc = with_node_port(svc, 30080, TrafficPolicy::Cluster);
            svc.internal_traffic_policy = TrafficPolicy::Local;
        }
        Shape::InternalLocal => svc.internal_traffic_policy = TrafficPolicy::Local,
    }
    let endpoints = case
        .eps
        .iter()
        .map(|e| Endpoint {
            conditions: match e.state {
                State::Ready => EndpointConditions::default(),
                State::NotReady => EndpointConditions {
                    ready: false,
                    serving: false,
                    terminating: false,
                },
                State::ServingTerminating => EndpointConditions {
                    ready: false,
                    serving: true,
                    terminating: true,
                },
            },
            ..with_hints(
                mk_endpoint(e.addr, if e.local { THIS_NODE } else { "node-b1" }),
                e.zones,
                e.nodes,
            )
        })
        .collect();
    let mut node = mk_node(THIS_NODE, "192.168.0.2", "10.0.0.0/24");
    if let Some(zone) = case.zone {
        node.labels = BTreeMap::from([("topology.kubernetes.io/zone".into(), zone.into())]);
    }
    let mut state = ClusterState::new();
    state.apply(Object::from(node));
    state.apply(Object::from(mk_slice("dev", "web", PORT, endpoints)));
    state.apply(Object::from(svc));
    let ctx = NodeContext {
        node_name: THIS_NODE.into(),
        family: IpFamily::V4,
    };
    let view = NodeView::build(&state, &ctx);
    let sp = view
        .services
        .into_values()
        .next()
        .expect("one service port");
    (
        sp.cluster_endpoints(),
        sp.local_endpoints(),
        sp.topology.clone(),
        sp.has_endpoints(),
    )
}

fn addrs(list: &[&str]) -> Vec<SocketAddr> {
    let mut v: Vec<SocketAddr> = list.iter().map(|a| SocketAddr::new(ip(a), PORT)).collect();
    v.sort();
    v
}

#[test]
fn endpoint_selection_follows_upstream_categorize_endpoints() {
    let mut failures = Vec::new();
    for case in cases() {
        let (cluster, local, topology, has_endpoints) = run(&case);
        let want = (
            addrs(case.cluster),
            addrs(case.local),
            case.topology.clone(),
        );
        if (cluster.clone(), local.clone(), topology.clone()) != want {
            failures.push(format!(
                "{}:\n  got     cluster {cluster:?} local {local:?} {topology:?}\n  \
                 want    cluster {:?} local {:?} {:?}",
                case.name, want.0, want.1, want.2
            ));
        }
        let any_usable = case.eps.iter().any(|e| !matches!(e.state, State::NotReady));
        if has_endpoints != any_usable {
            failures.push(format!(
                "{}: has_endpoints {has_endpoints}, want {any_usable}",
                case.name
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// `dev/web` with an endpoint hinted for zone-a and one for zone-b, seen from [`THIS_NODE`].
fn two_zone_view(state: &mut ClusterState, zone: &str) -> crate::ServicePortView {
    let mut node = mk_node(THIS_NODE, "192.168.0.2", "10.0.0.0/24");
    node.labels = BTreeMap::from([("topology.kubernetes.io/zone".into(), zone.into())]);
    state.apply(Object::from(node));
    let ctx = NodeContext {
        node_name: THIS_NODE.into(),
        family: IpFamily::V4,
    };
    let view = NodeView::build(state, &ctx);
    view.services.into_values().next().expect("service")
}

fn two_zone_state() -> ClusterState {
    let mut state = ClusterState::new();
    let eps = vec![
        with_hints(mk_endpoint("10.1.2.3", "node-a2"), &["zone-a"], &[]),
        with_hints(mk_endpoint("10.1.2.4", "node-b1"), &["zone-b"], &[]),
    ];
    state.apply(Object::from(mk_slice("dev", "web", PORT, eps)));
    state.apply(Object::from(mk_service("dev", "web", "172.30.0.10", PORT)));
    state
}

#[test]
fn topology_exclusions_are_reported_per_endpoint() {
    let sp = two_zone_view(&mut two_zone_state(), "zone-a");
    assert_eq!(sp.endpoints[0].cluster, Ok(()));
    assert_eq!(sp.endpoints[1].cluster, Err(crate::Exclusion::Topology));
    assert_eq!(
        sp.endpoints[1].zone_hints,
        vec![std::sync::Arc::from("zone-b")]
    );
    assert!(sp.topology.narrows());
}

#[test]
fn a_zone_label_change_touches_the_node_and_moves_the_set() {
    let mut state = two_zone_state();
    let in_a = two_zone_view(&mut state, "zone-a");
    assert_eq!(in_a.cluster_endpoints(), addrs(&["10.1.2.3"]));
    let mut node = state.node(THIS_NODE).cloned().expect("node");
    node.labels
        .insert("topology.kubernetes.io/zone".into(), "zone-b".into());
    let touched = state.apply(Object::from(node));
    assert!(
        touched.nodes.contains(THIS_NODE),
        "a label change is a change of this node (the sync loop then rebuilds every service)"
    );
    let in_b = two_zone_view(&mut state, "zone-b");
    assert_eq!(in_b.cluster_endpoints(), addrs(&["10.1.2.4"]));
    assert_eq!(in_b.topology, Topology::SameZone("zone-b".into()));
}
