//! IPVS mode's renderer.

use ferry_model::{ClusterState, IpFamily};

use super::{ProxyMode, Renderer};
use crate::ipvs::NodeRules;
use crate::trace::{trace, Packet, Trace};
use crate::NodeCompiler;

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

    fn trace(&self, compiler: &NodeCompiler, state: &ClusterState, packet: Packet) -> Trace {
        let view = compiler.view(state);
        let plan = compiler.plan_of(&view);
        let rules = NodeRules::offline(compiler);
        let ruleset = crate::ipvs::render(&plan, compiler.config(), rules.context());
        trace(&view, &plan, &crate::nft::render(&plan), packet).for_ipvs(&view, &plan, &ruleset)
    }
}
