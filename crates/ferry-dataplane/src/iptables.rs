//! iptables mode's kernel half: `iptables-restore --noflush` of Ferry's chains, in the layout
//! of upstream kube-proxy's iptables mode (see docs/src/modes/iptables-layout.md).
//!
//! The first sync of a process (and the one after a failure, or after the canary chain
//! vanished) is full: every Ferry chain is rewritten — but for the per-service chains the
//! kernel already holds with the wanted rules, read back and compared in canonical form (see
//! `survey`) — chains no longer wanted are deleted, and the jumps from the built-in chains are
//! checked one by one (`-C`) and the missing ones inserted (`-I`) in the restore itself, so
//! that nothing Ferry did not create is ever touched.
//! How the restore is cut into transactions is the backend's [`Transactions`]: on iptables-nft
//! the nat chains of a large ruleset go in several transactions of one restore (its
//! `--noflush` mode is quadratic in the chains of one transaction). Later syncs are partial: the chains of
//! the services that changed, and the shared top-level chains when their rules changed.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use ferry_compile::iptables::{
    canonical_digest, jump_rules, FullSync, JumpRule, NodeRules, Rerender, Restore, Ruleset,
    ServiceRules, Table, Transactions, LARGE_CLUSTER_ENDPOINTS, NON_POD_MASQ,
    SERVICE_CHAIN_PREFIXES,
};
use ferry_compile::NodeCompiler;
use ferry_model::{ClusterState, ServiceName};

use crate::{Applier, Error, SyncKind, SyncReport, TableRules};

mod canary;
mod cleanup;
mod counters;
mod kernel;
mod live;
mod mode;
mod pipe;

pub use crate::iptables_tool::{
    choose_backend, detect_backend, IptablesBackend, IptablesCli, IptablesRunner,
};
pub use cleanup::{cleanup, leftovers};
/// upstream's nfacct counters of iptables mode and the metrics read from them.
pub use counters::METRICS as COUNTER_METRICS;
pub(crate) use mode::MODE;
use pipe::Counted;

/// Chains per nat transaction of a full sync on iptables-nft: its `--noflush` restore spends
/// time quadratic in the chains of one transaction (see `ferry_compile::iptables::Restore::
/// full_with`); transactions of a few hundred chains load as fast as a plain restore.
pub const NFT_CHAINS_PER_TRANSACTION: usize = 250;

/// Up to this many nat chains a full sync on iptables-nft is still one transaction, so the
/// whole ruleset changes at once (a process killed mid-sync leaves the old rules or the new,
/// never some Services of each). One `--noflush` restore of 10 000 chains declared in
/// descending name order, over existing ones, took 1.0–1.3 s here (in hash order 2.7 s),
/// about 900 Services × 10 endpoints; larger rulesets are split, and then each Service
/// changes atomically, not the whole.
pub const NFT_ONE_TRANSACTION_UP_TO: usize = 10_000;

impl<R: IptablesRunner> Applier for IptablesDataplane<R> {
    /// Nothing installed by this process yet (or forgotten), or the top-level chains changed.
    fn needs_full(&mut self, compiler: &NodeCompiler) -> Result<bool, Error> {
        let base = NodeRules::new(compiler).base();
        Ok(!self.installed.as_ref().is_some_and(|i| i.same_base(&base)))
    }

    /// See [`damage`](IptablesDataplane::damage).
    fn intact(&mut self) -> Result<bool, Error> {
        if self.installed.is_none() {
            return Ok(true);
        }
        match self.damage()? {
            None => Ok(true),
            Some(what) => {
                tracing::info!("{what}: resyncing everything");
                self.installed = None;
                Ok(false)
            }
        }
    }

