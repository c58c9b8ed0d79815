//! The seed flows as data: one list, run with real packets in the lab (`lab_flows.rs`) and
//! predicted by `ferry explain` (`explain_flows.rs`), so the two must agree.
//!
//! Besides the seed's manifests, the flows use a second Service whose only endpoint is pod A
//! ([`EXTRA_MANIFESTS`]) and a secondary LAN address on two nodes ([`SECONDARY`]): the lab
//! adds them before the flows run, explain is given them (the file, `--node-address`).

#![allow(dead_code)]

use crate::seed::{CLUSTER_IP, EMPTY_CLUSTER_IP, MASTER_POD, NODE_PORT, POD_A, POD_B};

/// Who sends the packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum From {
    /// The client outside the cluster (10.1.1.100).
    Client,
    /// A node itself.
    Node(&'static str),
    /// A pod: (name, ip, node).
    Pod(&'static str, &'static str, &'static str),
}

/// The source address the endpoint sees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Peer {
    /// The original source (no SNAT).
    Source,
    /// This node address (SNAT).
    Node(&'static str),
    /// The original source, except when the pod lands on itself: then this node address.
    HairpinOr(&'static str),
}

/// What happens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Answered by one of the flow's servers; the pod sees `Peer`.
    Forwarded(Peer),
    /// Dropped: the client times out.
    Dropped,
    /// Rejected: connection refused.
    Rejected,
    /// Not translated (explain: not a service) and addressed to the node, where nothing
    /// listens: connection refused.
    Untranslated,
}

/// One flow of the seed matrix.
#[derive(Debug, Clone, Copy)]
pub struct Flow {
    pub name: &'static str,
    /// externalTrafficPolicy of url-analysis.
    pub policy: &'static str,
    pub from: From,
    /// The node whose rules the packet meets first.
    pub node: &'static str,
    pub dst: &'static str,
    pub port: u16,
    /// The endpoints it may reach when forwarded.
    pub servers: &'static [&'static str],
    /// What happens in nftables mode, and in iptables mode unless `iptables` says otherwise
    /// (IPVS mode: unless [`IPVS_DIFFERENCES`] says otherwise).
    /// In the userspace mode, a forwarded flow reaches the same servers but each sees the
    /// node as its peer (the proxy connects from the node's address), unless `userspace`
    /// says otherwise.
    pub expect: Expect,
    /// What happens in iptables mode when it differs (its filter on every local address;
    /// localhost NodePorts, on by default there).
    pub iptables: Option<Expect>,
    /// What happens in the userspace mode when it differs otherwise.
    pub userspace: Option<Expect>,
}

pub const MASTER_POD_FROM: From = From::Pod(MASTER_POD.0, MASTER_POD.1, "k8s-master");
pub const POD_A_FROM: From = From::Pod(POD_A.0, POD_A.1, "k8s-node2");
pub const SERVERS: [&str; 2] = [POD_A.1, POD_B.1];
/// The ClusterIP of `dev/only-a`, whose only endpoint is pod A.
pub const ONLY_A_IP: &str = "10.96.0.60";
/// A secondary LAN address of a node: (node, address).
pub const SECONDARY: [(&str, &str); 2] = [("k8s-node1", "10.1.1.27"), ("k8s-node2", "10.1.1.19")];

/// The manifests the flows need besides the seed's: `dev/only-a`, with pod A as its only
/// endpoint (hairpin to a single endpoint).
pub const EXTRA_MANIFESTS: &[(&str, &str)] = &[("only-a.yaml", ONLY_A)];

const ONLY_A: &str = "apiVersion: v1
kind: Service
metadata:
  name: only-a
  namespace: dev
spec:
  clusterIP: 10.96.0.60
  ports:
  - name: http
    protocol: TCP
    port: 8080
    targetPort: 56010
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: only-a-1
  namespace: dev
  labels:
    kubernetes.io/service-name: only-a
addressType: IPv4
ports:
- name: http
  port: 56010
  protocol: TCP
