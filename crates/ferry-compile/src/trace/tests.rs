use ferry_model::fixtures::*;
use ferry_model::{ClusterState, IpFamily, NodeContext, NodeView, Object, Protocol, TrafficPolicy};

use super::*;
use crate::config::{CompileConfig, LocalDetector};

fn seed(policy: TrafficPolicy) -> ClusterState {
    let mut state = ClusterState::new();
    let svc = with_node_port(
        mk_service("dev", "url-analysis", "10.96.198.86", 8080),
        32223,
        policy,
    );
    state.apply(Object::from(svc));
    let eps = vec![
        mk_endpoint("192.168.169.166", "k8s-node2"),
        mk_endpoint("192.168.169.168", "k8s-node2"),
    ];
    state.apply(Object::from(mk_slice("dev", "url-analysis", 56010, eps)));
    state.apply(Object::from(mk_service("dev", "empty", "10.96.0.50", 80)));
    for (n, ip, cidr) in [
        ("k8s-master", "10.1.1.12", "192.168.235.192/26"),
        ("k8s-node1", "10.1.1.17", "192.168.36.64/26"),
        ("k8s-node2", "10.1.1.9", "192.168.169.128/26"),
    ] {
        state.apply(Object::from(mk_node(n, ip, cidr)));
    }
    state
}

fn explain(policy: TrafficPolicy, node: &str, src: &str, dst: &str, port: u16) -> Trace {
    let state = seed(policy);
    let view = NodeView::build(
        &state,
        &NodeContext {
            node_name: node.into(),
            family: IpFamily::V4,
        },
    );
    let cfg = CompileConfig {
        local_detector: LocalDetector::ClusterCidr(vec!["192.168.0.0/16".parse().expect("cidr")]),
        ..CompileConfig::default()
    };
    let plan = Plan::build(&view, &cfg);
    let ruleset = crate::nft::render(&plan);
    trace(
        &view,
        &plan,
        &ruleset,
        Packet {
            src: ip(src),
            dst: ip(dst),
            port,
            protocol: Protocol::Tcp,
        },
    )
}

#[test]
fn the_seed_question_local_policy_on_a_node_without_pods_drops() {
    let t = explain(
        TrafficPolicy::Local,
        "k8s-node1",
        "10.1.1.100",
        "10.1.1.17",
        32223,
    );
    assert_eq!(t.frontend, Some(Frontend::NodePort));
    assert_eq!(t.origin, Origin::Outside);
    assert_eq!(t.verdict, Verdict::Dropped);
    assert!(t
        .candidates
        .iter()
        .all(|c| c.excluded.as_deref() == Some("on another node (k8s-node2)")));
    assert!(
        t.to_text()
            .contains("no-endpoint-nodeports element tcp . 32223 : drop"),
        "{}",
        t.to_text()
    );
}

#[test]
fn the_seed_question_cluster_policy_forwards_masqueraded() {
    let t = explain(
        TrafficPolicy::Cluster,
        "k8s-node1",
        "10.1.1.100",
        "10.1.1.17",
        32223,
    );
    assert_eq!(t.verdict_word(), "forwarded");
    assert!(matches!(t.masquerade(), Some(Masquerade::Yes(_))));
    let Verdict::Forwarded { targets } = &t.verdict else {
        panic!("forwarded")
    };
    assert_eq!(targets.len(), 2);
}

#[test]
fn local_policy_on_the_node_with_pods_keeps_the_client_ip() {
    let t = explain(
        TrafficPolicy::Local,
        "k8s-node2",
        "10.1.1.100",
        "10.1.1.9",
        32223,
    );
    assert_eq!(t.verdict_word(), "forwarded");
    assert_eq!(t.masquerade(), Some(Masquerade::No));
}

#[test]
fn pods_and_the_node_short_circuit_the_local_policy() {
    let pod = explain(
        TrafficPolicy::Local,
        "k8s-master",
        "192.168.235.200",
        "10.1.1.12",
        32223,
    );
    assert_eq!(
        pod.origin,
        Origin::Pod("192.168.0.0/16".parse().expect("net"))
    );
    assert_eq!(pod.verdict_word(), "forwarded");
    assert_eq!(pod.masquerade(), Some(Masquerade::No));
    let node = explain(
        TrafficPolicy::Local,
        "k8s-master",
        "10.1.1.12",
        "10.1.1.12",
        32223,
    );
    assert_eq!(node.origin, Origin::ThisNode);
    assert_eq!(node.verdict_word(), "forwarded");
    assert!(matches!(node.masquerade(), Some(Masquerade::Yes(_))));
}

