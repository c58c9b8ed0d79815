//! iptables mode's rule-count metrics against the kernel (both backends):
//! `kubeproxy_sync_proxy_rules_iptables_total{table}` equals the rules of Ferry's `KUBE-*`
//! chains that `iptables-save` lists, for the seed cluster as started and after a change.

#[path = "support/seed.rs"]
mod seed;

use ferry_lab::spec::NODE2;
use ferry_lab::{CurlResult, Host};

use seed::*;

/// The sample `series` of Ferry's `/metrics` on k8s-node2.
fn metric(seed: &SeedLab, series: &str) -> Option<f64> {
    let CurlResult::Ok(text) = seed.curl(&Host::node(NODE2), "http://127.0.0.1:10249/metrics")
    else {
        panic!("no /metrics");
    };
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// The rules of the `KUBE-*` chains in `table` as `<tool>-save` lists them on k8s-node2.
fn saved_rules(seed: &SeedLab, tool: &str, table: &str) -> f64 {
    let text = seed
        .lab
        .exec(NODE2, [format!("{tool}-save"), "-t".into(), table.into()])
        .expect("save");
    text.lines().filter(|l| l.starts_with("-A KUBE-")).count() as f64
}

/// Each table's exported rule count against the kernel's.
fn check(seed: &SeedLab, tool: &str, round: &str) {
    for table in ["nat", "filter"] {
        let labels = format!("{{table=\"{table}\",ip_family=\"IPv4\"}}");
        let series = format!("kubeproxy_sync_proxy_rules_iptables_total{labels}");
        let exported = metric(seed, &series).unwrap_or_else(|| panic!("{round}: no {series}"));
        assert_eq!(
            exported,
            saved_rules(seed, tool, table),
            "{round}: {series}"
        );
        let last = format!("kubeproxy_sync_proxy_rules_iptables_last{labels}");
        assert!(metric(seed, &last).is_some(), "{round}: no {last}");
    }
}

fn rule_counts_match_the_kernel(mode: Mode) {
    let tool = mode.iptables().expect("an iptables mode");
    let mut seed = SeedLab::start(mode, "Cluster");
    check(&seed, tool, "first sync");
    // One endpoint gone: the service's chains change (a partial sync).
    seed.change(|m| m.endpoints.retain(|(ip, _)| *ip == POD_A.1));
    check(&seed, tool, "after a change");
}

#[test]
#[ignore = "needs root: network namespaces"]
fn rule_counts_match_the_kernel_iptables_nft() {
    rule_counts_match_the_kernel(Mode::IptablesNft);
}

#[test]
#[ignore = "needs root: network namespaces"]
fn rule_counts_match_the_kernel_iptables_legacy() {
    rule_counts_match_the_kernel(Mode::IptablesLegacy);
}
