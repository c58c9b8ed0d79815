//! The compile step (state → node view → plan → ruleset) and the agent's incremental path,
//! both without I/O.
//!
//! [`incremental_changes`] does what `ferry`'s `Syncer::sync` does for an incremental sync, with
//! the same [`NodeCompiler`]: prepare the node-level plan, check that the installed base still
//! matches, then recompile only the dirty services (`NodeView::build_service_ports` →
//! `ServicePlan::build` → `render_service`). [`full_resync`] is the agent's full branch.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use ferry_compile::config::LocalDetector;
use ferry_compile::nft::{render, Ruleset, ServiceRules, Transaction};
use ferry_compile::{CompileConfig, NodeCompiler, Plan};
use ferry_dataplane::NftDataplane;
use ferry_model::{ClusterState, IpFamily, NodeContext, NodeView, Object, ServiceName};

use crate::cluster::{BENCH_NODE, CLUSTER_CIDR};

/// The node context the benchmark compiles for ([`BENCH_NODE`], IPv4).
pub fn node_context() -> NodeContext {
    NodeContext {
        node_name: BENCH_NODE.to_owned(),
        family: IpFamily::V4,
    }
}

/// The compiler settings: defaults plus `detectLocalMode: ClusterCIDR` with [`CLUSTER_CIDR`],
/// as a typical cluster configures it (adds a masquerade rule per service chain).
pub fn compile_config() -> anyhow::Result<CompileConfig> {
    let cidr = CLUSTER_CIDR.parse().context("parsing the cluster CIDR")?;
    Ok(CompileConfig {
        local_detector: LocalDetector::ClusterCidr(vec![cidr]),
        ..CompileConfig::default()
    })
}

/// A cluster state holding `objects`.
pub fn build_state(objects: Vec<Object>) -> ClusterState {
    let mut state = ClusterState::new();
    for o in objects {
        state.apply(o);
    }
    state
}

/// Time spent in each compile stage.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CompileTimes {
    /// `NodeView::build`.
    pub view: Duration,
    /// `Plan::build`.
    pub plan: Duration,
    /// `nft::render`.
    pub render: Duration,
}

impl CompileTimes {
    /// All three stages.
    pub fn total(&self) -> Duration {
        self.view + self.plan + self.render
    }
}

/// Compiles the whole node: state → node view → plan → ruleset (what a full sync does before
/// it talks to the kernel).
pub fn compile(
    state: &ClusterState,
    ctx: &NodeContext,
    cfg: &CompileConfig,
) -> (Ruleset, CompileTimes) {
    let t = Instant::now();
    let view = NodeView::build(state, ctx);
    let view_time = t.elapsed();
    let t = Instant::now();
    let plan = Plan::build(&view, cfg);
    let plan_time = t.elapsed();
    let t = Instant::now();
    let ruleset = render(&plan);
    let render_time = t.elapsed();
    (
        ruleset,
        CompileTimes {
            view: view_time,
            plan: plan_time,
            render: render_time,
        },
    )
}

/// Size of a rendered ruleset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RulesetSize {
    /// Chains: base, fixed and per-service.
    pub chains: usize,
    /// Dispatch chains (shared by services of the same shape).
    pub service_chains: usize,
    /// Rules in all chains.
    pub rules: usize,
    /// Sets and maps.
    pub sets: usize,
    /// Set and map elements (shared elements once).
    pub elements: usize,
    /// Bytes of the full sync's `nft -f` script (the skeleton; the rest goes over netlink).
    pub script_bytes: usize,
}

impl RulesetSize {
    /// Measures `rs` (renders its full-sync script to count the bytes).
    pub fn of(rs: &Ruleset) -> Self {
        let service_chains = rs.dispatch_chains().count();
        let base_rules: usize = rs.base_chains.iter().map(|b| b.chain.rules.len()).sum();
        let fixed_rules: usize = rs.chains.iter().map(|c| c.rules.len()).sum();
        let service_rules: usize = rs.dispatch_chains().map(|c| c.rules.len()).sum();
        Self {
            chains: rs.chain_names().count(),
            service_chains,
            rules: base_rules + fixed_rules + service_rules,
            sets: rs.sets.len(),
            elements: rs.all_elements().values().map(Vec::len).sum(),
            script_bytes: Transaction::skeleton(rs).text.len(),
        }
    }
}

/// What the agent would do for a set of dirty services.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Incremental {
    /// Recompiled rules of each dirty service (`None`: the service is gone), ready for
    /// `NftDataplane::apply_changes`.
    Changes(BTreeMap<ServiceName, Option<ServiceRules>>),
    /// Nothing installed yet, or the node-wide part changed: the agent would sync fully.
    NeedsFull,
}

/// The agent's incremental sync up to the kernel call (`Syncer::sync`): node compiler and base
/// check, then recompile each dirty service alone.
pub fn incremental_changes(
    state: &ClusterState,
    ctx: &NodeContext,
    cfg: &CompileConfig,
    installed: Option<&Ruleset>,
    dirty: &BTreeSet<ServiceName>,
) -> Incremental {
    let compiler = NodeCompiler::new(state, ctx, cfg);
    if !installed.is_some_and(|i| i.same_base(&compiler.base_ruleset())) {
        return Incremental::NeedsFull;
    }
    let changes = dirty
        .iter()
        .map(|name| (name.clone(), compiler.service(state, name)))
        .collect();
    Incremental::Changes(changes)
}

/// The agent's full sync up to the kernel call (`Syncer::sync` with `full`): node compiler,
/// base check (its result does not matter for a forced full sync, but the agent computes it),
/// whole-node compile.
/// Like the agent, it frees the installed ruleset before compiling the new one.
pub fn full_resync(
    state: &ClusterState,
    ctx: &NodeContext,
    cfg: &CompileConfig,
    dataplane: &mut NftDataplane,
) -> Ruleset {
    let compiler = NodeCompiler::new(state, ctx, cfg);
    let installed = dataplane.installed();
    std::hint::black_box(installed.is_none_or(|i| !i.same_base(&compiler.base_ruleset())));
    dataplane.forget_installed();
    compiler.full(state)
}

/// The agent's whole-node compile (`NodeCompiler::full`: service by service, never the whole
/// node's view and plan at once), what a full sync holds in memory.
pub fn compile_agent(state: &ClusterState, ctx: &NodeContext, cfg: &CompileConfig) -> Ruleset {
    NodeCompiler::new(state, ctx, cfg).full(state)
}
