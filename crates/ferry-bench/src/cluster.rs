//! The synthetic cluster: N services × M endpoints on three nodes.
//!
//! Everything is a pure function of the [`ClusterSpec`], so two runs (and the child process
//! that measures one N) see exactly the same objects.
//!
//! Shape of the cluster:
//! - three nodes `node-0`…`node-2` (InternalIPs `172.18.0.2`…`172.18.0.4`), each with a
//!   `/14` pod CIDR inside the cluster CIDR [`CLUSTER_CIDR`] (`10.64.0.0/12`); the benchmark
//!   programs [`BENCH_NODE`];
//! - services spread over 20 namespaces, ClusterIPs allocated upwards from `10.96.0.10` in the
//!   service range `10.96.0.0/12`, one TCP port `http` each;
//! - every 5th service is a NodePort service (node ports from 30000 while the default range
//!   30000–32767 lasts), half of those with `externalTrafficPolicy: Local`;
//! - each service has one EndpointSlice with M ready endpoints, assigned round-robin to the
//!   three nodes, pod IPs taken from the node's pod CIDR.

use std::net::Ipv4Addr;

use anyhow::ensure;
use ferry_model::fixtures::{mk_endpoint, mk_node, mk_service, mk_slice, with_node_port};
use ferry_model::{EndpointSlice, Interner, Object, Service, TrafficPolicy};

/// The node whose rules the benchmark compiles and applies.
pub const BENCH_NODE: &str = "node-1";
/// Its InternalIP (node `n` has `172.18.0.<n + 2>`).
pub const BENCH_NODE_IP: &str = "172.18.0.3";
/// The cluster CIDR (the local-traffic detector's pod range).
pub const CLUSTER_CIDR: &str = "10.64.0.0/12";
/// First ClusterIP handed out (`10.96.0.0/12` is the service range).
const FIRST_CLUSTER_IP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 10);
/// Last address of the service range.
const LAST_SERVICE_IP: Ipv4Addr = Ipv4Addr::new(10, 111, 255, 254);
/// Number of nodes.
pub const NODES: usize = 3;
/// Pod addresses usable per node (a `/14` minus network, gateway and broadcast).
const PODS_PER_NODE: usize = (1 << 18) - 3;
/// First and last node port of the default NodePort range.
const NODE_PORTS: (u16, u16) = (30000, 32767);
/// Every `NODE_PORT_EVERY`-th service is a NodePort service.
const NODE_PORT_EVERY: usize = 5;

const NAMESPACES: [&str; 20] = [
    "default",
    "payments",
    "checkout",
    "catalog",
    "search",
    "auth",
    "billing",
    "shipping",
    "inventory",
    "analytics",
    "monitoring",
    "logging",
    "ingress",
    "media",
    "notifications",
    "recommendations",
    "reviews",
    "users",
    "orders",
    "gateway",
];

const COMPONENTS: [&str; 8] = [
    "api", "frontend", "worker", "cache", "db-proxy", "grpc", "metrics", "admin",
];

/// Service port and target (container) port, chosen by service index.
const PORTS: [(u16, u16); 4] = [(80, 8080), (443, 8443), (8080, 8080), (9090, 9090)];

/// Size of the generated cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClusterSpec {
    /// Number of services (N).
    pub services: usize,
    /// Endpoints per service (M).
    pub endpoints: usize,
}

/// What kind of service index `i` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServiceKind {
    /// A ClusterIP-only service.
    ClusterIp,
    /// A NodePort service with the given node port and external traffic policy.
    NodePort {
        /// The node port.
        node_port: u16,
        /// `externalTrafficPolicy`.
        policy: TrafficPolicy,
    },
}

impl ClusterSpec {
    /// A spec of `services` × `endpoints`, checked against the address ranges used.
    pub fn new(services: usize, endpoints: usize) -> anyhow::Result<Self> {
        ensure!(services > 0, "need at least one service");
        ensure!(endpoints > 0, "need at least one endpoint per service");
        let ips = u32::from(LAST_SERVICE_IP) - u32::from(FIRST_CLUSTER_IP) + 1;
        ensure!(
            services <= ips as usize,
            "{services} services do not fit in the service range 10.96.0.0/12"
        );
        // Pods of the cluster plus one spare per change (see `changed_slice`), per node.
        let pods = services.saturating_mul(endpoints).saturating_add(services);
        ensure!(
            pods / NODES < PODS_PER_NODE,
            "{services} × {endpoints} endpoints do not fit in the pod CIDRs"
        );
        Ok(Self {
            services,
            endpoints,
        })
    }

