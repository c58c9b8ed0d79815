//! [`Object`] and [`ObjectKey`]: the objects sources deliver to the state, and their identity.

use std::sync::Arc;

use crate::{EndpointSlice, Node, ObjectRef, Pod, Service, ServiceCidr, ServiceName};

/// A validated object, as sources deliver it. Services and slices are shared (`Arc`): the
/// manifest source's last good copy, the Pod stage's and the event passed on are one
/// allocation, whoever holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Object {
    /// A Service.
    Service(Arc<Service>),
    /// An EndpointSlice (also what a legacy `v1 Endpoints` is converted to).
    EndpointSlice(Arc<EndpointSlice>),
    /// A Node.
    Node(Arc<Node>),
    /// A Pod (standalone mode only). The state does not store Pods: the EndpointSlice
    /// controller stage between the source and the state turns them into EndpointSlices.
    Pod(Arc<Pod>),
    /// A ServiceCIDR (`networking.k8s.io/v1`).
    ServiceCidr(Arc<ServiceCidr>),
}

impl From<Service> for Object {
    fn from(service: Service) -> Self {
        Object::Service(Arc::new(service))
    }
}

impl From<EndpointSlice> for Object {
    fn from(slice: EndpointSlice) -> Self {
        Object::EndpointSlice(Arc::new(slice))
    }
}

impl From<Arc<Service>> for Object {
    fn from(service: Arc<Service>) -> Self {
        Object::Service(service)
    }
}

impl From<Arc<EndpointSlice>> for Object {
    fn from(slice: Arc<EndpointSlice>) -> Self {
        Object::EndpointSlice(slice)
    }
}

impl From<Node> for Object {
    fn from(node: Node) -> Self {
        Object::Node(Arc::new(node))
    }
}

impl From<Pod> for Object {
    fn from(pod: Pod) -> Self {
        Object::Pod(Arc::new(pod))
    }
}

impl From<ServiceCidr> for Object {
    fn from(cidr: ServiceCidr) -> Self {
        Object::ServiceCidr(Arc::new(cidr))
    }
}

impl Object {
    /// The key under which the state stores this object.
    pub fn key(&self) -> ObjectKey {
        match self {
            Object::Service(s) => ObjectKey::Service(s.name.clone()),
            Object::EndpointSlice(s) => ObjectKey::EndpointSlice {
                namespace: s.namespace.to_string(),
                name: s.name.to_string(),
            },
            Object::Node(n) => ObjectKey::Node(n.name.clone()),
            Object::Pod(p) => ObjectKey::Pod {
                namespace: p.namespace.to_string(),
                name: p.name.to_string(),
            },
            Object::ServiceCidr(c) => ObjectKey::ServiceCidr(c.name.clone()),
        }
    }
}

/// Identity of a stored object.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ObjectKey {
    /// A Service.
    Service(ServiceName),
    /// An EndpointSlice.
    EndpointSlice {
        /// `metadata.namespace`.
        namespace: String,
        /// `metadata.name`.
        name: String,
    },
    /// A Node.
    Node(String),
    /// A Pod.
    Pod {
        /// `metadata.namespace`.
        namespace: String,
        /// `metadata.name`.
        name: String,
    },
    /// A ServiceCIDR (cluster-scoped: a name only).
    ServiceCidr(String),
}

impl ObjectKey {
    /// `Kind namespace/name`, for messages.
    pub fn object_ref(&self) -> ObjectRef {
        match self {
            ObjectKey::Service(s) => ObjectRef::new("Service", &s.namespace, &s.name),
            ObjectKey::EndpointSlice { namespace, name } => {
                ObjectRef::new("EndpointSlice", namespace, name)
            }
            ObjectKey::Node(n) => ObjectRef::new("Node", "", n),
            ObjectKey::Pod { namespace, name } => ObjectRef::new("Pod", namespace, name),
            ObjectKey::ServiceCidr(n) => ObjectRef::new("ServiceCIDR", "", n),
        }
    }
}
