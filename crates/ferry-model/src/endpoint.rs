//! EndpointSlices: where a Service's traffic may go.

use std::net::IpAddr;
use std::sync::Arc;

use crate::{IpFamily, Protocol, ServiceName};

/// `endpoints[].conditions`, with Kubernetes' defaulting already applied
/// as upstream kube-proxy reads them: `ready` unset → true, `serving` unset → true,
/// `terminating` unset → false.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EndpointConditions {
    /// Ready to receive new traffic (readiness probe passing, not terminating).
    pub ready: bool,
    /// Serving, regardless of terminating state.
    pub serving: bool,
    /// Being deleted.
    pub terminating: bool,
}

impl Default for EndpointConditions {
    fn default() -> Self {
        Self {
            ready: true,
            serving: true,
            terminating: false,
        }
    }
}

/// One `endpoints[]` entry.
///
/// Kept compact (32 bytes), as a cluster holds one per pod and service: where the endpoint
/// runs (node, zone, hints) is one shared [`EndpointLocation`], which
/// [`ClusterState`](crate::ClusterState) interns, so the 100 000 endpoints of a large cluster
/// point at one location per node (and hint combination) instead of holding their own strings.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Endpoint {
    /// `addresses[0]`; upstream kube-proxy uses only the first address.
    pub address: IpAddr,
    /// `conditions`.
    pub conditions: EndpointConditions,
    /// `nodeName`, `zone` and `hints`; `None` when none of them is set.
    pub location: Option<Arc<EndpointLocation>>,
}

/// Where an endpoint runs: `nodeName`, `zone` and `hints`, shared by the endpoints that have the
/// same ones.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct EndpointLocation {
    /// `nodeName`: the node the endpoint runs on.
    pub node_name: Option<Arc<str>>,
    /// `zone`.
    pub zone: Option<Arc<str>>,
    /// `hints.forZones[].name`, when hints are set (topology-aware routing, `PreferClose` /
    /// `PreferSameZone`).
    pub zone_hints: Option<Box<[Arc<str>]>>,
    /// `hints.forNodes[].name`, when hints are set (`trafficDistribution: PreferSameNode`).
    pub node_hints: Option<Box<[Arc<str>]>>,
}

impl EndpointLocation {
    /// The location, or `None` when nothing is set.
    pub fn shared(self) -> Option<Arc<Self>> {
        (self != Self::default()).then(|| Arc::new(self))
    }

    /// A location with only a node name (`None` for no name).
    pub fn on_node(node_name: Option<&str>) -> Option<Arc<Self>> {
        Self {
            node_name: node_name.map(Arc::from),
            ..Self::default()
        }
        .shared()
    }
}

impl Endpoint {
    /// `nodeName`.
    pub fn node_name(&self) -> Option<&str> {
        self.location.as_ref()?.node_name.as_deref()
    }

    /// `zone`.
    pub fn zone(&self) -> Option<&str> {
        self.location.as_ref()?.zone.as_deref()
    }

    /// `hints.forZones[].name`, when set.
    pub fn zone_hints(&self) -> Option<&[Arc<str>]> {
        self.location.as_ref()?.zone_hints.as_deref()
    }

    /// `hints.forNodes[].name`, when set.
    pub fn node_hints(&self) -> Option<&[Arc<str>]> {
        self.location.as_ref()?.node_hints.as_deref()
    }
}

/// One `ports[]` entry of a slice.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct EndpointPort {
    /// `name`, matching the Service port's name (empty when unnamed).
    pub name: String,
    /// `port`: the port on the endpoint (the resolved targetPort).
    pub port: u16,
    /// `protocol`.
    pub protocol: Protocol,
}

/// A `discovery.k8s.io/v1` EndpointSlice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointSlice {
    /// `metadata.namespace` (shared with the state's indexes).
    pub namespace: Arc<str>,
    /// `metadata.name` (shared with the state's indexes).
    pub name: Arc<str>,
    /// The owning Service (label `kubernetes.io/service-name`).
    pub service: ServiceName,
    /// `addressType`.
    pub family: IpFamily,
    /// `ports`.
    pub ports: Vec<EndpointPort>,
    /// `endpoints`.
    pub endpoints: Vec<Endpoint>,
    /// Annotation `endpoints.kubernetes.io/last-change-trigger-time` (RFC 3339), if any.
    pub trigger_time: Option<String>,
}
