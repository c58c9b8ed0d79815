//! What the compiler needs from Ferry's configuration, already validated.

use std::net::IpAddr;

use ipnet::IpNet;

use ferry_model::IpFamily;

use crate::ipvs::Scheduler;
use crate::userspace::PortRange;

/// Where NodePorts are opened (`nodePortAddresses`): CIDRs and upstream's keywords, in any
/// combination. `localhost` is upstream's shorthand for the loopback CIDRs (kept in `cidrs`):
/// the kernel rules never open loopback (see [`crate::NodePortScope::covers_loopback`]);
/// Ferry's userspace proxy serves it instead where [`NodePortAddresses::allow_loopback`] says so.
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

    /// Whether NodePorts of `family` may answer on its loopback address: nothing configured,
    /// `all`, no CIDR of the family (upstream then opens every address of it), or a CIDR that
    /// contains `127.0.0.1` / `::1` (upstream's `ContainsIPv4Loopback`).
    pub fn allow_loopback(&self, family: IpFamily) -> bool {
        if self.all {
            return true;
        }
        let lo = crate::family::loopback(family);
        let mut of_family = self
            .cidrs
            .iter()
            .filter(|n| IpFamily::of(&n.addr()) == family)
            .peekable();
        if self.is_default() || (of_family.peek().is_none() && !self.primary) {
            return true;
        }
        of_family.any(|n| n.contains(&lo))
    }

    /// Whether a configured CIDR of `family` contains its loopback address: the user asked
    /// for NodePorts on localhost.
    pub fn lists_loopback(&self, family: IpFamily) -> bool {
        let lo = crate::family::loopback(family);
        self.cidrs.iter().any(|n| n.contains(&lo))
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
    /// `BridgeInterface`: pod traffic comes in on this bridge (`detectLocal.bridgeInterface`).
    BridgeInterface(String),
    /// `InterfaceNamePrefix`: pod traffic comes in on an interface whose name starts with this
    /// (`detectLocal.interfaceNamePrefix`).
    InterfaceNamePrefix(String),
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
    /// Serve NodePorts on `127.0.0.1` / `[::1]` with Ferry's userspace proxy (the mode's
    /// default or `iptables.localhostNodePorts` / `nftables.localhostNodePorts`), where
    /// `nodePortAddresses` let them answer on loopback ([`Plan::localhost_node_ports`]).
    ///
    /// [`Plan::localhost_node_ports`]: crate::Plan::localhost_node_ports
    pub localhost_node_ports: bool,
    /// `portRange`: where the userspace mode's proxy ports are.
    pub proxy_port_range: PortRange,
    /// The kernel's `nf_conntrack_tcp_be_liberal` is on: iptables mode then drops no packet
    /// conntrack marks invalid (upstream's rule; with it off, an out-of-window packet would
    /// reach the pod un-NATed and reset the connection).
    pub conntrack_tcp_be_liberal: bool,
    /// Upstream's `bindAddress` when it is not `0.0.0.0` / `::`: this node's primary IP of its
    /// family, in place of the Node object's (NodePorts with `primary`, the firewall's
    /// `allowFromNode`, the userspace proxy's source).
    pub node_ip: Option<IpAddr>,
    /// The `AllowServiceExternalIPs` feature gate: with it off, no service's `externalIPs`
    /// are programmed, as in kube-proxy.
    pub external_ips: bool,
    /// The nfacct counters that exist on the node, which iptables mode's rules may count into.
    pub nfacct: NfacctCounters,
}

/// Which of upstream's nfacct counters exist on the node (iptables mode creates them at start,
/// where the kernel has nfacct): the rule that drops packets conntrack marks invalid, and the
/// rule that counts connections to localhost NodePorts, name the ones that do
/// (`-m nfacct --nfacct-name`); without one, the rule has no such match (upstream's).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NfacctCounters {
    /// `ct_state_invalid_dropped_pkts` exists.
    pub ct_state_invalid: bool,
    /// `localhost_nps_accepted_pkts` exists.
    pub localhost_node_ports: bool,
}

impl NfacctCounters {
    /// Both counters: what a node with nfacct has (what `ferry rules` shows).
    pub const ALL: NfacctCounters = NfacctCounters {
        ct_state_invalid: true,
        localhost_node_ports: true,
    };
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
            localhost_node_ports: false,
            proxy_port_range: PortRange::DEFAULT,
            conntrack_tcp_be_liberal: false,
            node_ip: None,
            external_ips: true,
            nfacct: NfacctCounters::default(),
        }
    }
}

impl CompileConfig {
    /// The masquerade mark (`1 << masquerade_bit`).
    pub fn masquerade_mark(&self) -> u32 {
        1u32 << (self.masquerade_bit & 31)
    }
}
