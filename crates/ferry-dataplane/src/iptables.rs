//! iptables mode's kernel half: `iptables-restore --noflush` of Ferry's chains, in the layout
//! of upstream kube-proxy's iptables mode (see docs/src/modes/iptables-layout.md).
//!
//! The first sync of a process (and the one after a failure, or after the canary chain
//! vanished) is full: every Ferry chain is rewritten, chains no longer wanted are deleted, and
//! the jumps from the built-in chains are checked and inserted one by one (`-C`, then `-I`), so
//! that nothing Ferry did not create is ever touched. Later syncs are partial: the shared
//! top-level chains plus the chains of the services that changed.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use ferry_compile::iptables::{
    jump_rules, NodeRules, Restore, Ruleset, ServiceRules, Table, CANARY, LARGE_CLUSTER_ENDPOINTS,
    NON_POD_MASQ, SERVICE_CHAIN_PREFIXES,
};
use ferry_compile::mode::{IptablesRenderer, ProxyMode};
use ferry_compile::trace::Trace;
use ferry_compile::NodeCompiler;
use ferry_model::{ClusterState, IpFamily, ServiceName};

use crate::live::{KernelReport, LiveReport};
use crate::mode::{FailureCounter, ModeEntry, ModeOptions, NodeMode};
use crate::preflight::{Capability, Requirements, Tool};
use crate::support::{kernel_has, succeeds, Unsupported};
use crate::userspace::{Engine, Stats, WithLocalhostNodePorts};
use crate::{Applier, Error, SyncKind, SyncReport};

mod cleanup;
mod cli;
mod detect;
mod kernel;
mod live;

pub use crate::mode::IptablesBackend;
pub use cleanup::{cleanup, leftovers};
pub(crate) use cleanup::{iptables_mode_ran, shared, tables as save_tables};
pub use cli::{IptablesCli, IptablesRunner};
pub use detect::{choose as choose_backend, detect as detect_backend};

/// iptables mode's line in the mode table.
pub(crate) const MODE: ModeEntry = ModeEntry {
    mode: ProxyMode::Iptables,
    renderer: &IptablesRenderer,
    open: |options: &ModeOptions| Box::new(IptablesMode::open(options)),
    cleanup,
    leftovers,
    sync_failures: FailureCounter::IptablesRestore,
};

/// iptables mode on this node, with the backend it programs and the proxy of its localhost
/// NodePorts.
struct IptablesMode {
    backend: IptablesBackend,
    localhost: Engine,
}

impl IptablesMode {
    /// The backend forced by the options, or the one that already holds Kubernetes' rules.
    fn open(options: &ModeOptions) -> Self {
        Self {
            backend: options.iptables_backend.unwrap_or_else(detect_backend),
            localhost: Engine::new(options),
        }
    }
}

impl NodeMode for IptablesMode {
    fn describe(&self) -> String {
        format!("iptables mode, {} backend", self.backend.as_str())
    }

    /// Upstream: `utiliptables.Present()`.
    fn supports(&self, family: IpFamily) -> Result<(), Unsupported> {
        kernel_has(family)?;
        let program = self.backend.program_for(family, "");
        succeeds(&program, &["-w", "5", "-t", "nat", "-S", "POSTROUTING"])
    }

    /// The backend's tools (`iptables-nft`, `-save`, `-restore`), CAP_NET_ADMIN, and for the
    /// legacy backend CAP_NET_RAW (it talks to the kernel over a raw socket).
    fn requirements(&self) -> Requirements {
        let tools = ["", "-save", "-restore"]
            .into_iter()
            .map(|t| Tool::new(self.backend.program(t), "iptables"))
            .collect();
        let mut capabilities = vec![Capability::NetAdmin];
        if self.backend == IptablesBackend::Legacy {
            capabilities.push(Capability::NetRaw);
        }
        Requirements {
            tools,
            capabilities,
        }
    }

    fn applier(&self, family: IpFamily) -> Box<dyn Applier> {
        let rules = IptablesDataplane::for_family(self.backend, family);
        Box::new(WithLocalhostNodePorts::new(
            rules,
            self.localhost.clone(),
            family,
        ))
    }

    fn proxy_metrics(&self) -> Option<Stats> {
        Some(self.localhost.stats())
    }

