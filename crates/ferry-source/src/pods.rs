//! Standalone mode's EndpointSlice controller and readiness probes: Pods → EndpointSlices.
//!
//! In a cluster, kubelet probes each Pod's readiness and the EndpointSlice controller writes
//! every selector Service's slices from the Pods; Ferry reads the result. Standalone, nobody
//! does, so this module does both for the Pods the manifests list:
//! - [`derive`]: one Service's slices from its Pods, by upstream's rules (pure);
//! - [`EndpointController`]: the stage between a source and the cluster state that keeps those
//!   slices up to date as Services, Pods, Nodes and readiness verdicts change (pure);
//! - [`readiness`]: a Pod's readiness from its status and Ferry's probe verdicts (pure);
//! - [`crate::probe`]: the probes themselves (I/O), and [`run`], the task that ties the
//!   controller to a source, the cluster state and the prober.
//!
//! Pods are never invented: Deployments and ReplicaSets are ignored, the manifests list the Pods
//! that exist, with `spec.nodeName`, `status.podIP(s)` and (for Pods without a probe Ferry
//! runs) their `Ready` condition.

use std::fmt;
use std::sync::Arc;

use ferry_model::Pod;

mod controller;
pub mod derive;
mod index;
pub mod readiness;
mod run;

pub use controller::{EndpointController, Output};
pub use readiness::{is_probed, ReadinessUpdate, Verdicts};
pub use run::{run, StageOptions};

/// `namespace/name` of a Pod.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PodKey {
    /// `metadata.namespace`.
    pub namespace: Arc<str>,
    /// `metadata.name`.
    pub name: Arc<str>,
}

impl PodKey {
    /// A key from its parts.
    pub fn new(namespace: impl AsRef<str>, name: impl AsRef<str>) -> Self {
        Self {
            namespace: namespace.as_ref().into(),
            name: name.as_ref().into(),
        }
    }

    /// The key of a Pod (sharing its strings).
    pub fn of(pod: &Pod) -> Self {
        Self {
            namespace: pod.namespace.clone(),
            name: pod.name.clone(),
        }
    }
}

impl fmt::Display for PodKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

#[cfg(test)]
mod tests;
