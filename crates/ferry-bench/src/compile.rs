//! The compile step without I/O: the benchmark's node and configuration, the cluster state,
//! and the nftables staged compile (state → node view → plan → ruleset) with its sizes. The
//! agent's own path (compile and apply per sync) is measured through the mode's applier.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use ferry_compile::config::LocalDetector;
use ferry_compile::nft::{render, Ruleset, Transaction};
use ferry_compile::{CompileConfig, Plan};
use ferry_model::{ClusterState, IpFamily, NodeContext, NodeView, Object};

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
