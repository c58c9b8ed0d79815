//! The nftables applier.

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

use ferry_compile::nft::{Delta, Key, Ruleset, ServiceRules, Transaction, TABLE};

use crate::netlink::{NetlinkError, NetlinkSocket};
use crate::pins;

mod cli;
pub use cli::{NftCli, NftRunner};
use ferry_model::{IpFamily, ServiceName};

/// Why a transaction was not applied. The kernel holds what it held before.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// `nft` could not be started.
    #[error("could not run {program}")]
    Spawn {
        /// The program.
        program: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// An incremental sync was asked for before any full sync succeeded.
    #[error("no full sync has succeeded yet; an incremental sync has nothing to start from")]
    NoBaseline,
    /// No netlink socket is open.
    #[error("no nfnetlink socket")]
    NoNetlink,
    /// The kernel rejected a batch sent over netlink.
    #[error("netlink batch failed: {0}")]
    Netlink(#[from] NetlinkError),
    /// `nft` rejected the transaction.
    #[error("{program} -f - failed ({status}): {stderr}")]
    Rejected {
        /// The program.
        program: String,
        /// Its exit status.
        status: String,
        /// What it printed.
        stderr: String,
    },
}

/// Full or incremental.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncKind {
    /// Everything rewritten.
    Full,
    /// Only changed services.
    Partial,
}