    fn sync_full(
        &mut self,
        compiler: &NodeCompiler,
        state: &ClusterState,
    ) -> Result<SyncReport, Error> {
        // Of the installed rules only the chains' names are needed (to delete the stale ones).
        let existing = self.forget_installed();
        // Each service's chains' rules are let go as soon as it is rendered, and rendered
        // again when they are written: the whole ruleset's rules (~40 MB at 10 000 Services ×
        // 10 endpoints) are never held at once, only their names, digests and the top-level
        // rules.
        let rules = NodeRules::new(compiler);
        let desired = rules.full_slim(state);
        let large = desired.large_cluster;
        let mut again = |name: &ServiceName| rules.service(state, name, large);
        self.apply_full_over(desired, existing, &mut Rerender::new(&mut again))
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
        let failed = match self.apply_changes(changes) {
            Ok(report) => return Ok(report),
            Err(e) => e,
        };
        // A partial restore fails when someone deleted the chains it refers to (a firewall
        // reload): when the canary check finds that, repair now rather than report a failure.
        match self.damage() {
            Ok(Some(what)) => {
                tracing::info!("{what}: resyncing everything");
                self.sync_full(compiler, state)
            }
            _ => Err(failed),
        }
    }
}

/// Keeps Ferry's iptables chains (one family, one backend) equal to the desired ruleset.
pub struct IptablesDataplane<R: IptablesRunner = IptablesCli> {
    runner: R,
    /// What the kernel holds, when known (after a successful sync by this process).
    installed: Option<Ruleset>,
    /// How a full sync is cut into transactions.
    transactions: Transactions,
}

impl IptablesDataplane<IptablesCli> {
    /// An applier using `backend`'s tools in the current network namespace.
    pub fn new(backend: IptablesBackend) -> Self {
        Self::for_family(backend, ferry_model::IpFamily::V4)
    }

    /// An applier of `family`'s chains (`ip6tables` for IPv6) using `backend`'s tools.
    pub fn for_family(backend: IptablesBackend, family: ferry_model::IpFamily) -> Self {
        let transactions = match backend {
            IptablesBackend::Nft => Transactions::Nft {
                whole_up_to: NFT_ONE_TRANSACTION_UP_TO,
                per_section: NFT_CHAINS_PER_TRANSACTION,
            },
            // Each legacy transaction rewrites its whole table: one is cheapest.
            IptablesBackend::Legacy => Transactions::PerTable,
        };
        Self::with_runner(IptablesCli::for_family(backend, family)).with_transactions(transactions)
    }
}

impl<R: IptablesRunner> IptablesDataplane<R> {
    /// An applier with a given runner.
    pub fn with_runner(runner: R) -> Self {
        Self {
            runner,
            installed: None,
            transactions: Transactions::PerTable,
        }
    }

    /// Cuts full syncs into transactions as `transactions` says (default: one per table).
    pub fn with_transactions(mut self, transactions: Transactions) -> Self {
        self.transactions = transactions;
        self
    }

    /// The runner (tests read what was sent).
    pub fn runner(&self) -> &R {
        &self.runner
    }

