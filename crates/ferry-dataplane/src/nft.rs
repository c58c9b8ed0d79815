//! The nftables applier.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ferry_compile::nft::{Delta, Ruleset, ServiceRules, Transaction, TABLE};

use crate::netlink::{ElementSocket, NetlinkError};
use crate::pins;
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
    /// The kernel rejected an element batch sent over netlink.
    #[error("element batch failed")]
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

/// Runs nft scripts. The real one is [`NftCli`]; tests substitute a recorder.
pub trait NftRunner: Send {
    /// Applies one script atomically.
    fn run(&mut self, script: &str) -> Result<(), ApplyError>;

    /// `nft -j list map <family> ferry <map>`: the map with the elements the kernel added
    /// (session affinity pins). A runner without a kernel has none.
    fn list_map(&mut self, _family: IpFamily, _map: &str) -> Result<String, ApplyError> {
        Ok(String::new())
    }

    /// `nft -j list chains <family>`: the chains of every table of the family (names only: a
    /// few milliseconds, where listing sets would read every element). A runner without a
    /// kernel has none.
    fn list_chains(&mut self, _family: IpFamily) -> Result<String, ApplyError> {
        Ok(String::new())
    }
}

/// Runs `nft -f -` (atomic per invocation).
#[derive(Debug, Clone)]
pub struct NftCli {
    program: String,
}

impl Default for NftCli {
    fn default() -> Self {
        Self {
            program: "nft".to_owned(),
        }
    }
}