/// What one applied sync did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncReport {
    /// Full or partial.
    pub kind: SyncKind,
    /// Chains whose rules were written.
    pub chains_written: usize,
    /// Set and map elements added or deleted.
    pub elements_changed: usize,
    /// Bytes of nft script (0 when sent over netlink).
    pub script_bytes: usize,
    /// True when the change went over Ferry's netlink socket instead of `nft -f`.
    pub netlink: bool,
    /// Time spent in the kernel transaction (including the nft tool).
    pub apply_time: Duration,
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

    /// Drops what this process believes the kernel holds (the next sync must be full). A full
    /// sync calls it before compiling, so that it never holds two whole rulesets.
    pub fn forget_installed(&mut self) {
        self.installed = None;
    }

    /// True when the next sync must be full (start-up, or after a failure).
    pub fn needs_full(&self) -> bool {
        self.installed.is_none()
    }

    /// Makes the table equal to `desired`: `nft -f` writes the skeleton (table, base and fixed
    /// chains with their rules, set declarations), then one netlink batch swaps in the
    /// dispatch chains and every element and deletes chains no longer wanted. Until the batch
    /// commits, the kernel keeps the dispatch chains and elements it had (or, on a fresh node,
    /// has none yet). Falls back to one `nft -f` run that recreates the table when the
    /// skeleton's declarations conflict with the table's (an upgrade), or without netlink.
    pub fn apply_full(&mut self, desired: Ruleset) -> Result<SyncReport, ApplyError> {
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
        let report = if self.netlink.is_none() {
            self.recreate(&desired, start)?
        } else {
            match self.in_place(&desired, start) {
                Ok(report) => report,
                Err(e) => {
                    // E.g. a set declared with another type by an older version, or a chain
                    // something else still refers to: start from a clean table (the pins
                    // go with it).
                    tracing::warn!(error = %e, "full sync in place failed: recreating the table in one nft run");
                    match self.recreate(&desired, start) {
                        Ok(report) => report,
                        // nft 1.0.6 cannot write every dispatch rule itself (IPv6 session
                        // affinity's `update`, see docs/nft-layout.md): delete the table,
                        // then the usual skeleton and netlink batch.
                        Err(e) => {
                            tracing::warn!(error = %e, "recreating the table with nft failed: deleting it, then skeleton and netlink");
                            let f = cli::family_name(desired.family);
                            self.runner.run(&format!(
                                "add table {f} {TABLE}\ndelete table {f} {TABLE}\n"
                            ))?;
                            self.in_place(&desired, start)?
                        }
                    }
                }
            }
        };
        if sweep {
            pins::sweep(&mut self.runner, desired.family, &backing);
        }
        self.pin_backing = Some(backing);
        self.installed = Some(desired);
        Ok(report)
    }

    /// The skeleton through `nft -f`, then everything else in one netlink batch.
    fn in_place(&mut self, desired: &Ruleset, start: Instant) -> Result<SyncReport, ApplyError> {
        let skeleton = Transaction::skeleton(desired);
        self.runner.run(&skeleton.text)?;
        let sock = self.netlink.as_mut().ok_or(ApplyError::NoNetlink)?;
        let existing = sock.chains(desired.family)?;
        let elements = sock
            .apply_full(desired, &existing)
            .map_err(|u| NetlinkError::Unencodable(u.0))??;
        Ok(SyncReport {
            kind: SyncKind::Full,
            chains_written: skeleton.chains_written + desired.dispatch_chains().count(),
            elements_changed: skeleton.elements_changed + elements,
            script_bytes: skeleton.text.len(),
            netlink: true,
            apply_time: start.elapsed(),
        })
    }

    /// The whole table in one `nft -f` run that deletes and recreates it (nft 1.0.6 can write
    /// the dispatch rules only together with their maps).
    fn recreate(&mut self, desired: &Ruleset, start: Instant) -> Result<SyncReport, ApplyError> {
        let tx = Transaction::full(desired, &[], true);
        let mut report = self.run(SyncKind::Full, &tx)?;
        report.apply_time = start.elapsed();
        Ok(report)
    }

    /// Replaces the given services' rules, touching nothing else. Requires a previous
    /// successful sync (see [`needs_full`](Self::needs_full)). Over netlink, new dispatch
    /// chains, elements and chains that lost their last user go in one batch; without
    /// netlink a new dispatch chain means recreating the table.
    pub fn apply_changes(
        &mut self,
        changes: BTreeMap<ServiceName, Option<ServiceRules>>,
    ) -> Result<SyncReport, ApplyError> {
        let Some(installed) = self.installed.as_ref() else {
            return Err(ApplyError::NoBaseline);
        };
        let family = installed.family;
        // Unknown until this sync succeeds.
        let mut backing = self.pin_backing.take();
        if let Some(b) = backing.as_mut() {
            let old = changes.keys().filter_map(|n| installed.services.get(n));
            for key in old.flat_map(pins::service_record_keys) {
                b.remove(&key);
            }
            b.extend(
                changes
                    .values()
                    .flatten()
                    .flat_map(pins::service_record_keys),
            );
        }
        // Pins to endpoints about to go are deleted before they go (a pinned client must not be
        // sent to a removed endpoint), and again after, for pins recorded meanwhile.
        let sweep = pins::may_go_stale(
            changes.keys().filter_map(|n| installed.services.get(n)),
            changes.values().flatten(),
        )
        .then(|| {
            let mut valid = pins::record_keys(installed);
            for name in changes.keys() {
                if let Some(old) = installed.services.get(name) {
                    for e in &old.elements {
                        valid.remove(&e.key);
                    }
                }
            }
            let new = changes.values().flatten();
            valid.extend(new.flat_map(|r| r.elements.iter().map(|e| e.key.clone())));
            valid
        });
        if let Some(valid) = &sweep {
            pins::sweep(&mut self.runner, family, valid);
        }
        let Some(installed) = self.installed.as_ref() else {
            return Err(ApplyError::NoBaseline);
        };
        let delta = Delta::between(installed, &changes);
        let start = Instant::now();
        let mut report = None;
        if delta.add.is_empty() && delta.delete.is_empty() && delta.elements_only() {
            report = Some(SyncReport {
                kind: SyncKind::Partial,
                chains_written: 0,
                elements_changed: 0,
                script_bytes: 0,
                netlink: false,
                apply_time: Duration::ZERO,
            });
        } else if let Some(sock) = self.netlink.as_mut() {
            match sock.apply(installed.family, &delta) {
                Ok(Ok(())) => {
                    report = Some(SyncReport {
                        kind: SyncKind::Partial,
                        chains_written: delta.add_chains.len(),
                        elements_changed: delta.elements_changed(),
                        script_bytes: 0,
                        netlink: true,
                        apply_time: start.elapsed(),
                    });
                }
                Ok(Err(e)) => {
                    // The kernel kept its old state, but ours may be out of date: resync fully.
                    self.installed = None;
                    return Err(e.into());
                }
                // Elements this encoder does not write: handled below.
                Err(_unsupported) => {}
            }
        }
        let report = match report {
            Some(r) => r,
            None if !delta.add_chains.is_empty() => {
                // Without netlink a dispatch chain's rules can only be written together with
                // the maps (see apply_full): a full sync of the updated ruleset.
                drop(delta);
                let Some(mut desired) = self.installed.take() else {
                    return Err(ApplyError::NoBaseline);
                };
                for (name, rules) in changes {
                    desired.set_service(name, rules);
                }
                return self.apply_full(desired);
            }
            None => {
                let tx = delta.transaction(installed.family);
                self.run(SyncKind::Partial, &tx)?
            }
        };
        if let Some(installed) = self.installed.as_mut() {
            for (name, rules) in changes {
                installed.set_service(name, rules);
            }
        }
        if let Some(valid) = &sweep {
            pins::sweep(&mut self.runner, family, valid);
        }
        self.pin_backing = backing;
        Ok(report)
    }

    fn run(&mut self, kind: SyncKind, tx: &Transaction) -> Result<SyncReport, ApplyError> {
        let start = Instant::now();
        let result = self.runner.run(&tx.text);
        if result.is_err() {
            // The kernel kept its old state, but ours may be out of date: resync fully.
            self.installed = None;
        }
        result?;
        Ok(SyncReport {
            kind,
            chains_written: tx.chains_written,
            elements_changed: tx.elements_changed,
            script_bytes: tx.text.len(),
            netlink: false,
            apply_time: start.elapsed(),
        })
    }
}

/// Removes Ferry's tables (both families) from the current network namespace. Absent tables
/// are not an error.
pub fn cleanup() -> Result<(), ApplyError> {
    let mut cli = NftCli::default();
    for family in [IpFamily::V4, IpFamily::V6] {
        let name = match family {
            IpFamily::V4 => "ip",
            IpFamily::V6 => "ip6",
        };
        // "add" first makes "delete" succeed whether or not the table exists.
        cli.run(&format!(
            "add table {name} {TABLE}\ndelete table {name} {TABLE}\n"
        ))?;
    }
    Ok(())
}
