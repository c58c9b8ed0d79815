//! One node's nftables rules, compiled service by service from a [`NodeCompiler`].

use ferry_model::{ClusterState, ServiceName};

use super::{render_base, render_service, RenderContext, Ruleset, ServiceRules};
use crate::plan::ServicePlan;
use crate::NodeCompiler;

/// A node's nftables rules, whole or per service.
#[derive(Debug, Clone)]
pub struct NodeRules<'a> {
    compiler: &'a NodeCompiler,
    ctx: RenderContext,
}

impl<'a> NodeRules<'a> {
    /// The rules of the compiler's node.
    pub fn new(compiler: &'a NodeCompiler) -> Self {
        Self {
            compiler,
            ctx: RenderContext::of(compiler.base_plan()),
        }
    }

    /// The ruleset without any service: what an incremental sync requires to be unchanged.
    pub fn base(&self) -> Ruleset {
        render_base(self.compiler.base_plan())
    }

    /// The whole node's ruleset.
    ///
    /// Compiled service by service, with the same per-service path as an incremental sync, so
    /// the whole node's view and plan are never held at once: memory is the ruleset plus one
    /// service's view and plan.
    pub fn full(&self, state: &ClusterState) -> Ruleset {
        let mut ruleset = self.base();
        for svc in state.services() {
            if let Some(rules) = self.service(state, &svc.name) {
                ruleset.set_service(svc.name.clone(), Some(rules));
            }
        }
        ruleset.repack();
        ruleset
    }

    /// One service's rules, or `None` when it has nothing to program on this node (deleted,
    /// or no ClusterIP of this family).
    pub fn service(&self, state: &ClusterState, name: &ServiceName) -> Option<ServiceRules> {
        let plans = self.compiler.service_plans(state, name);
        let refs: Vec<&ServicePlan> = plans.iter().collect();
        (!refs.is_empty()).then(|| render_service(&refs, &self.ctx))
    }
}
