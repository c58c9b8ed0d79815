//! ServiceCIDRs across the compiler: the plan's ranges, nftables mode's `cluster-ips-check`
//! drop rule, and the trace in every mode (only nftables and userspace modes drop).

use ferry_model::fixtures::*;
use ferry_model::{ClusterState, IpFamily, NodeContext, Object, Protocol, ServiceCidr};
use ipnet::IpNet;

use crate::config::{CompileConfig, LocalDetector};
use crate::mode::{
    IptablesRenderer, IpvsRenderer, NftRenderer, ProxyMode, Renderer, UserspaceRenderer,
};
use crate::trace::{NodeAddresses, Packet, StepKind, Trace, Verdict};
use crate::NodeCompiler;

fn cidr(name: &str, cidrs: &[&str]) -> Object {
    Object::from(ServiceCidr {
        name: name.into(),
        cidrs: cidrs.iter().map(|c| c.parse().expect("cidr")).collect(),
    })
}

/// `dev/web` on 172.30.0.10:80 with an endpoint on node-a, and `cidrs`.
fn state(cidrs: Vec<Object>) -> ClusterState {
    let mut state = ClusterState::new();
    state.apply(Object::from(mk_service("dev", "web", "172.30.0.10", 80)));
    let eps = vec![mk_endpoint("10.0.1.5", "node-a")];
    state.apply(Object::from(mk_slice("dev", "web", 8080, eps)));
    state.apply(Object::from(mk_node(
        "node-a",
        "192.168.0.2",
        "10.0.1.0/24",
    )));
    for c in cidrs {
        state.apply(c);
    }
    state
}

fn compiler(state: &ClusterState, family: IpFamily) -> NodeCompiler {
    let ctx = NodeContext {
        node_name: "node-a".into(),
        family,
    };
    let cfg = CompileConfig {
        family,
        local_detector: LocalDetector::ClusterCidr(vec!["10.0.0.0/8".parse().expect("cidr")]),
        ..CompileConfig::default()
    };
    NodeCompiler::new(state, &ctx, &cfg)
}

/// The `cluster-ips-check` chain's rules in nftables mode.
fn check_chain(state: &ClusterState, family: IpFamily) -> Vec<String> {
    let plan = compiler(state, family).plan(state);
    let ruleset = crate::nft::render(&plan);
    let chain = ruleset
        .chains
        .iter()
        .find(|c| c.name == "cluster-ips-check");
    chain.expect("cluster-ips-check").rules.clone()
}

fn explain(renderer: &dyn Renderer, state: &ClusterState, dst: &str, port: u16) -> Trace {
    let packet = Packet {
        src: ip("10.0.1.7"),
        dst: ip(dst),
        port,
        protocol: Protocol::Tcp,
    };
    let compiler = compiler(state, IpFamily::V4);
    renderer.trace(&compiler, state, packet, &NodeAddresses::default())
}

fn default_cidrs() -> ClusterState {
    state(vec![cidr(
        "kubernetes",
        &["172.30.0.0/16", "fd00:172:30::/112"],
    )])
}

#[test]
fn without_service_cidrs_the_check_only_rejects_unknown_ports() {
    assert_eq!(
        check_chain(&state(Vec::new()), IpFamily::V4),
        ["ip daddr @cluster-ips reject"]
    );
}

#[test]
fn service_cidrs_of_the_family_are_dropped_after_the_cluster_ips_are_checked() {
    let state = state(vec![
        cidr("kubernetes", &["172.30.0.0/16", "fd00:172:30::/112"]),
        cidr("inside", &["172.30.128.0/17"]),
        cidr("next", &["172.31.0.0/16"]),
    ]);
    assert_eq!(
        check_chain(&state, IpFamily::V4),
        [
            "ip daddr @cluster-ips reject",
            // Overlapping and adjacent ranges are aggregated (an nft interval set refuses
            // overlapping elements).
            "ip daddr { 172.30.0.0/15 } drop",
        ]
    );
    assert_eq!(
        check_chain(&state, IpFamily::V6),
        [
            "ip6 daddr @cluster-ips reject",
            "ip6 daddr { fd00:172:30::/112 } drop",
        ]
    );
    let plan = compiler(&state, IpFamily::V4).base_plan().clone();
    let want: Vec<IpNet> = vec!["172.30.0.0/15".parse().expect("cidr")];
    assert_eq!(plan.service_cidrs, want, "the node-level plan has them");
}

#[test]
fn an_unallocated_address_of_a_service_cidr_is_dropped_in_nftables_mode() {
    let state = default_cidrs();
    let t = explain(&NftRenderer, &state, "172.30.0.99", 80);
    assert_eq!(t.verdict, Verdict::Dropped);
    let text = t.to_text();
    assert!(
        text.contains("172.30.0.99 is inside service CIDR 172.30.0.0/16 (ServiceCIDR kubernetes)"),
        "{text}"
    );
    assert!(text.contains("nft: chain cluster-ips-check"), "{text}");
    assert_eq!(t.steps[0].kind, StepKind::UnallocatedServiceIp);
    // The userspace mode shares nftables mode's checks.
    let u = explain(&UserspaceRenderer, &state, "172.30.0.99", 80);
    assert_eq!(u.verdict, Verdict::Dropped, "{}", u.to_text());
}

#[test]
fn a_cluster_ip_still_serves_and_rejects_its_unknown_ports() {
    let state = default_cidrs();
    let served = explain(&NftRenderer, &state, "172.30.0.10", 80);
    assert!(
        matches!(served.verdict, Verdict::Forwarded { .. }),
        "{}",
        served.to_text()
    );
    let unknown = explain(&NftRenderer, &state, "172.30.0.10", 81);
    assert_eq!(unknown.verdict, Verdict::Rejected, "{}", unknown.to_text());
}

#[test]
fn an_address_outside_every_service_cidr_is_not_a_service() {
    let t = explain(&NftRenderer, &default_cidrs(), "172.29.0.1", 80);
    assert_eq!(t.verdict, Verdict::NotAService, "{}", t.to_text());
}

#[test]
fn iptables_and_ipvs_modes_route_unallocated_addresses_as_upstream_does() {
    let state = default_cidrs();
    for renderer in [&IptablesRenderer as &dyn Renderer, &IpvsRenderer] {
        let t = explain(renderer, &state, "172.30.0.99", 80);
        let mode = renderer.mode();
        assert_eq!(t.verdict, Verdict::NotAService, "{mode}: {}", t.to_text());
        assert!(
            t.steps
                .iter()
                .all(|s| s.kind != StepKind::UnallocatedServiceIp),
            "{mode}: {}",
            t.to_text()
        );
        if mode == ProxyMode::Iptables {
            assert!(
                t.to_text().contains("does nothing with ServiceCIDRs"),
                "{}",
                t.to_text()
            );
        }
    }
}

#[test]
fn a_node_address_inside_a_service_cidr_reached_from_elsewhere_is_not_dropped() {
    // The input hook, which cluster-ips-check is not on.
    let state = state(vec![cidr("wide", &["192.168.0.0/24"])]);
    let t = explain(&NftRenderer, &state, "192.168.0.2", 22);
    assert_ne!(t.verdict, Verdict::Dropped, "{}", t.to_text());
}
