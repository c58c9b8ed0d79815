//! The end-to-end cluster: N ClusterIP Services × M ready endpoints, as manifest files (one per
//! Service: the Service and its EndpointSlice) and as API objects.
//!
//! Addresses: ClusterIPs upwards from `10.96.0.10` (service range `10.96.0.0/12`), port 80 →
//! target port 8080; endpoints upwards from `10.64.0.2`, endpoints brought in by changes upwards
//! from `10.72.0.0`, all inside the pod range [`POD_RANGE`] that the endpoint namespace answers
//! on as a whole. Endpoints are spread round-robin over three nodes; Ferry programs [`NODE`].

use std::fmt::Write as _;
use std::net::Ipv4Addr;

use serde_json::Value;

/// The node Ferry runs as.
pub const NODE: &str = "node-1";
/// Every pod address (the cluster CIDR, and the endpoint namespace's AnyIP range).
pub const POD_RANGE: &str = "10.64.0.0/12";
/// The service range.
pub const SERVICE_RANGE: &str = "10.96.0.0/12";
/// The Services' port.
pub const PORT: u16 = 80;
/// The endpoints' port.
pub const TARGET_PORT: u16 = 8080;
/// The Services' namespace.
pub const NAMESPACE: &str = "bench";

const FIRST_CLUSTER_IP: Ipv4Addr = Ipv4Addr::new(10, 96, 0, 10);
const FIRST_POD: Ipv4Addr = Ipv4Addr::new(10, 64, 0, 2);
const FIRST_NEW_POD: Ipv4Addr = Ipv4Addr::new(10, 72, 0, 0);
const NODES: usize = 3;

/// The cluster's size, and the current endpoints of every Service.
#[derive(Debug, Clone)]
pub struct Cluster {
    /// N.
    pub services: usize,
    /// M.
    pub endpoints: usize,
    current: Vec<Vec<Ipv4Addr>>,
    changes: u32,
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

impl Cluster {
    /// N Services × M endpoints (N × M ≤ 500 000: the address ranges hold that).
    pub fn new(services: usize, endpoints: usize) -> anyhow::Result<Self> {
        anyhow::ensure!(
            services > 0 && endpoints > 0 && services.saturating_mul(endpoints) <= 500_000,
            "want at least one service and endpoint, and N × M ≤ 500 000"
        );
        let current = (0..services)
            .map(|i| {
                (0..endpoints)
                    .map(|j| offset(FIRST_POD, i * endpoints + j))
                    .collect()
            })
            .collect();
        Ok(Self {
            services,
            endpoints,
            current,
            changes: 0,
        })
    }

    /// Name of Service `i`.
    pub fn name(&self, i: usize) -> String {
        format!("svc-{i:05}")
    }

    /// ClusterIP of Service `i`.
    pub fn cluster_ip(&self, i: usize) -> Ipv4Addr {
        offset(FIRST_CLUSTER_IP, i)
    }

    /// Current endpoints of Service `i`.
    pub fn endpoints_of(&self, i: usize) -> &[Ipv4Addr] {
        &self.current[i]
    }

    /// The newest endpoint of Service `i` (the one its last change brought in, if any: changes
    /// bring in ever higher addresses).
    pub fn newest_endpoint(&self, i: usize) -> Ipv4Addr {
        self.current[i].iter().copied().max().unwrap_or(FIRST_POD)
    }

    /// Replaces one endpoint of Service `service` with a new address (as when a pod is
    /// rescheduled); successive changes of one Service replace successive slots.
    pub fn change(&mut self, service: usize) -> Change {
        let address = offset(FIRST_NEW_POD, self.changes as usize);
        let slot = self.changes as usize % self.endpoints;
        self.changes += 1;
        self.current[service][slot] = address;
        Change {
            service,
            slot,
            address,
        }
    }

