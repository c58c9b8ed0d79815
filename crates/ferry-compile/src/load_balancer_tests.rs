//! LoadBalancer Services across the compiler: the plan's decisions (firewall, external
//! traffic), both backends' rules, and the trace.

use ferry_model::fixtures::*;
use ferry_model::{
    ClusterState, IpFamily, NodeContext, NodeView, Object, Protocol, Service, ServiceType,
    TrafficPolicy,
};
use ipnet::IpNet;

use crate::config::{CompileConfig, LocalDetector, NodePortAddresses};
use crate::nft::{Key, Ruleset};
use crate::plan::{Dispatch, EndpointSet, NodePortScope, Plan, ServicePlan};
use crate::trace::{trace, Frontend, Masquerade, Packet, StepKind, Trace, Verdict};

const LB_IP: &str = "203.0.113.10";

fn net(s: &str) -> IpNet {
    s.parse().expect("net")
}

/// `dev/web` LoadBalancer (port 80 → 8080, NodePort 30080 unless `node_port` is false) with
/// one load-balancer IP, endpoints on node-b only (none when `endpoints` is false).
fn state(policy: TrafficPolicy, ranges: &[&str], node_port: bool, endpoints: bool) -> ClusterState {
    let mut svc: Service = mk_service("dev", "web", "172.30.0.10", 80);
    if node_port {
        svc = with_node_port(svc, 30080, policy);
    }
    svc.service_type = ServiceType::LoadBalancer;
    svc.external_traffic_policy = policy;
    svc.load_balancer_ips = vec![ip(LB_IP)];
    svc.load_balancer_source_ranges = ranges.iter().map(|r| net(r)).collect();
    let mut state = ClusterState::new();
    state.apply(Object::from(svc));
    let eps = if endpoints {
        vec![mk_endpoint("10.0.2.5", "node-b")]
    } else {
        Vec::new()
    };
    state.apply(Object::from(mk_slice("dev", "web", 8080, eps)));
    state.apply(Object::from(mk_node(
        "node-a",
        "192.168.0.2",
        "10.0.1.0/24",
    )));
    state.apply(Object::from(mk_node(
        "node-b",
        "192.168.0.3",
        "10.0.2.0/24",
    )));
    state
}

fn config() -> CompileConfig {
    CompileConfig {
        local_detector: LocalDetector::ClusterCidr(vec![net("10.0.0.0/16")]),
        ..CompileConfig::default()
    }
}

fn view(state: &ClusterState, node: &str) -> NodeView {
    let ctx = NodeContext {
        node_name: node.into(),
        family: IpFamily::V4,
    };
    NodeView::build(state, &ctx)
}

fn only(plan: &Plan) -> &ServicePlan {
    plan.services.values().next().expect("one service port")
}

fn explain(state: &ClusterState, node: &str, src: &str, dst: &str, port: u16) -> Trace {
    let view = view(state, node);
    let plan = Plan::build(&view, &config());
    let ruleset: Ruleset = crate::nft::render(&plan);
    let packet = Packet {
        src: ip(src),
        dst: ip(dst),
        port,
        protocol: Protocol::Tcp,
    };
    trace(&view, &plan, &ruleset, packet)
}

#[test]
fn load_balancer_ips_are_external_traffic_even_without_node_ports() {
    let s = state(TrafficPolicy::Local, &[], false, true);
    let plan = Plan::build(&view(&s, "node-a"), &config());
    let sp = only(&plan);
    assert_eq!(sp.node_port, None);
    assert_eq!(sp.load_balancer_ips, vec![ip(LB_IP)]);
    assert_eq!(
        sp.external.as_ref().map(|e| e.dispatch),
        Some(Dispatch::Drop)
    );
    assert_eq!(sp.firewall, None, "no source ranges, no firewall");
    let on_b = Plan::build(&view(&s, "node-b"), &config());
    let ext = only(&on_b).external.as_ref().map(|e| e.dispatch);
    assert_eq!(ext, Some(Dispatch::Forward(EndpointSet::Local)));
}

