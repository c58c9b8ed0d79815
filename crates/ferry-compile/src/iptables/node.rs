//! One node's iptables rules from a [`NodeCompiler`].

use ferry_model::{ClusterState, ServiceName};

use super::{
    render, render_base, render_service, render_slim, RenderContext, Ruleset, ServiceRules,
};
use crate::plan::ServicePlan;
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

    /// [`full`](Self::full) with every service's chains' rules let go as it is rendered
    /// ([`ServiceRules::slim`]); [`service`](Self::service) renders them again.
    pub fn full_slim(&self, state: &ClusterState) -> Ruleset {
        render_slim(&self.compiler.plan(state))
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
