use std::collections::BTreeMap;

use ferry_model::fixtures::*;
use ferry_model::{
    ClusterState, IpFamily, NodeContext, NodeView, Object, ObjectKey, ServiceName, TrafficPolicy,
};

use super::*;
use crate::config::{CompileConfig, LocalDetector};
use crate::plan::Plan;

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

fn cfg() -> CompileConfig {
    CompileConfig {
        local_detector: LocalDetector::ClusterCidr(vec!["192.168.0.0/16".parse().expect("cidr")]),
        ..CompileConfig::default()
    }
}

fn ruleset(state: &ClusterState, node: &str) -> Ruleset {
    let ctx = NodeContext {
        node_name: node.into(),
        family: IpFamily::V4,
    };
    render(&Plan::build(&NodeView::build(state, &ctx), &cfg()))
}

fn svc() -> ServiceName {
    ServiceName::new("dev", "url-analysis")
}

#[test]
fn rendering_is_deterministic() {
    let state = seed_state(
        TrafficPolicy::Cluster,
        &["192.168.169.166", "192.168.169.168"],
    );
    assert_eq!(
        ruleset(&state, "k8s-node2").to_string(),
        ruleset(&state, "k8s-node2").to_string()
    );
}

#[test]
fn an_endpoint_change_that_keeps_the_count_changes_endpoint_elements_only() {
    // On the endpoints' node, where they are in `hairpin`.
    let before = ruleset(
        &seed_state(
            TrafficPolicy::Cluster,
            &["192.168.169.166", "192.168.169.168"],
        ),
        "k8s-node2",
    );
    let after = ruleset(
        &seed_state(
            TrafficPolicy::Cluster,
            &["192.168.169.166", "192.168.169.170"],
        ),
        "k8s-node2",
    );
    let changes = BTreeMap::from([(svc(), after.services.get(&svc()).cloned())]);
    let tx = Transaction::delta(&before, &changes);
    assert_eq!(tx.chains_written, 0, "{}", tx.text);
    assert!(!tx.text.contains("chain"), "no chain, no rule: {}", tx.text);
    assert!(!tx.text.contains("service-ips"), "{}", tx.text);
    assert!(
        tx.text
            .contains("delete element ip ferry hairpin { 192.168.169.168 . 192.168.169.168 }"),
        "{}",
        tx.text
    );
    assert!(
        tx.text.contains(" . 1 : 192.168.169.170 . "),
        "slot 1 now holds the new endpoint: {}",
        tx.text
    );
}

#[test]
fn an_endpoint_count_change_moves_the_dispatch_element_to_another_chain() {
    let before = ruleset(
        &seed_state(
            TrafficPolicy::Cluster,
            &["192.168.169.166", "192.168.169.168"],
        ),
        "k8s-node1",
    );
    let after = ruleset(
        &seed_state(TrafficPolicy::Cluster, &["192.168.169.166"]),
        "k8s-node1",
    );
    let changes = BTreeMap::from([(svc(), after.services.get(&svc()).cloned())]);
    let tx = Transaction::delta(&before, &changes);
    assert!(
        tx.text
            .contains("add chain ip ferry cluster-ip-cluster-1\n"),
        "{}",
        tx.text
    );
    assert!(
        tx.text
            .contains("delete chain ip ferry cluster-ip-cluster-2\n"),
        "{}",
        tx.text
    );
    assert!(tx.text.contains("goto cluster-ip-cluster-1"), "{}", tx.text);
}