#[test]
fn cluster_ip_from_the_node_is_masqueraded_and_from_a_pod_is_not() {
    let node = explain(
        TrafficPolicy::Cluster,
        "k8s-master",
        "10.1.1.12",
        "10.96.198.86",
        8080,
    );
    assert!(matches!(node.masquerade(), Some(Masquerade::Yes(_))));
    let pod = explain(
        TrafficPolicy::Cluster,
        "k8s-master",
        "192.168.235.200",
        "10.96.198.86",
        8080,
    );
    assert_eq!(pod.masquerade(), Some(Masquerade::No));
    assert_eq!(pod.frontend, Some(Frontend::ClusterIp));
}

fn targets(t: &Trace) -> Vec<(String, Option<String>)> {
    let Verdict::Forwarded { targets } = &t.verdict else {
        panic!("forwarded: {}", t.to_text())
    };
    targets
        .iter()
        .map(|t| (t.addr.to_string(), t.masquerade.clone()))
        .collect()
}

#[test]
fn hairpin_masquerades_only_the_target_that_is_the_sender() {
    let t = explain(
        TrafficPolicy::Cluster,
        "k8s-node2",
        "192.168.169.166",
        "10.96.198.86",
        8080,
    );
    assert_eq!(
        targets(&t),
        [
            ("192.168.169.166:56010".into(), Some(HAIRPIN.into())),
            ("192.168.169.168:56010".into(), None),
        ]
    );
    assert!(matches!(t.masquerade(), Some(Masquerade::Some(_))));
    let text = t.to_text();
    assert!(
        text.contains(
            "masquerade: depends on the endpoint chosen: yes to 192.168.169.166:56010 (hairpin"
        ),
        "{text}"
    );
    assert!(
        text.contains("verdict: FORWARDED to one of 192.168.169.166:56010 (masqueraded), 192.168.169.168:56010 (not masqueraded)"),
        "{text}"
    );
    let m = t.to_mermaid();
    assert!(
        m.contains("-->|DNAT + SNAT| ep0") && m.contains("-->|DNAT| ep1"),
        "{m}"
    );
    // iptables mode: the same targets, the hairpin rule in the sender's KUBE-SEP- chain.
    let ipt = t.for_iptables();
    assert!(matches!(ipt.masquerade(), Some(Masquerade::Some(_))));
    assert!(ipt
        .to_text()
        .contains("(-s 192.168.169.166 -j KUBE-MARK-MASQ)"));
}

#[test]
fn a_sender_on_another_node_is_not_hairpinned_by_nftables_but_is_by_iptables() {
    // Both endpoints are pods of k8s-node2; asked on k8s-node1, where no rule of nftables
    // mode masquerades them (their own node does), while iptables mode's KUBE-SEP- chain does.
    let t = explain(
        TrafficPolicy::Cluster,
        "k8s-node1",
        "192.168.169.166",
        "10.96.198.86",
        8080,
    );
    assert_eq!(
        targets(&t),
        [
            ("192.168.169.166:56010".into(), None),
            ("192.168.169.168:56010".into(), None),
        ]
    );
    assert!(!t.steps.iter().any(|s| s.kind == StepKind::Hairpin));
    let ipt = t.for_iptables();
    assert_eq!(
        targets(&ipt),
        [
            ("192.168.169.166:56010".into(), Some(HAIRPIN.into())),
            ("192.168.169.168:56010".into(), None),
        ]
    );
    let text = ipt.to_text();
    assert!(
        text.contains("(-s 192.168.169.166 -j KUBE-MARK-MASQ)"),
        "{text}"
    );
    let forward = ipt
        .steps
        .iter()
        .position(|s| matches!(s.kind, StepKind::Forward(_)));
    let hairpin = ipt.steps.iter().position(|s| s.kind == StepKind::Hairpin);
    assert_eq!(hairpin, forward.map(|i| i + 1), "{text}");
}

#[test]
fn hairpin_to_the_only_endpoint_is_always_masqueraded() {
    let mut state = seed(TrafficPolicy::Cluster);
    let eps = vec![mk_endpoint("192.168.169.166", "k8s-node2")];
    state.apply(Object::from(mk_slice("dev", "url-analysis", 56010, eps)));
    let view = NodeView::build(
        &state,
        &NodeContext {
            node_name: "k8s-node2".into(),
            family: IpFamily::V4,
        },
    );
    let cfg = CompileConfig {
        local_detector: LocalDetector::ClusterCidr(vec!["192.168.0.0/16".parse().expect("cidr")]),
        ..CompileConfig::default()
    };
    let plan = Plan::build(&view, &cfg);
    let packet = Packet {
        src: ip("192.168.169.166"),
        dst: ip("10.96.198.86"),
        port: 8080,
        protocol: Protocol::Tcp,
    };
    let t = trace(&view, &plan, &crate::nft::render(&plan), packet);
    assert_eq!(t.masquerade(), Some(Masquerade::Yes(vec![HAIRPIN])));
    let text = t.to_text();
    assert!(text.contains("masquerade: yes: hairpin"), "{text}");
    assert!(
        text.contains("the endpoint is the sender itself (hairpin): the connection is masqueraded"),
        "{text}"
    );
    assert!(t.to_mermaid().contains("-->|DNAT + SNAT| ep0"));
}

