//! One sync round: every family's sync, what follows each success (metrics, the UDP conntrack
//! cleanup), and the round's log line. A failure is not logged here: the agent logs failures
//! at a limited rate (see [`crate::backoff`]).

use std::time::{Duration, Instant, SystemTime};

use ferry_compile::conntrack::StaleFlowFilter;
use ferry_dataplane::{Applier, SyncKind, SyncReport};
use ferry_model::IpFamily;

use crate::metrics::Metrics;
use crate::status::history::Attempt;
use crate::sync::Syncer;

/// What one round (every family) did.
#[derive(Debug, Default)]
pub struct Round {
    /// Some family's sync failed (its last good rules stay; the round is retried).
    pub failed: bool,
    /// Some family's sync was full.
    pub full: bool,
    /// Each family's attempt.
    pub attempts: Vec<Attempt>,
    chains_written: usize,
    elements_changed: usize,
    script_bytes: usize,
    /// Number of families synced.
    families: usize,
    /// How long the round took.
    duration: Duration,
}

impl Round {
    fn add(&mut self, r: &SyncReport) {
        self.full |= r.kind == SyncKind::Full;
        self.chains_written += r.chains_written;
        self.elements_changed += r.elements_changed;
        self.script_bytes += r.script_bytes;
        self.families += 1;
    }

    /// Why each family that failed did.
    pub fn errors(&self) -> impl Iterator<Item = (IpFamily, &str)> {
        self.attempts
            .iter()
            .filter_map(|a| a.result.as_ref().err().map(|e| (a.family, e.as_str())))
    }

    /// The round's `synced rules` line.
    pub fn log(&self, services_changed: usize) {
        tracing::info!(
            kind = ?if self.full { SyncKind::Full } else { SyncKind::Partial },
            services_changed,
            duration_ms = self.duration.as_secs_f64() * 1e3,
            chains_written = self.chains_written,
            elements_changed = self.elements_changed,
            script_bytes = self.script_bytes,
            families = self.families,
            "synced rules"
        );
    }
}

/// Syncs every family (`periodic`: the round every `syncPeriod`, which also checks that the
/// rules are still in the kernel, see [`crate::sync::FamilySync::sync`]), then, for each that
/// succeeded, records its metrics and deletes the UDP conntrack flows it made stale.
pub fn run<A: Applier>(syncer: &mut Syncer<A>, periodic: bool, metrics: &Metrics) -> Round {
    let started = Instant::now();
    let mut round = Round::default();
    let (state, families) = syncer.split();
    for family_sync in families {
        let family = family_sync.family();
        let trigger_times = family_sync.pending_changes().trigger_times.clone();
        let began = Instant::now();
        let result = family_sync.sync(state, periodic);
        let duration = began.elapsed();
        metrics.sync_ran_for(family, result.as_ref().ok().map(|r| r.kind), duration);
        round.attempts.push(Attempt {
            family,
            result: result.as_ref().map(|r| r.kind).map_err(|e| e.with_causes()),
            duration,
        });
        match result {
            Ok(report) => {
                metrics.sync_succeeded_for(family, SystemTime::now(), &trigger_times);
                metrics.table_rules_for(family, &report.table_rules);
                metrics.no_local_endpoints_for(family, family_sync.status().no_local_endpoints());
                // Stale UDP flows go once the new rules are in; before the "synced rules"
                // line, so whoever waits for that line sees the cleanup done too.
                let stale = family_sync.take_stale_flows();
                if !clean_stale_flows(family, &stale, metrics) {
                    family_sync.conntrack_failed();
                }
                round.add(&report);
            }
            Err(_) => {
                if family_sync.attempted() == Some(SyncKind::Partial) {
                    metrics.partial_sync_failed(family);
                }
                round.failed = true;
            }
        }
    }
    round.duration = started.elapsed();
    round
}

/// Deletes the flows `filters` find stale in this network namespace. Returns false (after
/// logging and counting it) when the cleanup failed.
fn clean_stale_flows(family: IpFamily, filters: &[StaleFlowFilter], metrics: &Metrics) -> bool {
    if filters.is_empty() {
        return true;
    }
    let started = Instant::now();
    let result = ferry_dataplane::conntrack::delete_stale_udp(family, filters);
    let elapsed = started.elapsed();
    let (report, ok) = match &result {
        Ok(report) => (*report, true),
        Err(ferry_dataplane::conntrack::ConntrackError::Delete { report, .. }) => (*report, false),
        Err(_) => (Default::default(), false),
    };
    metrics.conntrack_cleaned(family, elapsed, report.deleted as u64, ok);
    match result {
        Ok(report) => tracing::info!(
            ip_family = family.as_str(),
            frontends = filters.len(),
            entries = report.dumped,
            stale = report.stale,
            deleted = report.deleted,
            already_gone = report.already_gone,
            duration_ms = elapsed.as_secs_f64() * 1e3,
            "cleaned UDP conntrack entries"
        ),
        Err(e) => tracing::warn!(
            frontends = filters.len(),
            "UDP conntrack cleanup failed (checked again at the next sync): {e}"
        ),
    }
    ok
}
