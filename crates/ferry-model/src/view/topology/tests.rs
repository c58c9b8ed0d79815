//! Endpoint selection with topology, table-driven: one row per rule of upstream's
//! `CategorizeEndpoints` (the cases of pkg/proxy/topology_test.go, in our words), run through
//! [`NodeView::build`] so conversion of hints, the node's zone label and the policies all take
//! part.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use crate::fixtures::*;
use crate::view::{HintsIgnored, NodeContext, NodeView, Topology};
use crate::{ClusterState, Endpoint, EndpointConditions, IpFamily, Object, TrafficPolicy};

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

fn hints(list: &[&str]) -> Option<Vec<String>> {
    (!list.is_empty()).then(|| list.iter().map(|s| (*s).to_owned()).collect())
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
            zone_hints: hints(e.zones),
            node_hints: hints(e.nodes),
            ..mk_endpoint(e.addr, if e.local { THIS_NODE } else { "node-b1" })
        })
        .collect();
    let mut node = mk_node(THIS_NODE, "192.168.0.2", "10.0.0.0/24");
    if let Some(zone) = case.zone {
        node.labels = BTreeMap::from([("topology.kubernetes.io/zone".into(), zone.into())]);
    }
    let mut state = ClusterState::new();
    state.apply(Object::Node(node));
    state.apply(Object::EndpointSlice(mk_slice(
        "dev", "web", PORT, endpoints,
    )));
    state.apply(Object::Service(svc));
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

fn sock(a: &str) -> SocketAddr {
    SocketAddr::new(ip(a), PORT)
}

const ALL4: &[&str] = &["10.1.2.3", "10.1.2.4", "10.1.2.5", "10.1.2.6"];

fn four(zones: [&'static [&'static str]; 4]) -> Vec<Ep> {
    ALL4.iter().zip(zones).map(|(a, z)| ep(a, z)).collect()
}

