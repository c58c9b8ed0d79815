//! `NodeCompiler`: one node's plan, whole or one service at a time (incremental syncs). Mode
//! neutral: each mode renders the plans it gives (see [`crate::mode`]).

use ferry_model::{ClusterState, IpFamily, NodeContext, NodeView, ServiceName};

use crate::config::CompileConfig;
use crate::plan::{Plan, PlanContext, ServicePlan};

/// The node-level part of the plan (this node's Node object, the service CIDRs and the
/// configuration), ready to compile services against.
#[derive(Debug, Clone)]
pub struct NodeCompiler {
    context: NodeContext,
    config: CompileConfig,
    base: Plan,
    plan_ctx: PlanContext,
}

impl NodeCompiler {
    /// Prepares compilation for `context`'s node from the current state.
    pub fn new(state: &ClusterState, context: &NodeContext, config: &CompileConfig) -> Self {
        let view = NodeView::node_level(state, context);
        let base = Plan::build(&view, config);
        Self {
            context: context.clone(),
            config: config.clone(),
            plan_ctx: base.context(config),
            base,
        }
    }

    /// The IP family compiled for.
    pub fn family(&self) -> IpFamily {
        self.context.family
    }

    /// The compile configuration.
    pub fn config(&self) -> &CompileConfig {
        &self.config
    }

    /// The node-level plan (no services): what every mode renders its base from.
    pub fn base_plan(&self) -> &Plan {
        &self.base
    }

    /// The whole node's view (every service port's endpoints, categorised).
    pub fn view(&self, state: &ClusterState) -> NodeView {
        NodeView::build(state, &self.context)
    }

    /// The plan of a view built by [`view`](Self::view).
    pub fn plan_of(&self, view: &NodeView) -> Plan {
        Plan::build(view, &self.config)
    }

    /// The whole node's plan.
    pub fn plan(&self, state: &ClusterState) -> Plan {
        self.plan_of(&self.view(state))
    }

    /// One service's port plans; empty when it has nothing to program on this node (deleted,
    /// or no ClusterIP of this family).
    pub fn service_plans(&self, state: &ClusterState, name: &ServiceName) -> Vec<ServicePlan> {
        NodeView::build_service_ports(state, &self.context, name)
            .iter()
            .map(|view| ServicePlan::build(view, &self.plan_ctx))
            .collect()
    }
}
