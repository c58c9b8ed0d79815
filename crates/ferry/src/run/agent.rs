//! The agent's task: the single owner of the cluster state. It applies the source's events,
//! runs sync rounds when the [`Schedule`] says (backing off after failures, logging them at a
//! limited rate), answers `/status`, and after its first successful round removes what the
//! other modes left.

use std::sync::Arc;
use std::time::SystemTime;

use anyhow::Context as _;
use tokio::signal::unix::{signal, Signal, SignalKind};
use tokio::sync::{mpsc, Semaphore};
use tokio::time::{sleep_until, Instant};

use ferry_dataplane::cleanup::Scope;
use ferry_dataplane::mode::{ModeEntry, NodeMode};
use ferry_dataplane::modes::MODES;
use ferry_model::IpFamily;
use ferry_source::probe::book::lock;
use ferry_source::SourceEvent;

use super::presence::Presence;
use crate::backoff::{LogDecision, RateLimitedLog, Schedule, FAILURE_LOG_INTERVAL};
use crate::config::Config;
use crate::health::ProxyHealth;
use crate::healthcheck::ServiceHealthServers;
use crate::metrics::Metrics;
use crate::round::Round;
use crate::run::SharedBook;
use crate::status::client::Request;
use crate::status::{collect, History, Inputs, SourceStatus};
use crate::sync::Syncer;

/// What the agent is made of, before it starts.
pub struct Parts {
    /// The configuration.
    pub config: Config,
    /// The mode's line in the mode table.
    pub mode_entry: &'static ModeEntry,
    /// The mode, prepared on this node (shared with the `/status` answers).
    pub mode: Arc<dyn NodeMode>,
    /// The families programmed.
    pub families: Vec<IpFamily>,
    /// The state and the family syncs.
    pub syncer: Syncer,
    /// The proxy's health.
    pub health: ProxyHealth,
    /// The metrics.
    pub metrics: Metrics,
    /// `--manifests` PATH's presence, for a manifest source.
    pub presence: Option<Presence>,
    /// The source, described.
    pub source: String,
    /// The readiness probes' results (standalone mode).
    pub probes: Option<SharedBook>,
    /// The look for kube-proxy's leftovers, running beside the source's first read (it reads
    /// every table: seconds on a node kube-proxy programmed for a large cluster); joined
    /// before the first cleanup of the other modes, so it reports what was there.
    pub leftovers: Option<std::thread::JoinHandle<()>>,
}

impl Parts {
    /// The agent, nothing synced yet.
    pub fn start(self) -> Agent {
        let health_checks = ServiceHealthServers::new(self.health.clone());
        let schedule = Schedule::new(
            Instant::now(),
            self.config.min_sync_period,
            self.config.sync_period,
        );
        Agent {
            parts: self,
            health_checks,
            schedule,
            failure_log: RateLimitedLog::new(FAILURE_LOG_INTERVAL),
            history: History::default(),
            other_modes_cleaned: false,
            status_turn: Arc::new(Semaphore::new(1)),
        }
    }
}

/// The running agent.
pub struct Agent {
    parts: Parts,
    health_checks: ServiceHealthServers,
    schedule: Schedule,
    failure_log: RateLimitedLog,
    history: History,
    other_modes_cleaned: bool,
    /// One `/status` answer is computed at a time (each reads the whole ruleset back).
    status_turn: Arc<Semaphore>,
}

/// Why the agent woke up.
enum Wake {
    Event(Option<SourceEvent>),
    Status(Request),
    Due,
    Stop,
}

