//! `ferry_readiness_probe_results_total{namespace, service, result}`: the readiness probes'
//! results per Service (standalone mode), read from the probe book when scraped.

use std::sync::{Arc, Mutex, OnceLock};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use ferry_source::probe::book::lock;
use ferry_source::probe::{ProbeBook, PROBE_RESULTS_METRIC};

use super::catch_up;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProbeLabels {
    namespace: String,
    service: String,
    result: String,
}

/// The counter, and the book it follows once the Pod stage runs.
pub(super) struct ProbeMetrics {
    results: Family<ProbeLabels, Counter>,
    book: OnceLock<Arc<Mutex<ProbeBook>>>,
}

impl ProbeMetrics {
    pub(super) fn new() -> Self {
        Self {
            results: Family::default(),
            book: OnceLock::new(),
        }
    }

    /// Registers the counter (no series until a probe ran: they are labelled by Service).
    pub(super) fn register(&self, registry: &mut Registry) {
        let name = PROBE_RESULTS_METRIC
            .strip_prefix("ferry_")
            .and_then(|n| n.strip_suffix("_total"))
            .expect("the metric is named ferry_…_total");
        registry.sub_registry_with_prefix("ferry").register(
            name,
            "Readiness probe runs per Service whose Pods Ferry probes (standalone mode), by result (success, failure, error)",
            self.results.clone(),
        );
    }

    /// Counts from `book` from now on (the first call wins).
    pub(super) fn follow(&self, book: Arc<Mutex<ProbeBook>>) {
        let _ = self.book.set(book);
    }

    /// Brings the counters up to the book's totals.
    pub(super) fn catch_up(&self) {
        let Some(book) = self.book.get() else {
            return;
        };
        let book = lock(book);
        for (service, (success, failure, error)) in book.counters() {
            for (result, total) in [("success", success), ("failure", failure), ("error", error)] {
                let labels = ProbeLabels {
                    namespace: service.namespace.to_string(),
                    service: service.name.to_string(),
                    result: result.to_owned(),
                };
                catch_up(&self.results.get_or_create(&labels), total);
            }
        }
    }
}