#[test]
fn random_choice_is_uniform_over_the_slots() {
    // `numgen random mod n` draws 0..n with equal probability; the endpoint map must hold
    // exactly slots 0..n, one per endpoint, for every endpoint count.
    for n in 1..=12usize {
        let ips: Vec<String> = (0..n).map(|i| format!("192.168.169.{}", 100 + i)).collect();
        let refs: Vec<&str> = ips.iter().map(String::as_str).collect();
        let rs = ruleset(&seed_state(TrafficPolicy::Cluster, &refs), "k8s-node1");
        let rules = &rs.services[&svc()];
        let slots: Vec<(u32, std::net::SocketAddr)> = rules
            .all()
            .filter(|e| e.set == "cluster-endpoints")
            .filter_map(|e| match (&e.key, &e.value) {
                (Key::FrontendSlot(_, _, _, i), Some(Value::Endpoint(ep))) => Some((*i, *ep)),
                _ => None,
            })
            .collect();
        let idx: Vec<u32> = slots.iter().map(|(i, _)| *i).collect();
        assert_eq!(idx, (0..n as u32).collect::<Vec<_>>(), "n={n}");
        let mut eps: Vec<String> = slots.iter().map(|(_, ep)| ep.ip().to_string()).collect();
        eps.sort();
        eps.dedup();
        assert_eq!(eps.len(), n, "each endpoint in exactly one slot, n={n}");
        let chain = &rules.chains[0];
        assert!(
            chain.rules.iter().any(|r| r
                .to_string()
                .contains(&format!("numgen random mod {n} map @cluster-endpoints"))),
            "{chain:?}"
        );
    }
}

#[test]
fn hairpin_holds_the_endpoints_that_may_send_from_this_node() {
    // 166 on k8s-node2, 168 on k8s-node1, 170 without a node name.
    let mut state = seed_state(TrafficPolicy::Cluster, &["192.168.169.166"]);
    let mut unknown = mk_endpoint("192.168.169.170", "k8s-node2");
    unknown.location = None;
    state.apply(Object::from(mk_slice(
        "dev",
        "url-analysis",
        56010,
        vec![
            mk_endpoint("192.168.169.166", "k8s-node2"),
            mk_endpoint("192.168.169.168", "k8s-node1"),
            unknown,
        ],
    )));
    let on_node2 = ruleset(&state, "k8s-node2");
    let hairpin = |r: &Ruleset, ip: &str| r.shared_count("hairpin", &hairpin_key(ip));
    assert_eq!(hairpin(&on_node2, "192.168.169.166"), 1);
    assert_eq!(
        hairpin(&on_node2, "192.168.169.168"),
        0,
        "a pod of k8s-node1"
    );
    assert_eq!(hairpin(&on_node2, "192.168.169.170"), 1, "node not known");
    let on_node1 = ruleset(&state, "k8s-node1");
    assert_eq!(hairpin(&on_node1, "192.168.169.166"), 0);
    assert_eq!(hairpin(&on_node1, "192.168.169.168"), 1);
    // Every endpoint is still a DNAT target on both nodes.
    for r in [&on_node2, &on_node1] {
        let text = r.to_string();
        for ep in ["192.168.169.166", "192.168.169.168", "192.168.169.170"] {
            assert!(text.contains(&format!(": {ep} . 56010")), "{text}");
        }
    }
}

#[test]
fn removing_a_service_deletes_its_elements_before_its_chains() {
    let before = ruleset(
        &seed_state(TrafficPolicy::Cluster, &["192.168.169.166"]),
        "k8s-node1",
    );
    let tx = Transaction::delta(&before, &BTreeMap::from([(svc(), None)]));
    let del_el = tx
        .text
        .find("delete element ip ferry service-ips")
        .expect("element deleted");
    let del_chain = tx.text.find("delete chain").expect("chain deleted");
    assert!(del_el < del_chain, "{}", tx.text);
}

#[test]
fn shared_elements_stay_while_another_service_uses_them() {
    let mut state = seed_state(TrafficPolicy::Cluster, &["192.168.169.166"]);
    let other = mk_service("dev", "other", "10.96.0.20", 80);
    state.apply(Object::from(other));
    state.apply(Object::from(mk_slice(
        "dev",
        "other",
        56010,
        vec![mk_endpoint("192.168.169.166", "k8s-node2")],
    )));
    let before = ruleset(&state, "k8s-node2");
    assert_eq!(
        before.shared_count("hairpin", &hairpin_key("192.168.169.166")),
        2
    );
    let tx = Transaction::delta(&before, &BTreeMap::from([(svc(), None)]));
    assert!(
        !tx.text.contains("hairpin"),
        "still used by dev/other: {}",
        tx.text
    );
}

