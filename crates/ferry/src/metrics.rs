//! Prometheus metrics, served on `metricsBindAddress` (`/metrics`).
//!
//! Where Ferry measures what kube-proxy measures, the name, type, labels and buckets are
//! upstream's (`kubeproxy_` prefix, pkg/proxy/metrics), so existing dashboards and alerts keep
//! working. Ferry-only metrics are prefixed `ferry_`. The text is OpenMetrics (counters are
//! declared without their `_total` suffix and sampled with it), which Prometheus negotiates.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{exponential_buckets, linear_buckets, Histogram};
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

use ferry_dataplane::mode::FailureCounter;
use ferry_dataplane::SyncKind;
use ferry_model::IpFamily;

use crate::sync::status::NoLocalEndpoints;
use crate::sync::PendingChanges;

mod build_info;
mod conntrack;
mod iptables;
mod kernel_counters;
mod probes;
mod process;
mod rest_client;
mod userspace;

/// The `Content-Type` of `/metrics`.
pub const CONTENT_TYPE_OPENMETRICS: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// Upstream's value of the `ip_family` label of IPv4 (the series created at start).
const IPV4: &str = "IPv4";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FamilyLabel {
    ip_family: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PolicyLabels {
    ip_family: String,
    traffic_policy: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CodeLabel {
    code: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct KindLabel {
    kind: String,
}

type HistogramFamily = Family<FamilyLabel, Histogram, fn() -> Histogram>;
type FloatGauge = Gauge<f64, AtomicU64>;

/// Upstream `ExponentialBuckets(0.001, 2, 15)`: 1 ms … 16.4 s.
fn sync_histogram() -> Histogram {
    Histogram::new(exponential_buckets(0.001, 2.0, 15))
}

/// Upstream `MergeBuckets(LinearBuckets(0.25, 0.25, 2), LinearBuckets(1, 1, 59),
/// LinearBuckets(60, 5, 12), LinearBuckets(120, 30, 7))`; MergeBuckets starts with a 0 bucket.
fn programming_histogram() -> Histogram {
    let buckets = std::iter::once(0.0)
        .chain(linear_buckets(0.25, 0.25, 2))
        .chain(linear_buckets(1.0, 1.0, 59))
        .chain(linear_buckets(60.0, 5.0, 12))
        .chain(linear_buckets(120.0, 30.0, 7));
    Histogram::new(buckets)
}

struct Set {
    sync_duration: HistogramFamily,
    sync_full_duration: HistogramFamily,
    sync_partial_duration: HistogramFamily,
    last_timestamp: Family<FamilyLabel, FloatGauge>,
    last_queued_timestamp: Family<FamilyLabel, FloatGauge>,
    network_programming: HistogramFamily,
    endpoint_changes_pending: Gauge,
    endpoint_changes_total: Counter,
    service_changes_pending: Gauge,
    service_changes_total: Counter,
    no_local_endpoints: Family<PolicyLabels, Gauge>,
    healthz_total: Family<CodeLabel, Counter>,
    livez_total: Family<CodeLabel, Counter>,
    /// Failed syncs, by the counter each mode names (all registered, as before a mode is
    /// chosen dashboards may query any).
    sync_failures: BTreeMap<FailureCounter, Family<FamilyLabel, Counter>>,
    /// The counter of this process's mode.
    failure_counter: FailureCounter,
    invalid_objects: Family<KindLabel, Counter>,
    health_check_servers: Gauge,
    conntrack: conntrack::ConntrackMetrics,
    proxy: userspace::ProxyCollector,
    probes: probes::ProbeMetrics,
    rest_client: rest_client::RestClientMetrics,
    iptables: iptables::IptablesMetrics,
    kernel_counters: kernel_counters::KernelCounters,
}

/// Every metric Ferry exports; cheap to clone (shared).
#[derive(Clone)]
pub struct Metrics {
    registry: Arc<Registry>,
    set: Arc<Set>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Metrics")
    }
}

fn family() -> FamilyLabel {
    family_of(IpFamily::V4)
}

fn family_of(f: IpFamily) -> FamilyLabel {
    FamilyLabel {
        ip_family: f.as_str().to_owned(),
    }
}

fn seconds_since_epoch(t: SystemTime) -> f64 {
    t.duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
}

impl Metrics {
    /// Registers every metric (all start at zero); failed syncs count in `failure_counter`,
    /// the mode's (see [`ModeEntry::sync_failures`](ferry_dataplane::mode::ModeEntry)).
    pub fn new(failure_counter: FailureCounter) -> Self {
        let h = || HistogramFamily::new_with_constructor(sync_histogram as fn() -> Histogram);
        let set = Set {
            sync_duration: h(),
            sync_full_duration: h(),
            sync_partial_duration: h(),
            last_timestamp: Family::default(),
            last_queued_timestamp: Family::default(),
            network_programming: HistogramFamily::new_with_constructor(programming_histogram),
            endpoint_changes_pending: Gauge::default(),
            endpoint_changes_total: Counter::default(),
            service_changes_pending: Gauge::default(),
            service_changes_total: Counter::default(),
            no_local_endpoints: Family::default(),
            healthz_total: Family::default(),
            livez_total: Family::default(),
            sync_failures: FailureCounter::ALL
                .into_iter()
                .map(|c| (c, Family::default()))
                .collect(),
            failure_counter,
            invalid_objects: Family::default(),
            health_check_servers: Gauge::default(),
            conntrack: conntrack::ConntrackMetrics::new(),
            proxy: userspace::ProxyCollector::default(),
            probes: probes::ProbeMetrics::new(),
            rest_client: rest_client::RestClientMetrics::new(),
            iptables: iptables::IptablesMetrics::new(),
            kernel_counters: kernel_counters::KernelCounters::default(),
        };
        let mut registry = Registry::default();
        let kp = registry.sub_registry_with_prefix("kubeproxy");
        kp.register(
            "sync_proxy_rules_duration_seconds",
            "SyncProxyRules latency in seconds",
            set.sync_duration.clone(),
        );
        kp.register(
            "sync_full_proxy_rules_duration_seconds",
            "SyncProxyRules latency in seconds for full resyncs",
            set.sync_full_duration.clone(),
        );
        kp.register(
            "sync_partial_proxy_rules_duration_seconds",
            "SyncProxyRules latency in seconds for partial resyncs",
            set.sync_partial_duration.clone(),
        );
        kp.register(
            "sync_proxy_rules_last_timestamp_seconds",
            "The last time proxy rules were successfully synced",
            set.last_timestamp.clone(),
        );
        kp.register(
            "sync_proxy_rules_last_queued_timestamp_seconds",
            "The last time a sync of proxy rules was queued",
            set.last_queued_timestamp.clone(),
        );
        kp.register(
            "network_programming_duration_seconds",
            "In Cluster Network Programming Latency in seconds",
            set.network_programming.clone(),
        );
        kp.register(
            "sync_proxy_rules_endpoint_changes_pending",
            "Pending proxy rules Endpoint changes",
            set.endpoint_changes_pending.clone(),
        );
        kp.register(
            "sync_proxy_rules_endpoint_changes",
            "Cumulative proxy rules Endpoint changes",
            set.endpoint_changes_total.clone(),
        );
        kp.register(
            "sync_proxy_rules_service_changes_pending",
            "Pending proxy rules Service changes",
            set.service_changes_pending.clone(),
        );
        kp.register(
            "sync_proxy_rules_service_changes",
            "Cumulative proxy rules Service changes",
            set.service_changes_total.clone(),
        );
        // A gauge despite its name, as upstream.
        kp.register(
            "sync_proxy_rules_no_local_endpoints_total",
            "Number of services with a Local traffic policy and no endpoints",
            set.no_local_endpoints.clone(),
        );
        kp.register(
            "proxy_healthz",
            "Cumulative proxy healthz HTTP status",
            set.healthz_total.clone(),
        );
        kp.register(
            "proxy_livez",
            "Cumulative proxy livez HTTP status",
            set.livez_total.clone(),
        );
        for (counter, family) in &set.sync_failures {
            let (name, help) = counter.metric();
            kp.register(name, help, family.clone());
        }
        let ferry = registry.sub_registry_with_prefix("ferry");
        ferry.register("invalid_objects", "Objects rejected by the sources (each report), by kind (file: a whole file could not be read)", set.invalid_objects.clone());
        ferry.register(
            "service_health_check_servers",
            "Health-check NodePort servers open on this node",
            set.health_check_servers.clone(),
        );
        set.conntrack.register(&mut registry);
        registry.register_collector(Box::new(set.proxy.clone()));
        registry.register_collector(Box::new(set.kernel_counters.clone()));
        set.probes.register(&mut registry);
        build_info::register(&mut registry);
        process::register(&mut registry);
        set.rest_client.register(&mut registry);
        set.iptables.register(&mut registry);
        // Pre-create the IPv4 series, so dashboards see zeros rather than gaps (series labelled by
        // HTTP code or object kind appear with their first event, as upstream's do).
        let f = family();
        let _ = set.last_timestamp.get_or_create(&f);
        let _ = set.last_queued_timestamp.get_or_create(&f);
        for family in set.sync_failures.values() {
            let _ = family.get_or_create(&f);
        }
        for h in [
            &set.sync_duration,
            &set.sync_full_duration,
            &set.sync_partial_duration,
            &set.network_programming,
        ] {
            let _ = h.get_or_create(&f);
        }
        for policy in ["internal", "external"] {
            let _ = set.no_local_endpoints.get_or_create(&PolicyLabels {
                ip_family: IPV4.to_owned(),
                traffic_policy: policy.to_owned(),
            });
        }
        Self {
            registry: Arc::new(registry),
            set: Arc::new(set),
        }
    }

    /// The OpenMetrics text of every metric (the probe counters caught up with the book first).
    pub fn encode(&self) -> String {
        self.set.probes.catch_up();
        let mut out = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            tracing::error!("encoding metrics: {e}");
        }
        out
    }

    /// A change was queued for the next sync of `family`'s rules, at wall-clock time `now`.
    pub fn sync_queued_for(&self, family: IpFamily, now: SystemTime) {
        self.set
            .last_queued_timestamp
            .get_or_create(&family_of(family))
            .set(seconds_since_epoch(now));
    }

    /// A sync of `family`'s rules ran for `elapsed`; `kind` is `None` when it failed.
    pub fn sync_ran_for(&self, family: IpFamily, kind: Option<SyncKind>, elapsed: Duration) {
        let secs = elapsed.as_secs_f64();
        let f = family_of(family);
        self.set.sync_duration.get_or_create(&f).observe(secs);
        match kind {
            Some(SyncKind::Full) => self.set.sync_full_duration.get_or_create(&f).observe(secs),
            Some(SyncKind::Partial) => self
                .set
                .sync_partial_duration
                .get_or_create(&f)
                .observe(secs),
            None => {
                if let Some(counter) = self.set.sync_failures.get(&self.set.failure_counter) {
                    counter.get_or_create(&f).inc();
                }
            }
        }
    }

    /// A sync of `family`'s rules succeeded at wall-clock time `now`; `trigger_times` are the
    /// RFC 3339 last-change-trigger-times of the EndpointSlice changes it carried.
    pub fn sync_succeeded_for(&self, family: IpFamily, now: SystemTime, trigger_times: &[String]) {
        let f = family_of(family);
        self.set
            .last_timestamp
            .get_or_create(&f)
            .set(seconds_since_epoch(now));
        let now = seconds_since_epoch(now);
        for t in trigger_times {
            match t.parse::<jiff::Timestamp>() {
                Ok(t) => {
                    let since = now - t.as_nanosecond() as f64 / 1e9;
                    // A trigger time in the future is clock skew between nodes: skip it.
                    if since >= 0.0 {
                        self.set
                            .network_programming
                            .get_or_create(&f)
                            .observe(since);
                    }
                }
                Err(e) => tracing::debug!("ignoring last-change-trigger-time {t:?}: {e}"),
            }
        }
    }

    /// The pending changes and running totals.
    pub fn changes(&self, changes: &PendingChanges) {
        let s = &self.set;
        s.service_changes_pending.set(changes.services.len() as i64);
        s.endpoint_changes_pending
            .set(changes.endpoints.len() as i64);
        catch_up(&s.service_changes_total, changes.services_total);
        catch_up(&s.endpoint_changes_total, changes.slices_total);
    }

    /// Service ports of `family` with a Local policy and no local endpoint, after a sync.
    pub fn no_local_endpoints_for(&self, family: IpFamily, n: NoLocalEndpoints) {
        for (policy, count) in [("internal", n.internal), ("external", n.external)] {
            self.set
                .no_local_endpoints
                .get_or_create(&PolicyLabels {
                    ip_family: family.as_str().to_owned(),
                    traffic_policy: policy.to_owned(),
                })
                .set(count as i64);
        }
    }

    /// `/healthz` answered `code`.
    pub fn healthz(&self, code: u16) {
        self.set
            .healthz_total
            .get_or_create(&CodeLabel {
                code: code.to_string(),
            })
            .inc();
    }

    /// `/livez` answered `code`.
    pub fn livez(&self, code: u16) {
        self.set
            .livez_total
            .get_or_create(&CodeLabel {
                code: code.to_string(),
            })
            .inc();
    }

    /// A sync of `family` left these iptables tables' rules (iptables mode; empty otherwise).
    pub fn table_rules_for(&self, family: IpFamily, tables: &[ferry_dataplane::TableRules]) {
        self.set.iptables.synced(family, tables);
    }

    /// A partial sync of `family` failed: in iptables mode, a failed partial restore.
    pub fn partial_sync_failed(&self, family: IpFamily) {
        if self.set.failure_counter == FailureCounter::IptablesRestore {
            self.set.iptables.partial_failed(family);
        }
    }

    /// One request of the API client answered or failed.
    pub fn api_request(&self, r: &ferry_source::kube::RequestRecord) {
        self.set.rest_client.record(r);
    }

    /// What the API client tells of each request ([`Metrics::api_request`]).
    pub fn api_request_observer(&self) -> ferry_source::kube::RequestObserver {
        let metrics = self.clone();
        std::sync::Arc::new(move |r| metrics.api_request(r))
    }

    /// A source rejected an object of `kind` (empty: a whole file).
    pub fn invalid_object(&self, kind: &str) {
        let kind = if kind.is_empty() { "file" } else { kind };
        self.set
            .invalid_objects
            .get_or_create(&KindLabel {
                kind: kind.to_owned(),
            })
            .inc();
    }

    /// A UDP conntrack cleanup ran for `elapsed` and deleted `deleted` entries; `ok` is false
    /// when it failed.
    pub fn conntrack_cleaned(&self, family: IpFamily, elapsed: Duration, deleted: u64, ok: bool) {
        self.set.conntrack.cleaned(family, elapsed, deleted, ok);
    }

    /// Exports the counters of the mode's userspace proxy (`ferry_userspace_*`), when it runs
    /// one (see `NodeMode::proxy_metrics`).
    pub fn serve_proxy_metrics(&self, stats: Option<ferry_dataplane::userspace::Stats>) {
        if let Some(stats) = stats {
            self.set.proxy.serve(stats);
        }
    }

    /// Exports fixed `ferry_userspace_*` counters (the metrics reference's example).
    #[cfg(test)]
    pub fn serve_fixed_proxy_metrics(&self, ports: Vec<ferry_dataplane::userspace::PortMetrics>) {
        self.set.proxy.serve_fixed(ports);
    }

    /// Exports the metrics read from the kernel counters the mode created at start (see
    /// `NodeMode::packet_counters`), each read at every scrape.
    pub fn serve_counter_metrics(&self, counters: Vec<ferry_dataplane::mode::CounterMetric>) {
        self.set.kernel_counters.serve(counters);
    }

    /// Exports `counters` each at `value` (the metrics reference's example).
    #[cfg(test)]
    pub fn serve_fixed_counter_metrics(
        &self,
        counters: Vec<ferry_dataplane::mode::CounterMetric>,
        value: u64,
    ) {
        self.set.kernel_counters.serve_fixed(counters, value);
    }

    /// Counts the readiness probes' results recorded in `book` (standalone mode's Pod stage).
    pub fn follow_probes(&self, book: Arc<std::sync::Mutex<ferry_source::probe::ProbeBook>>) {
        self.set.probes.follow(book);
    }

    /// Health-check NodePort servers now open.
    pub fn health_check_servers(&self, n: usize) {
        self.set.health_check_servers.set(n as i64);
    }
}

/// Counters only go up: add what the running total gained since the last call.
fn catch_up(counter: &Counter, total: u64) {
    let seen = counter.get();
    if total > seen {
        counter.inc_by(total - seen);
    }
}

mod server;
pub use server::router;

#[cfg(test)]
mod tests;