    /// The manifest file of Service `i`: the Service and its EndpointSlice, as `kubectl get -o
    /// yaml` writes them (trimmed of status fields Ferry ignores).
    pub fn manifest(&self, i: usize) -> String {
        let name = self.name(i);
        let ip = self.cluster_ip(i);
        let mut y = format!(
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n  namespace: {NAMESPACE}\n  \
             labels:\n    app: {name}\nspec:\n  type: ClusterIP\n  clusterIP: {ip}\n  clusterIPs:\n  \
             - {ip}\n  ipFamilies:\n  - IPv4\n  ipFamilyPolicy: SingleStack\n  \
             internalTrafficPolicy: Cluster\n  sessionAffinity: None\n  selector:\n    app: {name}\n  \
             ports:\n  - name: http\n    port: {PORT}\n    protocol: TCP\n    targetPort: {TARGET_PORT}\n\
             ---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {name}-x7k2q\n  \
             namespace: {NAMESPACE}\n  labels:\n    kubernetes.io/service-name: {name}\n    \
             endpointslice.kubernetes.io/managed-by: endpointslice-controller.k8s.io\n\
             addressType: IPv4\nports:\n- name: http\n  port: {TARGET_PORT}\n  protocol: TCP\nendpoints:\n"
        );
        for (j, address) in self.current[i].iter().enumerate() {
            let _ = write!(
                y,
                "- addresses:\n  - {address}\n  conditions:\n    ready: true\n    serving: true\n    \
                 terminating: false\n  nodeName: node-{}\n",
                (i + j) % NODES
            );
        }
        y
    }

    /// The Node objects' manifest file.
    pub fn nodes_manifest(&self) -> String {
        (0..NODES)
            .map(|n| {
                format!(
                    "apiVersion: v1\nkind: Node\nmetadata:\n  name: node-{n}\nspec:\n  podCIDR: {}\n\
                     status:\n  addresses:\n  - type: InternalIP\n    address: 10.200.0.{}\n",
                    node_cidr(n),
                    n + 1
                )
            })
            .collect::<Vec<_>>()
            .join("---\n")
    }

    /// Service `i` as the API serves it.
    pub fn service_object(&self, i: usize) -> Value {
        let ip = self.cluster_ip(i).to_string();
        ferry_testkit::objects::service(NAMESPACE, &self.name(i), &ip, PORT, TARGET_PORT)
    }

    /// Service `i`'s EndpointSlice as the API serves it.
    pub fn slice_object(&self, i: usize) -> Value {
        let addresses: Vec<String> = self.current[i].iter().map(ToString::to_string).collect();
        let nodes: Vec<String> = (0..self.endpoints)
            .map(|j| format!("node-{}", (i + j) % NODES))
            .collect();
        let endpoints: Vec<(&str, bool, &str)> = addresses
            .iter()
            .zip(&nodes)
            .map(|(a, n)| (a.as_str(), true, n.as_str()))
            .collect();
        let name = self.name(i);
        let slice_name = format!("{name}-x7k2q");
        ferry_testkit::objects::endpoint_slice(
            NAMESPACE,
            &slice_name,
            &name,
            TARGET_PORT,
            &endpoints,
        )
    }

    /// The Node objects as the API serves them.
    pub fn node_objects(&self) -> Vec<Value> {
        (0..NODES)
            .map(|n| {
                let ip = format!("10.200.0.{}", n + 1);
                ferry_testkit::objects::node(&format!("node-{n}"), &ip, &node_cidr(n))
            })
            .collect()
    }

    /// The Service that change number `k` touches (spread over the whole cluster).
    pub fn changed_service(&self, k: usize) -> usize {
        (k.wrapping_mul(7919).wrapping_add(self.services / 2)) % self.services
    }

    /// `count` Service indexes spread over the cluster, first and last included.
    pub fn spread(&self, count: usize) -> Vec<usize> {
        let mut picked = vec![0, self.services - 1];
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        while picked.len() < count.min(self.services) {
            // A fixed pseudo-random sequence, so every run probes the same Services.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let i = (x % self.services as u64) as usize;
            if !picked.contains(&i) {
                picked.push(i);
            }
        }
        picked.truncate(count.min(self.services));
        picked
    }
}

fn node_cidr(n: usize) -> String {
    format!("10.{}.0.0/14", 64 + 4 * n)
}

fn offset(base: Ipv4Addr, by: usize) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(base) + by as u32)
}