    fn live(
        &self,
        trace: &Trace,
        compiler: &NodeCompiler,
        _state: &ClusterState,
    ) -> Result<LiveReport, Error> {
        let save = live::read_back(self.backend, compiler.family())?;
        Ok(live::check(trace, &save))
    }

    fn kernel(&self, compiler: &NodeCompiler, state: &ClusterState) -> Result<KernelReport, Error> {
        let save = live::read_back(self.backend, compiler.family())?;
        let compiled = NodeRules::new(compiler).full(state);
        Ok(kernel::compare(&compiled, &save))
    }
}

impl<R: IptablesRunner> Applier for IptablesDataplane<R> {
    /// Nothing installed by this process yet, the top-level chains changed, or a canary chain
    /// is gone (see [`canary_gone`](IptablesDataplane::canary_gone)).
    fn needs_full(&mut self, compiler: &NodeCompiler) -> Result<bool, Error> {
        let base = NodeRules::new(compiler).base();
        if !self.installed.as_ref().is_some_and(|i| i.same_base(&base)) {
            return Ok(true);
        }
        self.canary_gone()
    }

    fn sync_full(
        &mut self,
        compiler: &NodeCompiler,
        state: &ClusterState,
    ) -> Result<SyncReport, Error> {
        self.apply_full(NodeRules::new(compiler).full(state))
    }

    fn sync_partial(
        &mut self,
        compiler: &NodeCompiler,
        state: &ClusterState,
        dirty: &BTreeSet<ServiceName>,
    ) -> Result<SyncReport, Error> {
        let large = self.installed.as_ref().is_some_and(|i| i.large_cluster);
        let rules = NodeRules::new(compiler);
        let changes: BTreeMap<_, _> = dirty
            .iter()
            .map(|name| (name.clone(), rules.service(state, name, large)))
            .collect();
        if self.crosses_large_cluster_threshold(&changes, large) {
            // Upstream's large-cluster mode changes every service's rules.
            return self.sync_full(compiler, state);
        }
        self.apply_changes(changes)
    }
}

/// Keeps Ferry's iptables chains (one family, one backend) equal to the desired ruleset.
pub struct IptablesDataplane<R: IptablesRunner = IptablesCli> {
    runner: R,
    /// What the kernel holds, when known (after a successful sync by this process).
    installed: Option<Ruleset>,
}

impl IptablesDataplane<IptablesCli> {
    /// An applier using `backend`'s tools in the current network namespace.
    pub fn new(backend: IptablesBackend) -> Self {
        Self::with_runner(IptablesCli::new(backend))
    }

    /// An applier of `family`'s chains (`ip6tables` for IPv6) using `backend`'s tools.
    pub fn for_family(backend: IptablesBackend, family: ferry_model::IpFamily) -> Self {
        Self::with_runner(IptablesCli::for_family(backend, family))
    }
}

/// Names of chains in an `iptables-save` output of one table.
fn chains_in(save: &str) -> impl Iterator<Item = &str> {
    save.lines()
        .filter_map(|l| l.strip_prefix(':'))
        .filter_map(|l| l.split_whitespace().next())
}

impl<R: IptablesRunner> IptablesDataplane<R> {
    /// An applier with a given runner.
    pub fn with_runner(runner: R) -> Self {
        Self {
            runner,
            installed: None,
        }
    }

    /// The runner (tests read what was sent).
    pub fn runner(&self) -> &R {
        &self.runner
    }

    /// What the kernel holds, if known.
    pub fn installed(&self) -> Option<&Ruleset> {
        self.installed.as_ref()
    }

