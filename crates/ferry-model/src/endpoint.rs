//! EndpointSlices: where a Service's traffic may go.

use std::fmt;
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
/// Kept compact (40 bytes), as a cluster holds one per pod and service: where the endpoint
/// runs (node, zone, hints) is one shared [`EndpointLocation`], which
/// [`ClusterState`](crate::ClusterState) interns, so the 100 000 endpoints of a large cluster
/// point at one location per node (and hint combination) instead of holding their own strings;
/// who it is (`hostname`, `targetRef`) is one pointer, `None` when neither is set.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Endpoint {
    /// `addresses[0]`; upstream kube-proxy uses only the first address.
    pub address: IpAddr,
    /// `conditions`.
    pub conditions: EndpointConditions,
    /// `nodeName`, `zone` and `hints`; `None` when none of them is set.
    pub location: Option<Arc<EndpointLocation>>,
    /// `hostname` and `targetRef`; `None` when neither is set.
    pub target: Option<Arc<EndpointTarget>>,
}

/// Who an endpoint is: `hostname` and `targetRef`. The rules never use them (upstream
/// kube-proxy does not either); `ferry status` and `ferry explain` name the Pod behind an
/// endpoint with them, and standalone mode finds the Pod's readiness probes through them.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct EndpointTarget {
    /// `hostname` (the Pod's `spec.hostname` when its `spec.subdomain` names the Service).
    pub hostname: Option<Box<str>>,
    /// `targetRef`.
    pub target_ref: Option<TargetRef>,
}

impl EndpointTarget {
    /// The target, or `None` when nothing is set.
    pub fn shared(self) -> Option<Arc<Self>> {
        (self != Self::default()).then(|| Arc::new(self))
    }
}

/// An endpoint's `targetRef` (its `uid` and `resourceVersion` are not kept).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TargetRef {
    /// `kind`.
    pub kind: TargetKind,
    /// `namespace` (shared with the slice's, or the Pod's).
    pub namespace: Arc<str>,
    /// `name` (shared with the Pod's, for derived slices).
    pub name: Arc<str>,
}

impl TargetRef {
    /// A reference to a Pod.
    pub fn pod(namespace: Arc<str>, name: Arc<str>) -> Self {
        Self {
            kind: TargetKind::Pod,
            namespace,
            name,
        }
    }
}

impl fmt::Display for TargetRef {
    /// `Pod dev/web-1`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
    }
}

/// A `targetRef.kind`: a Pod (what the EndpointSlice controller writes) or anything else.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TargetKind {
    /// `Pod`.
    Pod,
    /// Another kind, as written (empty when unset).
    Other(Box<str>),
}

impl fmt::Display for TargetKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TargetKind::Pod => f.write_str("Pod"),
            TargetKind::Other(kind) => f.write_str(kind),
        }
    }
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

    /// `targetRef`, when set.
    pub fn target_ref(&self) -> Option<&TargetRef> {
        self.target.as_ref()?.target_ref.as_ref()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endpoint_stays_small() {
        // One per Pod and Service: 100 000 in a large cluster.
        assert_eq!(std::mem::size_of::<Endpoint>(), 40);
    }

    #[test]
    fn a_target_ref_reads_kind_namespace_and_name() {
        let pod = TargetRef::pod("dev".into(), "web-1".into());
        assert_eq!(pod.to_string(), "Pod dev/web-1");
        let other = TargetRef {
            kind: TargetKind::Other("VirtualMachineInstance".into()),
            ..pod
        };
        assert_eq!(other.to_string(), "VirtualMachineInstance dev/web-1");
        assert_eq!(EndpointTarget::default().shared(), None);
    }
}