fn cases() -> Vec<Case> {
    use State::*;
    vec![
        Case {
            name: "zone hints keep traffic in this node's zone",
            zone: Some("zone-a"),
            shape: Shape::ClusterIp,
            eps: four([&["zone-a"], &["zone-b"], &["zone-c"], &["zone-a"]]),
            cluster: &["10.1.2.3", "10.1.2.6"],
            local: &[],
            topology: Topology::SameZone("zone-a".into()),
        },
        Case {
            name: "without hints every ready endpoint is used",
            zone: Some("zone-a"),
            shape: Shape::ClusterIp,
            eps: four([&[], &[], &[], &[]]),
            cluster: ALL4,
            local: &[],
            topology: Topology::NoHints,
        },
        Case {
            name: "one ready endpoint without a hint disables topology",
            zone: Some("zone-a"),
            shape: Shape::ClusterIp,
            eps: four([&["zone-a"], &["zone-b"], &[], &["zone-a"]]),
            cluster: ALL4,
            local: &[],
            topology: Topology::Ignored(HintsIgnored::EndpointWithoutHint(sock("10.1.2.5"))),
        },
        Case {
            name: "an unready endpoint without a hint does not disable topology",
            zone: Some("zone-a"),
            shape: Shape::ClusterIp,
            eps: vec![
                ep("10.1.2.3", &["zone-a"]),
                ep("10.1.2.4", &["zone-b"]),
                ep("10.1.2.5", &[]).state(NotReady),
            ],
            cluster: &["10.1.2.3"],
            local: &[],
            topology: Topology::SameZone("zone-a".into()),
        },
        Case {
            name: "a node without a zone label ignores hints",
            zone: None,
            shape: Shape::ClusterIp,
            eps: vec![ep("10.1.2.3", &["zone-a"])],
            cluster: &["10.1.2.3"],
            local: &[],
            topology: Topology::Ignored(HintsIgnored::NodeWithoutZone),
        },
        Case {
            name: "an empty zone label counts as none",
            zone: Some(""),
            shape: Shape::ClusterIp,
            eps: vec![ep("10.1.2.3", &["zone-a"]), ep("10.1.2.4", &["zone-b"])],
            cluster: &["10.1.2.3", "10.1.2.4"],
            local: &[],
            topology: Topology::Ignored(HintsIgnored::NodeWithoutZone),
        },
        Case {
            name: "a zone no endpoint is hinted for uses every endpoint",
            zone: Some("zone-b"),
            shape: Shape::ClusterIp,
            eps: vec![ep("10.1.2.3", &["zone-a"])],
            cluster: &["10.1.2.3"],
            local: &[],
            topology: Topology::Ignored(HintsIgnored::NoEndpointForZone("zone-b".into())),
        },
        Case {
            name: "an unready endpoint in this zone is not used",
            zone: Some("zone-a"),
            shape: Shape::ClusterIp,
            eps: vec![
                ep("10.1.2.3", &["zone-a"]),
                ep("10.1.2.4", &["zone-b"]),
                ep("10.1.2.5", &["zone-c"]),
                ep("10.1.2.6", &["zone-a"]).state(NotReady),
            ],
            cluster: &["10.1.2.3"],
            local: &[],
            topology: Topology::SameZone("zone-a".into()),
        },
        Case {
            name: "only unready endpoints in this zone: no filtering",
            zone: Some("zone-a"),
            shape: Shape::ClusterIp,
            eps: vec![
                ep("10.1.2.3", &["zone-a"]).state(NotReady),
                ep("10.1.2.4", &["zone-b"]),
                ep("10.1.2.5", &["zone-c"]),
                ep("10.1.2.6", &["zone-a"]).state(NotReady),
            ],
            cluster: &["10.1.2.4", "10.1.2.5"],
            local: &[],
            topology: Topology::Ignored(HintsIgnored::NoEndpointForZone("zone-a".into())),
        },
        Case {
            name: "an endpoint hinted for several zones serves each of them",
            zone: Some("zone-c"),
            shape: Shape::ClusterIp,
            eps: four([
                &["zone-a", "zone-b", "zone-c"],
                &["zone-b", "zone-c"],
                &["zone-b", "zone-d"],
                &["zone-c"],
            ]),
            cluster: &["10.1.2.3", "10.1.2.4", "10.1.2.6"],
            local: &[],
            topology: Topology::SameZone("zone-c".into()),
        },
        Case {
            name: "externalTrafficPolicy Local: topology narrows only the cluster-wide set",
            zone: Some("zone-a"),
            shape: Shape::ExternalLocal,
            eps: vec![
                ep("10.1.2.3", &["zone-a"]).local(),
                ep("10.1.2.4", &["zone-b"]).local(),
                ep("10.1.2.5", &["zone-c"]),
                ep("10.1.2.6", &["zone-a"]),
            ],
            cluster: &["10.1.2.3", "10.1.2.6"],
            local: &["10.1.2.3", "10.1.2.4"],
            topology: Topology::SameZone("zone-a".into()),
        },
        Case {
            name: "internalTrafficPolicy Local with a NodePort: topology narrows only the cluster-wide set",
            zone: Some("zone-a"),
            shape: Shape::InternalLocalNodePort,
            eps: vec![
                ep("10.0.0.0", &["zone-a"]).local(),
                ep("10.0.0.1", &["zone-b"]).local(),
                ep("10.0.0.2", &["zone-a"]),
                ep("10.0.0.3", &["zone-b"]),
            ],
            cluster: &["10.0.0.0", "10.0.0.2"],
            local: &["10.0.0.0", "10.0.0.1"],
            topology: Topology::SameZone("zone-a".into()),
        },
        Case {
            name: "internalTrafficPolicy Local alone never considers topology",
            zone: Some("zone-a"),
            shape: Shape::InternalLocal,
            eps: vec![
                ep("10.0.0.0", &["zone-b"]).local(),
                ep("10.0.0.1", &["zone-a"]),
            ],
            cluster: &[],
            local: &["10.0.0.0"],
            topology: Topology::Unused,
        },
        Case {
            name: "internalTrafficPolicy Local with only remote endpoints: empty local set",
            zone: None,
            shape: Shape::InternalLocal,
            eps: vec![ep("10.0.0.0", &[]), ep("10.0.0.1", &[])],
            cluster: &[],
            local: &[],
            topology: Topology::Unused,
        },
        Case {
            name: "without ready endpoints the terminating fallback ignores topology",
            zone: Some("zone-a"),
            shape: Shape::ClusterIp,
            eps: vec![
                ep("10.0.0.0", &["zone-b"]).state(ServingTerminating),
                ep("10.0.0.1", &["zone-a"]).state(ServingTerminating),
                ep("10.0.0.2", &["zone-a"]).state(NotReady),
            ],
            cluster: &["10.0.0.0", "10.0.0.1"],
            local: &[],
            topology: Topology::NoHints,
        },
        Case {
            name: "terminating endpoints are left out while ready ones exist, whatever their hints",
            zone: Some("zone-a"),
            shape: Shape::ClusterIp,
            eps: vec![
                ep("10.0.0.0", &["zone-a"]).state(ServingTerminating),
                ep("10.0.0.1", &["zone-a"]),
                ep("10.0.0.2", &["zone-b"]),
            ],
            cluster: &["10.0.0.1"],
            local: &[],
            topology: Topology::SameZone("zone-a".into()),
        },
        Case {
            name: "Local falls back to this node's terminating endpoints while the cluster set uses zones",
            zone: Some("zone-a"),
            shape: Shape::ExternalLocal,
            eps: vec![
                ep("10.0.0.0", &["zone-a"]).local().state(ServingTerminating),
                ep("10.0.0.1", &["zone-a"]),
                ep("10.0.0.2", &["zone-b"]),
            ],
            cluster: &["10.0.0.1"],
            local: &["10.0.0.0"],
            topology: Topology::SameZone("zone-a".into()),
        },
        Case {
            name: "node hints for this node keep traffic on the node",
            zone: Some("zone-a"),
            shape: Shape::ClusterIp,
            eps: vec![
                ep("10.0.0.0", &["zone-a"]).local().nodes(&[THIS_NODE]),
                ep("10.0.0.1", &["zone-a"]).nodes(&["node-a2"]),
                ep("10.0.0.2", &["zone-b"]).nodes(&["node-b1"]),
            ],
            cluster: &["10.0.0.0"],
            local: &[],
            topology: Topology::SameNode,
        },
        Case {
            name: "node hints for other nodes fall back to zone hints",
            zone: Some("zone-a"),
            shape: Shape::ClusterIp,
            eps: vec![
                ep("10.0.0.1", &["zone-a"]).nodes(&["node-a2"]),
                ep("10.0.0.2", &["zone-b"]).nodes(&["node-b1"]),
            ],
            cluster: &["10.0.0.1"],
            local: &[],
            topology: Topology::SameZone("zone-a".into()),
        },
        Case {
            name: "an endpoint without a node hint falls back to zone hints",
            zone: Some("zone-a"),
            shape: Shape::ClusterIp,
            eps: vec![
                ep("10.0.0.0", &["zone-a"]).local().nodes(&[THIS_NODE]),
                ep("10.0.0.1", &["zone-a"]),
                ep("10.0.0.2", &["zone-b"]).nodes(&["node-b1"]),
            ],
            cluster: &["10.0.0.0", "10.0.0.1"],
            local: &[],
            topology: Topology::SameZone("zone-a".into()),
        },
        Case {
            name: "node hints work without a zone label",
            zone: None,
            shape: Shape::ClusterIp,
            eps: vec![
                ep("10.0.0.0", &[]).local().nodes(&[THIS_NODE]),
                ep("10.0.0.1", &[]).nodes(&["node-b1"]),
            ],
            cluster: &["10.0.0.0"],
            local: &[],
            topology: Topology::SameNode,
        },
        Case {
            name: "only node hints, none for this node: every endpoint",
            zone: Some("zone-a"),
            shape: Shape::ClusterIp,
            eps: vec![
                ep("10.0.0.1", &[]).nodes(&["node-a2"]),
                ep("10.0.0.2", &[]).nodes(&["node-b1"]),
            ],
            cluster: &["10.0.0.1", "10.0.0.2"],
            local: &[],
            topology: Topology::Ignored(HintsIgnored::NoEndpointForNode),
        },
        Case {
            name: "only node hints, one endpoint without: every endpoint",
            zone: Some("zone-a"),
            shape: Shape::ClusterIp,
            eps: vec![
                ep("10.0.0.0", &[]).local().nodes(&[THIS_NODE]),
                ep("10.0.0.1", &[]),
            ],
            cluster: &["10.0.0.0", "10.0.0.1"],
            local: &[],
            topology: Topology::Ignored(HintsIgnored::EndpointWithoutHint(sock("10.0.0.1"))),
        },
        Case {
            name: "a node hint on an unready endpoint does not count",
            zone: Some("zone-a"),
            shape: Shape::ClusterIp,
            eps: vec![
                ep("10.0.0.0", &["zone-a"]).local().nodes(&[THIS_NODE]).state(NotReady),
                ep("10.0.0.1", &["zone-a"]).nodes(&["node-a2"]),
                ep("10.0.0.2", &["zone-b"]).nodes(&["node-b1"]),
            ],
            cluster: &["10.0.0.1"],
            local: &[],
            topology: Topology::SameZone("zone-a".into()),
        },
    ]
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

#[test]
fn topology_exclusions_are_reported_per_endpoint() {
    let case = &cases()[0];
    let (cluster, ..) = run(case);
    assert_eq!(cluster.len(), 2);
    let mut svc_state = ClusterState::new();
    let mut node = mk_node(THIS_NODE, "192.168.0.2", "10.0.0.0/24");
    node.labels = BTreeMap::from([("topology.kubernetes.io/zone".into(), "zone-a".into())]);
    svc_state.apply(Object::Node(node));
    let eps = vec![
        Endpoint {
            zone_hints: hints(&["zone-a"]),
            ..mk_endpoint("10.1.2.3", "node-b1")
        },
        Endpoint {
            zone_hints: hints(&["zone-b"]),
            ..mk_endpoint("10.1.2.4", "node-b1")
        },
    ];
    svc_state.apply(Object::EndpointSlice(mk_slice("dev", "web", PORT, eps)));
    svc_state.apply(Object::Service(mk_service(
        "dev",
        "web",
        "172.30.0.10",
        PORT,
    )));
    let ctx = NodeContext {
        node_name: THIS_NODE.into(),
        family: IpFamily::V4,
    };
    let view = NodeView::build(&svc_state, &ctx);
    let sp = view.services.values().next().expect("service");
    assert_eq!(sp.endpoints[0].cluster, Ok(()));
    assert_eq!(sp.endpoints[1].cluster, Err(crate::Exclusion::Topology));
    assert_eq!(sp.endpoints[1].zone_hints, vec!["zone-b".to_owned()]);
    assert!(sp.topology.narrows());
}

#[test]
fn a_zone_label_change_changes_the_view() {
    let case = &cases()[0];
    let moved = Case {
        zone: Some("zone-b"),
        eps: four([&["zone-a"], &["zone-b"], &["zone-c"], &["zone-a"]]),
        cluster: &["10.1.2.4"],
        topology: Topology::SameZone("zone-b".into()),
        ..Case {
            name: "moved",
            zone: None,
            shape: case.shape,
            eps: Vec::new(),
            cluster: &[],
            local: &[],
            topology: Topology::Unused,
        }
    };
    let (cluster, _, topology, _) = run(&moved);
    assert_eq!(cluster, addrs(moved.cluster));
    assert_eq!(topology, moved.topology);
}