#[test]
fn a_delta_to_the_same_rules_is_empty() {
    let before = ruleset(
        &seed_state(TrafficPolicy::Local, &["192.168.169.166"]),
        "k8s-node2",
    );
    let same = BTreeMap::from([(svc(), before.services.get(&svc()).cloned())]);
    assert!(Transaction::delta(&before, &same).is_empty());
}

fn hairpin_key(ip: &str) -> Key {
    let ip: std::net::IpAddr = ip.parse().expect("ip");
    Key::AddrPair(ip, ip)
}

#[test]
fn the_node_compiler_builds_the_same_ruleset_service_by_service() {
    let mut shared_twice = false;
    for policy in [TrafficPolicy::Cluster, TrafficPolicy::Local] {
        let mut state = seed_state(policy, &["192.168.169.166", "192.168.36.70"]);
        state.apply(Object::from(mk_service("dev", "other", "10.96.0.20", 80)));
        // A third service sharing an endpoint (a shared hairpin count of 2, built whole by
        // `full`, one service at a time by `render`) and its dispatch chain.
        state.apply(Object::from(mk_service("dev", "same", "10.96.0.30", 80)));
        state.apply(Object::from(mk_slice(
            "dev",
            "same",
            56010,
            vec![
                mk_endpoint("192.168.169.166", "k8s-node2"),
                mk_endpoint("192.168.36.70", "k8s-node1"),
            ],
        )));
        for node in ["k8s-node1", "k8s-node2"] {
            let ctx = NodeContext {
                node_name: node.into(),
                family: IpFamily::V4,
            };
            let compiler = crate::NodeCompiler::new(&state, &ctx, &cfg());
            let whole = render(&Plan::build(&NodeView::build(&state, &ctx), &cfg()));
            let full = super::NodeRules::new(&compiler).full(&state);
            assert_eq!(full, whole, "{node} {policy:?}");
            let counts: Vec<usize> = ["192.168.169.166", "192.168.36.70"]
                .iter()
                .map(|ip| full.shared_count("hairpin", &hairpin_key(ip)))
                .collect();
            shared_twice |= counts.contains(&2);
        }
    }
    assert!(
        shared_twice,
        "no hairpin element was shared by two services"
    );
}

fn with_affinity(mut state: ClusterState, timeout: u32) -> ClusterState {
    let mut svc = with_node_port(
        mk_service("dev", "url-analysis", "10.96.198.86", 8080),
        32223,
        TrafficPolicy::Cluster,
    );
    svc.session_affinity = ferry_model::SessionAffinity::ClientIp {
        timeout_seconds: timeout,
    };
    state.apply(Object::from(svc));
    state
}

#[test]
fn an_affinity_service_keeps_endpoint_changes_element_only() {
    let eps = |b: &'static str| {
        with_affinity(
            seed_state(TrafficPolicy::Cluster, &["192.168.169.166", b]),
            30,
        )
    };
    let before = ruleset(&eps("192.168.169.168"), "k8s-node1");
    let after = ruleset(&eps("192.168.169.170"), "k8s-node1");
    let changes = BTreeMap::from([(svc(), after.services.get(&svc()).cloned())]);
    let tx = Transaction::delta(&before, &changes);
    assert!(!tx.text.contains("chain"), "no chain, no rule: {}", tx.text);
    // The frontends' record elements follow the endpoints.
    for want in [
        "delete element ip ferry affinity-service-ips { 10.96.198.86 . tcp . 8080 . 192.168.169.168 . 56010 }",
        "10.96.198.86 . tcp . 8080 . 192.168.169.170 . 56010 : goto affinity-ip-30",
        "tcp . 32223 . 192.168.169.170 . 56010 : goto affinity-nodeport-30",
    ] {
        assert!(tx.text.contains(want), "{want}: {}", tx.text);
    }
}

#[test]
fn set_elements_streams_what_all_elements_lists() {
    let mut state = seed_state(TrafficPolicy::Local, &["192.168.169.166", "192.168.36.70"]);
    let other = mk_service("dev", "other", "10.96.0.20", 80);
    state.apply(Object::from(other));
    state.apply(Object::from(mk_slice(
        "dev",
        "other",
        56010,
        vec![mk_endpoint("192.168.169.166", "k8s-node2")],
    )));
    let rs = ruleset(&state, "k8s-node2");
    let all = rs.all_elements();
    assert_eq!(all["hairpin"].len(), 2, "one per endpoint address");
    for s in &rs.sets {
        let mut streamed: Vec<Element> = rs.set_elements(s.name).map(|e| e.into_owned()).collect();
        streamed.sort();
        let listed: Vec<Element> = all
            .get(s.name)
            .map(|els| els.iter().map(|e| e.as_ref().clone()).collect())
            .unwrap_or_default();
        assert_eq!(streamed, listed, "{}", s.name);
    }
}

