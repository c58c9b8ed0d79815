//! The dataplanes the syncer drives. The compile step is shared (the [`NodeCompiler`]'s plan
//! per service); each dataplane renders it into its own rules and applies them.

use std::collections::{BTreeMap, BTreeSet};

use ferry_compile::{iptables, NodeCompiler, ServicePlan};
use ferry_dataplane::iptables::{IptablesDataplane, IptablesRunner};
use ferry_dataplane::{ApplyError, NftDataplane, NftRunner, SyncReport};
use ferry_model::{ClusterState, ServiceName};

/// A dataplane: nftables or iptables.
pub trait Dataplane: Send {
    /// The full rules for the current state, as the kernel tool's input (`ferry rules`).
    fn render(&self, compiler: &NodeCompiler, state: &ClusterState) -> String;
    /// True when only a full sync is possible: nothing installed yet, the node-wide rules
    /// changed, or (iptables) someone removed Ferry's chains.
    fn needs_full(&mut self, compiler: &NodeCompiler) -> Result<bool, ApplyError>;
    /// Rewrites everything.
    fn sync_full(
        &mut self,
        compiler: &NodeCompiler,
        state: &ClusterState,
    ) -> Result<SyncReport, ApplyError>;
    /// Rewrites the rules of `dirty` services only.
    fn sync_partial(
        &mut self,
        compiler: &NodeCompiler,
        state: &ClusterState,
        dirty: &BTreeSet<ServiceName>,
    ) -> Result<SyncReport, ApplyError>;
}

impl<R: NftRunner> Dataplane for NftDataplane<R> {
    fn render(&self, compiler: &NodeCompiler, state: &ClusterState) -> String {
        compiler.full(state).to_string()
    }

    fn needs_full(&mut self, compiler: &NodeCompiler) -> Result<bool, ApplyError> {
        Ok(match self.installed() {
            Some(installed) => !installed.same_base(&compiler.base_ruleset()),
            None => true,
        })
    }

    fn sync_full(
        &mut self,
        compiler: &NodeCompiler,
        state: &ClusterState,
    ) -> Result<SyncReport, ApplyError> {
        // Free the installed ruleset before compiling the new one: the kernel keeps its
        // rules until the new ones replace them, and the next sync is full if this one fails.
        self.forget_installed();
        self.apply_full(compiler.full(state))
    }

    fn sync_partial(
        &mut self,
        compiler: &NodeCompiler,
        state: &ClusterState,
        dirty: &BTreeSet<ServiceName>,
    ) -> Result<SyncReport, ApplyError> {
        let changes = dirty
            .iter()
            .map(|name| (name.clone(), compiler.service(state, name)))
            .collect();
        self.apply_changes(changes)
    }
}

fn iptables_service(
    compiler: &NodeCompiler,
    state: &ClusterState,
    name: &ServiceName,
    large_cluster: bool,
) -> Option<iptables::ServiceRules> {
    let plans = compiler.service_plans(state, name);
    let refs: Vec<&ServicePlan> = plans.iter().collect();
    let ctx = iptables::RenderContext {
        large_cluster,
        ..iptables::RenderContext::of(compiler.base_plan())
    };
    (!refs.is_empty()).then(|| iptables::render_service(&refs, &ctx))
}

impl<R: IptablesRunner> Dataplane for IptablesDataplane<R> {
    fn render(&self, compiler: &NodeCompiler, state: &ClusterState) -> String {
        iptables::render(&compiler.plan(state)).to_string()
    }

    fn needs_full(&mut self, compiler: &NodeCompiler) -> Result<bool, ApplyError> {
        let base = iptables::render_base(compiler.base_plan());
        if !self.installed().is_some_and(|i| i.same_base(&base)) {
            return Ok(true);
        }
        IptablesDataplane::needs_full(self)
    }

    fn sync_full(
        &mut self,
        compiler: &NodeCompiler,
        state: &ClusterState,
    ) -> Result<SyncReport, ApplyError> {
        self.apply_full(iptables::render(&compiler.plan(state)))
    }

    fn sync_partial(
        &mut self,
        compiler: &NodeCompiler,
        state: &ClusterState,
        dirty: &BTreeSet<ServiceName>,
    ) -> Result<SyncReport, ApplyError> {
        let large = self.installed().is_some_and(|i| i.large_cluster);
        let changes: BTreeMap<_, _> = dirty
            .iter()
            .map(|name| (name.clone(), iptables_service(compiler, state, name, large)))
            .collect();
        if let Some(installed) = self.installed() {
            // Crossing upstream's large-cluster threshold changes every service's rules.
            let before: usize = changes
                .keys()
                .filter_map(|n| installed.services.get(n))
                .map(|s| s.endpoints)
                .sum();
            let after: usize = changes.values().flatten().map(|s| s.endpoints).sum();
            let total = installed.endpoint_count() - before + after;
            if (total > iptables::LARGE_CLUSTER_ENDPOINTS) != large {
                return self.sync_full(compiler, state);
            }
        }
        self.apply_changes(changes)
    }
}

impl Dataplane for Box<dyn Dataplane> {
    fn render(&self, compiler: &NodeCompiler, state: &ClusterState) -> String {
        (**self).render(compiler, state)
    }

    fn needs_full(&mut self, compiler: &NodeCompiler) -> Result<bool, ApplyError> {
        (**self).needs_full(compiler)
    }

    fn sync_full(
        &mut self,
        compiler: &NodeCompiler,
        state: &ClusterState,
    ) -> Result<SyncReport, ApplyError> {
        (**self).sync_full(compiler, state)
    }

    fn sync_partial(
        &mut self,
        compiler: &NodeCompiler,
        state: &ClusterState,
        dirty: &BTreeSet<ServiceName>,
    ) -> Result<SyncReport, ApplyError> {
        (**self).sync_partial(compiler, state, dirty)
    }
}
