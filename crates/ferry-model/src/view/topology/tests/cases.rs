//! The table: upstream's topology_test.go cases in our words, plus node hints and the
//! terminating fallback.

use std::net::SocketAddr;

use super::{ep, Case, Ep, Shape, State, PORT, THIS_NODE};
use crate::fixtures::ip;
use crate::view::{HintsIgnored, Topology};

fn sock(a: &str) -> SocketAddr {
    SocketAddr::new(ip(a), PORT)
}

const ALL4: &[&str] = &["10.1.2.3", "10.1.2.4", "10.1.2.5", "10.1.2.6"];

fn four(zones: [&'static [&'static str]; 4]) -> Vec<Ep> {
    ALL4.iter().zip(zones).map(|(a, z)| ep(a, z)).collect()
}

pub(super) fn cases() -> Vec<Case> {
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
