//! The userspace mode's renderer.

use ferry_model::ClusterState;

use super::{ProxyMode, Renderer, TraceInput};
use crate::trace::Trace;
use crate::userspace::{port_table, NodeRules, ProxyPorts, Rules};
use crate::NodeCompiler;

/// The userspace mode's renderer: Ferry's table with the redirect rules (as `nft -f` takes
/// it), then the proxy-port table as comments.
#[derive(Debug, Clone, Copy, Default)]
pub struct UserspaceRenderer;

/// The node's rules, with proxy ports assigned from scratch (derived from the service ports'
/// names, in the order a starting agent assigns them).
fn rules(compiler: &NodeCompiler, state: &ClusterState) -> Rules {
    let mut ports = ProxyPorts::new(compiler.config().proxy_port_range);
    NodeRules::new(compiler).full(state, &mut ports).0
}

impl Renderer for UserspaceRenderer {
    fn mode(&self) -> ProxyMode {
        ProxyMode::Userspace
    }

    fn render(&self, compiler: &NodeCompiler, state: &ClusterState) -> String {
        let rules = rules(compiler, state);
        let mut out = rules.ruleset.to_string();
        out.push_str(&port_table(compiler.family(), &rules.ports));
        out
    }

    fn retell(&self, input: &TraceInput<'_>, trace: Trace) -> Trace {
        let rules = rules(input.compiler, input.state);
        trace.for_userspace(input.view, input.plan, &rules)
    }
}
