//! Where NodePorts answer: the plan's scope against the node's addresses (declared or live),
//! and what each mode does with a NodePort's port where it does not answer.

use ferry_model::fixtures::*;
use ferry_model::{ClusterState, IpFamily, NodeContext, NodeView, Object, Protocol, TrafficPolicy};
use ipnet::IpNet;

use super::*;
use crate::config::{CompileConfig, LocalDetector};
use crate::trace::{trace_at, Frontend, Origin, Packet, Trace};
use crate::Plan;

fn net(s: &str) -> IpNet {
    s.parse().expect("prefix")
}

fn view(state: &ClusterState) -> NodeView {
    let ctx = NodeContext {
        node_name: "node-a".into(),
        family: IpFamily::V4,
    };
    NodeView::build(state, &ctx)
}

/// The trace on node-a, with its plan's NodePort scope replaced when `scope` is given.
fn explain(
    state: &ClusterState,
    scope: Option<NodePortScope>,
    addresses: &NodeAddresses,
    src: &str,
    dst: &str,
) -> Trace {
    let view = view(state);
    let cfg = CompileConfig {
        local_detector: LocalDetector::ClusterCidr(vec![net("10.244.0.0/16")]),
        ..CompileConfig::default()
    };
    let mut plan = Plan::build(&view, &cfg);
    if let Some(scope) = scope {
        plan.node_ports = scope;
    }
    let packet = Packet {
        src: ip(src),
        dst: ip(dst),
        port: 30080,
        protocol: Protocol::Tcp,
    };
    trace_at(&view, &plan, &crate::nft::render(&plan), packet, addresses)
}

/// A client's packet to node-a's NodePort on 10.1.1.27, an address only declared (not its
/// Node object's primary IP), with the plan's own scope.
fn to_declared_address(state: &ClusterState) -> Trace {
    explain(
        state,
        None,
        &declared(&["10.1.1.27"]),
        "10.1.1.100",
        "10.1.1.27",
    )
}

fn declared(extra: &[&str]) -> NodeAddresses {
    NodeAddresses::Declared(extra.iter().map(|a| ip(a)).collect())
}

fn kinds(t: &Trace) -> Vec<StepKind> {
    t.steps.iter().map(|s| s.kind).collect()
}

#[test]
fn a_node_port_answers_on_local_addresses_in_scope_only() {
    let s = two_node_web_state(TrafficPolicy::Cluster, &["10.244.2.5"]);
    let local = LocalAddresses::new(&view(&s), &declared(&["10.1.1.27"]), IpFamily::V4);
    let all = NodePortScope::AllLocal;
    let primary = NodePortScope::LocalWithin(vec![net("10.1.1.17/32")]);
    let lan = NodePortScope::LocalWithin(vec![net("10.1.1.0/24")]);
    let every = NodePortScope::LocalWithin(vec![net("0.0.0.0/0")]);
    let cases = [
        (&all, "10.1.1.17", NodePortAnswer::Answers),
        (&all, "10.1.1.27", NodePortAnswer::Answers),
        (&all, "10.1.1.9", NodePortAnswer::NotLocal),
        (&all, "127.0.0.1", NodePortAnswer::Loopback),
        (&primary, "10.1.1.17", NodePortAnswer::Answers),
        (&primary, "10.1.1.27", NodePortAnswer::OutOfScope),
        (&lan, "10.1.1.27", NodePortAnswer::Answers),
        // In the prefix, but not the node's: the kernel's local check fails.
        (&lan, "10.1.1.9", NodePortAnswer::NotLocal),
        (&every, "127.0.0.1", NodePortAnswer::Loopback),
    ];
    for (scope, dst, want) in cases {
        assert_eq!(answer(scope, &local, &ip(dst)), want, "{scope:?} {dst}");
    }
}

#[test]
fn declared_addresses_add_to_the_node_object_and_live_ones_replace_it() {
    let s = two_node_web_state(TrafficPolicy::Cluster, &[]);
    let v = view(&s);
    let declared = LocalAddresses::new(&v, &declared(&["10.1.1.27", "fd00::1"]), IpFamily::V4);
    assert!(declared.has(&ip("10.1.1.17")) && declared.has(&ip("10.1.1.27")));
    assert!(!declared.has(&ip("fd00::1")), "another family");
    assert!(declared.has(&ip("127.0.0.5")), "loopback is always local");
    let live = NodeAddresses::Live(vec![ip("10.1.1.27"), ip("127.0.0.1")]);
    let live = LocalAddresses::new(&v, &live, IpFamily::V4);
    assert!(live.has(&ip("10.1.1.27")) && !live.has(&ip("10.1.1.17")));
    assert_eq!(live.describe(), "10.1.1.27 (its interfaces)");
}

