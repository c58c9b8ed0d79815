//! iptables mode's rule counts and partial-restore failures, with upstream's names and labels
//! (pkg/proxy/metrics): `kubeproxy_sync_proxy_rules_iptables_total` / `_last` by `table` and
//! `ip_family`, `kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total`; and
//! `kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total`, which stays 0: Ferry deletes
//! stale chains in the sync's own transaction, so no separate cleanup can fail.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use ferry_dataplane::TableRules;
use ferry_model::IpFamily;

use super::{family, family_of, FamilyLabel};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TableLabels {
    table: String,
    ip_family: String,
}

pub(super) struct IptablesMetrics {
    total: Family<TableLabels, Gauge>,
    last: Family<TableLabels, Gauge>,
    partial_failures: Family<FamilyLabel, Counter>,
    nft_cleanup_failures: Family<FamilyLabel, Counter>,
}

impl IptablesMetrics {
    pub(super) fn new() -> Self {
        Self {
            total: Family::default(),
            last: Family::default(),
            partial_failures: Family::default(),
            nft_cleanup_failures: Family::default(),
        }
    }

    pub(super) fn register(&self, registry: &mut Registry) {
        let kp = registry.sub_registry_with_prefix("kubeproxy");
        kp.register(
            "sync_proxy_rules_iptables_total",
            "Total number of iptables rules owned by kube-proxy",
            self.total.clone(),
        );
        kp.register(
            "sync_proxy_rules_iptables_last",
            "Number of iptables rules written by kube-proxy in last sync",
            self.last.clone(),
        );
        kp.register(
            "sync_proxy_rules_iptables_partial_restore_failures",
            "Cumulative proxy iptables partial restore failures",
            self.partial_failures.clone(),
        );
        kp.register(
            "sync_proxy_rules_nftables_cleanup_failures",
            "Cumulative proxy nftables cleanup failures",
            self.nft_cleanup_failures.clone(),
        );
        let f = family();
        let _ = self.partial_failures.get_or_create(&f);
        let _ = self.nft_cleanup_failures.get_or_create(&f);
    }

    /// A sync of `fam` left these tables' rules.
    pub(super) fn synced(&self, fam: IpFamily, tables: &[TableRules]) {
        for t in tables {
            let labels = TableLabels {
                table: t.table.to_owned(),
                ip_family: fam.as_str().to_owned(),
            };
            self.total.get_or_create(&labels).set(t.total as i64);
            self.last.get_or_create(&labels).set(t.written as i64);
        }
    }

    /// A partial iptables restore of `fam` failed (the next sync is full).
    pub(super) fn partial_failed(&self, fam: IpFamily) {
        self.partial_failures.get_or_create(&family_of(fam)).inc();
    }
}
