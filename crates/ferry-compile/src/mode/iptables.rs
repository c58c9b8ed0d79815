//! iptables mode's renderer.

use ferry_model::{ClusterState, IpFamily, ServiceName};

use super::{ProxyMode, Renderer, TraceInput};
use crate::family::iptables_tool;
use crate::iptables::{FullSync, NodeRules, Rerender, Restore};
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

    /// The same text, written as each service is rendered again (see
    /// [`Restore::write_full_with`]): at 10 000 Services × 10 endpoints neither the 31 MiB of
    /// text nor every chain's rules are held at once.
    fn write(
        &self,
        compiler: &NodeCompiler,
        state: &ClusterState,
        out: &mut dyn std::fmt::Write,
    ) -> std::fmt::Result {
        let rules = NodeRules::new(compiler);
        let slim = rules.full_slim(state);
        let mut again = |name: &ServiceName| rules.service(state, name, slim.large_cluster);
        let mut out = out;
        Restore::write_full_with(
            &slim,
            &FullSync::default(),
            &mut out,
            &mut Rerender::new(&mut again),
        )
        .map(drop)
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