    /// True when a canary chain is gone: someone flushed or deleted the tables, so what Ferry
    /// installed is no longer there (and is then forgotten). Checks the canaries of mangle (upstream's signal: a firewall reload
    /// deletes every table's chains) and filter. Not nat's: listing one nat chain makes
    /// iptables-legacy read the whole nat table (0.25 s at 10 000 services × 10 endpoints);
    /// a partial restore into a nat table emptied by hand fails and is retried as a full sync.
    fn canary_gone(&mut self) -> Result<bool, Error> {
        for table in [Table::Mangle, Table::Filter] {
            if !self
                .runner
                .iptables(&["-t", table.as_str(), "-S", CANARY])?
            {
                tracing::info!(
                    table = table.as_str(),
                    "canary chain {CANARY} is gone: resyncing everything"
                );
                self.installed = None;
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// True when applying `changes` would move the endpoint count across upstream's
    /// large-cluster threshold.
    fn crosses_large_cluster_threshold(
        &self,
        changes: &BTreeMap<ServiceName, Option<ServiceRules>>,
        large: bool,
    ) -> bool {
        let Some(installed) = &self.installed else {
            return false;
        };
        let before: usize = changes
            .keys()
            .filter_map(|n| installed.services.get(n))
            .map(|s| s.endpoints)
            .sum();
        let after: usize = changes.values().flatten().map(|s| s.endpoints).sum();
        let total = installed.endpoint_count() - before + after;
        (total > LARGE_CLUSTER_ENDPOINTS) != large
    }

    /// Per-service nat chains the kernel holds that `desired` does not want.
    fn stale_chains(&mut self, desired: &Ruleset) -> Result<Vec<String>, Error> {
        let keep = desired.nat_chain_names();
        let existing: Vec<String> = match &self.installed {
            Some(old) => old
                .nat_chain_names()
                .into_iter()
                .map(str::to_owned)
                .collect(),
            // What an earlier run (or kube-proxy) left is unknown: look.
            None => chains_in(&self.runner.save(Some(Table::Nat))?)
                .filter(|c| {
                    *c == NON_POD_MASQ || SERVICE_CHAIN_PREFIXES.iter().any(|p| c.starts_with(p))
                })
                .map(str::to_owned)
                .collect(),
        };
        Ok(existing
            .into_iter()
            .filter(|c| !keep.contains(c.as_str()))
            .collect())
    }

    /// Makes Ferry's chains equal to `desired` and ensures the jumps into them.
    pub fn apply_full(&mut self, desired: Ruleset) -> Result<SyncReport, Error> {
        let start = Instant::now();
        let result = self.full(&desired);
        match result {
            Ok(restore) => {
                self.installed = Some(desired);
                Ok(report(SyncKind::Full, &restore, start.elapsed()))
            }
            Err(e) => {
                self.installed = None;
                Err(e)
            }
        }
    }

    fn full(&mut self, desired: &Ruleset) -> Result<Restore, Error> {
        let stale = self.stale_chains(desired)?;
        let restore = Restore::full(desired, &stale);
        self.runner.restore(&restore.text)?;
        // After the restore, so that every jump target exists.
        for jump in jump_rules() {
            let mut args = vec!["-t", jump.table.as_str(), "-C", jump.chain];
            args.extend(jump.args.iter().map(String::as_str));
            if !self.runner.iptables(&args)? {
                args[2] = "-I";
                self.runner.iptables(&args)?;
            }
        }
        Ok(restore)
    }

    /// Replaces the given services' rules. Requires a previous successful sync; the caller
    /// checks [`Applier::needs_full`] first.
    pub fn apply_changes(
        &mut self,
        changes: BTreeMap<ServiceName, Option<ServiceRules>>,
    ) -> Result<SyncReport, Error> {
        let Some(installed) = self.installed.as_mut() else {
            return Err(Error::NoBaseline);
        };
        let start = Instant::now();
        let mut previous = BTreeMap::new();
        for (name, rules) in changes {
            let old = installed.services.get(&name).cloned();
            if old == rules {
                continue;
            }
            installed.set_service(name.clone(), rules);
            previous.insert(name, old);
        }
        if previous.is_empty() {
            return Ok(report(
                SyncKind::Partial,
                &Restore::default(),
                Duration::ZERO,
            ));
        }
        let restore = Restore::partial(installed, &previous);
        if let Err(e) = self.runner.restore(&restore.text) {
            // The kernel kept its old state, ours moved on: resync fully.
            self.installed = None;
            return Err(e);
        }
        Ok(report(SyncKind::Partial, &restore, start.elapsed()))
    }
}

fn report(kind: SyncKind, restore: &Restore, apply_time: Duration) -> SyncReport {
    SyncReport {
        kind,
        chains_written: restore.chains_written,
        elements_changed: 0,
        script_bytes: restore.text.len(),
        netlink: false,
        apply_time,
    }
}

#[cfg(test)]
mod tests;
