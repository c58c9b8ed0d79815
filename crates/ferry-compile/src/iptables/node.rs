//! One node's iptables rules from a [`NodeCompiler`], and the iptables mode's [`Renderer`].

use ferry_model::{ClusterState, IpFamily, ServiceName};

use super::{render, render_base, render_service, RenderContext, Ruleset, ServiceRules};
use crate::family::iptables_tool;
use crate::mode::{ProxyMode, Renderer};
use crate::plan::ServicePlan;
use crate::trace::{trace, Packet, Trace};
use crate::NodeCompiler;

/// A node's iptables rules, whole or per service.
#[derive(Debug, Clone, Copy)]
pub struct NodeRules<'a> {
    compiler: &'a NodeCompiler,
}

impl<'a> NodeRules<'a> {
    /// The rules of the compiler's node.
    pub fn new(compiler: &'a NodeCompiler) -> Self {
        Self { compiler }
    }

    /// The top-level chains without any service: what a partial sync requires unchanged.
    pub fn base(&self) -> Ruleset {
        render_base(self.compiler.base_plan())
    }

    /// The whole node's rules. Upstream's large-cluster mode depends on every service's
    /// endpoints, so this compiles the whole plan at once.
    pub fn full(&self, state: &ClusterState) -> Ruleset {
        render(&self.compiler.plan(state))
    }

    /// One service's chains, in or out of large-cluster mode; `None` when it has nothing to
    /// program on this node.
    pub fn service(
        &self,
        state: &ClusterState,
        name: &ServiceName,
        large_cluster: bool,
    ) -> Option<ServiceRules> {
        let plans = self.compiler.service_plans(state, name);
        let refs: Vec<&ServicePlan> = plans.iter().collect();
        let ctx = RenderContext {
            large_cluster,
            ..RenderContext::of(self.compiler.base_plan())
        };
        (!refs.is_empty()).then(|| render_service(&refs, &ctx))
    }
}

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

    fn family_header(&self, family: IpFamily) -> Option<String> {
        Some(format!(
            "# {} rules: {}-restore --noflush input\n",
            family.as_str(),
            iptables_tool(family)
        ))
    }

    fn trace(&self, compiler: &NodeCompiler, state: &ClusterState, packet: Packet) -> Trace {
        let view = compiler.view(state);
        let plan = compiler.plan_of(&view);
        trace(&view, &plan, &crate::nft::render(&plan), packet).for_iptables()
    }
}
