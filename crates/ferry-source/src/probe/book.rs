//! What the probes found, as data: per container (for `ferry status` and `ferry explain`) and
//! per Service (counters for metrics).

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::SystemTime;

use ferry_model::ServiceName;

use super::threshold::Outcome;
use crate::pods::PodKey;

/// The counter of probe results per Service, by `result` (`success`, `failure`, `error`).
/// Registered by the binary; labels `namespace`, `service`, `result`.
pub const PROBE_RESULTS_METRIC: &str = "ferry_readiness_probe_results_total";

/// One probe run, as a worker reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeReport {
    /// The Pod.
    pub pod: PodKey,
    /// The container.
    pub container: Box<str>,
    /// What the run found.
    pub outcome: Outcome,
    /// When it ended.
    pub at: SystemTime,
    /// Equal results in a row, this one included.
    pub run: u32,
    /// The verdict after this run (`None`: no threshold reached yet).
    pub verdict: Option<bool>,
    /// True when this run changed the verdict.
    pub changed: bool,
}

/// Where one container's readiness probe stands.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProbeStatus {
    /// Probing (or waiting for `initialDelaySeconds`); `verdict` is `None` until a threshold is
    /// reached.
    Probing {
        /// What is probed (`GET http://10.0.1.1:8080/hello`).
        target: String,
        /// `Some(true)` ready, `Some(false)` not ready, `None` no verdict yet.
        verdict: Option<bool>,
        /// The last run, if any.
        last: Option<(Outcome, SystemTime)>,
        /// Equal results in a row.
        run: u32,
        /// When the current run of failures started (set while the last result is a failure).
        failing_since: Option<SystemTime>,
    },
    /// Not run: an `exec` probe, or a probe that cannot be resolved; the Pod's status decides.
    NotRun {
        /// Why.
        reason: String,
    },
}

/// Every container's probe status.
#[derive(Debug, Clone, Default)]
pub struct ProbeBook {
    entries: BTreeMap<(PodKey, Box<str>), ProbeStatus>,
    counters: BTreeMap<ServiceName, [u64; 3]>,
}

impl ProbeBook {
    /// A container whose probe runs against `target` (its results so far are kept when the
    /// target is unchanged).
    pub fn probing(&mut self, pod: &PodKey, container: &str, target: String) {
        let entry = ProbeStatus::Probing {
            target,
            verdict: None,
            last: None,
            run: 0,
            failing_since: None,
        };
        self.entries.insert((pod.clone(), container.into()), entry);
    }

    /// A container whose probe Ferry does not run.
    pub fn not_run(&mut self, pod: &PodKey, container: &str, reason: String) {
        self.entries.insert(
            (pod.clone(), container.into()),
            ProbeStatus::NotRun { reason },
        );
    }

    /// Forgets a container.
    pub fn remove(&mut self, pod: &PodKey, container: &str) {
        self.entries.remove(&(pod.clone(), container.into()));
    }