#[test]
fn a_secondary_address_is_the_node_itself_and_answers_when_in_scope() {
    let s = two_node_web_state(TrafficPolicy::Cluster, &["10.244.2.5"]);
    let t = explain(
        &s,
        Some(NodePortScope::AllLocal),
        &declared(&["10.1.1.27"]),
        "10.1.1.100",
        "10.1.1.27",
    );
    assert_eq!(t.frontend, Some(Frontend::NodePort));
    assert_eq!(t.verdict_word(), "forwarded");
    let from_it = explain(
        &s,
        None,
        &declared(&["10.1.1.27"]),
        "10.1.1.27",
        "10.96.0.10",
    );
    assert_eq!(from_it.origin, Origin::ThisNode);
    let undeclared = explain(&s, None, &declared(&[]), "10.1.1.27", "10.96.0.10");
    assert_eq!(undeclared.origin, Origin::Outside);
}

#[test]
fn an_address_the_node_does_not_have_is_named_with_the_nodes_addresses() {
    let s = two_node_web_state(TrafficPolicy::Cluster, &["10.244.2.5"]);
    let t = explain(&s, None, &declared(&[]), "10.1.1.100", "10.1.1.9");
    assert_eq!(t.verdict, Verdict::NotAService);
    assert_eq!(
        kinds(&t),
        [StepKind::NodePortNotHere(NodePortAnswer::NotLocal)]
    );
    let text = t.to_text();
    assert!(
        text.contains("10.1.1.9 is not an address of node node-a, so NodePort 30080/tcp"),
        "{text}"
    );
    assert!(
        text.contains("this node's: 10.1.1.17 (Node object)"),
        "{text}"
    );
    // Same in iptables mode: its filter matches local addresses only.
    let ipt = t.for_iptables();
    assert_eq!(ipt.verdict, Verdict::NotAService);
    assert!(ipt
        .to_text()
        .contains("--dst-type LOCAL: not a local address"));
}

#[test]
fn out_of_scope_without_local_endpoints_nftables_delivers_iptables_drops() {
    let s = two_node_web_state(TrafficPolicy::Local, &["10.244.2.5"]);
    let t = to_declared_address(&s);
    assert_eq!(t.verdict, Verdict::NotAService);
    assert_eq!(
        kinds(&t),
        [
            StepKind::NodePortNotHere(NodePortAnswer::OutOfScope),
            StepKind::DeliveredLocally
        ]
    );
    assert!(t
        .to_text()
        .contains("set nodeport-ips (no element for 10.1.1.27)"));
    assert!(t.to_mermaid().contains("delivered to the node"));
    let ipt = t.for_iptables();
    assert_eq!(ipt.verdict, Verdict::Dropped);
    assert_eq!(
        kinds(&ipt),
        [
            StepKind::NodePortNotHere(NodePortAnswer::OutOfScope),
            StepKind::LocalAddressFilter
        ]
    );
    let text = ipt.to_text();
    assert!(
        text.contains("filter KUBE-EXTERNAL-SERVICES (-m addrtype --dst-type LOCAL -p tcp --dport 30080: DROP"),
        "{text}"
    );
}

#[test]
fn out_of_scope_with_local_endpoints_is_delivered_in_both_modes() {
    let mut s = two_node_web_state(TrafficPolicy::Local, &[]);
    let eps = vec![mk_endpoint("10.244.1.5", "node-a")];
    s.apply(Object::from(mk_slice("dev", "web", 8080, eps)));
    let t = to_declared_address(&s);
    assert_eq!(t.verdict, Verdict::NotAService);
    assert_eq!(t.for_iptables().verdict, Verdict::NotAService);
}

#[test]
fn localhost_node_ports_are_never_opened_and_iptables_rejects_without_endpoints() {
    let s = two_node_web_state(TrafficPolicy::Cluster, &[]);
    let t = explain(&s, None, &declared(&[]), "10.1.1.17", "127.0.0.1");
    assert_eq!(t.origin, Origin::ThisNode);
    assert_eq!(t.verdict, Verdict::NotAService);
    assert_eq!(
        t.steps[0].kind,
        StepKind::NodePortNotHere(NodePortAnswer::Loopback)
    );
    assert!(t
        .to_text()
        .contains("is not opened on localhost (127.0.0.1)"));
    let ipt = t.for_iptables();
    assert_eq!(ipt.verdict, Verdict::Rejected);
    assert!(ipt
        .to_text()
        .contains("--dport 30080: REJECT: has no endpoints"));
}
