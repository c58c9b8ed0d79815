//! `NodeCompiler`: compiles a whole node, or one service on its own (incremental syncs).

use std::collections::BTreeMap;

use ferry_model::{ClusterState, NodeContext, NodeView, ServiceName};

use crate::config::CompileConfig;
use crate::nft::{render_base, render_service, RenderContext, Ruleset, ServiceRules};
use crate::plan::{Plan, PlanContext, ServicePlan};

/// The node-level part of the plan (this node's Node object and the configuration), ready to
/// compile services against.
#[derive(Debug, Clone)]
pub struct NodeCompiler {
    context: NodeContext,
    config: CompileConfig,
    base: Plan,
    plan_ctx: PlanContext,
    render_ctx: RenderContext,
}

impl NodeCompiler {
    /// Prepares compilation for `context`'s node from the current state.
    pub fn new(state: &ClusterState, context: &NodeContext, config: &CompileConfig) -> Self {
        let view = NodeView {
            context: context.clone(),
            node: state.node(&context.node_name).cloned(),
            services: BTreeMap::new(),
        };
        let base = Plan::build(&view, config);
        Self {
            context: context.clone(),
            config: config.clone(),
            plan_ctx: base.context(config),
            render_ctx: RenderContext::of(&base),
            base,
        }
    }

    /// The ruleset without any service: what an incremental sync requires to be unchanged.
    pub fn base_ruleset(&self) -> Ruleset {
        render_base(&self.base)
    }

    /// The whole node's ruleset.
    ///
    /// Compiled service by service, with the same per-service path as an incremental sync, so
    /// the whole node's view and plan are never held at once: memory is the ruleset plus one
    /// service's view and plan.
    pub fn full(&self, state: &ClusterState) -> Ruleset {
        let mut ruleset = render_base(&self.base);
        for svc in state.services() {
            if let Some(rules) = self.service(state, &svc.name) {
                ruleset.set_service(svc.name.clone(), Some(rules));
            }
        }
        ruleset
    }

    /// The node-level plan (no services): what every backend renders its base from.
    pub fn base_plan(&self) -> &Plan {
        &self.base
    }

    /// The whole node's plan.
    pub fn plan(&self, state: &ClusterState) -> Plan {
        Plan::build(&NodeView::build(state, &self.context), &self.config)
    }

    /// One service's port plans; empty when it has nothing to program on this node.
    pub fn service_plans(&self, state: &ClusterState, name: &ServiceName) -> Vec<ServicePlan> {
        NodeView::build_service_ports(state, &self.context, name)
            .iter()
            .map(|view| ServicePlan::build(view, &self.plan_ctx))
            .collect()
    }

    /// One service's rules, or `None` when it has nothing to program on this node (deleted,
    /// or no ClusterIP of this family).
    pub fn service(&self, state: &ClusterState, name: &ServiceName) -> Option<ServiceRules> {
        let plans = self.service_plans(state, name);
        let refs: Vec<&ServicePlan> = plans.iter().collect();
        (!refs.is_empty()).then(|| render_service(&refs, &self.render_ctx))
    }
}