    /// Records a run, and counts it for each Service that selects the Pod.
    pub fn record<'a>(
        &mut self,
        report: &ProbeReport,
        services: impl IntoIterator<Item = &'a ServiceName>,
    ) {
        let index = match report.outcome {
            Outcome::Success => 0,
            Outcome::Failure(_) => 1,
            Outcome::Error(_) => 2,
        };
        for service in services {
            self.counters.entry(service.clone()).or_default()[index] += 1;
        }
        let key = (report.pod.clone(), report.container.clone());
        let Some(ProbeStatus::Probing {
            verdict,
            last,
            run,
            failing_since,
            ..
        }) = self.entries.get_mut(&key)
        else {
            return;
        };
        match (&report.outcome, &*failing_since) {
            (Outcome::Failure(_), None) => *failing_since = Some(report.at),
            (Outcome::Success, _) => *failing_since = None,
            _ => {}
        }
        *verdict = report.verdict;
        *last = Some((report.outcome.clone(), report.at));
        *run = report.run;
    }

    /// One container's status.
    pub fn get(&self, pod: &PodKey, container: &str) -> Option<&ProbeStatus> {
        self.entries.get(&(pod.clone(), container.into()))
    }

    /// Every container's status, sorted by Pod and container.
    pub fn iter(&self) -> impl Iterator<Item = (&PodKey, &str, &ProbeStatus)> {
        self.entries.iter().map(|((p, c), s)| (p, &**c, s))
    }

    /// Probe results per Service: `(success, failure, error)`.
    pub fn counters(&self) -> impl Iterator<Item = (&ServiceName, (u64, u64, u64))> {
        self.counters.iter().map(|(s, [a, b, c])| (s, (*a, *b, *c)))
    }

    /// One Pod's containers' statuses, sorted by container.
    pub fn of_pod<'a>(&'a self, pod: &PodKey) -> impl Iterator<Item = (&'a str, &'a ProbeStatus)> {
        let first = (pod.clone(), Box::<str>::from(""));
        let pod = pod.clone();
        self.entries
            .range(first..)
            .take_while(move |((p, _), _)| *p == pod)
            .map(|((_, container), status)| (&**container, status))
    }

    /// Why a Pod's endpoint is not ready because of its probes, in the words `ferry explain`
    /// uses: `not ready: readiness probe failing since 2024-05-01T10:00:00Z (GET
    /// http://10.0.1.1:8080/hello: HTTP probe failed with statuscode: 503; 3 failures in a row)`.
    /// `None` when no probe of the Pod holds it back.
    pub fn explain(&self, pod: &PodKey) -> Option<String> {
        join_reasons(
            self.of_pod(pod)
                .filter_map(|(container, status)| status.not_ready_reason(container)),
        )
    }
}

/// Reasons joined with `; ` (`None` for none).
pub fn join_reasons(reasons: impl IntoIterator<Item = String>) -> Option<String> {
    let mut reasons = reasons.into_iter();
    let first = reasons.next()?;
    Some(reasons.fold(first, |all, r| format!("{all}; {r}")))
}

impl ProbeStatus {
    /// Why this probe holds its container (`container`) back, as [`ProbeBook::explain`] says
    /// it; `None` when it does not (ready, or not run).
    pub fn not_ready_reason(&self, container: &str) -> Option<String> {
        let ProbeStatus::Probing {
            target,
            verdict,
            last,
            run,
            failing_since,
        } = self
        else {
            return None;
        };
        match (verdict, last) {
            (Some(true), _) => None,
            (None, None) => Some(format!(
                "not ready: readiness probe of container {container} has not run yet ({target})"
            )),
            (None, Some(_)) => Some(format!(
                "not ready: readiness probe of container {container} has not passed yet ({target})"
            )),
            (Some(false), last) => {
                let since = failing_since.map_or_else(|| "its last run".to_owned(), rfc3339);
                let what = match last {
                    Some((Outcome::Failure(text) | Outcome::Error(text), _)) => text.as_str(),
                    _ => "",
                };
                Some(format!(
                    "not ready: readiness probe failing since {since} ({target}: {what}; {run} \
                     failures in a row)"
                ))
            }
        }
    }
}

/// The book, even if a panic poisoned its lock (its data stays consistent: every update is
/// one assignment).
pub fn lock(book: &Mutex<ProbeBook>) -> MutexGuard<'_, ProbeBook> {
    book.lock().unwrap_or_else(PoisonError::into_inner)
}

/// RFC 3339 in UTC, seconds precision.
pub fn rfc3339(t: SystemTime) -> String {
    k8s_openapi::jiff::Timestamp::try_from(t)
        .map(|ts| {
            ts.round(k8s_openapi::jiff::Unit::Second)
                .map_or_else(|_| ts.to_string(), |r| r.to_string())
        })
        .unwrap_or_else(|_| format!("{t:?}"))
}
