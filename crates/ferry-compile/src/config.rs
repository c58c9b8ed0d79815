//! What the compiler needs from Ferry's configuration, already validated.

use ipnet::IpNet;

use ferry_model::IpFamily;

use crate::ipvs::Scheduler;

/// Where NodePorts are opened (`nodePortAddresses`): CIDRs and upstream's keywords, in any
/// combination. `localhost` is upstream's shorthand for the loopback CIDRs (kept in `cidrs`;
/// loopback itself is never served, see [`crate::NodePortScope::covers_loopback`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct NodePortAddresses {
    /// CIDRs: a NodePort answers on this node's local addresses inside them.
    pub cidrs: Vec<IpNet>,
    /// `primary`: the node's primary IPs (its Node object's InternalIPs).
    pub primary: bool,
    /// `all`: every local address of the node (upstream's `0.0.0.0/0` and `::/0`, matched as
    /// `fib daddr type local` / `ADDRTYPE LOCAL`); also iptables mode's default.
    pub all: bool,
}

impl NodePortAddresses {
    /// Nothing configured: the mode's default applies (primary IPs in nftables mode, like
    /// upstream since KEP-3866; every local address in iptables mode).
    pub fn is_default(&self) -> bool {
        self.cidrs.is_empty() && !self.primary && !self.all
    }
}

/// Where the local-traffic detector gets "traffic from this cluster's pods" from
/// (`detectLocalMode`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum LocalDetector {
    /// No detector: traffic is never classified as pod traffic (upstream's no-op detector,
    /// used when `clusterCIDR` is empty).
    #[default]
    None,
    /// `ClusterCIDR`: pods are the given cluster CIDRs.
    ClusterCidr(Vec<IpNet>),
    /// `NodeCIDR`: pods are this node's `spec.podCIDRs`.
    NodeCidr,
}

/// Compiler settings, per IP family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompileConfig {
    /// Family being compiled.
    pub family: IpFamily,
    /// `detectLocalMode` + `clusterCIDR`.
    pub local_detector: LocalDetector,
    /// `masqueradeAll`: masquerade all traffic to ClusterIPs.
    pub masquerade_all: bool,
    /// `masqueradeBit` (0–31); the mark is `1 << bit` (default 14 → 0x4000).
    pub masquerade_bit: u8,
    /// `nodePortAddresses`.
    pub node_port_addresses: NodePortAddresses,
    /// `ipvs.scheduler` (IPVS mode's virtual servers).
    pub ipvs_scheduler: Scheduler,
}

impl Default for CompileConfig {
    fn default() -> Self {
        Self {
            family: IpFamily::V4,
            local_detector: LocalDetector::None,
            masquerade_all: false,
            masquerade_bit: 14,
            node_port_addresses: NodePortAddresses::default(),
            ipvs_scheduler: Scheduler::Rr,
        }
    }
}

impl CompileConfig {
    /// The masquerade mark (`1 << masquerade_bit`).
    pub fn masquerade_mark(&self) -> u32 {
        1u32 << (self.masquerade_bit & 31)
    }
}