endpoints:
- addresses: [\"192.168.169.166\"]
  conditions:
    ready: true
  nodeName: k8s-node2
";

const fn flow(
    name: &'static str,
    policy: &'static str,
    from: From,
    node: &'static str,
    dst: &'static str,
    port: u16,
    expect: Expect,
) -> Flow {
    Flow {
        name,
        policy,
        from,
        node,
        dst,
        port,
        servers: &SERVERS,
        expect,
        iptables: None,
        userspace: None,
    }
}

impl Flow {
    /// The same flow, reaching only `servers`.
    const fn to(mut self, servers: &'static [&'static str]) -> Flow {
        self.servers = servers;
        self
    }

    /// The same flow, with another outcome in iptables mode.
    const fn iptables(mut self, expect: Expect) -> Flow {
        self.iptables = Some(expect);
        self
    }

    /// The same flow, with another outcome in the userspace mode.
    const fn userspace(mut self, expect: Expect) -> Flow {
        self.userspace = Some(expect);
        self
    }

    /// What happens in `mode` (its `--proxy-mode` value).
    pub fn expect_in(&self, mode: &str) -> Expect {
        let ipvs = IPVS_DIFFERENCES
            .iter()
            .find(|(name, _)| *name == self.name)
            .map(|(_, e)| *e);
        match (mode, self.iptables, ipvs, self.userspace) {
            ("iptables", Some(e), _, _) | ("ipvs", _, Some(e), _) => e,
            ("userspace", _, _, Some(e)) => e,
            // Proxied: the endpoint sees the node whose proxy connected to it.
            ("userspace", _, _, None) => match self.expect {
                Expect::Forwarded(_) => Expect::Forwarded(Peer::Node(self.node_ip())),
                other => other,
            },
            _ => self.expect,
        }
    }

    /// The primary address of the node whose rules the flow meets.
    pub fn node_ip(&self) -> &'static str {
        crate::seed::NODES
            .iter()
            .find(|(name, _)| *name == self.node)
            .map(|(_, ip)| *ip)
            .expect("node")
    }
}

pub const FLOWS: &[Flow] = &[
    flow(
        "pod → ClusterIP",
        "Cluster",
        MASTER_POD_FROM,
        "k8s-master",
        CLUSTER_IP,
        8080,
        Expect::Forwarded(Peer::Source),
    ),
    flow(
        "node → ClusterIP",
        "Cluster",
        From::Node("k8s-master"),
        "k8s-master",
        CLUSTER_IP,
        8080,
        Expect::Forwarded(Peer::Node("10.1.1.12")),
    ),
    flow(
        "pod → own Service (hairpin)",
        "Cluster",
        POD_A_FROM,
        "k8s-node2",
        CLUSTER_IP,
        8080,
        Expect::Forwarded(Peer::HairpinOr("10.1.1.9")),
    ),
    flow(
        "pod → own Service, its only endpoint (hairpin)",
        "Cluster",
        POD_A_FROM,
        "k8s-node2",
        ONLY_A_IP,
        8080,
        Expect::Forwarded(Peer::Node("10.1.1.9")),
    )
    .to(&[POD_A.1]),
    flow(
        "client → master NodePort, Cluster",
        "Cluster",
        From::Client,
        "k8s-master",
        "10.1.1.12",
        NODE_PORT,
        Expect::Forwarded(Peer::Node("10.1.1.12")),
    ),
    flow(
        "client → node1 NodePort, Cluster",
        "Cluster",
        From::Client,
        "k8s-node1",
        "10.1.1.17",
        NODE_PORT,
        Expect::Forwarded(Peer::Node("10.1.1.17")),
    ),
    flow(
        "client → node2 NodePort, Cluster",
        "Cluster",
        From::Client,
        "k8s-node2",
        "10.1.1.9",
        NODE_PORT,
        Expect::Forwarded(Peer::Node("10.1.1.9")),
    ),
    // nodePortAddresses' default leaves the secondary address out in nftables mode (the
    // primary IPs); iptables mode's default is every local address, as upstream's.
    flow(
        "client → node2 NodePort on its secondary address, Cluster",
        "Cluster",
        From::Client,
        "k8s-node2",
        "10.1.1.19",
        NODE_PORT,
        Expect::Untranslated,
    )
    .iptables(Expect::Forwarded(Peer::Node("10.1.1.9"))),
    flow(
        "client → Service without endpoints",
        "Cluster",
        MASTER_POD_FROM,
        "k8s-master",
        EMPTY_CLUSTER_IP,
        80,
        Expect::Rejected,
    ),
    flow(
        "node → Service without endpoints",
        "Cluster",
        From::Node("k8s-node1"),
        "k8s-node1",
        EMPTY_CLUSTER_IP,
        80,
        Expect::Rejected,
    ),
    flow(
        "client → node2 NodePort, Local",
        "Local",
        From::Client,
        "k8s-node2",
        "10.1.1.9",
        NODE_PORT,
        Expect::Forwarded(Peer::Source),
    ),
    flow(
        "client → node1 NodePort, Local",
        "Local",
        From::Client,
        "k8s-node1",
        "10.1.1.17",
        NODE_PORT,
        Expect::Dropped,
    ),
    flow(
        "client → master NodePort, Local",
        "Local",
        From::Client,
        "k8s-master",
        "10.1.1.12",
        NODE_PORT,
        Expect::Dropped,
    ),
    // iptables mode's filter drops a NodePort without local endpoints on every local address.
    flow(
        "client → node1 NodePort on its secondary address, Local",
        "Local",
        From::Client,
        "k8s-node1",
        "10.1.1.27",
        NODE_PORT,
        Expect::Untranslated,
    )
    .iptables(Expect::Dropped),
    // Localhost NodePorts: off by default in nftables mode and never in IPVS mode (untranslated:
    // nothing listens), served by Ferry's userspace proxy in iptables mode (its default) and in
    // the userspace mode, cluster-wide whatever the policy (the node's own traffic).
    flow(
        "node → own NodePort on localhost, Local",
        "Local",
        From::Node("k8s-node1"),
        "k8s-node1",
        "127.0.0.1",
        NODE_PORT,
        Expect::Untranslated,
    )
    .iptables(Expect::Forwarded(Peer::Node("10.1.1.17")))
    .userspace(Expect::Forwarded(Peer::Node("10.1.1.17"))),
    flow(
        "pod → own NodePort, Local (short-circuit, hairpin)",
        "Local",
        POD_A_FROM,
        "k8s-node2",
        "10.1.1.9",
        NODE_PORT,
        Expect::Forwarded(Peer::HairpinOr("10.1.1.9")),
    ),
    flow(
        "pod → master NodePort, Local (short-circuit)",
        "Local",
        MASTER_POD_FROM,
        "k8s-master",
        "10.1.1.12",
        NODE_PORT,
        Expect::Forwarded(Peer::Source),
    ),
    flow(
        "node → own NodePort, Local (short-circuit)",
        "Local",
        From::Node("k8s-master"),
        "k8s-master",
        "10.1.1.12",
        NODE_PORT,
        Expect::Forwarded(Peer::Node("10.1.1.12")),
    ),
];

