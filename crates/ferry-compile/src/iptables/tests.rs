use std::collections::BTreeMap;

use ferry_model::fixtures::*;
use ferry_model::{
    ClusterState, IpFamily, NodeContext, NodeView, Object, Protocol, ServiceName, ServicePortName,
    TrafficPolicy,
};

use super::*;
use crate::config::{CompileConfig, LocalDetector};
use crate::plan::Plan;

fn port_name(ns: &str, name: &str, port: &str, protocol: Protocol) -> ServicePortName {
    ServicePortName {
        service: ServiceName::new(ns, name),
        port: port.into(),
        protocol,
    }
}

#[test]
fn chain_hashes_match_upstreams_test_vectors() {
    let p80 = port_name("ns1", "svc1", "p80", Protocol::Tcp);
    assert_eq!(port_proto_hash(&p80), "XPGD46QRK7WJZT7O");
    assert_eq!(service_chain(SVC_PREFIX, &p80), "KUBE-SVC-XPGD46QRK7WJZT7O");
    assert_eq!(
        endpoint_chain(&p80, &"10.180.0.1:80".parse().expect("addr")),
        "KUBE-SEP-SXIVWICOYRO3J4NJ"
    );
    let dns = port_name("kube-system", "kube-dns", "dns", Protocol::Udp);
    assert_eq!(port_proto_hash(&dns), "TCOU7JCQXEZGVUNU");
}

fn seed_state(policy: TrafficPolicy, endpoints: &[&str]) -> ClusterState {
    let mut state = ClusterState::new();
    let svc = with_node_port(
        mk_service("dev", "url-analysis", "10.96.198.86", 8080),
        32223,
        policy,
    );
    state.apply(Object::from(svc));
    let eps = endpoints
        .iter()
        .map(|a| mk_endpoint(a, "k8s-node2"))
        .collect();
    state.apply(Object::from(mk_slice("dev", "url-analysis", 56010, eps)));
    state.apply(Object::from(mk_node(
        "k8s-node2",
        "10.1.1.9",
        "192.168.169.128/26",
    )));
    state
}

fn ruleset(state: &ClusterState, node: &str, cidrs: &[&str]) -> Ruleset {
    let cfg = CompileConfig {
        local_detector: LocalDetector::ClusterCidr(
            cidrs.iter().map(|c| c.parse().expect("cidr")).collect(),
        ),
        ..CompileConfig::default()
    };
    let ctx = NodeContext {
        node_name: node.into(),
        family: IpFamily::V4,
    };
    render(&Plan::build(&NodeView::build(state, &ctx), &cfg))
}

fn svc() -> ServiceName {
    ServiceName::new("dev", "url-analysis")
}

fn chain<'a>(rules: &'a ServiceRules, prefix: &str) -> &'a Chain {
    rules
        .chains
        .iter()
        .find(|c| c.name.starts_with(prefix))
        .unwrap_or_else(|| panic!("no {prefix} chain in {rules:?}"))
}

#[test]
fn endpoints_are_chosen_with_a_statistic_cascade_of_ten_decimal_probabilities() {
    let state = seed_state(
        TrafficPolicy::Cluster,
        &["10.0.0.1", "10.0.0.2", "10.0.0.3"],
    );
    let rs = ruleset(&state, "k8s-node2", &["192.168.0.0/16"]);
    let svc_chain = chain(&rs.services[&svc()], SVC_PREFIX);
    let rules = &svc_chain.rules;
    assert!(
        rules[0].contains("! -s 192.168.0.0/16 -j KUBE-MARK-MASQ"),
        "{rules:?}"
    );
    assert!(
        rules[1].contains("--probability 0.3333333333 -j KUBE-SEP-"),
        "{rules:?}"
    );
    assert!(
        rules[2].contains("--probability 0.5000000000 -j KUBE-SEP-"),
        "{rules:?}"
    );
    assert!(
        !rules[3].contains("statistic"),
        "last is unconditional: {rules:?}"
    );
    let seps = rs.services[&svc()]
        .chains
        .iter()
        .filter(|c| c.name.starts_with(SEP_PREFIX))
        .count();
    assert_eq!(seps, 3);
}

#[test]
fn local_policy_without_local_endpoints_drops_in_filter_and_short_circuits_in_nat() {
    let state = seed_state(TrafficPolicy::Local, &["10.0.0.1"]);
    let rs = ruleset(&state, "k8s-node1", &["192.168.0.0/16"]);
    let rules = &rs.services[&svc()];
    assert_eq!(rules.filter_external.len(), 1, "{rules:?}");
    assert!(
        rules.filter_external[0].contains("has no local endpoints\" -m addrtype --dst-type LOCAL")
    );
    assert!(rules.filter_external[0].ends_with("--dport 32223 -j DROP"));
    let ext = chain(rules, EXTERNAL_PREFIX);
    assert_eq!(
        ext.rules.len(),
        3,
        "pod, masquerade LOCAL, route LOCAL; no SVL: {ext:?}"
    );
    assert!(ext.rules[0].contains("-s 192.168.0.0/16 -j KUBE-SVC-"));
    assert!(rules
        .chains
        .iter()
        .all(|c| !c.name.starts_with(LOCAL_PREFIX)));
}