impl NftRunner for NftCli {
    fn run(&mut self, script: &str) -> Result<(), ApplyError> {
        let spawn_err = |source| ApplyError::Spawn {
            program: self.program.clone(),
            source,
        };
        let mut child = Command::new(&self.program)
            .args(["-f", "-"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(spawn_err)?;
        if let Some(mut stdin) = child.stdin.take() {
            stdin.write_all(script.as_bytes()).map_err(spawn_err)?;
        }
        let out = child.wait_with_output().map_err(spawn_err)?;
        if out.status.success() {
            Ok(())
        } else {
            Err(ApplyError::Rejected {
                program: self.program.clone(),
                status: out.status.to_string(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            })
        }
    }

    fn list_map(&mut self, family: IpFamily, map: &str) -> Result<String, ApplyError> {
        self.list(&["-j", "list", "map", family_name(family), TABLE, map])
    }

    fn list_chains(&mut self, family: IpFamily) -> Result<String, ApplyError> {
        self.list(&["-j", "list", "chains", family_name(family)])
    }
}

fn family_name(family: IpFamily) -> &'static str {
    match family {
        IpFamily::V4 => "ip",
        IpFamily::V6 => "ip6",
    }
}

impl NftCli {
    /// Runs an `nft` listing and returns its stdout.
    fn list(&self, args: &[&str]) -> Result<String, ApplyError> {
        let out = Command::new(&self.program)
            .args(args)
            .output()
            .map_err(|source| ApplyError::Spawn {
                program: self.program.clone(),
                source,
            })?;
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(ApplyError::Rejected {
                program: self.program.clone(),
                status: out.status.to_string(),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            })
        }
    }
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
    /// Element-only deltas go here when open (see [`crate::netlink`]).
    elements: Option<ElementSocket>,
    /// The chains the kernel holds, when this process committed them: a full sync then
    /// rebuilds the table in place (keeping session affinity pins) instead of recreating it.
    /// Kept across a failed transaction, which changes nothing in the kernel.
    committed_chains: Option<Vec<String>>,
}

impl NftDataplane<NftCli> {
    /// An applier using the `nft` tool in the current network namespace.
    /// Element-only incremental syncs go over a long-lived netlink socket; everything else
    /// through `nft -f`.
    pub fn new() -> Self {
        let mut dp = Self::with_runner(NftCli::default());
        match ElementSocket::open() {
            Ok(sock) => dp.elements = Some(sock),
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
            elements: None,
            committed_chains: None,
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

    /// True when the next sync must be full (start-up, or after a failure).
    pub fn needs_full(&self) -> bool {
        self.installed.is_none()
    }

    /// Makes the table equal to `desired`. The first sync of a process recreates the table in
    /// the same transaction (what an earlier run left is unknown); later ones flush and reload
    /// Ferry's objects and delete chains that are no longer wanted.
    pub fn apply_full(&mut self, desired: Ruleset) -> Result<SyncReport, ApplyError> {
        // nft 1.0.6 cannot add a rule that reads one of the `typeof` endpoint maps once that
        // map exists in the kernel ("conflicting protocols specified: tcp vs. th"), so rules
        // are only ever written together with their maps: when this process knows the table's
        // chains, the table is rebuilt in place, recreating those maps and keeping the session
        // affinity pins; otherwise (start-up) it is recreated. Established connections keep
        // their conntrack NAT state either way.
        let before = self.installed.take();
        if self.committed_chains.is_none() {
            // Start-up: a table an earlier run left is rebuilt in place too, its pins kept
            // (if the kernel refuses, e.g. a set of another type, it is recreated below).
            self.committed_chains = pins::kernel_chains(&mut self.runner, desired.family);
        }
        let rebuild = self.committed_chains.as_ref().map(|known| {
            let wanted: BTreeSet<&str> = desired.chain_names().collect();
            let stale: Vec<String> = known
                .iter()
                .filter(|c| !wanted.contains(c.as_str()))
                .cloned()
                .collect();
            Transaction::full(&desired, &stale, false)
        });
        let sweep = rebuild.is_some()
            && before
                .as_ref()
                .is_none_or(|b| pins::may_go_stale(b.services.values(), desired.services.values()));
        let valid = sweep.then(|| pins::record_keys(&desired));
        if let Some(valid) = &valid {
            pins::sweep(&mut self.runner, desired.family, valid);
        }
        let report = match rebuild {
            Some(tx) => match self.run(SyncKind::Full, &tx) {
                Ok(report) => report,
                Err(e) => {
                    tracing::warn!(error = %e, "in-place full sync failed; recreating the table");
                    self.run(SyncKind::Full, &Transaction::full(&desired, &[], true))?
                }
            },
            None => self.run(SyncKind::Full, &Transaction::full(&desired, &[], true))?,
        };
        if let Some(valid) = &valid {
            pins::sweep(&mut self.runner, desired.family, valid);
        }
        self.committed_chains = Some(desired.chain_names().map(str::to_owned).collect());
        self.installed = Some(desired);
        Ok(report)
    }

    /// Replaces the given services' rules, touching nothing else. Requires a previous
    /// successful sync (see [`needs_full`](Self::needs_full)).
    pub fn apply_changes(
        &mut self,
        changes: BTreeMap<ServiceName, Option<ServiceRules>>,
    ) -> Result<SyncReport, ApplyError> {
        let Some(installed) = self.installed.as_ref() else {
            return Err(ApplyError::NoBaseline);
        };
        let family = installed.family;
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
        if let Some(sock) = self.elements.as_mut() {
            match sock.apply(installed.family, &delta) {
                Ok(Ok(())) => {
                    report = Some(SyncReport {
                        kind: SyncKind::Partial,
                        chains_written: 0,
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
                // Chain changes (or an interval set): handled below.
                Err(_unsupported) => {}
            }
        }
        let report = match report {
            Some(r) => r,
            None if !delta.add_chains.is_empty() => {
                // A dispatch chain comes or goes: its rules must be written with the maps
                // (see apply_full), so this is a full sync of the updated ruleset.
                drop(delta);
                let mut desired = installed.clone();
                for (name, rules) in changes {
                    desired.set_service(name, rules);
                }
                return self.apply_full(desired);
            }
            None => {
                let tx = delta.transaction(installed.family);
                if tx.is_empty() {
                    return Ok(SyncReport {
                        kind: SyncKind::Partial,
                        chains_written: 0,
                        elements_changed: 0,
                        script_bytes: 0,
                        netlink: false,
                        apply_time: Duration::ZERO,
                    });
                }
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