#[test]
fn hairpin_through_a_node_port_short_circuited_for_a_pod() {
    let t = explain(
        TrafficPolicy::Local,
        "k8s-node2",
        "192.168.169.166",
        "10.1.1.9",
        32223,
    );
    assert_eq!(
        targets(&t),
        [
            ("192.168.169.166:56010".into(), Some(HAIRPIN.into())),
            ("192.168.169.168:56010".into(), None),
        ]
    );
    // A reason for the whole connection covers the sender too.
    let cluster = explain(
        TrafficPolicy::Cluster,
        "k8s-node2",
        "192.168.169.166",
        "10.1.1.9",
        32223,
    );
    assert!(
        matches!(cluster.masquerade(), Some(Masquerade::Yes(why)) if why.len() == 1 && why[0] != HAIRPIN)
    );
}

#[test]
fn services_without_endpoints_reject_and_unknown_ports_too() {
    let t = explain(
        TrafficPolicy::Cluster,
        "k8s-master",
        "192.168.235.200",
        "10.96.0.50",
        80,
    );
    assert_eq!(t.verdict, Verdict::Rejected);
    let wrong_port = explain(
        TrafficPolicy::Cluster,
        "k8s-master",
        "192.168.235.200",
        "10.96.198.86",
        9999,
    );
    assert_eq!(wrong_port.verdict, Verdict::Rejected);
    let nothing = explain(
        TrafficPolicy::Cluster,
        "k8s-master",
        "192.168.235.200",
        "8.8.8.8",
        53,
    );
    assert_eq!(nothing.verdict, Verdict::NotAService);
}

#[test]
fn mermaid_draws_client_node_chain_and_endpoints() {
    let t = explain(
        TrafficPolicy::Cluster,
        "k8s-node1",
        "10.1.1.100",
        "10.1.1.17",
        32223,
    );
    let m = t.to_mermaid();
    assert!(m.starts_with("flowchart LR"), "{m}");
    assert!(m.contains("192.168.169.166:56010"), "{m}");
    assert!(m.contains("DNAT + SNAT"), "{m}");
    // The masquerade and the DNAT step both start in the dispatch chain: drawn once.
    assert_eq!(
        m.matches("[\"chain nodeport-cluster-2\"]").count(),
        1,
        "{m}"
    );
}

#[test]
fn session_affinity_is_explained_before_the_random_choice_with_the_objects_behind_it() {
    let mut state = seed(TrafficPolicy::Cluster);
    let mut svc = with_node_port(
        mk_service("dev", "url-analysis", "10.96.198.86", 8080),
        32223,
        TrafficPolicy::Cluster,
    );
    svc.session_affinity = ferry_model::SessionAffinity::ClientIp {
        timeout_seconds: 30,
    };
    state.apply(Object::from(svc));
    let view = NodeView::build(
        &state,
        &NodeContext {
            node_name: "k8s-node1".into(),
            family: IpFamily::V4,
        },
    );
    let plan = Plan::build(&view, &CompileConfig::default());
    let ruleset = crate::nft::render(&plan);
    let packet = Packet {
        src: ip("10.1.1.100"),
        dst: ip("10.1.1.17"),
        port: 32223,
        protocol: Protocol::Tcp,
    };
    let t = trace(&view, &plan, &ruleset, packet);
    let kinds: Vec<StepKind> = t.steps.iter().map(|s| s.kind).collect();
    let at = kinds
        .iter()
        .position(|k| *k == StepKind::Affinity(EndpointSet::Cluster, 30))
        .expect("an affinity step");
    assert_eq!(kinds[at + 1], StepKind::Forward(EndpointSet::Cluster));
    let objects = &t.steps[at].objects;
    for want in [
        "chain nodeport-cluster-2-affinity",
        "map nodeport-affinity key tcp . 32223 . 10.1.1.100",
        "chain filter-prerouting-post-dnat → affinity-record",
        "chain affinity-nodeport-30",
    ] {
        assert!(objects.iter().any(|o| o == want), "{want} in {objects:?}");
    }
    // Every chain named exists in the compiled ruleset.
    let names: Vec<&str> = ruleset.chain_names().collect();
    assert!(
        names.contains(&"nodeport-cluster-2-affinity") && names.contains(&"affinity-nodeport-30")
    );
    let ipt = t.iptables_objects(&t.steps[at]).join("\n");
    assert!(ipt.contains("--rcheck --seconds 30 --reap"), "{ipt}");
    assert!(
        ipt.contains("--set, on the DNAT to 192.168.169.166:56010"),
        "{ipt}"
    );
}