#[test]
fn a_service_without_endpoints_is_rejected_in_filter_and_has_no_nat_chains() {
    let state = seed_state(TrafficPolicy::Cluster, &[]);
    let rs = ruleset(&state, "k8s-node2", &["192.168.0.0/16"]);
    let rules = &rs.services[&svc()];
    assert!(rules.chains.is_empty() && rules.nat_services.is_empty());
    assert!(rules.filter_services[0].contains("has no endpoints"));
    assert!(rules.filter_services[0].ends_with("-d 10.96.198.86 --dport 8080 -j REJECT"));
    assert!(rules.filter_external[0].ends_with("--dport 32223 -j REJECT"));
}

#[test]
fn several_pod_cidrs_use_a_helper_chain_for_the_negated_match() {
    let state = seed_state(TrafficPolicy::Cluster, &["10.0.0.1"]);
    let rs = ruleset(&state, "k8s-node2", &["192.168.0.0/16", "10.0.0.0/8"]);
    let first = &chain(&rs.services[&svc()], SVC_PREFIX).rules[0];
    assert!(first.ends_with(&format!("-j {NON_POD_MASQ}")), "{first}");
    let helper = rs
        .nat
        .iter()
        .find(|c| c.name == NON_POD_MASQ)
        .expect("helper chain");
    assert_eq!(
        helper.rules.last().map(String::as_str),
        Some("-j KUBE-MARK-MASQ")
    );
}

#[test]
fn the_nodeports_jump_is_the_last_rule_of_nat_kube_services() {
    let state = seed_state(TrafficPolicy::Cluster, &["10.0.0.1"]);
    let text = ruleset(&state, "k8s-node2", &["192.168.0.0/16"]).to_string();
    let services: Vec<&str> = text
        .lines()
        .skip_while(|l| *l != "*nat")
        .filter(|l| l.starts_with("-A KUBE-SERVICES "))
        .collect();
    assert_eq!(services.len(), 2, "{text}");
    assert!(services[1].contains("-d 10.1.1.9/32 -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS"));
}

#[test]
fn a_partial_restore_rewrites_only_the_changed_services_chains() {
    let mut state = seed_state(TrafficPolicy::Cluster, &["10.0.0.1", "10.0.0.2"]);
    state.apply(Object::from(mk_service("dev", "other", "10.96.0.20", 80)));
    state.apply(Object::from(mk_slice(
        "dev",
        "other",
        80,
        vec![mk_endpoint("10.0.0.9", "k8s-node1")],
    )));
    let before = ruleset(&state, "k8s-node2", &["192.168.0.0/16"]);
    state.apply(Object::from(mk_slice(
        "dev",
        "url-analysis",
        56010,
        vec![
            mk_endpoint("10.0.0.1", "k8s-node2"),
            mk_endpoint("10.0.0.3", "k8s-node2"),
        ],
    )));
    let after = ruleset(&state, "k8s-node2", &["192.168.0.0/16"]);
    let previous = BTreeMap::from([(svc(), before.services.get(&svc()).cloned())]);
    let restore = Restore::partial(&after, &previous);
    let text = &restore.text;
    let other = &after.services[&ServiceName::new("dev", "other")];
    for c in &other.chains {
        assert!(
            !text.contains(&format!(":{} ", c.name)),
            "{} untouched:\n{text}",
            c.name
        );
    }
    let changed = &after.services[&svc()];
    let sep1 = endpoint_chain(&changed_port(), &"10.0.0.1:56010".parse().expect("addr"));
    let sep2 = endpoint_chain(&changed_port(), &"10.0.0.2:56010".parse().expect("addr"));
    let sep3 = endpoint_chain(&changed_port(), &"10.0.0.3:56010".parse().expect("addr"));
    assert!(
        !text.contains(&format!(":{sep1} ")),
        "unchanged endpoint chain kept:\n{text}"
    );
    assert!(text.contains(&format!("-X {sep2}")), "{text}");
    assert!(text.contains(&format!(":{sep3} - [0:0]")), "{text}");
    assert!(text.contains(&format!(":{} - [0:0]", chain(changed, SVC_PREFIX).name)));
    assert!(!text.contains(CANARY), "the canary is left alone:\n{text}");
    assert_eq!(restore.chains_deleted, 1);
    assert!(
        !text.contains(":KUBE-SERVICES ") && !text.contains("*filter"),
        "an endpoint change leaves the top-level chains alone:\n{text}"
    );
}

