//! [`run`]: the Pod stage as a task between a source and the cluster state, with its prober.

use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;

use super::{EndpointController, Output};
use crate::probe::book::lock;
use crate::probe::{Check, ProbeBook, Prober};
use crate::{InvalidObject, SourceEvent};

/// How the stage runs.
pub struct StageOptions {
    /// What runs the probes ([`crate::probe::NetworkCheck`] in production).
    pub check: Arc<dyn Check>,
    /// Probes running at once, at most.
    pub max_concurrent: usize,
    /// Where probe results are kept, for `ferry status`, `ferry explain` and metrics.
    pub book: Arc<Mutex<ProbeBook>>,
}

/// Probe reports handled together, at most.
const MAX_BATCH: usize = 4096;

/// Passes `input` (a source's events) through an [`EndpointController`] to `output`, runs the
/// readiness probes of the Pods that Services select, and feeds their verdicts back. Each new
/// problem (a hand-written slice of a Service fed by Pods, a Pod on an unknown Node) is logged
/// once and passed to `problems` (for metrics). Returns when `input` ends or `output` closes.
pub async fn run(
    mut input: mpsc::Receiver<SourceEvent>,
    output: mpsc::Sender<SourceEvent>,
    options: StageOptions,
    problems: impl Fn(&InvalidObject) + Send,
) {
    let (reports_tx, mut reports) = mpsc::channel(1024);
    let mut prober = Prober::new(options.check, options.max_concurrent, reports_tx);
    let mut controller = EndpointController::new();
    let book = options.book;
    loop {
        let out = tokio::select! {
            event = input.recv() => {
                let Some(event) = event else { return };
                let mut out = controller.handle(event);
                if controller.take_targets_changed() {
                    let withdrawn = prober.sync(controller.selected_pods(), &mut lock(&book));
                    for update in withdrawn {
                        merge(&mut out, controller.readiness(&update));
                    }
                    tracing::debug!(workers = prober.len(), "readiness probes");
                }
                out
            }
            Some(report) = reports.recv() => {
                // Take every report already waiting, so the Services they touch are
                // recomputed once for the batch.
                let mut batch = vec![report];
                while batch.len() < MAX_BATCH {
                    match reports.try_recv() {
                        Ok(report) => batch.push(report),
                        Err(_) => break,
                    }
                }
                let mut updates = Vec::new();
                let mut book = lock(&book);
                for report in batch {
                    book.record(&report, controller.services_of(&report.pod));
                    if report.changed {
                        tracing::info!(
                            pod = %report.pod, container = %report.container,
                            ready = ?report.verdict, result = ?report.outcome,
                            "readiness changed"
                        );
                        updates.push(crate::pods::ReadinessUpdate {
                            pod: report.pod,
                            container: report.container,
                            ready: report.verdict,
                        });
                    }
                }
                drop(book);
                controller.readiness_all(&updates)
            }
        };
        for problem in &out.new_problems {
            tracing::warn!(error = %problem, "invalid manifest");
            problems(problem);
        }
        if !send(&output, out.events).await {
            return;
        }
    }
}

/// Sends one input's events: one [`SourceEvent::Batch`] (so the state never syncs a Service
/// without the slices derived for it), or in order when there is a Resync among them (the
/// complete view stands alone; a Batch holds only `Apply` and `Delete`). False once `output`
/// is closed.
async fn send(output: &mpsc::Sender<SourceEvent>, events: Vec<SourceEvent>) -> bool {
    let resync = events.iter().any(|e| matches!(e, SourceEvent::Resync(_)));
    let events = if resync {
        events
    } else {
        SourceEvent::batch(events).into_iter().collect()
    };
    for event in events {
        if output.send(event).await.is_err() {
            return false;
        }
    }
    true
}

fn merge(into: &mut Output, more: Output) {
    into.events.extend(more.events);
    into.new_problems.extend(more.new_problems);
}
