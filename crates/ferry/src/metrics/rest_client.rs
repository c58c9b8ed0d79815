//! The API client's requests as client-go counts them (component-base's restclient metrics,
//! which kube-proxy's dashboards read): `rest_client_requests_total` by `code`, `method` and
//! `host`, and `rest_client_request_duration_seconds` by `verb` and `host`, with client-go's
//! buckets. Fed by the source's request observer (`ferry_source::kube::ObserveLayer`).

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use ferry_source::kube::RequestRecord;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    code: String,
    method: String,
    host: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct VerbLabels {
    verb: String,
    host: String,
}

/// client-go's request latency buckets: 5 ms … 60 s.
fn latency_histogram() -> Histogram {
    Histogram::new([
        0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 15.0, 30.0, 60.0,
    ])
}

/// The two families.
pub(super) struct RestClientMetrics {
    requests: Family<RequestLabels, Counter>,
    duration: Family<VerbLabels, Histogram, fn() -> Histogram>,
}

impl RestClientMetrics {
    pub(super) fn new() -> Self {
        Self {
            requests: Family::default(),
            duration: Family::new_with_constructor(latency_histogram),
        }
    }

    pub(super) fn register(&self, registry: &mut Registry) {
        registry.register(
            "rest_client_requests",
            "Number of HTTP requests, partitioned by status code, method, and host",
            self.requests.clone(),
        );
        registry.register(
            "rest_client_request_duration_seconds",
            "Request latency in seconds. Broken down by verb, and host",
            self.duration.clone(),
        );
    }

    /// One request answered (or failed).
    pub(super) fn record(&self, r: &RequestRecord) {
        self.requests
            .get_or_create(&RequestLabels {
                code: r.code.clone(),
                method: r.method.clone(),
                host: r.host.clone(),
            })
            .inc();
        self.duration
            .get_or_create(&VerbLabels {
                verb: r.method.clone(),
                host: r.host.clone(),
            })
            .observe(r.duration.as_secs_f64());
    }
}
