//! The [`Lab`]: a cluster built in network namespaces, and everything a test does with it.
//! Building the network is in `lab/build.rs`, pods in `lab/pods.rs`, running things inside the
//! lab in `lab/run.rs`, teardown and leftover cleanup in `lab/teardown.rs`.

mod build;
pub use build::wire_pod;
pub mod ipv6;
mod pods;
mod run;
mod teardown;

use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::atomic::AtomicUsize;

use ipnet::Ipv4Net;

use crate::netns::NetnsError;
use crate::pod::PodInfo;
use crate::process::{LabProcess, ProcessError};
use crate::spec::{ClientSpec, LabSpec};

/// Errors from building and using a lab. Messages name the host, namespace or command.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// Labs need root (CAP_NET_ADMIN and CAP_SYS_ADMIN).
    #[error("ferry-lab needs root to create network namespaces (euid is not 0)")]
    NotRoot,
    /// The spec is inconsistent.
    #[error("invalid lab spec: {0}")]
    InvalidSpec(String),
    /// No host of that kind and name.
    #[error("lab {prefix} has no {kind} named {name:?}")]
    UnknownHost {
        /// The lab's prefix.
        prefix: String,
        /// `node`, `pod`, `client` or `pod server`.
        kind: &'static str,
        /// The name looked up.
        name: String,
    },
    /// A host of that name exists already.
    #[error("lab {prefix} already has a host named {name:?}")]
    Duplicate {
        /// The lab's prefix.
        prefix: String,
        /// The name.
        name: String,
    },
    /// A pod IP outside its node's pod CIDR, or already used.
    #[error("pod {pod}: IP {ip} {problem}")]
    BadPodIp {
        /// The pod.
        pod: String,
        /// The IP asked for.
        ip: Ipv4Addr,
        /// What is wrong with it.
        problem: String,
    },
    /// A namespace operation failed (the message names namespace and command).
    #[error(transparent)]
    Netns(#[from] NetnsError),
    /// Managing a process failed.
    #[error(transparent)]
    Process(#[from] ProcessError),
    /// The lab's temporary directory could not be created.
    #[error("cannot create the lab's temporary directory: {0}")]
    TempDir(#[source] io::Error),
    /// A pod server did not start listening.
    #[error("pod {pod}: server on {addr} not ready: {detail}\n--- log ---\n{log}")]
    ServerNotReady {
        /// The pod.
        pod: String,
        /// Its listen address.
        addr: SocketAddr,
        /// Why we gave up.
        detail: String,
        /// The server's log.
        log: String,
    },
    /// A TCP connect from inside a namespace failed.
    #[error("connect from {host} (network namespace {ns}) to {addr}: {source}")]
    Connect {
        /// The host connecting.
        host: String,
        /// Its namespace.
        ns: String,
        /// The destination.
        addr: SocketAddr,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// Namespaces survived teardown.
    #[error("lab {prefix}: namespaces left after teardown: {left:?}")]
    Leftovers {
        /// The lab's prefix.
        prefix: String,
        /// The namespaces still listed.
        left: Vec<String>,
    },
}

/// A host of the lab, by kind and name (Kubernetes names for nodes and pods).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Host {
    /// A node, e.g. `k8s-master`.
    Node(String),
    /// A pod, by pod name.
    Pod(String),
    /// A client outside the cluster, e.g. `client`.
    Client(String),
}

impl Host {
    /// A node by Kubernetes name.
    pub fn node(name: impl Into<String>) -> Self {
        Host::Node(name.into())
    }
    /// A pod by name.
    pub fn pod(name: impl Into<String>) -> Self {
        Host::Pod(name.into())
    }
    /// A client by name.
    pub fn client(name: impl Into<String>) -> Self {
        Host::Client(name.into())
    }
    /// The default client ([`crate::spec::CLIENT`]).
    pub fn default_client() -> Self {
        Host::Client(crate::spec::CLIENT.to_string())
    }
}

impl std::fmt::Display for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Host::Node(n) => write!(f, "node {n}"),
            Host::Pod(n) => write!(f, "pod {n}"),
            Host::Client(n) => write!(f, "client {n}"),
        }
    }
}

/// A node of a built lab.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    /// Kubernetes node name.
    pub name: String,
    /// `eth0` address on the LAN.
    pub ip: Ipv4Addr,
    /// Pod CIDR.
    pub pod_cidr: Ipv4Net,
    /// Its namespace.
    pub netns: String,
}

/// A client of a built lab.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientInfo {
    /// Client name.
    pub name: String,
    /// `eth0` address on the LAN.
    pub ip: Ipv4Addr,
    /// Its namespace.
    pub netns: String,
}

/// A server process running in a pod.
#[derive(Debug)]
struct PodServer {
    pod: String,
    port: u16,
    process: LabProcess,
    wait_tcp: bool,
}

