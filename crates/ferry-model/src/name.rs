//! Names that identify objects and service ports.

use std::fmt;

use crate::Protocol;

/// `namespace/name` of a Service.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServiceName {
    /// Kubernetes namespace.
    pub namespace: String,
    /// Object name.
    pub name: String,
}

impl ServiceName {
    /// Builds a service name.
    pub fn new(namespace: impl Into<String>, name: impl Into<String>) -> Self {
        Self {
            namespace: namespace.into(),
            name: name.into(),
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

/// `Kind namespace/name`, used in every error and log line about an object.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectRef {
    /// Kubernetes kind, e.g. `Service`.
    pub kind: String,
    /// Namespace; empty for cluster-scoped objects (Node).
    pub namespace: String,
    /// Object name.
    pub name: String,
}

impl ObjectRef {
    /// Builds a reference.
    pub fn new(kind: &str, namespace: &str, name: &str) -> Self {
        Self {
            kind: kind.to_owned(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
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
