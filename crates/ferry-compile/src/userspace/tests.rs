use ferry_model::fixtures::*;
use ferry_model::{ClusterState, IpFamily, NodeContext, NodeView, Object, Protocol, ServiceName};
use ferry_model::{ServicePortName, TrafficPolicy};

use std::collections::BTreeMap;

use super::*;
use crate::config::{CompileConfig, LocalDetector};
use crate::nft::{ServiceRules, Transaction};
use crate::Plan;

fn name(ns: &str, svc: &str, port: &str, protocol: Protocol) -> ServicePortName {
    ServicePortName {
        service: ServiceName::new(ns, svc),
        port: port.to_owned(),
        protocol,
    }
}

#[test]
fn port_range_parses_upstream_syntax() {
    assert_eq!(PortRange::parse(""), Ok(PortRange::DEFAULT));
    assert_eq!(PortRange::parse("0-0"), Ok(PortRange::DEFAULT));
    let r = PortRange::parse("20000-20009").expect("range");
    assert_eq!((r.first, r.last, r.size()), (20000, 20009, 10));
    let r = PortRange::parse("20000+9").expect("range");
    assert_eq!((r.first, r.last), (20000, 20009));
    for bad in ["x-1", "10-5", "0-10", "65535+1", "20000"] {
        let err = PortRange::parse(bad).expect_err(bad);
        assert!(err.to_string().contains(bad), "{err}");
    }
}

#[test]
fn a_service_port_gets_the_same_proxy_port_every_time() {
    let web = name("dev", "web", "http", Protocol::Tcp);
    let mut a = ProxyPorts::new(PortRange::DEFAULT);
    let mut b = ProxyPorts::new(PortRange::DEFAULT);
    // Other assignments in between do not move it (unless they collide).
    b.assign(&name("dev", "other", "", Protocol::Udp))
        .expect("port");
    let pa = a.assign(&web).expect("port");
    assert_eq!(pa, b.assign(&web).expect("port"));
    assert_eq!(pa, a.preferred(&web));
    assert!(PortRange::DEFAULT.contains(pa));
    // TCP and UDP ports of the same name are different service ports.
    assert_ne!(
        a.preferred(&web),
        a.preferred(&name("dev", "web", "http", Protocol::Udp))
    );
}

#[test]
fn collisions_take_the_next_free_port_and_the_range_can_run_out() {
    let mut ports = ProxyPorts::new(PortRange::parse("100-102").expect("range"));
    let names: Vec<_> = (0..4)
        .map(|i| name("ns", &format!("s{i}"), "", Protocol::Tcp))
        .collect();
    let got: Vec<u16> = names[..3]
        .iter()
        .map(|n| ports.assign(n).expect("free"))
        .collect();
    let mut sorted = got.clone();
    sorted.sort();
    assert_eq!(sorted, vec![100, 101, 102]);
    let err = ports.assign(&names[3]).expect_err("exhausted");
    assert!(err.to_string().contains("ns/s3"), "{err}");
    // A released port is reused once its listener is closed, and assignments are stable.
    ports.release(&names[0]);
    ports.closed();
    assert_eq!(ports.assign(&names[3]), Ok(got[0]));
    assert_eq!(ports.assign(&names[1]), Ok(got[1]));
}

#[test]
fn restored_assignments_win_and_unusable_ports_are_skipped() {
    let mut ports = ProxyPorts::new(PortRange::parse("100-109").expect("range"));
    let web = name("dev", "web", "", Protocol::Tcp);
    let db = name("dev", "db", "", Protocol::Tcp);
    assert!(ports.restore(&web, 105));
    assert!(!ports.restore(&db, 105), "taken");
    assert!(!ports.restore(&db, 99), "outside the range");
    assert_eq!(ports.get(&web), Some(105));
    assert_eq!(ports.mark_unusable(105), Some(web.clone()));
    let again = ports.assign(&web).expect("port");
    assert_ne!(again, 105);
    assert!(!ports.restore(&db, 105), "unusable");
    ports.retain(|n| n != &web);
    assert!(ports.is_empty());
}

