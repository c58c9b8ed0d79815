//! Plans per IP family: each family sees only its own ClusterIPs, endpoints, pod CIDRs and
//! node addresses.

use ferry_model::fixtures::*;
use ferry_model::{
    ClusterState, IpFamily, NodeAddress, NodeAddressType, NodeContext, NodeView, Object,
    TrafficPolicy,
};

use super::super::*;
use crate::config::{CompileConfig, LocalDetector, NodePortAddresses};

fn plan(state: &ClusterState, family: IpFamily, cfg: &CompileConfig) -> Plan {
    let ctx = NodeContext {
        node_name: "node-a".into(),
        family,
    };
    let cfg = CompileConfig {
        family,
        ..cfg.clone()
    };
    Plan::build(&NodeView::build(state, &ctx), &cfg)
}

fn net(s: &str) -> IpNet {
    s.parse().expect("net")
}

/// `dual` (both families), `v6only`, `v4only`, all with endpoints on node-a; node-a has an
/// address and a pod CIDR in each family when `dual_node`.
fn state(dual_node: bool) -> ClusterState {
    let mut s = ClusterState::new();
    let mut dual = with_node_port(
        mk_service("dev", "dual", "10.96.0.10", 80),
        30080,
        TrafficPolicy::Cluster,
    );
    dual.cluster_ips.push(ip("fd00:10:96::10"));
    s.apply(Object::from(dual));
    s.apply(Object::from(mk_service(
        "dev",
        "v6only",
        "fd00:10:96::20",
        80,
    )));
    s.apply(Object::from(mk_service("dev", "v4only", "10.96.0.30", 80)));
    let v4 = mk_slice(
        "dev",
        "dual",
        8080,
        vec![mk_endpoint("10.244.1.5", "node-a")],
    );
    s.apply(Object::from(v4));
    for (svc, name) in [("dual", "dual-v6"), ("v6only", "v6only-v6")] {
        let mut v6 = mk_slice(
            "dev",
            svc,
            8080,
            vec![mk_endpoint("fd00:10:244:1::5", "node-a")],
        );
        v6.family = IpFamily::V6;
        v6.name = name.into();
        s.apply(Object::from(v6));
    }
    let mut node = mk_node("node-a", "10.1.1.9", "10.244.1.0/24");
    if dual_node {
        node.addresses.push(NodeAddress {
            kind: NodeAddressType::InternalIp,
            address: ip("fd00:10:1::9"),
        });
        node.pod_cidrs.push(net("fd00:10:244:1::/64"));
    }
    s.apply(Object::from(node));
    s
}

#[test]
fn each_family_plans_only_its_own_cluster_ips_and_endpoints() {
    let s = state(true);
    let cfg = CompileConfig::default();
    let v4 = plan(&s, IpFamily::V4, &cfg);
    let v6 = plan(&s, IpFamily::V6, &cfg);
    let names = |p: &Plan| -> Vec<String> {
        p.services
            .values()
            .map(|sp| sp.name.service.name.to_string())
            .collect()
    };
    assert_eq!(names(&v4), ["dual", "v4only"]);
    assert_eq!(names(&v6), ["dual", "v6only"]);
    let dual6 = v6.services.values().next().expect("dual");
    assert_eq!(dual6.cluster_ip, ip("fd00:10:96::10"));
    assert_eq!(
        dual6.cluster_endpoints,
        vec!["[fd00:10:244:1::5]:8080".parse().expect("addr")]
    );
    assert_eq!(v6.family, IpFamily::V6);
    // The IPv4-only service has no IPv6 ClusterIP: nothing at all in IPv6.
    assert!(v6.services.values().all(|sp| sp.cluster_ip.is_ipv6()));
}

#[test]
fn pod_cidrs_and_node_port_addresses_are_per_family() {
    let s = state(true);
    let cfg = CompileConfig {
        local_detector: LocalDetector::ClusterCidr(vec![
            net("10.244.0.0/16"),
            net("fd00:10:244::/48"),
        ]),
        ..CompileConfig::default()
    };
    let v6 = plan(&s, IpFamily::V6, &cfg);
    assert_eq!(v6.local.cidrs(), [net("fd00:10:244::/48")]);
    assert_eq!(
        v6.node_ports,
        NodePortScope::LocalWithin(vec![net("fd00:10:1::9/128")])
    );
    let node_cidr = CompileConfig {
        local_detector: LocalDetector::NodeCidr,
        ..CompileConfig::default()
    };
    assert_eq!(
        plan(&s, IpFamily::V6, &node_cidr).local.cidrs(),
        [net("fd00:10:244:1::/64")]
    );
}

#[test]
fn a_node_without_an_ipv6_address_opens_no_ipv6_node_port_by_default() {
    let v6 = plan(&state(false), IpFamily::V6, &CompileConfig::default());
    assert_eq!(v6.node_ports, NodePortScope::LocalWithin(Vec::new()));
}

#[test]
fn node_port_cidrs_of_the_other_family_only_open_every_address_like_upstream() {
    let cfg = CompileConfig {
        node_port_addresses: NodePortAddresses {
            cidrs: vec![net("10.1.1.0/24")],
            primary: false,
            all: false,
        },
        ..CompileConfig::default()
    };
    let s = state(true);
    assert_eq!(
        plan(&s, IpFamily::V6, &cfg).node_ports,
        NodePortScope::AllLocal
    );
    assert_eq!(
        plan(&s, IpFamily::V4, &cfg).node_ports,
        NodePortScope::LocalWithin(vec![net("10.1.1.0/24")])
    );
}
