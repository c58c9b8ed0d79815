//! Ferry's own nftables table of one family (`ip ferry`, `ip6 ferry`): kept equal to a compiled
//! ruleset ([`NftDataplane`]), read back ([`read_back`], [`live`], [`kernel`]), checked for
//! ([`table_supported`]) and removed ([`cleanup`]).
//!
//! Machinery, not a mode: it imports none. The nftables mode and the userspace mode (whose
//! redirect rules are a ruleset of the same table) both compose it.
//!
//! A full sync writes the table's skeleton with `nft -f` and everything else (dispatch chains,
//! elements) in one netlink batch; an incremental sync writes only the changed services' elements
//! and the dispatch chains that come or go, in one batch. See docs/src/modes/nft-layout.md.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::time::Instant;

use ferry_compile::family::nft_family;
use ferry_compile::nft::{Delta, Key, NodeRules, Ruleset, ServiceRules, Transaction, TABLE};
use ferry_compile::NodeCompiler;
use ferry_model::{ClusterState, IpFamily, ServiceName};

use crate::netlink::{NetlinkError, NetlinkSocket};
use crate::preflight::{Capability, Requirements, Tool};
use crate::support::{kernel_has, succeeds, Unsupported};
use crate::{Applier, Error, SyncKind, SyncReport};

mod canary;
mod cleanup;
mod cli;
pub(crate) mod kernel;
pub(crate) mod live;
mod pins;
mod read_back;

pub use cleanup::{cleanup, leftovers};
pub(crate) use cleanup::{cleanup_unless_chain, with_kube_proxy};
pub use cli::{NftCli, NftRunner};
pub use read_back::{read_back, LiveTable};

/// Whether Ferry's table can be written for `family` here (the nftables and userspace modes).
/// Upstream: `knftables.New` checking `nft --check add table <family> kube-proxy`.
pub(crate) fn table_supported(family: IpFamily) -> Result<(), Unsupported> {
    kernel_has(family)?;
    succeeds(
        "nft",
        &["--check", "add", "table", nft_family(family), TABLE],
    )
}

/// What writing Ferry's table needs: the `nft` tool (the table's skeleton), and CAP_NET_ADMIN
/// for it and for Ferry's nfnetlink batches.
pub(crate) fn table_requirements() -> Requirements {
    Requirements {
        tools: vec![Tool::new("nft", "nftables")],
        capabilities: vec![Capability::NetAdmin],
    }
}

/// Keeps Ferry's table of one family in the kernel equal to the desired ruleset.
pub struct NftDataplane<R: NftRunner = NftCli> {
    runner: R,
    /// What the kernel holds, when known (after a successful sync by this process).
    installed: Option<Ruleset>,
    /// The session affinity record elements (`frontend . endpoint`) of what the kernel holds,
    /// kept when `installed` is forgotten before a resync: a full sync deletes stale pins only
    /// when one of these goes. `None` when unknown (start-up, after a failure).
    pin_backing: Option<HashSet<Key>>,
    /// Dispatch chains and elements go here when open (see [`crate::netlink`]); without it
    /// every sync goes through `nft -f` (see [`Transaction::full`]).
    netlink: Option<NetlinkSocket>,
}

impl NftDataplane<NftCli> {
    /// An applier in the current network namespace: the table's skeleton through the `nft`
    /// tool, dispatch chains and elements over a long-lived netlink socket.
    pub fn new() -> Self {
        let mut dp = Self::with_runner(NftCli::default());
        match NetlinkSocket::open() {
            Ok(sock) => dp.netlink = Some(sock),
            Err(e) => tracing::warn!(error = %e, "no netlink socket: every sync uses nft -f"),
        }
        dp
    }
}

impl Default for NftDataplane<NftCli> {
    fn default() -> Self {
        Self::new()
    }
}

impl<R: NftRunner> Applier for NftDataplane<R> {
    fn needs_full(&mut self, compiler: &NodeCompiler) -> Result<bool, Error> {
        Ok(match &self.installed {
            Some(installed) => !installed.same_base(&NodeRules::new(compiler).base()),
            None => true,
        })
    }

    /// The table and every chain this process installed are there (one netlink chain dump:
    /// `nft flush ruleset` and a deleted table leave none), and each top-level chain holds
    /// the rules written into it (one rule dump of that chain each: `nft flush chain` keeps
    /// the chain but empties it). See [`canary`].
    fn intact(&mut self) -> Result<bool, Error> {
        let Some(installed) = self.installed.as_ref() else {
            return Ok(true);
        };
        let family = installed.family;
        let existing = match self.netlink.as_mut() {
            Some(sock) => Some(sock.chains(family)?),
            None => self.runner.chains(family)?,
        };
        let Some(existing) = existing else {
            return Ok(true);
        };
        let (netlink, runner) = (&mut self.netlink, &mut self.runner);
        let damage = canary::first_damage(installed, &existing, |chain| match netlink {
            Some(sock) => Ok(Some(sock.rule_count(family, chain)?)),
            None => runner.rule_count(family, chain),
        })?;
        let Some(damage) = damage else {
            return Ok(true);
        };
        tracing::info!(
            ip_family = family.as_str(),
            "{damage}: resyncing everything"
        );
        self.forget_installed();
        Ok(false)
    }