#[test]
fn source_ranges_are_aggregated_and_admit_the_load_balancer_ip_when_they_hold_the_node() {
    // 10.9.0.0/24 sits inside 10.9.0.0/16: one interval element each would overlap.
    let ranges = ["10.9.0.0/16", "10.9.0.0/24", "192.168.0.0/24"];
    let s = state(TrafficPolicy::Cluster, &ranges, true, true);
    let plan = Plan::build(&view(&s, "node-a"), &config());
    let fw = only(&plan).firewall.clone().expect("firewall");
    assert_eq!(
        fw.allowed,
        vec![
            net("10.9.0.0/16"),
            net("192.168.0.0/24"),
            net("203.0.113.10/32")
        ]
    );
    assert!(fw.allows(&ip(LB_IP)) && !fw.allows(&ip("198.51.100.1")));
    // Without a range holding the node's IP, the load-balancer IP is not a source.
    let s = state(TrafficPolicy::Cluster, &["10.9.0.0/16"], true, true);
    let plan = Plan::build(&view(&s, "node-a"), &config());
    let fw = only(&plan).firewall.clone().expect("firewall");
    assert_eq!(fw.allowed, vec![net("10.9.0.0/16")]);
}

#[test]
fn nft_firewall_is_elements_of_fixed_sets() {
    let s = state(TrafficPolicy::Cluster, &["198.51.100.0/24"], true, true);
    let rs = crate::nft::render(&Plan::build(&view(&s, "node-a"), &config()));
    let els: Vec<String> = rs
        .services
        .values()
        .flat_map(|r| &r.elements)
        .map(|e| format!("{} {e}", e.set))
        .collect();
    assert!(
        els.contains(&"firewall-ips 203.0.113.10 . tcp . 80 comment \"dev/web:http\"".to_owned()),
        "{els:#?}"
    );
    assert!(
        els.contains(&"firewall-allow 203.0.113.10 . tcp . 80 . 198.51.100.0/24".to_owned()),
        "{els:#?}"
    );
    assert!(
        els.iter()
            .any(|e| e.starts_with("service-ips 203.0.113.10 . tcp . 80")
                && e.ends_with("goto external-ip-cluster-1")),
        "{els:#?}"
    );
    // No per-service chain for the firewall: only the shared dispatch chains.
    let chains: Vec<&str> = rs.dispatch_chains().map(|c| c.name.as_str()).collect();
    assert_eq!(
        chains,
        [
            "cluster-ip-cluster-1",
            "external-ip-cluster-1",
            "nodeport-cluster-1"
        ]
    );
    let key = Key::FrontendSource(ip(LB_IP), Protocol::Tcp, 80, net("10.1.1.100/32"));
    assert_eq!(
        key.to_string(),
        "203.0.113.10 . tcp . 80 . 10.1.1.100",
        "as nft lists it"
    );
}

#[test]
fn iptables_firewall_chain_accepts_the_ranges_and_the_filter_drops_the_rest() {
    let s = state(TrafficPolicy::Cluster, &["198.51.100.0/24"], true, true);
    let rs = crate::iptables::render(&Plan::build(&view(&s, "node-a"), &config()));
    let rules = rs.services.values().next().expect("service");
    let fw = rules
        .chains
        .iter()
        .find(|c| c.name.starts_with("KUBE-FW-"))
        .expect("KUBE-FW-");
    let ext = rules
        .chains
        .iter()
        .find(|c| c.name.starts_with("KUBE-EXT-"))
        .expect("KUBE-EXT-");
    assert_eq!(fw.rules.len(), 2, "{fw:?}");
    assert!(
        fw.rules[0].ends_with(&format!("-s 198.51.100.0/24 -j {}", ext.name)),
        "{fw:?}"
    );
    assert!(rules
        .nat_services
        .iter()
        .any(|r| r.contains("loadbalancer IP")
            && r.ends_with(&format!("-d 203.0.113.10 --dport 80 -j {}", fw.name))));
    assert_eq!(rules.filter_firewall.len(), 1);
    assert!(rules.filter_firewall[0].ends_with("-d 203.0.113.10 --dport 80 -j DROP"));
    // Without endpoints: no KUBE-FW- (upstream iptables mode), everyone is rejected.
    let s = state(TrafficPolicy::Cluster, &["198.51.100.0/24"], true, false);
    let rs = crate::iptables::render(&Plan::build(&view(&s, "node-a"), &config()));
    let rules = rs.services.values().next().expect("service");
    assert!(
        rules.chains.is_empty() && rules.filter_firewall.is_empty(),
        "{rules:?}"
    );
    assert!(rules
        .filter_external
        .iter()
        .any(|r| r.contains("-d 203.0.113.10 --dport 80 -j REJECT")));
}