    /// What the kernel holds, if known.
    pub fn installed(&self) -> Option<&Ruleset> {
        self.installed.as_ref()
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

    /// Forgets what is installed; its nat chains' names (`None` when nothing was known).
    fn forget_installed(&mut self) -> Option<Vec<String>> {
        let old = self.installed.take()?;
        Some(
            old.nat_chain_names()
                .into_iter()
                .map(str::to_owned)
                .collect(),
        )
    }

    /// Per-service nat chains the kernel holds that `desired` does not want, and those it
    /// already holds exactly as `desired` wants them (not written again). `existing`: the nat
    /// chains this process installed (`None`: unknown, the kernel is asked: an earlier run,
    /// or kube-proxy, may have left them). `again` renders a slim `desired`'s services.
    fn survey(
        &mut self,
        desired: &Ruleset,
        existing: Option<Vec<String>>,
        again: &mut Rerender<'_>,
    ) -> Result<(Vec<String>, BTreeSet<String>), Error> {
        let keep = desired.nat_chain_names();
        let mut unchanged = BTreeSet::new();
        let existing: Vec<String> = match existing {
            Some(names) => names,
            None => {
                let ours: Vec<String> = self
                    .runner
                    .saved_chains()?
                    .remove(Table::Nat.as_str())
                    .unwrap_or_default()
                    .into_iter()
                    .filter(|c| {
                        *c == NON_POD_MASQ
                            || SERVICE_CHAIN_PREFIXES.iter().any(|p| c.starts_with(p))
                    })
                    .collect();
                if ours.iter().any(|c| keep.contains(c.as_str())) {
                    unchanged = self.unchanged(desired, again);
                }
                ours
            }
        };
        let stale = existing
            .into_iter()
            .filter(|c| !keep.contains(c.as_str()))
            .collect();
        Ok((stale, unchanged))
    }

    /// The per-service nat chains of `desired` the kernel holds with the same rules, compared
    /// in canonical form (`iptables-save` prints a rule in its own spelling). A restart over
    /// 10 000 Services × 10 endpoints on iptables-nft rewrote all 110 000 chains, each
    /// transaction of them paying the kernel's check of the whole chain graph (73 s); what
    /// did not change is now left as it is. When the kernel's rules cannot be read, nothing is
    /// taken as unchanged.
    fn unchanged(&mut self, desired: &Ruleset, again: &mut Rerender<'_>) -> BTreeSet<String> {
        let saved = match self.runner.saved_digests(Table::Nat, desired.family) {
            Ok(saved) => saved,
            Err(e) => {
                tracing::warn!("reading the nat table back failed, rewriting every chain: {e}");
                return BTreeSet::new();
            }
        };
        let mut unchanged = BTreeSet::new();
        for (name, service) in &desired.services {
            let rendered;
            let rules = if service.is_slim() {
                rendered = again.render(name);
                match &rendered {
                    Some(rules) => rules,
                    None => continue,
                }
            } else {
                service
            };
            for chain in &rules.chains {
                let Some(Some(kernel)) = saved.get(&chain.name) else {
                    continue;
                };
                let ours = canonical_digest(chain.rules.iter().map(String::as_str), desired.family);
                if ours.as_ref() == Some(kernel) {
                    unchanged.insert(chain.name.clone());
                }
            }
        }
        unchanged
    }

    /// Makes Ferry's chains equal to `desired` and ensures the jumps into them.
    pub fn apply_full(&mut self, desired: Ruleset) -> Result<SyncReport, Error> {
        let existing = self.forget_installed();
        let mut again = |_: &ServiceName| None;
        self.apply_full_over(desired, existing, &mut Rerender::new(&mut again))
    }

    /// [`apply_full`](Self::apply_full) over the nat chains `existing` (see
    /// [`survey`](Self::survey)). What was installed is forgotten first, so after
    /// a failure nothing is known and the next sync is full again.
    /// `desired` may be slim: `again` renders its services' chains again as they are written.
    /// What is kept as installed is slim either way.
    fn apply_full_over(
        &mut self,
        mut desired: Ruleset,
        existing: Option<Vec<String>>,
        again: &mut Rerender<'_>,
    ) -> Result<SyncReport, Error> {
        let start = Instant::now();
        let (restore, bytes) = self.full(&desired, existing, again)?;
        desired.services.values_mut().for_each(ServiceRules::slim);
        let report = report(
            SyncKind::Full,
            &restore,
            bytes,
            start.elapsed(),
            Some(&desired),
        );
        self.installed = Some(desired);
        Ok(report)
    }

    /// The full sync's restore (its counts) and the bytes of text the tool was given.
    fn full(
        &mut self,
        desired: &Ruleset,
        existing: Option<Vec<String>>,
        again: &mut Rerender<'_>,
    ) -> Result<(Restore, usize), Error> {
        let (stale, unchanged) = self.survey(desired, existing, again)?;
        let jumps = self.missing_jumps()?;
        let sync = FullSync {
            stale: &stale,
            jumps: &jumps,
            transactions: self.transactions,
            unchanged: Some(&unchanged),
        };
        // Written to the tool as it is produced: the text of 10 000 Services × 10 endpoints
        // (~30 MiB) is never held beside the ruleset it comes from.
        let mut restore = None;
        let mut bytes = 0;
        self.runner.restore_from(&mut |pipe| {
            let mut out = Counted::new(pipe);
            let written = Restore::write_full_with(desired, &sync, &mut out, again);
            bytes = out.bytes;
            let written = written.map_err(|_| match again.mismatch.take() {
                Some(why) => std::io::Error::other(why),
                None => out.error(),
            })?;
            restore = Some(written);
            Ok(())
        })?;
        Ok((restore.unwrap_or_default(), bytes))
    }

    /// The jumps from the built-in chains that are not there. Checked before the restore,
    /// which inserts the missing ones together with their targets: after it, each check (and
    /// each insert) of a nat jump makes iptables-legacy read the whole nat table again
    /// (0.25 s each at 10 000 services × 10 endpoints; six of them on a first start).
    fn missing_jumps(&mut self) -> Result<Vec<JumpRule>, Error> {
        let mut missing = Vec::new();
        for jump in jump_rules() {
            if !self.runner.check(&jump_args(&jump, "-C"))? {
                missing.push(jump);
            }
        }
        Ok(missing)
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
            let same = match (&old, &rules) {
                (Some(old), Some(new)) => old.same_as(new),
                (old, new) => old.is_none() && new.is_none(),
            };
            if same {
                continue;
            }
            installed.set_service(name.clone(), rules);
            previous.insert(name, old);
        }
        if previous.is_empty() {
            let installed = self.installed.as_ref();
            return Ok(report(
                SyncKind::Partial,
                &Restore::default(),
                0,
                Duration::ZERO,
                installed,
            ));
        }
        let restore = Restore::partial(installed, &previous);
        // Kept slim, like the rest (see `sync_full`).
        for name in previous.keys() {
            if let Some(rules) = installed.services.get_mut(name) {
                rules.slim();
            }
        }
        if restore.text.is_empty() {
            let installed = self.installed.as_ref();
            return Ok(report(
                SyncKind::Partial,
                &restore,
                0,
                start.elapsed(),
                installed,
            ));
        }
        if let Err(e) = self.runner.restore(&restore.text) {
            // The kernel kept its old state, ours moved on: resync fully.
            self.installed = None;
            return Err(e);
        }
        let bytes = restore.text.len();
        let installed = self.installed.as_ref();
        Ok(report(
            SyncKind::Partial,
            &restore,
            bytes,
            start.elapsed(),
            installed,
        ))
    }
}

/// `-t TABLE OP CHAIN ARGS…` of one jump (`OP`: `-C` to check it).
fn jump_args<'a>(jump: &'a JumpRule, op: &'a str) -> Vec<&'a str> {
    let mut args = vec!["-t", jump.table.as_str(), op, jump.chain];
    args.extend(jump.args.iter().map(String::as_str));
    args
}

fn report(
    kind: SyncKind,
    restore: &Restore,
    script_bytes: usize,
    apply_time: Duration,
    installed: Option<&Ruleset>,
) -> SyncReport {
    let table_rules = installed
        .map(|rs| {
            rs.rule_counts()
                .into_iter()
                .map(|(table, total)| TableRules {
                    table: table.as_str(),
                    total,
                    written: restore
                        .rules_written_by_table
                        .get(&table)
                        .copied()
                        .unwrap_or(0),
                })
                .collect()
        })
        .unwrap_or_default();
    SyncReport {
        kind,
        chains_written: restore.chains_written,
        elements_changed: 0,
        script_bytes,
        netlink: false,
        apply_time,
        table_rules,
    }
}

#[cfg(test)]
mod tests;
