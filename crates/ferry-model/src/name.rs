//! Names that identify objects and service ports.

use std::fmt;
use std::sync::Arc;

use crate::Protocol;

/// `namespace/name` of a Service.
///
/// The parts are shared `Arc<str>`s: the state, its indexes, node views and compiled rules all
/// hold a copy of a Service's name, and cloning one only bumps two counters.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServiceName {
    /// Kubernetes namespace.
    pub namespace: Arc<str>,
    /// Object name.
    pub name: Arc<str>,
}

impl ServiceName {
    /// Builds a service name.
    pub fn new(namespace: impl AsRef<str>, name: impl AsRef<str>) -> Self {
        Self {
            namespace: namespace.as_ref().into(),
            name: name.as_ref().into(),
        }
    }
}

impl fmt::Display for ServiceName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// One port of one Service: the unit kube-proxy programs (`namespace/name:portName`).
///
/// Ordered by service, then port name, then protocol, so rulesets come out sorted.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServicePortName {
    /// The Service.
    pub service: ServiceName,
    /// The port's `name` (empty when the Service has a single unnamed port).
    pub port: String,
    /// The port's protocol.
    pub protocol: Protocol,
}

impl fmt::Display for ServicePortName {
    /// Upstream's `ServicePortName.String()`: `namespace/name:port` (the protocol is not shown).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.service, self.port)
    }
}

/// `Kind namespace/name`, used in every error and log line about an object. The strings are
/// shared: the manifest source keeps one per object it knows (its identity), with the kind
/// and namespace interned and the name shared with the object's own.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectRef {
    /// Kubernetes kind, e.g. `Service`.
    pub kind: Arc<str>,
    /// Namespace; empty for cluster-scoped objects (Node).
    pub namespace: Arc<str>,
    /// Object name.
    pub name: Arc<str>,
}

impl ObjectRef {
    /// Builds a reference.
    pub fn new(kind: &str, namespace: &str, name: &str) -> Self {
        Self {
            kind: Arc::from(kind),
            namespace: Arc::from(namespace),
            name: Arc::from(name),
        }
    }
}

impl fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.namespace.is_empty() {
            write!(f, "{} {}", self.kind, self.name)
        } else {
            write!(f, "{} {}/{}", self.kind, self.namespace, self.name)
        }
    }
}
