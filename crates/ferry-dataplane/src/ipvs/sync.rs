//! The IPVS applier behind the mode-neutral [`Applier`] trait: the node's addresses are read
//! from the kernel at each sync (NodePorts get a virtual server on each), and a change of them,
//! of the node-level settings, a missing `KUBE-IPVS-FILTER` chain (someone flushed the
//! tables) or, at the periodic check, a chain holding other than the rules written makes the
//! next sync a full one.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use ferry_compile::ipvs::chains::KUBE_IPVS_FILTER;
use ferry_compile::ipvs::NodeRules;
use ferry_compile::NodeCompiler;
use ferry_model::{ClusterState, ServiceName};

use super::applier::{IpvsApplier, IpvsReport};
use super::node;
use crate::iptables_tool::saved::first_changed;
use crate::iptables_tool::IptablesRunner;
use crate::{Applier, Error, SyncKind, SyncReport};

/// How often a partial sync looks for the canary chain.
const CANARY_INTERVAL: Duration = Duration::from_secs(1);

impl<R: IptablesRunner> IpvsApplier<R> {
    /// True when `KUBE-IPVS-FILTER` (written at every full sync, never empty) is gone from
    /// filter: someone flushed the tables, and what Ferry installed is forgotten. Looked at
    /// most once per [`CANARY_INTERVAL`]: each look runs `iptables`, which would otherwise be
    /// most of a one-endpoint sync; a burst of changes is checked once.
    fn canary_gone(&mut self) -> Result<bool, Error> {
        if self
            .canary_checked
            .is_some_and(|t| t.elapsed() < CANARY_INTERVAL)
        {
            return Ok(false);
        }
        self.canary_checked = Some(Instant::now());
        if self
            .iptables
            .iptables(&["-t", "filter", "-S", KUBE_IPVS_FILTER])?
        {
            return Ok(false);
        }
        tracing::info!("chain {KUBE_IPVS_FILTER} is gone: resyncing everything");
        self.installed = None;
        Ok(true)
    }
}

impl<R: IptablesRunner> Applier for IpvsApplier<R> {
    fn needs_full(&mut self, compiler: &NodeCompiler) -> Result<bool, Error> {
        let Some(installed) = &self.installed else {
            return Ok(true);
        };
        let local = node::local_addresses()?;
        let rules = NodeRules::new(compiler, &local);
        if !installed.ruleset.same_base(&rules.base())
            || installed.context.as_ref() != Some(rules.context())
        {
            return Ok(true);
        }
        self.canary_gone()
    }

    fn intact(&mut self) -> Result<bool, Error> {
        if self.installed.is_none() {
            return Ok(true);
        }
        // The periodic check, once per sync period: look now, whatever the partial syncs'
        // throttle says.
        self.canary_checked = None;
        if self.canary_gone()? {
            return Ok(false);
        }
        // Then the rules of every chain written (IPVS mode's chains are few and fixed: one
        // `-S CHAIN` each), so that an emptied one (`iptables -t nat -F KUBE-SERVICES`) is
        // noticed too.
        let Some(installed) = &self.installed else {
            return Ok(true);
        };
        let written = installed.chains.rule_counts();
        let runner = &mut self.iptables;
        let Some(what) = first_changed(&written, |table, chain| runner.rules_in(table, chain))?
        else {
            return Ok(true);
        };
        tracing::info!("{what}: resyncing everything");
        self.installed = None;
        Ok(false)
    }

    fn sync_full(
        &mut self,
        compiler: &NodeCompiler,
        state: &ClusterState,
    ) -> Result<SyncReport, Error> {
        let start = Instant::now();
        let local = node::local_addresses()?;
        let rules = NodeRules::new(compiler, &local);
        let report = self.apply_full(&rules.full(state))?;
        if let Some(installed) = &mut self.installed {
            installed.context = Some(rules.context().clone());
        }
        Ok(sync_report(SyncKind::Full, &report, start.elapsed()))
    }

    fn sync_partial(
        &mut self,
        compiler: &NodeCompiler,
        state: &ClusterState,
        dirty: &BTreeSet<ServiceName>,
    ) -> Result<SyncReport, Error> {
        let start = Instant::now();
        let context = self.installed.as_ref().and_then(|i| i.context.clone());
        let Some(context) = context else {
            return Err(Error::NoBaseline);
        };
        // The addresses were checked by needs_full; render for the same ones.
        let rules = NodeRules::with_context(compiler, context);
        let changes: BTreeMap<_, _> = dirty
            .iter()
            .map(|name| (name.clone(), rules.service(state, name)))
            .collect();
        let report = self.apply_changes(changes)?;
        Ok(sync_report(SyncKind::Partial, &report, start.elapsed()))
    }
}

fn sync_report(kind: SyncKind, r: &IpvsReport, apply_time: Duration) -> SyncReport {
    SyncReport {
        kind,
        chains_written: r.chains_written,
        elements_changed: r.ipvs_changes + r.set_changes + r.addresses_changed,
        script_bytes: r.script_bytes,
        netlink: true,
        apply_time,
        table_rules: Vec::new(),
    }
}