impl Agent {
    /// Runs until SIGTERM or SIGINT (`Ok`), or until the source stops (an error).
    pub async fn run(
        &mut self,
        mut events: mpsc::Receiver<SourceEvent>,
        mut status: mpsc::Receiver<Request>,
    ) -> anyhow::Result<()> {
        let mut signals = Signals::new()?;
        // No sync before the source has delivered its first complete view: a half-programmed
        // node would reject traffic to services it has not read yet. Both sources send a
        // Resync first: the manifests after the first scan, the API once every watch has
        // listed once.
        let mut viewed = false;
        loop {
            let due = viewed.then(|| self.schedule.due(Instant::now()));
            match next(&mut events, &mut status, &mut signals, due).await {
                Wake::Event(Some(ev)) => {
                    if self.parts.syncer.handle(ev) || !viewed {
                        self.schedule.changed();
                        self.queued();
                    }
                    viewed = true;
                }
                Wake::Event(None) if !viewed => {
                    anyhow::bail!("the source stopped before its first complete view")
                }
                Wake::Event(None) => anyhow::bail!("the source stopped"),
                Wake::Status(reply) => self.status(reply),
                Wake::Due => self.round().await,
                Wake::Stop => return Ok(()),
            }
        }
    }

    /// Closes the health-check NodePorts.
    pub async fn stop(&mut self) {
        self.health_checks.close_all().await;
    }

    /// One sync round, and what follows it.
    async fn round(&mut self) {
        let started = Instant::now();
        let services = self.parts.syncer.state().services().count();
        if let Some(p) = &mut self.parts.presence {
            p.check(started, services);
        }
        let periodic = self.schedule.start(started);
        let changed = self.parts.syncer.pending_services();
        let round = crate::round::run(&mut self.parts.syncer, periodic, &self.parts.metrics);
        self.history.record(&round.attempts, SystemTime::now());
        if round.failed {
            return self.failed(&round);
        }
        let failures = self.schedule.succeeded(started, periodic);
        if failures > 0 {
            self.failure_log.recovered();
            tracing::info!(
                failures,
                "sync succeeded again after {failures} failed rounds"
            );
        }
        let parts = &self.parts;
        parts.health.updated();
        parts
            .metrics
            .changes(parts.syncer.primary().pending_changes());
        self.health_checks.sync(&parts.syncer.health_checks()).await;
        parts
            .metrics
            .health_check_servers(self.health_checks.open().len());
        round.log(changed);
        if !self.other_modes_cleaned {
            self.other_modes_cleaned = true;
            if let Some(look) = self.parts.leftovers.take() {
                let _ = look.join();
            }
            start_cleanup_of_other_modes(self.parts.mode_entry);
        }
    }

    /// A round failed: the last good rules stay; retry after the back-off, and say so (at a
    /// limited rate).
    fn failed(&mut self, round: &Round) {
        let now = Instant::now();
        let wait = self.schedule.failed(now);
        if let LogDecision::Log { suppressed } = self.failure_log.failure(now) {
            for (family, e) in round.errors() {
                tracing::error!(
                    ip_family = family.as_str(),
                    retry_in = ?wait,
                    failures_not_logged = suppressed,
                    "sync failed, keeping the last good rules: {e}"
                );
            }
        }
    }

    /// A change is waiting for a sync: start the health clock, export the pending changes, and
    /// follow this node's eligibility (its Node may be what changed).
    fn queued(&self) {
        let p = &self.parts;
        p.health.queued_update();
        p.health.sync_node(p.syncer.this_node());
        let now = SystemTime::now();
        for family in p.syncer.families() {
            p.metrics.sync_queued_for(family, now);
        }
        p.metrics.changes(p.syncer.primary().pending_changes());
    }

    /// Answers `ferry status` as of now, off this task: reading the kernel back and comparing
    /// it with a fresh compile takes seconds at 10 000 Services (tens of seconds with
    /// iptables-legacy on a loaded node), and syncs must not wait for it. The answer is
    /// computed from a snapshot of the state (shared objects: cheap to copy) on a blocking
    /// thread, one status at a time.
    fn status(&self, reply: Request) {
        let p = &self.parts;
        let state = p.syncer.state().clone();
        let problem = p
            .presence
            .as_ref()
            .and_then(|pr| pr.problem(state.services().count()));
        let book = p.probes.as_deref().map(|b| lock(b).clone());
        let (config, mode, families) = (p.config.clone(), p.mode.clone(), p.families.clone());
        let (history, source) = (self.history.clone(), p.source.clone());
        let one_at_a_time = self.status_turn.clone();
        tokio::spawn(async move {
            let Ok(_turn) = one_at_a_time.acquire_owned().await else {
                return;
            };
            let status = tokio::task::spawn_blocking(move || {
                collect(&Inputs {
                    probes: book.as_ref(),
                    config: &config,
                    mode: mode.as_ref(),
                    families: &families,
                    state: &state,
                    history: &history,
                    source: SourceStatus {
                        description: source,
                        problem,
                    },
                })
            })
            .await;
            if let Ok(status) = status {
                let _ = reply.send(status);
            }
        });
    }
}

