//! Ferry's vocabulary and state.
//!
//! Place in the data flow (source → **cluster state → node view** → compiler → applier): this crate
//! holds the Kubernetes objects Ferry cares about, already validated and converted to typed values
//! ([`Service`], [`EndpointSlice`], [`Node`], [`ServiceCidr`], and in standalone mode [`Pod`]),
//! the single-owner [`ClusterState`] that sources feed, and [`NodeView`], the pure per-node answer to "which endpoints may this node send this service's
//! traffic to?".
//!
//! It must never do I/O: no files, no sockets, no clocks, no processes. Everything here is a pure
//! function of its inputs, so the compiler's output is deterministic and testable.

pub mod btree;
mod cluster;
mod endpoint;
mod intern;
mod labels;
mod name;
mod node;
mod pod;
mod service;
mod service_cidr;
mod view;

pub use cluster::{ClusterState, Object, ObjectKey, Touched};
pub use endpoint::{
    Endpoint, EndpointConditions, EndpointLocation, EndpointPort, EndpointSlice, EndpointTarget,
    TargetKind, TargetRef,
};
pub use intern::Interner;
pub use labels::{Labels, Selector};
pub use name::{ObjectRef, ServiceName, ServicePortName};
pub use node::{Node, NodeAddress, NodeAddressType, NodeTaint, TO_BE_DELETED_TAINT};
pub use pod::{
    Container, ContainerPort, HttpGetAction, HttpScheme, Pod, PodPhase, PortRef, Probe,
    ProbeHandler,
};
pub use service::{
    IpFamily, Protocol, Service, ServicePort, ServiceType, SessionAffinity, TrafficDistribution,
    TrafficPolicy,
};
pub use service_cidr::ServiceCidr;
pub use view::{
    EndpointView, Exclusion, HintsIgnored, NodeContext, NodeView, ServicePortView, Topology,
    Unserved,
};

#[cfg(any(test, feature = "fixtures"))]
pub mod fixtures;
