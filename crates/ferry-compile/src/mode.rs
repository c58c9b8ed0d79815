//! The proxy modes, and the pure half of the seam every mode plugs into: its [`Renderer`].
//!
//! A mode's rules are rendered by its module of this crate (`nft`, `iptables`, `ipvs`,
//! `userspace`: from a node's [`Plan`](crate::Plan) to the mode's own objects), and the mode's [`Renderer`] here (pure:
//! the text `ferry rules` prints, the objects `ferry explain` names) wraps them for the
//! binary; a module in `ferry-dataplane` applies them to the kernel. One table joins the two
//! halves (`ferry_dataplane::modes::MODES`); nothing else matches on the mode.
//!
//! Adding a mode: its rendering module in this crate and its renderer here, a module in
//! `ferry-dataplane` with an applier and a mode entry, a [`ProxyMode`] variant, and its line
//! in the table.

use std::fmt;

use ferry_model::{ClusterState, IpFamily, NodeView};

use crate::trace::{trace_at, NodeAddresses, Packet, Trace};
use crate::{NodeCompiler, NodePortAddresses, Plan};

mod iptables;
mod ipvs;
mod nft;
mod userspace;

pub use iptables::IptablesRenderer;
pub use ipvs::IpvsRenderer;
pub use nft::NftRenderer;
pub use userspace::UserspaceRenderer;

/// The proxy mode (`mode` in the configuration file, `--proxy-mode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ProxyMode {
    /// nftables, in Ferry's own table (the default).
    Nftables,
    /// iptables, with upstream kube-proxy's chain layout.
    Iptables,
    /// IPVS, with upstream kube-proxy's virtual servers, ipsets and chains.
    Ipvs,
    /// Ferry's proxy forwards in user space; nftables rules in Ferry's table redirect service
    /// traffic to it (upstream's userspace proxier, removed in Kubernetes 1.26).
    Userspace,
}

impl ProxyMode {
    /// Every mode Ferry implements.
    pub const ALL: [ProxyMode; 4] = [
        ProxyMode::Nftables,
        ProxyMode::Iptables,
        ProxyMode::Ipvs,
        ProxyMode::Userspace,
    ];

    /// Parses kube-proxy's spelling (empty: the default). Modes Ferry does not implement are a
    /// clear error.
    pub fn parse(s: &str) -> Result<Self, String> {
        if s.is_empty() {
            return Ok(ProxyMode::Nftables);
        }
        if let Some(mode) = Self::ALL.into_iter().find(|m| m.as_str() == s) {
            return Ok(mode);
        }
        let known = Self::ALL.map(|m| format!("{:?}", m.as_str())).join(" or ");
        match s {
            "kernelspace" => Err(format!(
                "proxy mode {s:?} is not implemented yet; use {known}"
            )),
            other => Err(format!("unknown proxy mode {other:?} (want {known})")),
        }
    }

    /// Whether NodePorts answer on `127.0.0.1` / `[::1]` when the configuration does not say
    /// (served by Ferry's userspace proxy, never with `route_localnet`): upstream's
    /// `iptables.localhostNodePorts` defaults to true; its nftables mode has no such setting
    /// and never answers them (Ferry's `nftables.localhostNodePorts` is opt-in); upstream's
    /// userspace proxier answered NodePorts on every local address, loopback included.
    /// Upstream's IPVS mode has no such setting and never answers them (its virtual servers
    /// sit on the node's non-loopback addresses): Ferry's IPVS mode never serves them.
    pub fn localhost_node_ports_default(self) -> bool {
        match self {
            ProxyMode::Nftables | ProxyMode::Ipvs => false,
            ProxyMode::Iptables | ProxyMode::Userspace => true,
        }
    }

    /// Whether the mode can tell pod traffic by the interface it came in on
    /// (`detectLocalMode: BridgeInterface` / `InterfaceNamePrefix`): its rules can, but the
    /// userspace mode's proxy picks endpoints by the client's address, which an accepted
    /// connection has and its input interface has not.
    pub fn detects_local_by_interface(self) -> bool {
        match self {
            ProxyMode::Nftables | ProxyMode::Iptables | ProxyMode::Ipvs => true,
            ProxyMode::Userspace => false,
        }
    }