/// SIGTERM and SIGINT, listened to for the agent's whole life: a signal that arrives while a
/// round holds the agent (a long sync, the removal of another mode's rules) is kept until the
/// agent looks again. (A listener made afresh at each look, as `tokio::signal::ctrl_c()` is,
/// misses what came before it: Ferry went on running after a Ctrl-C sent during the 13 s
/// removal of kube-proxy's rules for 3 000 Services.)
struct Signals {
    term: Signal,
    int: Signal,
}

impl Signals {
    fn new() -> anyhow::Result<Self> {
        Ok(Self {
            term: signal(SignalKind::terminate()).context("installing the SIGTERM handler")?,
            int: signal(SignalKind::interrupt()).context("installing the SIGINT handler")?,
        })
    }

    /// The next SIGTERM or SIGINT, or one that came since the last.
    async fn recv(&mut self) {
        tokio::select! {
            _ = self.term.recv() => {}
            _ = self.int.recv() => {}
        }
    }
}

/// Waits for whatever comes first; `due`: when a round is due (`None`: none yet).
async fn next(
    events: &mut mpsc::Receiver<SourceEvent>,
    status: &mut mpsc::Receiver<Request>,
    signals: &mut Signals,
    due: Option<Instant>,
) -> Wake {
    tokio::select! {
        ev = events.recv() => Wake::Event(ev),
        Some(reply) = status.recv() => Wake::Status(reply),
        () = sleep_until(due.unwrap_or_else(Instant::now)), if due.is_some() => Wake::Due,
        () = signals.recv() => Wake::Stop,
    }
}

/// Starts [`cleanup_other_modes`]: beside the agent when the running mode writes only its own
/// nftables table (removing kube-proxy's iptables rules for 3 000 Services × 10 endpoints
/// takes seconds, and changes should not wait for it), in line when it writes iptables chains,
/// which the other modes' cleanups also remove (the same names). The thread is not waited for
/// at stop: each of its removals is one atomic restore or batch, and what a stop leaves is
/// found and removed again at the next start.
fn start_cleanup_of_other_modes(running: &'static ModeEntry) {
    if running.writes_iptables {
        return cleanup_other_modes(running);
    }
    crate::run::beside("cleanup", move || cleanup_other_modes(running));
}

/// Removes what the other modes left (a node switched from one mode to another, or kube-proxy's
/// iptables chains under nftables mode), kube-proxy's included, as upstream kube-proxy does at
/// start-up, but after the first successful sync, so that the node's Services are served
/// throughout. Each removal is logged at info (whose, which chains or tables); a failure is
/// only worth a warning.
fn cleanup_other_modes(running: &ModeEntry) {
    for other in MODES.iter().filter(|e| e.mode != running.mode) {
        let started = std::time::Instant::now();
        let result = (other.cleanup)(Scope {
            dry_run: false,
            kube_proxy: true,
        });
        tracing::debug!(
            mode = %other.mode,
            duration_ms = started.elapsed().as_secs_f64() * 1e3,
            "looked for what the other mode left"
        );
        match result {
            Ok(done) => {
                for object in done.objects {
                    tracing::info!("removed what {} mode left: {object}", other.mode);
                }
            }
            Err(e) => tracing::warn!("removing {} mode's rules failed: {e}", other.mode),
        }
    }
}

#[cfg(test)]
mod tests;
