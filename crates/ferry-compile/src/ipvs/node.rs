//! One node's IPVS-mode state from a [`NodeCompiler`], for the addresses its interfaces hold.

use std::net::IpAddr;

use ferry_model::{ClusterState, ServiceName};

use super::render::{render, render_service, RenderContext};
use super::ruleset::{Ruleset, ServiceIpvs};
use crate::plan::ServicePlan;
use crate::NodeCompiler;

/// A node's IPVS-mode state, whole or per service.
#[derive(Debug, Clone)]
pub struct NodeRules<'a> {
    compiler: &'a NodeCompiler,
    ctx: RenderContext,
}

impl<'a> NodeRules<'a> {
    /// The state of the compiler's node, whose interfaces (kube-ipvs0 aside) hold
    /// `local_addresses` (NodePorts get a virtual server on each; the dataplane reads them
    /// from the kernel).
    pub fn new(compiler: &'a NodeCompiler, local_addresses: &[IpAddr]) -> Self {
        let ctx = RenderContext::new(compiler.base_plan(), compiler.config(), local_addresses);
        Self { compiler, ctx }
    }

    /// The state of the compiler's node for an earlier rendering's context (the same node
    /// addresses).
    pub fn with_context(compiler: &'a NodeCompiler, ctx: RenderContext) -> Self {
        Self { compiler, ctx }
    }

    /// The state as far as it can be known without the kernel: the node's only addresses are
    /// its Node object's primary IPs (`ferry rules`, `ferry explain`, the golden files).
    pub fn offline(compiler: &'a NodeCompiler) -> Self {
        Self::new(compiler, &compiler.base_plan().node_ips)
    }

    /// What rendering depends on besides the plan.
    pub fn context(&self) -> &RenderContext {
        &self.ctx
    }

    /// The node-level settings without any service: what an incremental sync requires
    /// unchanged.
    pub fn base(&self) -> Ruleset {
        Ruleset::base(self.compiler.base_plan(), self.compiler.config())
    }

    /// The whole node's state.
    pub fn full(&self, state: &ClusterState) -> Ruleset {
        render(
            &self.compiler.plan(state),
            self.compiler.config(),
            &self.ctx,
        )
    }

    /// One service's state; `None` when it has nothing to program on this node.
    pub fn service(&self, state: &ClusterState, name: &ServiceName) -> Option<ServiceIpvs> {
        let plans = self.compiler.service_plans(state, name);
        let refs: Vec<&ServicePlan> = plans.iter().collect();
        (!refs.is_empty()).then(|| render_service(&refs, &self.ctx))
    }
}
