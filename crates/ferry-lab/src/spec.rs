//! What a lab looks like: the LAN, the nodes and the clients. [`LabSpec::seed004`] is the
//! cluster of the seed experiment (three nodes on 10.1.1.0/24 with calico pod CIDRs).

use std::net::Ipv4Addr;

use ipnet::Ipv4Net;

/// Kubernetes name of the seed's control-plane node.
pub const MASTER: &str = "k8s-master";
/// Kubernetes name of the seed's first worker.
pub const NODE1: &str = "k8s-node1";
/// Kubernetes name of the seed's second worker.
pub const NODE2: &str = "k8s-node2";
/// Name of the default client (10.1.1.100 in the seed lab).
pub const CLIENT: &str = "client";

/// A cluster node: a namespace with `eth0` on the LAN, IP forwarding on, and routes to the
/// other nodes' pod CIDRs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSpec {
    /// Kubernetes node name (`k8s-master`); hosts are looked up by it.
    pub name: String,
    /// Address of the node's `eth0` on the LAN.
    pub ip: Ipv4Addr,
    /// The node's pod CIDR; pods on this node take their IPs from it.
    pub pod_cidr: Ipv4Net,
}

/// A machine outside the cluster, on the LAN.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientSpec {
    /// Name used to look the client up.
    pub name: String,
    /// Address of the client's `eth0` on the LAN.
    pub ip: Ipv4Addr,
    /// Add routes to every node's pod CIDR via that node (so the client can reach pod IPs
    /// directly, as a router announcing the pod network would allow).
    pub pod_routes: bool,
}

/// The shape of a lab.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabSpec {
    /// Namespace-name prefix. `None` (the default) picks a unique one per lab
    /// (`fy<pid>x<counter>`), which lets several labs exist at once and lets
    /// [`crate::Lab::cleanup_orphans`] find labs whose process died. A fixed prefix must be
    /// 1–12 characters of `[a-z0-9]`.
    pub prefix: Option<String>,
    /// The LAN subnet; every host's `eth0` gets an address with this prefix length.
    pub lan: Ipv4Net,
    /// Default gateway of every host: a dead-end address nobody owns. Every LAN host has a
    /// permanent neighbour entry for it ([`GATEWAY_MAC`]), so packets to it are silently
    /// dropped (a blackhole: connections time out instead of failing with "No route to host"
    /// after ARP gives up). It exists so that nodes have a route covering the service range.
    pub gateway: Ipv4Addr,
    /// The nodes.
    pub nodes: Vec<NodeSpec>,
    /// The clients outside the cluster.
    pub clients: Vec<ClientSpec>,
}

/// MAC address given to the dead-end gateway in every LAN host's neighbour table. No interface
/// has it, so frames sent to it are flooded by the LAN bridge and dropped by every receiver.
pub const GATEWAY_MAC: &str = "02:00:00:00:00:01";

fn v4(a: u8, b: u8, c: u8, d: u8) -> Ipv4Addr {
    Ipv4Addr::new(a, b, c, d)
}

fn net(addr: Ipv4Addr, len: u8) -> Ipv4Net {
    // Only called with constant, valid prefix lengths.
    Ipv4Net::new(addr, len).unwrap_or_default()
}

impl LabSpec {
    /// The seed 004 cluster: LAN 10.1.1.0/24, dead-end gateway 10.1.1.1,
    /// `k8s-master` 10.1.1.12 (pods 192.168.235.192/26), `k8s-node1` 10.1.1.17
    /// (192.168.36.64/26), `k8s-node2` 10.1.1.9 (192.168.169.128/26), and one client
    /// `client` 10.1.1.100 with routes to the pod CIDRs.
    pub fn seed004() -> Self {
        let node = |name: &str, ip, cidr| NodeSpec {
            name: name.to_string(),
            ip,
            pod_cidr: net(cidr, 26),
        };
        LabSpec {
            prefix: None,
            lan: net(v4(10, 1, 1, 0), 24),
            gateway: v4(10, 1, 1, 1),
            nodes: vec![
                node(MASTER, v4(10, 1, 1, 12), v4(192, 168, 235, 192)),
                node(NODE1, v4(10, 1, 1, 17), v4(192, 168, 36, 64)),
                node(NODE2, v4(10, 1, 1, 9), v4(192, 168, 169, 128)),
            ],
            clients: vec![ClientSpec {
                name: CLIENT.to_string(),
                ip: v4(10, 1, 1, 100),
                pod_routes: true,
            }],
        }
    }

    /// Adds a client (with pod routes) and returns the spec, for chaining.
    pub fn with_client(mut self, name: &str, ip: Ipv4Addr) -> Self {
        self.clients.push(ClientSpec {
            name: name.to_string(),
            ip,
            pod_routes: true,
        });
        self
    }

    /// Checks what the kernel would not: the prefix's shape and that host names are unique and
    /// non-empty. Addresses and routes are left to the kernel, whose errors name the command.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(p) = &self.prefix {
            validate_prefix(p)?;
        }
        let mut names: Vec<&str> = self.nodes.iter().map(|n| n.name.as_str()).collect();
        names.extend(self.clients.iter().map(|c| c.name.as_str()));
        if let Some(empty) = names.iter().position(|n| n.is_empty()) {
            return Err(format!("host #{empty} has an empty name"));
        }
        let mut sorted = names.clone();
        sorted.sort_unstable();
        if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
            return Err(format!("host name {:?} is used twice", w[0]));
        }
        Ok(())
    }
}

impl Default for LabSpec {
    /// Same as [`LabSpec::seed004`].
    fn default() -> Self {
        Self::seed004()
    }
}

/// Checks a fixed namespace prefix: 1–12 characters of `[a-z0-9]`.
pub fn validate_prefix(p: &str) -> Result<(), String> {
    if p.is_empty()
        || p.len() > 12
        || !p
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit())
    {
        return Err(format!(
            "lab prefix {p:?} must be 1-12 characters of [a-z0-9]"
        ));
    }
    Ok(())
}