/// A cluster in network namespaces: a LAN bridge (`<prefix>-lan`), nodes (`<prefix>-n<i>`),
/// clients (`<prefix>-c<i>`) and pods (`<prefix>-p<i>`). Dropping it (also while panicking)
/// stops its processes, kills anything else left in its namespaces and deletes them; a build
/// that fails halfway removes what it created.
#[derive(Debug)]
pub struct Lab {
    prefix: String,
    spec: LabSpec,
    lan_ns: String,
    nodes: Vec<NodeInfo>,
    clients: Vec<ClientInfo>,
    pods: Vec<PodInfo>,
    servers: Vec<PodServer>,
    namespaces: Vec<String>,
    next_pod: usize,
    next_log: AtomicUsize,
    dir: Option<tempfile::TempDir>,
    armed: bool,
    ipv6: ipv6::Ipv6State,
}

/// True when running as root (labs need it; tests skip otherwise).
pub fn running_as_root() -> bool {
    nix::unistd::geteuid().is_root()
}

impl Lab {
    /// Builds the seed 004 lab ([`LabSpec::seed004`]).
    pub fn seed004() -> Result<Lab, LabError> {
        Lab::build(&LabSpec::seed004())
    }

    /// Builds a lab. Labs of dead processes (see [`Lab::cleanup_orphans`]) are removed first.
    /// On error, whatever was created is removed again.
    pub fn build(spec: &LabSpec) -> Result<Lab, LabError> {
        if !running_as_root() {
            return Err(LabError::NotRoot);
        }
        spec.validate().map_err(LabError::InvalidSpec)?;
        if let Err(e) = Lab::cleanup_orphans() {
            tracing::warn!(error = %e, "removing orphaned labs");
        }
        let prefix = spec.prefix.clone().unwrap_or_else(build::auto_prefix);
        let dir = tempfile::Builder::new()
            .prefix(&format!("ferry-lab-{prefix}-"))
            .tempdir()
            .map_err(LabError::TempDir)?;
        let mut lab = Lab {
            lan_ns: format!("{prefix}-lan"),
            prefix,
            spec: spec.clone(),
            nodes: Vec::new(),
            clients: Vec::new(),
            pods: Vec::new(),
            servers: Vec::new(),
            namespaces: Vec::new(),
            next_pod: 0,
            next_log: AtomicUsize::new(0),
            dir: Some(dir),
            armed: true,
            ipv6: ipv6::Ipv6State::default(),
        };
        // On error `lab` is dropped here, which tears down what exists.
        lab.setup()?;
        Ok(lab)
    }

    /// The namespace-name prefix of this lab.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The spec the lab was built from (clients added later are not in it).
    pub fn spec(&self) -> &LabSpec {
        &self.spec
    }

    /// The lab's temporary directory (process logs live here; removed on drop).
    pub fn dir(&self) -> &Path {
        self.dir.as_ref().map_or(Path::new("/tmp"), |d| d.path())
    }

    /// The LAN bridge's namespace.
    pub fn lan_netns(&self) -> &str {
        &self.lan_ns
    }

    /// Every namespace of the lab, in creation order.
    pub fn namespaces(&self) -> &[String] {
        &self.namespaces
    }

    /// The nodes.
    pub fn nodes(&self) -> &[NodeInfo] {
        &self.nodes
    }

    /// A node by Kubernetes name.
    pub fn node(&self, name: &str) -> Result<&NodeInfo, LabError> {
        self.nodes
            .iter()
            .find(|n| n.name == name)
            .ok_or_else(|| self.unknown("node", name))
    }

    /// The clients.
    pub fn clients(&self) -> &[ClientInfo] {
        &self.clients
    }

    /// A client by name.
    pub fn client(&self, name: &str) -> Result<&ClientInfo, LabError> {
        self.clients
            .iter()
            .find(|c| c.name == name)
            .ok_or_else(|| self.unknown("client", name))
    }

    /// The pods.
    pub fn pods(&self) -> &[PodInfo] {
        &self.pods
    }

    /// A pod by name.
    pub fn pod(&self, name: &str) -> Result<&PodInfo, LabError> {
        self.pods
            .iter()
            .find(|p| p.name == name)
            .ok_or_else(|| self.unknown("pod", name))
    }

    fn unknown(&self, kind: &'static str, name: &str) -> LabError {
        LabError::UnknownHost {
            prefix: self.prefix.clone(),
            kind,
            name: name.to_string(),
        }
    }

    /// The namespace of a host.
    pub fn netns_of(&self, host: &Host) -> Result<&str, LabError> {
        Ok(match host {
            Host::Node(n) => &self.node(n)?.netns,
            Host::Pod(n) => &self.pod(n)?.netns,
            Host::Client(n) => &self.client(n)?.netns,
        })
    }

    /// Adds a client on the LAN (default route via the dead-end gateway; routes to the pod
    /// CIDRs if `pod_routes`).
    pub fn add_client(&mut self, client: &ClientSpec) -> Result<&ClientInfo, LabError> {
        self.check_new_name(&client.name)?;
        self.attach_clients(std::slice::from_ref(client))?;
        self.client(&client.name)
    }

    fn check_new_name(&self, name: &str) -> Result<(), LabError> {
        let taken = self.nodes.iter().any(|n| n.name == name)
            || self.clients.iter().any(|c| c.name == name)
            || self.pods.iter().any(|p| p.name == name);
        if name.is_empty() || taken {
            return Err(LabError::Duplicate {
                prefix: self.prefix.clone(),
                name: name.to_string(),
            });
        }
        Ok(())
    }
}