fn seed(policy: TrafficPolicy, endpoints_on: &[&str]) -> ClusterState {
    let mut state = ClusterState::new();
    let addresses: Vec<String> = (0..endpoints_on.len())
        .map(|i| format!("192.168.169.{}", 166 + i))
        .collect();
    let eps: Vec<(&str, &str)> = addresses
        .iter()
        .map(String::as_str)
        .zip(endpoints_on.iter().copied())
        .collect();
    add_seed_web(&mut state, policy, &eps);
    for n in ["k8s-node1", "k8s-node2"] {
        state.apply(Object::from(seed_node(n)));
    }
    state
}

fn rules_on(node: &str, state: &ClusterState) -> Rules {
    let cfg = CompileConfig {
        local_detector: LocalDetector::ClusterCidr(vec!["192.168.0.0/16".parse().expect("cidr")]),
        ..CompileConfig::default()
    };
    let ctx = NodeContext {
        node_name: node.into(),
        family: IpFamily::V4,
    };
    let plan = Plan::build(&NodeView::build(state, &ctx), &cfg);
    let mut ports = ProxyPorts::new(PortRange::DEFAULT);
    for n in plan.services.keys() {
        ports.assign(n).expect("port");
    }
    render(&plan, &ports)
}

fn elements_of(rs: &Rules, set: &str) -> Vec<String> {
    rs.ruleset
        .all_elements()
        .get(set)
        .map(|els| els.iter().map(ToString::to_string).collect())
        .unwrap_or_default()
}

#[test]
fn cluster_ip_and_node_port_are_redirected_to_the_proxy_port() {
    let rs = rules_on("k8s-node1", &seed(TrafficPolicy::Cluster, &["k8s-node2"]));
    let (sp, info) = rs.ports.iter().next().expect("one port");
    let Proxied::Port(p) = info.proxied else {
        panic!("{sp} not proxied")
    };
    assert_eq!(
        elements_of(&rs, "portals"),
        [format!(
            "10.96.198.86 . tcp . 8080 comment \"dev/web:http\" : {p}"
        )]
    );
    assert_eq!(
        elements_of(&rs, "nodeports"),
        [format!("tcp . 32223 comment \"dev/web:http\" : {p}")]
    );
    assert_eq!(
        elements_of(&rs, "proxy-ports"),
        [format!("tcp . {p} comment \"dev/web:http\"")]
    );
    assert!(elements_of(&rs, "no-endpoint-nodeports").is_empty());
    // Everything is DNATed to the node's address (never `redirect`ed: a pod's host-side veth
    // may have no address to redirect to).
    let text = rs.ruleset.to_string();
    assert!(text.contains("dnat ip to 10.1.1.17:ip daddr . meta l4proto . th dport map @portals"));
    assert!(!text.contains("redirect to"), "{text}");
    assert!(port_table(IpFamily::V4, &rs.ports).contains(&format!(
        "{p}/tcp <- dev/web:http <- 10.96.198.86:8080, *:32223"
    )));
}

#[test]
fn local_policy_without_local_endpoint_redirects_only_the_node_and_its_pods() {
    let rs = rules_on("k8s-node1", &seed(TrafficPolicy::Local, &["k8s-node2"]));
    assert!(elements_of(&rs, "nodeports").is_empty());
    let short = elements_of(&rs, "nodeports-local-sources");
    assert_eq!(short.len(), 1, "{short:?}");
    assert_eq!(
        elements_of(&rs, "no-endpoint-nodeports"),
        ["tcp . 32223 comment \"dev/web:http\" : drop"]
    );
    let text = rs.ruleset.to_string();
    assert!(
        text.contains("ip saddr { 192.168.0.0/16 } meta l4proto { tcp, udp } dnat ip to 10.1.1.17:meta l4proto . th dport map @nodeports-local-sources"),
        "{text}"
    );
    // On the node with the endpoints everyone is redirected (the proxy picks the set).
    let rs = rules_on("k8s-node2", &seed(TrafficPolicy::Local, &["k8s-node2"]));
    assert_eq!(elements_of(&rs, "nodeports").len(), 1);
}