/// Where IPVS mode differs from nftables mode (as upstream's IPVS proxier does): a node
/// without a local endpoint of a Local-policy service has a virtual server without real
/// servers, which the kernel refuses (ICMP port unreachable), and there is no short-circuit for
/// pods and the node itself; NodePorts answer on every node address but loopback.
pub const IPVS_DIFFERENCES: &[(&str, Expect)] = &[
    (
        "client → node2 NodePort on its secondary address, Cluster",
        Expect::Forwarded(Peer::Node("10.1.1.9")),
    ),
    ("client → node1 NodePort, Local", Expect::Rejected),
    (
        "client → node1 NodePort on its secondary address, Local",
        Expect::Rejected,
    ),
    ("client → master NodePort, Local", Expect::Rejected),
    (
        "pod → master NodePort, Local (short-circuit)",
        Expect::Rejected,
    ),
    (
        "node → own NodePort, Local (short-circuit)",
        Expect::Rejected,
    ),
];

impl Flow {
    /// The node's secondary address, when it has one.
    pub fn node_address(&self) -> Option<&'static str> {
        SECONDARY
            .iter()
            .find(|(n, _)| *n == self.node)
            .map(|(_, ip)| *ip)
    }

    /// The source address.
    pub fn src(&self) -> &'static str {
        match self.from {
            From::Client => "10.1.1.100",
            From::Node(n) => crate::seed::NODES
                .iter()
                .find(|(name, _)| *name == n)
                .map(|(_, ip)| *ip)
                .expect("node"),
            From::Pod(_, ip, _) => ip,
        }
    }

    /// The source address the endpoint `server_ip` sees when the flow forwards with `peer`.
    pub fn peer_seen(&self, peer: Peer, server_ip: &str) -> &'static str {
        match peer {
            Peer::Source => self.src(),
            Peer::Node(ip) => ip,
            Peer::HairpinOr(ip) if server_ip == self.src() => ip,
            Peer::HairpinOr(_) => self.src(),
        }
    }

    /// `ferry explain` of this flow with the lab's settings, as JSON, in `mode`.
    pub fn explain_args(&self, mode: &str, manifests: &str) -> Vec<String> {
        let to = format!("{}:{}", self.dst, self.port);
        [
            "explain",
            "--manifests",
            manifests,
            "--node",
            self.node,
            "--from",
            self.src(),
            "--to",
            &to,
            "--cluster-cidr",
            "192.168.0.0/16",
            "--output",
            "json",
            "--proxy-mode",
            mode,
        ]
        .map(str::to_owned)
        .to_vec()
    }

    pub fn url(&self) -> String {
        format!("http://{}:{}/hello", self.dst, self.port)
    }
}