    /// Namespace of service `i`.
    pub fn namespace(&self, i: usize) -> &'static str {
        NAMESPACES[i % NAMESPACES.len()]
    }

    /// Name of service `i` (unique: the index is part of it).
    pub fn name(&self, i: usize) -> String {
        let component = COMPONENTS[(i / NAMESPACES.len()) % COMPONENTS.len()];
        format!("{component}-{i:05}")
    }

    /// ClusterIP of service `i`.
    pub fn cluster_ip(&self, i: usize) -> Ipv4Addr {
        // `new` checked that every index fits in the service range.
        Ipv4Addr::from(u32::from(FIRST_CLUSTER_IP).wrapping_add(i as u32))
    }

    /// Whether service `i` is a ClusterIP or a NodePort service.
    pub fn kind(&self, i: usize) -> ServiceKind {
        let slot = i / NODE_PORT_EVERY;
        let available = usize::from(NODE_PORTS.1 - NODE_PORTS.0) + 1;
        if !i.is_multiple_of(NODE_PORT_EVERY) || slot >= available {
            return ServiceKind::ClusterIp;
        }
        let policy = if slot % 2 == 1 {
            TrafficPolicy::Local
        } else {
            TrafficPolicy::Cluster
        };
        // `slot < available` so this fits in the range.
        ServiceKind::NodePort {
            node_port: NODE_PORTS.0 + slot as u16,
            policy,
        }
    }

    /// The Service object of service `i`.
    pub fn service(&self, i: usize) -> Service {
        let (port, _) = PORTS[i % PORTS.len()];
        let svc = mk_service(
            self.namespace(i),
            &self.name(i),
            &self.cluster_ip(i).to_string(),
            port,
        );
        match self.kind(i) {
            ServiceKind::ClusterIp => svc,
            ServiceKind::NodePort { node_port, policy } => with_node_port(svc, node_port, policy),
        }
    }

    /// Node name and pod IP of the cluster's `p`-th pod (pods are spread round-robin).
    pub fn pod(&self, p: usize) -> (String, Ipv4Addr) {
        let node = p % NODES;
        // Skip the pod CIDR's network address and gateway (`.0`, `.1`).
        let offset = (p / NODES + 2) as u32;
        let base = u32::from(Ipv4Addr::new(10, 64, 0, 0)) + (node as u32) * (1 << 18);
        (format!("node-{node}"), Ipv4Addr::from(base + offset))
    }

    /// The EndpointSlice of service `i`, with endpoint `replace.0` swapped for pod `replace.1`.
    fn slice_with(&self, i: usize, replace: Option<(usize, usize)>) -> EndpointSlice {
        let endpoints = (0..self.endpoints)
            .map(|j| {
                let p = match replace {
                    Some((which, pod)) if which == j => pod,
                    _ => i * self.endpoints + j,
                };
                let (node, ip) = self.pod(p);
                mk_endpoint(&ip.to_string(), &node)
            })
            .collect();
        let (_, target_port) = PORTS[i % PORTS.len()];
        let name = self.name(i);
        let mut slice = mk_slice(self.namespace(i), &name, target_port, endpoints);
        slice.name = format!("{name}-{}", slice_suffix(i)).into();
        // What ferry-source's conversion delivers: one location per node within a slice.
        Interner::default().intern_slice(&mut slice);
        slice
    }

    /// The EndpointSlice of service `i`.
    pub fn slice(&self, i: usize) -> EndpointSlice {
        self.slice_with(i, None)
    }

    /// The Node objects.
    pub fn nodes(&self) -> Vec<Object> {
        (0..NODES)
            .map(|n| {
                let ip = format!("172.18.0.{}", n + 2);
                let cidr = format!("10.{}.0.0/14", 64 + 4 * n);
                Object::from(mk_node(&format!("node-{n}"), &ip, &cidr))
            })
            .collect()
    }

    /// Every object of the cluster: nodes, then each service followed by its slice.
    pub fn objects(&self) -> Vec<Object> {
        let mut out = self.nodes();
        out.reserve(2 * self.services);
        for i in 0..self.services {
            out.push(Object::from(self.service(i)));
            out.push(Object::from(self.slice(i)));
        }
        out
    }

    /// The service that change number `k` touches (spread over the whole cluster).
    pub fn changed_service(&self, k: usize) -> usize {
        (k.wrapping_mul(7919).wrapping_add(self.services / 2)) % self.services
    }

    /// Change number `k`: one endpoint of [`changed_service`](Self::changed_service)`(k)` is
    /// replaced by a new pod (as when a pod is rescheduled). Returns the service index and its
    /// new slice.
    pub fn changed_slice(&self, k: usize) -> (usize, EndpointSlice) {
        let i = self.changed_service(k);
        // Pods beyond the cluster's own are fresh (`new` reserved one per service);
        // `k % endpoints` varies which endpoint moves.
        let fresh = self.services * self.endpoints + k % self.services;
        (i, self.slice_with(i, Some((k % self.endpoints, fresh))))
    }
}

/// A 5-character suffix like the API server's generated names (`api-00042-x7k2q`).
fn slice_suffix(i: usize) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut x = (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 20;
    (0..5)
        .map(|_| {
            let c = ALPHABET[(x % ALPHABET.len() as u64) as usize];
            x /= ALPHABET.len() as u64;
            char::from(c)
        })
        .collect()
}