#[test]
fn no_endpoints_sctp_and_missing_ports_are_rejected_by_the_kernel() {
    let rs = rules_on("k8s-node1", &seed(TrafficPolicy::Cluster, &[]));
    assert_eq!(
        elements_of(&rs, "no-endpoint-services"),
        ["10.96.198.86 . tcp . 8080 comment \"dev/web:http\" : goto reject-chain"]
    );
    assert!(elements_of(&rs, "portals").is_empty());

    let mut state = seed(TrafficPolicy::Cluster, &["k8s-node2"]);
    let mut svc = mk_service("dev", "assoc", "10.96.0.7", 9000);
    svc.ports[0].protocol = Protocol::Sctp;
    state.apply(Object::from(svc));
    let rs = rules_on("k8s-node1", &state);
    let (sctp, _) = rs
        .ports
        .iter()
        .find(|(_, r)| r.proxied == Proxied::Sctp)
        .expect("the SCTP port");
    assert_eq!(sctp.service.name.as_ref(), "assoc");
    assert!(elements_of(&rs, "no-endpoint-services").contains(
        &"10.96.0.7 . sctp . 9000 comment \"dev/assoc:http\" : goto reject-chain".to_owned()
    ));
    assert!(port_table(IpFamily::V4, &rs.ports).contains("SCTP is not proxied in user space"));

    let nctx = NodeContext {
        node_name: "k8s-node1".into(),
        family: IpFamily::V4,
    };
    let plan = Plan::build(&NodeView::build(&state, &nctx), &CompileConfig::default());
    let web = plan
        .services
        .values()
        .find(|p| p.name.service.name.as_ref() == "web");
    let (els, info) = render_port(web.expect("web"), None);
    assert_eq!(info.proxied, Proxied::NoPort);
    assert!(els.iter().all(|e| e.set != "portals"));
}

#[test]
fn without_a_node_address_the_nodes_own_traffic_is_redirected() {
    let mut state = seed(TrafficPolicy::Cluster, &["k8s-node2"]);
    state.apply(Object::from(mk_service("dev", "x", "10.96.0.9", 80)));
    let rs = rules_on("unknown-node", &state);
    let host = rs
        .ruleset
        .chains
        .iter()
        .find(|c| c.name == "portals-host")
        .expect("portals-host");
    assert!(host.rules[0].contains("redirect to :"), "{:?}", host.rules);
}

/// The transaction of an incremental sync from `old` to `new`, or `None` when the base
/// changed (a full sync is needed).
fn delta(old: &Rules, new: &Rules) -> Option<String> {
    if !old.ruleset.same_base(&new.ruleset) {
        return None;
    }
    let mut changes: BTreeMap<ServiceName, Option<ServiceRules>> = BTreeMap::new();
    for name in old
        .ruleset
        .services
        .keys()
        .chain(new.ruleset.services.keys())
    {
        changes.insert(name.clone(), new.ruleset.services.get(name).cloned());
    }
    Some(Transaction::delta(&old.ruleset, &changes).text)
}

#[test]
fn endpoint_changes_are_element_changes_and_a_new_node_address_is_not() {
    let old = rules_on("k8s-node1", &seed(TrafficPolicy::Cluster, &["k8s-node2"]));
    let same = rules_on(
        "k8s-node1",
        &seed(TrafficPolicy::Cluster, &["k8s-node2", "k8s-node1"]),
    );
    // The proxy picks endpoints: the rules do not change at all.
    assert_eq!(delta(&old, &same), Some(String::new()));
    let none = rules_on("k8s-node1", &seed(TrafficPolicy::Cluster, &[]));
    let d = delta(&old, &none).expect("elements only");
    assert!(
        d.contains("delete element ip ferry portals { 10.96.198.86 . tcp . 8080 }"),
        "{d}"
    );
    assert!(
        d.contains("add element ip ferry no-endpoint-services"),
        "{d}"
    );
    let other_node = rules_on("k8s-node2", &seed(TrafficPolicy::Cluster, &["k8s-node2"]));
    assert_eq!(delta(&old, &other_node), None);
}
