use ferry_compile::config::LocalDetector;
use ferry_compile::iptables::{render, Restore};
use ferry_compile::{CompileConfig, Plan};
use ferry_model::fixtures::*;
use ferry_model::{IpFamily, NodeContext, NodeView, TrafficPolicy};

use super::*;

/// dev/web: a NodePort service with two endpoints, as node k8s-node1 compiles it.
fn compiled() -> Ruleset {
    let state = seed_web_state(TrafficPolicy::Cluster);
    let context = NodeContext {
        node_name: "k8s-node1".into(),
        family: IpFamily::V4,
    };
    let cfg = CompileConfig {
        local_detector: LocalDetector::ClusterCidr(vec!["192.168.0.0/16".parse().expect("cidr")]),
        ..CompileConfig::default()
    };
    render(&Plan::build(&NodeView::build(&state, &context), &cfg))
}

/// What `iptables-save` shows after Ferry restored `ruleset` (the restore input has the same
/// shape: `*table`, `:CHAIN`, `-A CHAIN rule`).
fn saved(ruleset: &Ruleset) -> String {
    Restore::full(ruleset, &[]).text
}

fn web() -> ServiceName {
    ServiceName::new("dev", "web")
}

#[test]
fn chains_as_ferry_wrote_them_are_programmed() {
    let ruleset = compiled();
    let report = compare(&ruleset, &saved(&ruleset));
    assert!(report.present);
    assert_eq!(report.services[&web()], Vec::<String>::new());
    assert!(report.stray.is_empty(), "{:?}", report.stray);
}

#[test]
fn a_changed_dnat_target_a_missing_chain_and_a_lost_dispatch_rule_are_named() {
    let ruleset = compiled();
    let text = saved(&ruleset).replace("192.168.169.168:56010", "192.168.169.99:56010");
    let report = compare(&ruleset, &text);
    assert_eq!(
        report.services[&web()],
        [
            "the kernel DNATs to 192.168.169.166:56010, 192.168.169.99:56010, Ferry would DNAT \
          to 192.168.169.166:56010, 192.168.169.168:56010"
        ]
    );
    let ext = &ruleset.services[&web()]
        .chains
        .iter()
        .find(|c| c.name.starts_with("KUBE-EXT-"))
        .expect("an external chain")
        .name;
    let text: String = saved(&ruleset)
        .lines()
        .filter(|l| !l.contains(ext.as_str()) || l.starts_with("-A KUBE-SERVICES"))
        .map(|l| format!("{l}\n"))
        .collect();
    let report = compare(&ruleset, &text);
    assert_eq!(
        report.services[&web()],
        [
            format!("chain {ext} is missing from the kernel"),
            "nat chain KUBE-NODEPORTS has 0 rules for it, Ferry would write 1".to_owned(),
        ]
    );
}

#[test]
fn another_services_chains_and_rules_are_stray() {
    let ruleset = compiled();
    let text = saved(&ruleset).replace(
        "COMMIT\n*nat\n",
        "COMMIT\n*nat\n:KUBE-SVC-GONE - [0:0]\n-A KUBE-SERVICES -m comment --comment \"dev/gone:http cluster IP\" -d 10.96.0.99/32 -j KUBE-SVC-GONE\n",
    );
    let report = compare(&ruleset, &text);
    assert_eq!(
        report.stray,
        [
            "nat chain KUBE-SERVICES: a rule for dev/gone",
            "nat chain KUBE-SVC-GONE (0 rules)"
        ]
    );
    assert!(report.services[&web()].is_empty());
}

#[test]
fn without_kube_services_nothing_is_programmed() {
    let report = compare(&compiled(), "*nat\n:PREROUTING ACCEPT [0:0]\nCOMMIT\n");
    assert!(!report.present);
    assert_eq!(
        report.services[&web()],
        ["nat chain KUBE-SERVICES is not in this network namespace"]
    );
}

#[test]
fn comments_are_read_quoted_or_not() {
    assert_eq!(
        service_of("-m comment --comment \"dev/web:http cluster IP\" -j X").as_deref(),
        Some("dev/web")
    );
    assert_eq!(
        service_of("-m comment --comment dev/web:http -j X").as_deref(),
        Some("dev/web")
    );
    assert_eq!(
        service_of("-m comment --comment \"dev/web cluster IP\"").as_deref(),
        Some("dev/web")
    );
    assert_eq!(
        service_of("-m comment --comment \"kubernetes service nodeports\""),
        None
    );
    assert_eq!(service_of("-j KUBE-MARK-MASQ"), None);
}
