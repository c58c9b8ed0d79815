//! iptables mode's renderer.

use ferry_model::{ClusterState, IpFamily};

use super::{ProxyMode, Renderer, TraceInput};
use crate::family::iptables_tool;
use crate::iptables::NodeRules;
use crate::trace::Trace;
use crate::{NodeCompiler, NodePortAddresses};

/// iptables mode's renderer: upstream kube-proxy's chains, as `iptables-restore --noflush`
/// takes them.
#[derive(Debug, Clone, Copy, Default)]
pub struct IptablesRenderer;

impl Renderer for IptablesRenderer {
    fn mode(&self) -> ProxyMode {
        ProxyMode::Iptables
    }

    fn render(&self, compiler: &NodeCompiler, state: &ClusterState) -> String {
        NodeRules::new(compiler).full(state).to_string()
    }

    /// Every local address, as upstream's iptables mode (its `ADDRTYPE match dst-type LOCAL`
    /// rule).
    fn default_node_port_addresses(&self) -> NodePortAddresses {
        NodePortAddresses {
            all: true,
            ..NodePortAddresses::default()
        }
    }

    fn family_header(&self, family: IpFamily) -> Option<String> {
        Some(format!(
            "# {} rules: {}-restore --noflush input\n",
            family.as_str(),
            iptables_tool(family)
        ))
    }

    fn retell(&self, _: &TraceInput<'_>, trace: Trace) -> Trace {
        trace.for_iptables()
    }
}
