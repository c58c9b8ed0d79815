//! IPVS mode's renderer.

use std::net::IpAddr;

use ferry_model::{ClusterState, IpFamily};

use super::{ProxyMode, Renderer, TraceInput};
use crate::ipvs::NodeRules;
use crate::trace::{NodeAddresses, Trace};
use crate::{NodeCompiler, NodePortAddresses};

/// IPVS mode's renderer: kube-ipvs0's addresses, the virtual servers as `ipvsadm -Ln` lists
/// them, the ipsets as `ipset save` prints them, and the chains as `iptables-restore
/// --noflush` takes them. Without the kernel, the node's addresses are its Node object's
/// (NodePorts get a virtual server on each).
#[derive(Debug, Clone, Copy, Default)]
pub struct IpvsRenderer;

impl Renderer for IpvsRenderer {
    fn mode(&self) -> ProxyMode {
        ProxyMode::Ipvs
    }

    fn render(&self, compiler: &NodeCompiler, state: &ClusterState) -> String {
        NodeRules::offline(compiler).full(state).to_string()
    }

    fn family_header(&self, family: IpFamily) -> Option<String> {
        Some(format!("\n# {} rules\n", family.as_str()))
    }

    /// Every local address, as upstream's IPVS mode (a virtual server per node address).
    fn default_node_port_addresses(&self) -> NodePortAddresses {
        NodePortAddresses {
            all: true,
            ..NodePortAddresses::default()
        }
    }

    fn retell(&self, input: &TraceInput<'_>, trace: Trace) -> Trace {
        // NodePorts get a virtual server on each of the node's addresses: those read from its
        // interfaces (`--live`), or its Node object's and the declared ones.
        let local: Vec<IpAddr> = match input.addresses {
            NodeAddresses::Live(ips) => ips.clone(),
            NodeAddresses::Declared(extra) => input
                .view
                .node
                .iter()
                .flat_map(|n| n.addresses.iter().map(|a| a.address))
                .chain(extra.iter().copied())
                .collect(),
        };
        let rules = NodeRules::new(input.compiler, &local);
        let ruleset = crate::ipvs::render(input.plan, input.compiler.config(), rules.context());
        trace.for_ipvs(input.view, input.plan, &ruleset)
    }
}