    fn sync_full(
        &mut self,
        compiler: &NodeCompiler,
        state: &ClusterState,
    ) -> Result<SyncReport, Error> {
        // Free the installed ruleset before compiling the new one: the kernel keeps its
        // rules until the new ones replace them, and the next sync is full if this one fails.
        self.forget_installed();
        self.apply_full(NodeRules::new(compiler).full(state))
    }

    fn sync_partial(
        &mut self,
        compiler: &NodeCompiler,
        state: &ClusterState,
        dirty: &BTreeSet<ServiceName>,
    ) -> Result<SyncReport, Error> {
        let rules = NodeRules::new(compiler);
        let changes = dirty
            .iter()
            .map(|name| (name.clone(), rules.service(state, name)))
            .collect();
        self.apply_changes(changes)
    }
}

impl<R: NftRunner> NftDataplane<R> {
    /// An applier with a given runner.
    pub fn with_runner(runner: R) -> Self {
        Self {
            runner,
            installed: None,
            pin_backing: None,
            netlink: None,
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

    /// Whether Ferry's table, installed by this process, is gone from the kernel (someone
    /// deleted it): one netlink dump of its chain names. False when nothing was installed or
    /// without netlink.
    pub fn table_gone(&mut self) -> Result<bool, Error> {
        let (Some(installed), Some(sock)) = (&self.installed, self.netlink.as_mut()) else {
            return Ok(false);
        };
        Ok(sock.chains(installed.family)?.is_empty())
    }

    /// Drops what this process believes the kernel holds (the next sync must be full). A full
    /// sync calls it before compiling, so that it never holds two whole rulesets.
    pub fn forget_installed(&mut self) {
        self.installed = None;
    }

    /// Makes the table equal to `desired`: `nft -f` writes the skeleton (table, base and fixed
    /// chains with their rules, set declarations), then one netlink batch swaps in the
    /// dispatch chains and every element and deletes chains no longer wanted. Until the batch
    /// commits, the kernel keeps the dispatch chains and elements it had (or, on a fresh node,
    /// has none yet). Falls back to one `nft -f` run that recreates the table when the
    /// skeleton's declarations conflict with the table's (an upgrade), or without netlink.
    pub fn apply_full(&mut self, desired: Ruleset) -> Result<SyncReport, Error> {
        // Forget the old state first: it is stale whatever happens below, and freeing it
        // keeps a resync from holding two whole rulesets.
        self.installed = None;
        let start = Instant::now();
        // Session affinity pins (kernel-written, never flushed in place) whose endpoint the new
        // ruleset no longer backs are deleted before the sync and again after it (pins
        // recorded meanwhile). At start-up (a table left by an earlier run) any may be.
        let backing = pins::record_keys(&desired);
        let sweep = self
            .pin_backing
            .take()
            .is_none_or(|before| before.iter().any(|k| !backing.contains(k)));
        if sweep {
            pins::sweep(&mut self.runner, desired.family, &backing);
        }
        let report = self.write_full(&desired, start)?;
        if sweep {
            pins::sweep(&mut self.runner, desired.family, &backing);
        }
        self.pin_backing = Some(backing);
        self.installed = Some(desired);
        Ok(report)
    }

    /// In place when netlink is open; otherwise, or when that fails, by recreating the table.
    /// The fallbacks are logged only when one of them succeeds: a sync that fails every way is
    /// one error, which the caller logs (at a limited rate while it keeps failing).
    fn write_full(&mut self, desired: &Ruleset, start: Instant) -> Result<SyncReport, Error> {
        if self.netlink.is_none() {
            return self.recreate(desired, start);
        }
        let in_place = match self.in_place(desired, start) {
            Ok(report) => return Ok(report),
            Err(e) => e,
        };
        // E.g. a set declared with another type by an older version, or a chain something
        // else still refers to: start from a clean table (the pins go with it).
        let recreate = match self.recreate(desired, start) {
            Ok(report) => {
                tracing::warn!(error = %in_place, "full sync in place failed: recreated the table in one nft run");
                return Ok(report);
            }
            Err(e) => e,
        };
        // nft 1.0.6 cannot write every dispatch rule itself (IPv6 session affinity's `update`, see
        // docs/src/modes/nft-layout.md): delete the table, then the usual skeleton and netlink
        // batch.
        let f = nft_family(desired.family);
        self.runner.run(&format!(
            "add table {f} {TABLE}\ndelete table {f} {TABLE}\n"
        ))?;
        let report = self.in_place(desired, start)?;
        tracing::warn!(in_place = %in_place, recreate = %recreate, "full sync in place and recreating the table with nft failed: deleted it, then skeleton and netlink");
        Ok(report)
    }

    /// The skeleton through `nft -f`, then everything else in one netlink batch (in several
    /// transactions when the table is new: see [`NetlinkSocket::apply_full`]).
    fn in_place(&mut self, desired: &Ruleset, start: Instant) -> Result<SyncReport, Error> {
        let sock = self.netlink.as_mut().ok_or(Error::NoNetlink)?;
        let fresh = sock.chains(desired.family)?.is_empty();
        let skeleton = Transaction::skeleton(desired);
        self.runner.run(&skeleton.text)?;
        let sock = self.netlink.as_mut().ok_or(Error::NoNetlink)?;
        let existing = sock.chains(desired.family)?;
        let elements = sock.apply_full(desired, &existing, fresh)?;
        Ok(SyncReport {
            kind: SyncKind::Full,
            chains_written: skeleton.chains_written + desired.dispatch_chains().count(),
            elements_changed: skeleton.elements_changed + elements,
            script_bytes: skeleton.text.len(),
            netlink: true,
            apply_time: start.elapsed(),
            table_rules: Vec::new(),
        })
    }

    /// The whole table in one `nft -f` run that deletes and recreates it (nft 1.0.6 can write
    /// the dispatch rules only together with their maps).
    fn recreate(&mut self, desired: &Ruleset, start: Instant) -> Result<SyncReport, Error> {
        let tx = Transaction::full(desired, &[], true);
        let mut report = self.run(SyncKind::Full, &tx)?;
        report.apply_time = start.elapsed();
        Ok(report)
    }

    /// Replaces the given services' rules, touching nothing else. Requires a previous
    /// successful sync ([`Error::NoBaseline`] otherwise). Over netlink, new dispatch chains,
    /// elements and chains that lost their last user go in one batch; without netlink a new
    /// dispatch chain means recreating the table.
    pub fn apply_changes(
        &mut self,
        changes: BTreeMap<ServiceName, Option<ServiceRules>>,
    ) -> Result<SyncReport, Error> {
        // Taken out while the change is applied: if it fails, the kernel keeps its old state
        // but this process no longer knows it, and the next sync is full.
        let mut installed = self.installed.take().ok_or(Error::NoBaseline)?;
        let family = installed.family;
        let pins = pins::Update::plan(&installed, self.pin_backing.take(), &changes);
        pins.sweep(&mut self.runner, family);
        let delta = Delta::between(&installed, &changes);
        let written = self.write_delta(family, &delta)?;
        drop(delta);
        for (name, rules) in changes {
            installed.set_service(name, rules);
        }
        let Some(report) = written else {
            // Without netlink a dispatch chain's rules can only be written together with the
            // maps (see apply_full): a full sync of the updated ruleset.
            return self.apply_full(installed);
        };
        pins.sweep(&mut self.runner, family);
        self.installed = Some(installed);
        self.pin_backing = pins.backing;
        Ok(report)
    }

    /// Writes a delta: over netlink when open and the delta is encodable, else with `nft -f`.
    /// `None` when it adds dispatch chains and only `nft` can write it: the caller rewrites
    /// the whole table.
    fn write_delta(
        &mut self,
        family: IpFamily,
        delta: &Delta<'_>,
    ) -> Result<Option<SyncReport>, Error> {
        if delta.add.is_empty() && delta.delete.is_empty() && delta.elements_only() {
            return Ok(Some(SyncReport::nothing(SyncKind::Partial)));
        }
        let start = Instant::now();
        if let Some(sock) = self.netlink.as_mut() {
            match sock.apply(family, delta) {
                Ok(()) => {
                    return Ok(Some(SyncReport {
                        kind: SyncKind::Partial,
                        chains_written: delta.add_chains.len(),
                        elements_changed: delta.elements_changed(),
                        script_bytes: 0,
                        netlink: true,
                        apply_time: start.elapsed(),
                        table_rules: Vec::new(),
                    }))
                }
                Err(NetlinkError::Unencodable(what)) => {
                    tracing::debug!(what, "delta not encodable over netlink: using nft -f");
                }
                Err(e) => return Err(e.into()),
            }
        }
        if !delta.add_chains.is_empty() {
            return Ok(None);
        }
        self.run(SyncKind::Partial, &delta.transaction(family))
            .map(Some)
    }

    fn run(&mut self, kind: SyncKind, tx: &Transaction) -> Result<SyncReport, Error> {
        let start = Instant::now();
        self.runner.run(&tx.text)?;
        Ok(SyncReport {
            kind,
            chains_written: tx.chains_written,
            elements_changed: tx.elements_changed,
            script_bytes: tx.text.len(),
            netlink: false,
            apply_time: start.elapsed(),
            table_rules: Vec::new(),
        })
    }
}

/// The chain only nftables mode's layout of Ferry's table has: a cleanup that must leave the
/// userspace mode's table asks for it.
pub(crate) const NFTABLES_LAYOUT_CHAIN: &str = "services";

/// The chain only the userspace mode's layout of Ferry's table has.
pub(crate) const USERSPACE_LAYOUT_CHAIN: &str = "portals-container";
