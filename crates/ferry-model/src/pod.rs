//! Pods, as standalone mode's EndpointSlice controller and readiness prober need them.
//!
//! Only manifests deliver Pods (the Kubernetes API source reads the EndpointSlices the cluster's
//! own controller writes). The cluster state never stores them: a stage between the source and
//! the state turns them into EndpointSlices.

use std::net::IpAddr;
use std::sync::Arc;

use crate::{Labels, Protocol};

/// A port given by number or by the name of a container port (`IntOrString` in the API): a
/// Service port's `targetPort`, a probe's `port`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PortRef {
    /// A port number.
    Number(u16),
    /// The `name` of a container port.
    Name(Box<str>),
}

impl std::fmt::Display for PortRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PortRef::Number(n) => write!(f, "{n}"),
            PortRef::Name(name) => f.write_str(name),
        }
    }
}

/// `status.phase`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum PodPhase {
    /// `Pending`.
    Pending,
    /// `Running`.
    Running,
    /// `Succeeded`: every container exited 0 and will not restart.
    Succeeded,
    /// `Failed`: every container exited, one of them in failure.
    Failed,
    /// `Unknown`, or unset.
    #[default]
    Unknown,
}

impl PodPhase {
    /// True for `Succeeded` and `Failed`: the Pod is done and never comes back, so upstream
    /// leaves it out of every EndpointSlice.
    pub fn is_terminal(self) -> bool {
        matches!(self, PodPhase::Succeeded | PodPhase::Failed)
    }
}

/// One `ports[]` entry of a container.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ContainerPort {
    /// `name`, empty when unnamed.
    pub name: Box<str>,
    /// `containerPort`.
    pub port: u16,
    /// `protocol` (TCP when unset).
    pub protocol: Protocol,
}

/// `httpGet.scheme`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum HttpScheme {
    /// `HTTP` (the default).
    #[default]
    Http,
    /// `HTTPS`: as kubelet, the certificate is not verified.
    Https,
}

/// A probe's `httpGet`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HttpGetAction {
    /// `scheme`.
    pub scheme: HttpScheme,
    /// `host`; the Pod's IP when unset.
    pub host: Option<Box<str>>,
    /// `path` (`/` when unset).
    pub path: Box<str>,
    /// `port`.
    pub port: PortRef,
    /// `httpHeaders`, in order (a name may repeat).
    pub headers: Vec<(Box<str>, Box<str>)>,
}

/// What a probe does.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ProbeHandler {
    /// `httpGet`: success is a status from 200 to 399.
    HttpGet(HttpGetAction),
    /// `tcpSocket`: success is an accepted connection.
    TcpSocket {
        /// `host`; the Pod's IP when unset.
        host: Option<Box<str>>,
        /// `port`.
        port: PortRef,
    },
    /// `grpc`: `grpc.health.v1.Health/Check`; success is `SERVING`.
    Grpc {
        /// `port` (a number: the API allows no name here).
        port: u16,
        /// `service` (empty: the server's overall health).
        service: Box<str>,
    },
    /// `exec`: runs a command in the container, which only kubelet can do.
    Exec,
}

/// A container's `readinessProbe`, with the API server's defaults applied.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Probe {
    /// The action.
    pub handler: ProbeHandler,
    /// `initialDelaySeconds` (default 0): counted from the container's start.
    pub initial_delay_seconds: u32,
    /// `periodSeconds` (default 10).
    pub period_seconds: u32,
    /// `timeoutSeconds` (default 1).
    pub timeout_seconds: u32,
    /// `successThreshold` (default 1): passes in a row that make a failing container ready.
    pub success_threshold: u32,
    /// `failureThreshold` (default 3): failures in a row that make a ready container not ready.
    pub failure_threshold: u32,
}

/// A container (or a sidecar: an init container with `restartPolicy: Always`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Container {
    /// `name`.
    pub name: Box<str>,
    /// True for a sidecar (`initContainers[]` with `restartPolicy: Always`): its named ports
    /// are looked up after the regular containers', as upstream's `FindPort` does.
    pub sidecar: bool,
    /// `ports`.
    pub ports: Vec<ContainerPort>,
    /// `readinessProbe`.
    pub readiness_probe: Option<Probe>,
    /// `status.containerStatuses[].ready` of this container, when the status lists it.
    pub ready: Option<bool>,
    /// `status.containerStatuses[].state.running.startedAt`, in seconds since the Unix epoch:
    /// a probe's `initialDelaySeconds` counts from there.
    pub started_at: Option<i64>,
}

impl Container {
    /// The port of a container port named `name`, of any protocol (how kubelet resolves a
    /// probe's named port).
    pub fn named_port(&self, name: &str) -> Option<u16> {
        self.ports.iter().find(|p| &*p.name == name).map(|p| p.port)
    }
}

/// A `v1` Pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pod {
    /// `metadata.namespace`.
    pub namespace: Arc<str>,
    /// `metadata.name`.
    pub name: Arc<str>,
    /// `metadata.labels`.
    pub labels: Labels,
    /// `spec.nodeName`.
    pub node_name: Option<Arc<str>>,
    /// `spec.hostname`: the endpoints of the Service named by `spec.subdomain` carry it (for
    /// DNS; a proxy only shows it).
    pub hostname: Option<Box<str>>,
    /// `spec.subdomain`.
    pub subdomain: Option<Box<str>>,
    /// `status.podIPs` (or `status.podIP`), in order: at most one per family.
    pub ips: Vec<IpAddr>,
    /// `status.phase`.
    pub phase: PodPhase,
    /// `status.conditions[type=Ready].status` is `True`.
    pub ready: bool,
    /// `metadata.deletionTimestamp` (RFC 3339), set while the Pod terminates.
    pub deletion_timestamp: Option<String>,
    /// `spec.containers`, then the sidecars of `spec.initContainers`.
    pub containers: Vec<Container>,
}

impl Pod {
    /// The Pod's IP of one family.
    pub fn ip(&self, family: crate::IpFamily) -> Option<IpAddr> {
        self.ips
            .iter()
            .copied()
            .find(|ip| crate::IpFamily::of(ip) == family)
    }

    /// The container port a Service's `targetPort` names on this Pod: the number itself, or
    /// the first container port with that name and the Service port's protocol (regular
    /// containers first, then sidecars). `None` when no container has it: upstream then leaves
    /// that port out of the Pod's endpoint.
    pub fn find_port(&self, target: &PortRef, protocol: Protocol) -> Option<u16> {
        match target {
            PortRef::Number(n) => Some(*n),
            PortRef::Name(name) => self
                .containers
                .iter()
                .filter(|c| !c.sidecar)
                .chain(self.containers.iter().filter(|c| c.sidecar))
                .flat_map(|c| c.ports.iter())
                .find(|p| p.name == *name && p.protocol == protocol)
                .map(|p| p.port),
        }
    }
}
