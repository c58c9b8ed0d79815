//! The UDP conntrack cleanup's metrics: upstream's conntrack reconciler names (kube-proxy
//! 1.33, pkg/proxy/metrics), plus Ferry's failure counter.

use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

use ferry_model::IpFamily;

use super::{family, family_of, sync_histogram, FamilyLabel, HistogramFamily};

/// `kubeproxy_conntrack_reconciler_*` and `ferry_conntrack_cleanup_failures_total`.
pub(super) struct ConntrackMetrics {
    duration: HistogramFamily,
    deleted: Family<FamilyLabel, Counter>,
    failures: Family<FamilyLabel, Counter>,
}

impl ConntrackMetrics {
    pub(super) fn new() -> Self {
        Self {
            duration: HistogramFamily::new_with_constructor(sync_histogram),
            deleted: Family::default(),
            failures: Family::default(),
        }
    }

    /// Registers the metrics, with the IPv4 series at zero.
    pub(super) fn register(&self, registry: &mut Registry) {
        let kp = registry.sub_registry_with_prefix("kubeproxy");
        kp.register(
            "conntrack_reconciler_sync_duration_seconds",
            "ReconcileConntrackFlowsLatency latency in seconds",
            self.duration.clone(),
        );
        kp.register(
            "conntrack_reconciler_deleted_entries",
            "Cumulative conntrack flows deleted by conntrack reconciler",
            self.deleted.clone(),
        );
        let ferry = registry.sub_registry_with_prefix("ferry");
        ferry.register(
            "conntrack_cleanup_failures",
            "UDP conntrack cleanups that failed (dump refused or deletions failed)",
            self.failures.clone(),
        );
        let f = family();
        let _ = self.duration.get_or_create(&f);
        let _ = self.deleted.get_or_create(&f);
        let _ = self.failures.get_or_create(&f);
    }

    /// A cleanup of one family ran for `elapsed` and deleted `deleted` entries; `ok` is false
    /// when it failed.
    pub(super) fn cleaned(&self, fam: IpFamily, elapsed: Duration, deleted: u64, ok: bool) {
        let f = family_of(fam);
        self.duration
            .get_or_create(&f)
            .observe(elapsed.as_secs_f64());
        self.deleted.get_or_create(&f).inc_by(deleted);
        if !ok {
            self.failures.get_or_create(&f).inc();
        }
    }
}