#[test]
fn node_port_prefixes_covering_loopback_exclude_it_in_both_backends() {
    let s = state(TrafficPolicy::Cluster, &[], true, true);
    let cfg = CompileConfig {
        node_port_addresses: NodePortAddresses {
            cidrs: vec![net("0.0.0.0/0")],
            primary: false,
            all: false,
        },
        ..config()
    };
    let plan = Plan::build(&view(&s, "node-a"), &cfg);
    assert!(plan.node_ports.covers_loopback());
    let nft = crate::nft::render(&plan).to_string();
    assert!(
        nft.contains("ip daddr @nodeport-ips ip daddr != 127.0.0.0/8 fib daddr type local"),
        "{nft}"
    );
    let ipt = crate::iptables::render(&plan);
    assert!(
        ipt.nodeport_jumps[0].ends_with("-d 127.0.0.0/8 -j RETURN"),
        "{:?}",
        ipt.nodeport_jumps
    );
    // The primary IP alone does not cover loopback: no extra rule.
    let primary = Plan::build(&view(&s, "node-a"), &config());
    assert_eq!(
        primary.node_ports,
        NodePortScope::LocalWithin(vec![net("192.168.0.2/32")])
    );
    assert!(!primary.node_ports.covers_loopback());
}

#[test]
fn explain_follows_the_firewall() {
    let s = state(TrafficPolicy::Cluster, &["198.51.100.0/24"], true, true);
    let allowed = explain(&s, "node-a", "198.51.100.7", LB_IP, 80);
    assert_eq!(allowed.frontend, Some(Frontend::LoadBalancerIp));
    assert!(allowed
        .steps
        .iter()
        .any(|s| s.kind == StepKind::FirewallAllowed));
    assert!(
        matches!(allowed.verdict, Verdict::Forwarded { .. }),
        "{}",
        allowed.to_text()
    );
    assert!(
        matches!(allowed.masquerade(), Some(Masquerade::Yes(_))),
        "Cluster policy"
    );

    let denied = explain(&s, "node-a", "203.0.113.99", LB_IP, 80);
    assert_eq!(denied.verdict, Verdict::Dropped, "{}", denied.to_text());
    let text = denied.to_text();
    assert!(
        text.contains("not in loadBalancerSourceRanges")
            && text.contains("chain firewall-allow-check"),
        "{text}"
    );
    let ipt = denied.clone().for_iptables().to_text();
    assert!(ipt.contains("filter KUBE-PROXY-FIREWALL (DROP"), "{ipt}");

    // The NodePort is not subject to the ranges, and is not opened on the load-balancer IP.
    let np = explain(&s, "node-a", "203.0.113.99", "192.168.0.2", 30080);
    assert!(
        matches!(np.verdict, Verdict::Forwarded { .. }),
        "{}",
        np.to_text()
    );
    let on_lb = explain(&s, "node-a", "203.0.113.99", LB_IP, 30080);
    assert_eq!(on_lb.verdict, Verdict::NotAService);
    let localhost = explain(&s, "node-a", "127.0.0.1", "127.0.0.1", 30080);
    assert_eq!(localhost.verdict, Verdict::NotAService);
}

#[test]
fn explain_of_a_firewalled_service_without_endpoints_differs_by_backend() {
    let s = state(TrafficPolicy::Cluster, &["198.51.100.0/24"], true, false);
    let denied = explain(&s, "node-a", "203.0.113.99", LB_IP, 80);
    assert_eq!(
        denied.verdict,
        Verdict::Dropped,
        "nftables: the firewall runs first"
    );
    let ipt = denied.for_iptables();
    assert_eq!(
        ipt.verdict,
        Verdict::Rejected,
        "iptables: no KUBE-FW- without endpoints"
    );
    let allowed = explain(&s, "node-a", "198.51.100.7", LB_IP, 80);
    assert_eq!(allowed.verdict, Verdict::Rejected);
}