    /// kube-proxy's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ProxyMode::Nftables => "nftables",
            ProxyMode::Iptables => "iptables",
            ProxyMode::Ipvs => "ipvs",
            ProxyMode::Userspace => "userspace",
        }
    }
}

impl fmt::Display for ProxyMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A mode's pure half: what the mode would program on a node, as text and as the objects an
/// explanation names. Never touches the kernel, so `ferry rules` and `ferry explain` work
/// without root.
pub trait Renderer: Sync {
    /// The mode.
    fn mode(&self) -> ProxyMode;

    /// The whole node's rules of one IP family (the compiler's), as the mode's tools take them:
    /// what `ferry rules` prints.
    fn render(&self, compiler: &NodeCompiler, state: &ClusterState) -> String;

    /// [`render`](Self::render), written into `out` (a mode whose text is large writes it as
    /// it is produced).
    fn write(
        &self,
        compiler: &NodeCompiler,
        state: &ClusterState,
        out: &mut dyn std::fmt::Write,
    ) -> std::fmt::Result {
        out.write_str(&self.render(compiler, state))
    }

    /// Where NodePorts answer when `nodePortAddresses` is not set: upstream's per-mode default.
    /// Unless the mode says otherwise, the unset value itself, which the plan reads as the
    /// node's primary IPs (KEP-3866, nftables mode; every local address while the node's
    /// primary IP is unknown).
    fn default_node_port_addresses(&self) -> NodePortAddresses {
        NodePortAddresses::default()
    }

    /// A line `ferry rules` prints before a further family's rules, when the texts cannot
    /// simply follow each other (iptables: the IPv6 input goes to another tool).
    fn family_header(&self, family: IpFamily) -> Option<String> {
        let _ = family;
        None
    }

    /// Where the first packet of a new connection goes on the compiler's node, which has
    /// `addresses`, and why, each step naming this mode's objects: the trace through the
    /// node's nftables rules (every mode sends a packet where they do), which
    /// [`Renderer::retell`] tells in the mode's objects.
    fn trace(
        &self,
        compiler: &NodeCompiler,
        state: &ClusterState,
        packet: Packet,
        addresses: &NodeAddresses,
    ) -> Trace {
        let view = compiler.view(state);
        let plan = compiler.plan_of(&view);
        let nft = trace_at(&view, &plan, &crate::nft::render(&plan), packet, addresses);
        let input = TraceInput {
            compiler,
            state,
            view: &view,
            plan: &plan,
            addresses,
        };
        self.retell(&input, nft)
    }

    /// The trace through the node's nftables rules (`trace`), told with this mode's objects.
    /// Unless the mode says otherwise, as it is (nftables mode's own objects).
    fn retell(&self, input: &TraceInput<'_>, trace: Trace) -> Trace {
        let _ = input;
        trace
    }
}

/// What [`Renderer::trace`] read, for [`Renderer::retell`]: the compiler, the cluster, the
/// node's view and plan, and the node's addresses.
#[derive(Debug, Clone, Copy)]
pub struct TraceInput<'a> {
    /// The node's compiler (one IP family).
    pub compiler: &'a NodeCompiler,
    /// The cluster.
    pub state: &'a ClusterState,
    /// The node's view of the cluster.
    pub view: &'a NodeView,
    /// The node's plan.
    pub plan: &'a Plan,
    /// The node's addresses (read from its interfaces, or declared).
    pub addresses: &'a NodeAddresses,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kube_proxy_spellings() {
        assert_eq!(ProxyMode::parse(""), Ok(ProxyMode::Nftables));
        assert_eq!(ProxyMode::parse("nftables"), Ok(ProxyMode::Nftables));
        assert_eq!(ProxyMode::parse("iptables"), Ok(ProxyMode::Iptables));
        assert_eq!(ProxyMode::parse("ipvs"), Ok(ProxyMode::Ipvs));
        assert_eq!(ProxyMode::parse("userspace"), Ok(ProxyMode::Userspace));
        let err = ProxyMode::parse("kernelspace").expect_err("not a mode yet");
        assert!(err.contains("not implemented yet"), "{err}");
        let err = ProxyMode::parse("bogus").expect_err("not a mode");
        assert!(err.contains("unknown proxy mode \"bogus\""), "{err}");
    }
}
