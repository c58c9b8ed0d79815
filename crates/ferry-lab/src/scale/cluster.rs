//! The generated cluster: N ClusterIP Services × M ready endpoints, and optionally three extra
//! Services for traffic drills (a NodePort with each external policy and a ClusterIP with
//! session affinity, each with a second `stream` port). The same objects are written as
//! manifest files (one per Service: the Service and its EndpointSlice, as YAML the way `kubectl
//! get -o yaml` writes them, or as a JSON `List`) or served by the fake API server.
//!
//! Addresses: ClusterIPs upwards from `10.96.0.10` (service range `10.96.0.0/12`), port 80 →
//! target port 8080; endpoints upwards from `10.64.0.0`, all inside the pod range
//! [`POD_RANGE`] that the pods namespace answers on as a whole. Endpoints are spread
//! round-robin over three nodes; Ferry programs [`NODE`]. Two kinds of change:
//! - [`Cluster::change`] replaces *one* endpoint of a Service with an address never used before
//!   (upwards from `10.72.0.0`), as when a pod is rescheduled;
//! - [`Cluster::bump`] replaces *every* endpoint of a Service (a new generation of addresses),
//!   so a probe can tell the old rules from the new ones, and a mix of both within one Service.

use std::net::Ipv4Addr;

mod objects;
mod yaml;

/// The node Ferry runs as.
pub const NODE: &str = "node-1";
/// Every pod address (the cluster CIDR, and the pods namespace's AnyIP range).
pub const POD_RANGE: &str = "10.64.0.0/12";
/// The service range.
pub const SERVICE_RANGE: &str = "10.96.0.0/12";
/// The node's address on the client's side (its Node's InternalIP: NodePorts answer here).
pub const NODE_IP: &str = "10.200.0.1";
/// The Services' port.
pub const PORT: u16 = 80;
/// The extra Services' second port (a long-lived stream).
pub const STREAM_SERVICE_PORT: u16 = 81;
/// The endpoints' port.
pub const TARGET_PORT: u16 = 8080;
/// The endpoints' stream port.
pub const STREAM_PORT: u16 = 8081;

const FIRST_CLUSTER_IP: u32 = u32::from_be_bytes([10, 96, 0, 10]);
const FIRST_POD: u32 = u32::from_be_bytes([10, 64, 0, 0]);
/// Where [`Cluster::change`]'s addresses start (generation 4 of [`Cluster::bump`]'s: a
/// cluster uses one kind of change).
const FIRST_NEW_POD: u32 = u32::from_be_bytes([10, 72, 0, 0]);
/// Pod addresses in [`POD_RANGE`]: 8 generations of at most this many endpoints.
const GENERATION_SPAN: u32 = 1 << 17;
/// The most endpoints of a cluster that only [`Cluster::change`]s (the addresses below
/// [`FIRST_NEW_POD`]).
const MAX_ENDPOINTS: usize = 500_000;
pub(super) const NODES: usize = 3;

/// How the cluster is written: its namespace, manifest format, and extra Services.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// The Services' namespace.
    pub namespace: &'static str,
    /// The manifest files' format.
    pub format: Format,
    /// The three [`Extra`] Services after the N plain ones.
    pub extras: bool,
}

impl Layout {
    /// The benchmark's: namespace `bench`, YAML, no extras.
    pub const BENCH: Layout = Layout {
        namespace: "bench",
        format: Format::Yaml,
        extras: false,
    };

    /// The drills': namespace `drill`, JSON, extras as asked.
    pub fn drill(extras: bool) -> Layout {
        Layout {
            namespace: "drill",
            format: Format::Json,
            extras,
        }
    }
}

/// A manifest file's format.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `<name>.yaml`: two YAML documents.
    Yaml,
    /// `<name>.json`: a `List`.
    Json,
}

/// An extra Service for the traffic drills.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Extra {
    /// NodePort, `externalTrafficPolicy: Cluster` (node ports 30080, 30090).
    NodePortCluster,
    /// NodePort, `externalTrafficPolicy: Local` (node ports 30081, 30091).
    NodePortLocal,
    /// ClusterIP with `sessionAffinity: ClientIP`.
    Affinity,
}

impl Extra {
    /// Every extra, in index order after the N plain Services.
    pub const ALL: [Extra; 3] = [
        Extra::NodePortCluster,
        Extra::NodePortLocal,
        Extra::Affinity,
    ];

    /// Node ports (http, stream), for the NodePort extras.
    pub fn node_ports(self) -> Option<(u16, u16)> {
        match self {
            Extra::NodePortCluster => Some((30080, 30090)),
            Extra::NodePortLocal => Some((30081, 30091)),
            Extra::Affinity => None,
        }
    }
}

/// One endpoint change: Service `service`'s endpoint `slot` is now `address`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Change {
    /// The Service's index.
    pub service: usize,
    /// Which of its endpoints was replaced.
    pub slot: usize,
    /// The new endpoint.
    pub address: Ipv4Addr,
}

/// The cluster: its size and every Service's current endpoints.
#[derive(Debug, Clone)]
pub struct Cluster {
    /// N (plain Services).
    pub services: usize,
    /// M.
    pub endpoints: usize,
    pub(super) layout: Layout,
    generation: Vec<u32>,
    current: Vec<Vec<Ipv4Addr>>,
    changes: u32,
}