#[test]
fn a_partial_restore_rewrites_the_top_level_chains_a_changed_service_is_in() {
    let state = seed_state(TrafficPolicy::Cluster, &["10.0.0.1"]);
    let after = ruleset(&state, "k8s-node2", &["192.168.0.0/16"]);
    let has = |text: &str, wanted: &[&str], unwanted: &[&str]| {
        for w in wanted {
            assert!(text.contains(w), "{w}:\n{text}");
        }
        for u in unwanted {
            assert!(!text.contains(u), "{u}:\n{text}");
        }
    };
    // The service is new: its ClusterIP rule joins nat KUBE-SERVICES.
    let restore = Restore::partial(&after, &BTreeMap::from([(svc(), None)]));
    has(
        &restore.text,
        &[":KUBE-SERVICES - [0:0]", ":KUBE-NODEPORTS - [0:0]"],
        &["*filter"],
    );
    // Now it has no endpoints: its REJECT joins filter KUBE-SERVICES, its nat rules leave.
    let no_endpoints = seed_state(TrafficPolicy::Cluster, &[]);
    let empty = ruleset(&no_endpoints, "k8s-node2", &["192.168.0.0/16"]);
    let previous = BTreeMap::from([(svc(), after.services.get(&svc()).cloned())]);
    let restore = Restore::partial(&empty, &previous);
    has(
        &restore.text,
        &[
            "*filter\n:KUBE-SERVICES - [0:0]",
            "*nat\n:KUBE-SERVICES - [0:0]",
        ],
        &[],
    );
}

fn changed_port() -> ServicePortName {
    port_name("dev", "url-analysis", "http", Protocol::Tcp)
}

#[test]
fn a_full_restore_declares_the_canaries_and_deletes_stale_chains() {
    let state = seed_state(TrafficPolicy::Cluster, &["10.0.0.1"]);
    let rs = ruleset(&state, "k8s-node2", &["192.168.0.0/16"]);
    let text = Restore::full(&rs, &["KUBE-SEP-GONE".to_owned()]).text;
    assert_eq!(
        text.matches(":KUBE-PROXY-CANARY - [0:0]").count(),
        3,
        "{text}"
    );
    assert!(
        text.contains("*mangle\n:KUBE-PROXY-CANARY - [0:0]\nCOMMIT\n"),
        "{text}"
    );
    assert!(text.contains(":KUBE-SEP-GONE - [0:0]") && text.contains("-X KUBE-SEP-GONE\nCOMMIT"));
}

#[test]
fn above_a_thousand_endpoints_per_endpoint_rules_carry_no_comment() {
    let ips: Vec<String> = (0..1001)
        .map(|i| format!("10.0.{}.{}", i / 250, i % 250 + 1))
        .collect();
    let refs: Vec<&str> = ips.iter().map(String::as_str).collect();
    let large = ruleset(&seed_state(TrafficPolicy::Cluster, &refs), "k8s-node2", &[]);
    assert!(large.large_cluster);
    let rules = &large.services[&svc()];
    assert_eq!(rules.endpoints, 1001);
    let sep = chain(rules, SEP_PREFIX);
    assert!(sep.rules.iter().all(|r| !r.contains("comment")), "{sep:?}");
    assert!(!chain(rules, SVC_PREFIX).rules[0].contains("comment"));
    assert!(
        rules.nat_services[0].contains("cluster IP"),
        "KUBE-SERVICES keeps its comments"
    );
    let small = ruleset(
        &seed_state(TrafficPolicy::Cluster, &refs[..1000]),
        "k8s-node2",
        &[],
    );
    assert!(!small.large_cluster);
}

#[test]
fn client_ip_affinity_checks_every_endpoints_recent_list_before_the_random_choice() {
    let mut state = seed_state(TrafficPolicy::Cluster, &["10.0.0.1", "10.0.0.2"]);
    let mut svc_obj = with_node_port(
        mk_service("dev", "url-analysis", "10.96.198.86", 8080),
        32223,
        TrafficPolicy::Cluster,
    );
    svc_obj.session_affinity = ferry_model::SessionAffinity::ClientIp {
        timeout_seconds: 10800,
    };
    state.apply(Object::from(svc_obj));
    let rs = ruleset(&state, "k8s-node2", &["192.168.0.0/16"]);
    let rules = &rs.services[&svc()];
    let svc_rules = &chain(rules, SVC_PREFIX).rules;
    // Masquerade, one rcheck per endpoint, then the statistic cascade.
    assert!(svc_rules[0].contains("-j KUBE-MARK-MASQ"), "{svc_rules:?}");
    for (i, ep) in ["10.0.0.1:56010", "10.0.0.2:56010"].iter().enumerate() {
        let sep = endpoint_chain(&rs_port(), &ep.parse().expect("endpoint"));
        assert_eq!(
            svc_rules[1 + i],
            format!(
                "-m comment --comment \"dev/url-analysis:http -> {ep}\" -m recent --name {sep} --rcheck --seconds 10800 --reap -j {sep}"
            )
        );
        let dnat = &chain_named(rules, &sep).rules[1];
        assert!(
            dnat.contains(&format!(
                "-m recent --name {sep} --set -m tcp -p tcp -j DNAT"
            )),
            "{dnat}"
        );
    }
    assert!(svc_rules[3].contains("statistic"), "{svc_rules:?}");
}

fn rs_port() -> ServicePortName {
    port_name("dev", "url-analysis", "http", Protocol::Tcp)
}

fn chain_named<'a>(rules: &'a ServiceRules, name: &str) -> &'a Chain {
    rules
        .chains
        .iter()
        .find(|c| c.name == name)
        .unwrap_or_else(|| panic!("no {name} chain in {rules:?}"))
}