#[test]
fn local_policy_load_balancer_ip_drops_without_local_endpoint() {
    let s = state(TrafficPolicy::Local, &[], false, true);
    let t = explain(&s, "node-a", "203.0.113.99", LB_IP, 80);
    assert_eq!(t.verdict, Verdict::Dropped, "{}", t.to_text());
    assert!(
        t.to_text().contains("service-endpoints-check"),
        "{}",
        t.to_text()
    );
    let t = explain(&s, "node-b", "203.0.113.99", LB_IP, 80);
    assert!(matches!(t.verdict, Verdict::Forwarded { .. }));
    assert_eq!(
        t.masquerade(),
        Some(Masquerade::No),
        "Local keeps the client's address"
    );
}

/// Upstream kube-proxy's nftables mode (v1.37.2, run in the lab: `kube_proxy_diff.rs`) checks
/// `no-endpoint-services` on output at filter priority, after `nat-output`: the node's own
/// traffic is short-circuited (masqueraded, to the cluster-wide endpoints) before the check, as
/// in iptables mode.
#[test]
fn node_traffic_to_a_local_policy_load_balancer_ip_without_local_endpoint_is_short_circuited() {
    let s = state(TrafficPolicy::Local, &[], false, true);
    let t = explain(&s, "node-a", "192.168.0.2", LB_IP, 80);
    assert!(
        matches!(t.verdict, Verdict::Forwarded { .. }),
        "nftables: {}",
        t.to_text()
    );
    assert!(matches!(t.masquerade(), Some(Masquerade::Yes(_))));
    let ipt = t.for_iptables();
    assert!(
        matches!(ipt.verdict, Verdict::Forwarded { .. }),
        "iptables short-circuits"
    );
    assert!(matches!(ipt.masquerade(), Some(Masquerade::Yes(_))));
}

/// The Dispatch step's why of a trace.
fn dispatch_why(t: &Trace) -> &str {
    let step = t.steps.iter().find(|s| s.kind == StepKind::Dispatch);
    step.map(|s| s.why.as_str()).expect("dispatch step")
}

#[test]
fn a_destination_two_services_claim_is_explained_with_the_one_that_does_not_get_it() {
    // dev/web's load-balancer IP is claimed by dev/zed too (later by name), and dev/alloc's
    // ClusterIP is claimed by dev/web as an external IP.
    let mut s = state(TrafficPolicy::Cluster, &[], false, true);
    let mut zed = mk_service("dev", "zed", "172.30.0.11", 80);
    zed.load_balancer_ips = vec![ip(LB_IP)];
    s.apply(Object::from(zed));
    let name = ferry_model::ServiceName::new("dev", "web");
    let mut web = s.service(&name).expect("web").clone();
    web.external_ips = vec![ip("172.30.0.99")];
    s.apply(Object::from(web));
    s.apply(Object::from(mk_service("dev", "alloc", "172.30.0.99", 80)));

    let t = explain(&s, "node-a", "198.51.100.7", LB_IP, 80);
    assert_eq!(
        t.service.as_ref().map(|n| n.service.to_string()).as_deref(),
        Some("dev/web")
    );
    assert!(
        dispatch_why(&t).ends_with(
            "; Service dev/zed also claims it (load-balancer IP 203.0.113.10), which is not \
             programmed for it: Service dev/web claims it too and serves it (the first by name)"
        ),
        "{t:#?}"
    );
    let t = explain(&s, "node-a", "198.51.100.7", "172.30.0.99", 80);
    assert_eq!(t.frontend, Some(Frontend::ClusterIp));
    assert!(
        dispatch_why(&t).ends_with(
            "; Service dev/web also claims it (external IP 172.30.0.99), which is not \
             programmed for it: it is Service dev/alloc's ClusterIP, which keeps its destination"
        ),
        "{t:#?}"
    );
    // A destination nobody else claims says nothing more.
    let t = explain(&s, "node-a", "198.51.100.7", "172.30.0.11", 80);
    assert!(dispatch_why(&t).ends_with("before routing"), "{t:#?}");
}