impl Cluster {
    /// N Services × M endpoints, plus the [`Extra`] Services when the layout has them. Every
    /// endpoint must fit one generation of addresses (131 072) in a cluster with extras (the
    /// drills', which [`Cluster::bump`]), 500 000 otherwise.
    pub fn new(services: usize, endpoints: usize, layout: Layout) -> anyhow::Result<Cluster> {
        let total = services + if layout.extras { Extra::ALL.len() } else { 0 };
        let most = if layout.format == Format::Json {
            GENERATION_SPAN as usize
        } else {
            MAX_ENDPOINTS
        };
        anyhow::ensure!(
            services > 0 && endpoints > 0 && total.saturating_mul(endpoints) <= most,
            "want at least one Service and endpoint, and (N + extras) × M ≤ {most}"
        );
        let mut c = Cluster {
            services,
            endpoints,
            layout,
            generation: vec![0; total],
            current: Vec::with_capacity(total),
            changes: 0,
        };
        c.current = (0..total).map(|i| c.endpoints_in(i, 0)).collect();
        Ok(c)
    }

    /// Every Service index, extras included.
    pub fn all(&self) -> std::ops::Range<usize> {
        0..self.generation.len()
    }

    /// The index of an extra Service (panics if the cluster has none).
    pub fn extra(&self, extra: Extra) -> usize {
        assert!(self.layout.extras, "this cluster has no extra Services");
        self.services + Extra::ALL.iter().position(|e| *e == extra).unwrap_or(0)
    }

    pub(super) fn extra_of(&self, i: usize) -> Option<Extra> {
        i.checked_sub(self.services)
            .and_then(|k| Extra::ALL.get(k).copied())
    }

    /// The Services' namespace.
    pub fn namespace(&self) -> &'static str {
        self.layout.namespace
    }

    /// Name of Service `i`.
    pub fn name(&self, i: usize) -> String {
        match self.extra_of(i) {
            Some(Extra::NodePortCluster) => "np-cluster".to_owned(),
            Some(Extra::NodePortLocal) => "np-local".to_owned(),
            Some(Extra::Affinity) => "affinity".to_owned(),
            None => format!("svc-{i:05}"),
        }
    }

    /// ClusterIP of Service `i`.
    pub fn cluster_ip(&self, i: usize) -> Ipv4Addr {
        Ipv4Addr::from(FIRST_CLUSTER_IP + i as u32)
    }

    /// The endpoints of Service `i` in generation `g`.
    pub fn endpoints_in(&self, i: usize, g: u32) -> Vec<Ipv4Addr> {
        let base = FIRST_POD + (g % 8) * GENERATION_SPAN + (i * self.endpoints) as u32;
        (0..self.endpoints as u32)
            .map(|j| Ipv4Addr::from(base + j))
            .collect()
    }

    /// The current endpoints of Service `i`.
    pub fn endpoints_of(&self, i: usize) -> &[Ipv4Addr] {
        &self.current[i]
    }

    /// The newest endpoint of Service `i` (the one its last [`Cluster::change`] brought in, if
    /// any: changes bring in ever higher addresses).
    pub fn newest_endpoint(&self, i: usize) -> Ipv4Addr {
        self.current[i]
            .iter()
            .copied()
            .max()
            .unwrap_or(Ipv4Addr::from(FIRST_POD))
    }

    /// The node of endpoint `j` of Service `i`.
    pub fn node_of(&self, i: usize, j: usize) -> String {
        format!("node-{}", (i + j) % NODES)
    }

    /// The current generation of Service `i`.
    pub fn generation(&self, i: usize) -> u32 {
        self.generation[i]
    }

    /// Replaces every endpoint of Service `i` (the next generation).
    pub fn bump(&mut self, i: usize) {
        self.generation[i] += 1;
        self.current[i] = self.endpoints_in(i, self.generation[i]);
    }

    /// Replaces one endpoint of Service `service` with a new address (as when a pod is
    /// rescheduled); successive changes of one Service replace successive slots.
    pub fn change(&mut self, service: usize) -> Change {
        let address = Ipv4Addr::from(FIRST_NEW_POD + self.changes);
        let slot = self.changes as usize % self.endpoints;
        self.changes += 1;
        self.current[service][slot] = address;
        Change {
            service,
            slot,
            address,
        }
    }

    /// Changes made by [`Cluster::change`] so far.
    pub fn changes(&self) -> u32 {
        self.changes
    }

    /// The Service that change number `k` touches (spread over the whole cluster).
    pub fn changed_service(&self, k: usize) -> usize {
        (k.wrapping_mul(7919).wrapping_add(self.services / 2)) % self.services
    }

    /// `count` distinct plain Service indexes, drawn with `rng`, first and last included.
    pub fn sample(&self, count: usize, rng: &mut fastrand::Rng) -> Vec<usize> {
        let mut picked = vec![0, self.services - 1];
        picked.dedup();
        while picked.len() < count.min(self.services) {
            let i = rng.usize(0..self.services);
            if !picked.contains(&i) {
                picked.push(i);
            }
        }
        picked
    }

    /// `count` Service indexes spread over the cluster, first and last included, the same in
    /// every run.
    pub fn spread(&self, count: usize) -> Vec<usize> {
        let mut picked = self.sample(count, &mut fastrand::Rng::with_seed(0x9E37_79B9_7F4A_7C15));
        picked.truncate(count.min(self.services));
        picked
    }
}

/// Node `n`'s InternalIP (`node-1`, Ferry's, is the node's client-side address).
pub(super) fn node_ip(n: usize) -> String {
    if n == 1 {
        NODE_IP.to_owned()
    } else {
        format!("10.200.0.1{n}")
    }
}

pub(super) fn node_cidr(n: usize) -> String {
    format!("10.{}.0.0/14", 64 + 4 * n)
}