#[test]
fn affinity_shapes_read_the_pin_map_before_the_random_choice() {
    let rs = ruleset(
        &with_affinity(
            seed_state(TrafficPolicy::Cluster, &["192.168.169.166"]),
            10800,
        ),
        "k8s-node1",
    );
    let chain = |name: &str| {
        rs.dispatch_chains()
            .find(|c| c.name == name)
            .unwrap_or_else(|| panic!("no chain {name}: {rs}"))
            .rules
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
    };
    let ip = chain("cluster-ip-cluster-1-affinity");
    assert!(ip[1].ends_with("ip daddr . meta l4proto . th dport . ip saddr map @affinity"));
    assert!(ip[2].contains("numgen random mod 1"));
    let np = chain("nodeport-cluster-1-affinity");
    assert!(np[1].ends_with("meta l4proto . th dport . ip saddr map @nodeport-affinity"));
    assert_eq!(
        chain("affinity-ip-10800"),
        ["meta l4proto { tcp, udp, sctp } update @affinity { ct original ip daddr . meta l4proto . ct original proto-dst . ip saddr timeout 3h : ip daddr . th dport }"]
    );
    assert!(chain("affinity-nodeport-10800")[0]
        .starts_with("meta l4proto { tcp, udp, sctp } update @nodeport-affinity { meta l4proto . ct original proto-dst . ip saddr timeout 3h"));
    // Without affinity nothing reads or records pins.
    let plain = ruleset(
        &seed_state(TrafficPolicy::Cluster, &["192.168.169.166"]),
        "k8s-node1",
    );
    assert!(plain
        .dispatch_chains()
        .all(|c| !c.name.contains("affinity")));
}

/// Services `dev/a` and `dev/b` (those of `names`) on one external IP and port.
fn sharing_an_external_ip(names: &[&str]) -> ClusterState {
    let mut state = ClusterState::new();
    for name in names {
        // Addresses of its own, whatever else is in the state.
        let i = usize::from(name.as_bytes()[0] - b'a');
        let mut svc = mk_service("dev", name, &format!("10.96.0.{}", 10 + i), 80);
        svc.external_ips = vec![ip("192.0.2.1")];
        state.apply(Object::from(svc));
        state.apply(Object::from(mk_slice(
            "dev",
            name,
            8080,
            vec![mk_endpoint(&format!("192.168.169.{}", 10 + i), "k8s-node2")],
        )));
    }
    state
}

#[test]
fn an_external_ip_shared_by_two_services_passes_to_the_second_in_an_incremental_sync() {
    // The API server lets two Services claim one external IP and port: the first by name
    // serves it; when it goes, the state touches the second, and the delta hands it over.
    let mut state = sharing_an_external_ip(&["a", "b"]);
    let mut installed = ruleset(&state, "k8s-node2");
    let touched = state.delete(&ObjectKey::Service(ServiceName::new("dev", "a")));
    let after = ruleset(&state, "k8s-node2");
    let changes: BTreeMap<_, _> = touched
        .services
        .iter()
        .map(|name| (name.clone(), after.services.get(name).cloned()))
        .collect();
    assert_eq!(changes.len(), 2);
    let tx = Transaction::delta(&installed, &changes);
    assert!(
        tx.text.contains(
            "add element ip ferry service-ips { 192.0.2.1 . tcp . 80 comment \"dev/b:http\""
        ),
        "{}",
        tx.text
    );
    for (name, rules) in changes {
        installed.set_service(name, rules);
    }
    assert_eq!(installed.all_elements(), after.all_elements());
    assert_eq!(
        after.all_elements(),
        ruleset(&sharing_an_external_ip(&["b"]), "k8s-node2").all_elements()
    );
}
