//! [`Prober`]: one task per probed container, ticking every `periodSeconds`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use ferry_model::{Container, Pod, Probe};
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinHandle;
use tokio::time::{Instant, MissedTickBehavior};

use super::book::{ProbeBook, ProbeReport};
use super::check::Check;
use super::threshold::{Outcome, Thresholds};
use super::Target;
use crate::pods::readiness::is_probed;
use crate::pods::{PodKey, ReadinessUpdate};

/// Probes running at once, at most, by default: enough for 10 000 endpoints at a 10 s period
/// (1 000 probes a second of a few milliseconds each), few enough not to flood a node.
pub const DEFAULT_MAX_CONCURRENT: usize = 64;

/// What a worker runs; a change restarts the worker.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Spec {
    target: Result<Target, String>,
    probe: Probe,
    started_at: Option<i64>,
}

struct Worker {
    spec: Spec,
    task: JoinHandle<()>,
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Runs the readiness probes of the Pods it is given, from this node, as kubelet would:
/// each container's probe every `periodSeconds`, not before `initialDelaySeconds` after the
/// container started (its `startedAt`, or when Ferry first saw it), each run bounded by
/// `timeoutSeconds`; at most `max_concurrent` runs at once; workers started in the prober's
/// first period wait a random part of their period first (kubelet's restart jitter), so
/// thousands of probes do not fire together. Results go to the `reports` channel.
pub struct Prober {
    check: Arc<dyn Check>,
    permits: Arc<Semaphore>,
    started: Instant,
    reports: mpsc::Sender<ProbeReport>,
    workers: BTreeMap<(PodKey, Box<str>), Worker>,
}

impl Prober {
    /// A prober running its checks with `check`.
    pub fn new(
        check: Arc<dyn Check>,
        max_concurrent: usize,
        reports: mpsc::Sender<ProbeReport>,
    ) -> Self {
        Self {
            check,
            permits: Arc::new(Semaphore::new(max_concurrent.max(1))),
            started: Instant::now(),
            reports,
            workers: BTreeMap::new(),
        }
    }

    /// Number of probe workers running.
    pub fn len(&self) -> usize {
        self.workers.len()
    }

    /// True when no probe runs.
    pub fn is_empty(&self) -> bool {
        self.workers.is_empty()
    }

    /// Makes the workers match `pods` (the Pods some Service selects): starts the new ones,
    /// restarts those whose probe or Pod IP changed, stops the rest. Returns the verdicts to
    /// withdraw (restarted or stopped workers' containers go back to their status).
    pub fn sync<'a>(
        &mut self,
        pods: impl IntoIterator<Item = (&'a PodKey, &'a Arc<Pod>)>,
        book: &mut ProbeBook,
    ) -> Vec<ReadinessUpdate> {
        let mut wanted: BTreeMap<(PodKey, Box<str>), Spec> = BTreeMap::new();
        for (key, pod) in pods {
            for container in &pod.containers {
                let Some(probe) = &container.readiness_probe else {
                    continue;
                };
                if !is_probed(container) {
                    book.not_run(key, &container.name, "exec probes are not supported in standalone mode: the Pod's Ready condition decides".into());
                    continue;
                }
                wanted.insert(
                    (key.clone(), container.name.clone()),
                    spec(pod, container, probe),
                );
            }
        }
        let mut withdrawn = Vec::new();
        self.workers.retain(|key, worker| {
            let keep = wanted.get(key) == Some(&worker.spec);
            if !keep {
                book.remove(&key.0, &key.1);
                withdrawn.push(ReadinessUpdate {
                    pod: key.0.clone(),
                    container: key.1.clone(),
                    ready: None,
                });
            }
            keep
        });
        for (key, spec) in wanted {
            if self.workers.contains_key(&key) {
                continue;
            }
            match &spec.target {
                Ok(target) => book.probing(&key.0, &key.1, target.to_string()),
                Err(reason) => book.not_run(&key.0, &key.1, reason.clone()),
            }
            let task = tokio::spawn(run_worker(
                key.clone(),
                spec.clone(),
                self.check.clone(),
                self.permits.clone(),
                self.reports.clone(),
                self.jitter(spec.probe.period_seconds),
            ));
            self.workers.insert(key, Worker { spec, task });
        }
        withdrawn
    }

    /// kubelet's start-up jitter: a random part of the period for workers started during the
    /// prober's first period, none afterwards.
    fn jitter(&self, period_seconds: u32) -> Duration {
        let period = Duration::from_secs(u64::from(period_seconds));
        if self.started.elapsed() < period {
            period.mul_f64(fastrand::f64())
        } else {
            Duration::ZERO
        }
    }
}

fn spec(pod: &Pod, container: &Container, probe: &Probe) -> Spec {
    Spec {
        target: Target::resolve(pod, container, probe),
        probe: probe.clone(),
        started_at: container.started_at,
    }
}

/// How long after now the probe may first run: `initialDelaySeconds` from the container's
/// start (wall clock) when known, else from now.
fn initial_delay(spec: &Spec) -> Duration {
    let delay = Duration::from_secs(u64::from(spec.probe.initial_delay_seconds));
    let Some(started) = spec.started_at else {
        return delay;
    };
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let running_for = Duration::from_secs(now.saturating_sub(u64::try_from(started).unwrap_or(0)));
    delay.saturating_sub(running_for)
}

async fn run_worker(
    (pod, container): (PodKey, Box<str>),
    spec: Spec,
    check: Arc<dyn Check>,
    permits: Arc<Semaphore>,
    reports: mpsc::Sender<ProbeReport>,
    jitter: Duration,
) {
    let ready_at = Instant::now() + initial_delay(&spec);
    tokio::time::sleep(jitter).await;
    let period = Duration::from_secs(u64::from(spec.probe.period_seconds.max(1)));
    let timeout = Duration::from_secs(u64::from(spec.probe.timeout_seconds.max(1)));
    let mut ticks = tokio::time::interval(period);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    let mut thresholds =
        Thresholds::new(spec.probe.success_threshold, spec.probe.failure_threshold);
    loop {
        ticks.tick().await;
        // Like kubelet, the worker ticks from its start and skips the ticks that fall within
        // the initial delay.
        if Instant::now() < ready_at {
            continue;
        }
        let outcome = match &spec.target {
            Ok(target) => {
                let Ok(_permit) = permits.acquire().await else {
                    return;
                };
                check.check(target, timeout).await
            }
            Err(reason) => Outcome::Error(reason.clone()),
        };
        let before = thresholds.verdict();
        thresholds.record(&outcome);
        let report = ProbeReport {
            pod: pod.clone(),
            container: container.clone(),
            outcome,
            at: SystemTime::now(),
            run: thresholds.run(),
            verdict: thresholds.verdict(),
            changed: thresholds.verdict() != before,
        };
        if reports.send(report).await.is_err() {
            return;
        }
    }
}
