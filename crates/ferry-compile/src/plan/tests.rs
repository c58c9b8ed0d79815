use ferry_model::fixtures::*;
use ferry_model::{ClusterState, IpFamily, NodeContext, NodeView, Object, TrafficPolicy};

use super::*;
use crate::config::{CompileConfig, LocalDetector, NodePortAddresses};

fn plan_on(node: &str, state: &ClusterState, cfg: &CompileConfig) -> Plan {
    let ctx = NodeContext {
        node_name: node.into(),
        family: IpFamily::V4,
    };
    Plan::build(&NodeView::build(state, &ctx), cfg)
}

fn seed(policy: TrafficPolicy, eps: &[(&str, &str)]) -> ClusterState {
    let mut state = ClusterState::new();
    add_seed_web(&mut state, policy, eps);
    for n in ["k8s-master", "k8s-node1", "k8s-node2"] {
        state.apply(Object::from(seed_node(n)));
    }
    state
}

fn cluster_cidr() -> CompileConfig {
    CompileConfig {
        local_detector: LocalDetector::ClusterCidr(vec!["192.168.0.0/16".parse().expect("cidr")]),
        ..CompileConfig::default()
    }
}

fn only(plan: &Plan) -> &ServicePlan {
    plan.services.values().next().expect("one service port")
}

const TWO_ON_NODE2: &[(&str, &str)] = &[
    ("192.168.169.166", "k8s-node2"),
    ("192.168.169.168", "k8s-node2"),
];

#[test]
fn cluster_policy_forwards_everything_to_the_cluster_set() {
    let plan = plan_on(
        "k8s-node1",
        &seed(TrafficPolicy::Cluster, TWO_ON_NODE2),
        &cluster_cidr(),
    );
    let sp = only(&plan);
    assert_eq!(sp.internal, Dispatch::Forward(EndpointSet::Cluster));
    let ext = sp.external.as_ref().expect("node port makes it external");
    assert_eq!(ext.dispatch, Dispatch::Forward(EndpointSet::Cluster));
    assert_eq!(sp.used_sets(), vec![EndpointSet::Cluster]);
}

#[test]
fn local_policy_without_local_endpoints_drops_external_traffic() {
    let plan = plan_on(
        "k8s-node1",
        &seed(TrafficPolicy::Local, TWO_ON_NODE2),
        &cluster_cidr(),
    );
    let sp = only(&plan);
    assert_eq!(
        sp.external.as_ref().map(|e| e.dispatch),
        Some(Dispatch::Drop)
    );
    assert_eq!(
        sp.internal,
        Dispatch::Forward(EndpointSet::Cluster),
        "ClusterIP still works"
    );
    assert_eq!(
        sp.used_sets(),
        vec![EndpointSet::Cluster],
        "short-circuit uses the cluster set"
    );
}

#[test]
fn local_policy_with_local_endpoints_forwards_to_the_local_set() {
    let plan = plan_on(
        "k8s-node2",
        &seed(TrafficPolicy::Local, TWO_ON_NODE2),
        &cluster_cidr(),
    );
    let sp = only(&plan);
    assert_eq!(
        sp.external.as_ref().map(|e| e.dispatch),
        Some(Dispatch::Forward(EndpointSet::Local))
    );
    assert_eq!(sp.local_endpoints.len(), 2);
    assert_eq!(
        sp.used_sets(),
        vec![EndpointSet::Cluster, EndpointSet::Local]
    );
}

#[test]
fn no_endpoints_anywhere_rejects_all_traffic() {
    let plan = plan_on(
        "k8s-node2",
        &seed(TrafficPolicy::Local, &[]),
        &cluster_cidr(),
    );
    let sp = only(&plan);
    assert_eq!(sp.internal, Dispatch::Reject);
    assert_eq!(
        sp.external.as_ref().map(|e| e.dispatch),
        Some(Dispatch::Reject)
    );
    assert!(sp.used_sets().is_empty());
}

#[test]
fn internal_local_policy_without_local_endpoints_drops_cluster_ip_traffic() {
    let mut state = seed(TrafficPolicy::Cluster, TWO_ON_NODE2);
    let mut svc = mk_service("dev", "web", "10.96.198.86", 8080);
    svc.internal_traffic_policy = TrafficPolicy::Local;
    state.apply(Object::from(svc));
    let sp_master = only(&plan_on("k8s-master", &state, &cluster_cidr())).clone();
    assert_eq!(sp_master.internal, Dispatch::Drop);
    let sp_node2 = only(&plan_on("k8s-node2", &state, &cluster_cidr())).clone();
    assert_eq!(sp_node2.internal, Dispatch::Forward(EndpointSet::Local));
}

#[test]
fn cluster_ip_masquerade_follows_the_local_detector_and_masquerade_all() {
    let state = seed(TrafficPolicy::Cluster, TWO_ON_NODE2);
    let none = CompileConfig::default();
    assert_eq!(
        only(&plan_on("k8s-master", &state, &none)).cluster_ip_masquerade,
        ClusterIpMasquerade::Never
    );
    assert_eq!(
        only(&plan_on("k8s-master", &state, &cluster_cidr())).cluster_ip_masquerade,
        ClusterIpMasquerade::NotFromPods
    );
    let all = CompileConfig {
        masquerade_all: true,
        ..cluster_cidr()
    };
    assert_eq!(
        only(&plan_on("k8s-master", &state, &all)).cluster_ip_masquerade,
        ClusterIpMasquerade::Always
    );
}

#[test]
fn node_cidr_detector_uses_this_nodes_pod_cidr() {
    let state = seed(TrafficPolicy::Cluster, TWO_ON_NODE2);
    let cfg = CompileConfig {
        local_detector: LocalDetector::NodeCidr,
        ..CompileConfig::default()
    };
    let plan = plan_on("k8s-node1", &state, &cfg);
    assert_eq!(
        plan.local.cidrs(),
        ["192.168.36.64/26".parse::<IpNet>().expect("cidr")]
    );
}

#[test]
fn node_ports_default_to_the_primary_ip_and_fall_back_to_all_local_addresses() {
    let state = seed(TrafficPolicy::Cluster, TWO_ON_NODE2);
    let plan = plan_on("k8s-node1", &state, &CompileConfig::default());
    assert_eq!(
        plan.node_ports,
        NodePortScope::LocalWithin(vec!["10.1.1.17/32".parse().expect("net")])
    );
    let unknown = plan_on("not-a-node", &state, &CompileConfig::default());
    assert_eq!(unknown.node_ports, NodePortScope::AllLocal);
}

#[test]
fn node_port_cidrs_are_used_as_given() {
    let state = seed(TrafficPolicy::Cluster, TWO_ON_NODE2);
    let cfg = CompileConfig {
        node_port_addresses: NodePortAddresses {
            cidrs: vec!["10.1.1.0/24".parse().expect("net")],
            primary: false,
            all: false,
        },
        ..CompileConfig::default()
    };
    let plan = plan_on("k8s-node1", &state, &cfg);
    assert_eq!(
        plan.node_ports,
        NodePortScope::LocalWithin(vec!["10.1.1.0/24".parse().expect("net")])
    );
}

#[test]
fn node_ports_on_every_local_address_with_all_and_primary_mixed_with_cidrs() {
    let state = seed(TrafficPolicy::Cluster, TWO_ON_NODE2);
    let all = CompileConfig {
        node_port_addresses: NodePortAddresses {
            all: true,
            ..NodePortAddresses::default()
        },
        ..CompileConfig::default()
    };
    assert_eq!(
        plan_on("k8s-node1", &state, &all).node_ports,
        NodePortScope::AllLocal
    );
    let mixed = CompileConfig {
        node_port_addresses: NodePortAddresses {
            cidrs: vec!["172.16.0.0/12".parse().expect("net")],
            primary: true,
            all: false,
        },
        ..CompileConfig::default()
    };
    assert_eq!(
        plan_on("k8s-node1", &state, &mixed).node_ports,
        NodePortScope::LocalWithin(vec![
            "10.1.1.17/32".parse().expect("net"),
            "172.16.0.0/12".parse().expect("net"),
        ])
    );
}

mod family;

#[test]
fn client_ip_affinity_carries_its_timeout_into_the_plan() {
    let mut state = seed(TrafficPolicy::Cluster, TWO_ON_NODE2);
    let plan = plan_on("k8s-node1", &state, &cluster_cidr());
    assert_eq!(only(&plan).affinity, None);
    let mut svc = with_node_port(
        mk_service("dev", "web", "10.96.198.86", 8080),
        32223,
        TrafficPolicy::Cluster,
    );
    svc.session_affinity = ferry_model::SessionAffinity::ClientIp {
        timeout_seconds: 60,
    };
    state.apply(Object::from(svc));
    let plan = plan_on("k8s-node1", &state, &cluster_cidr());
    assert_eq!(only(&plan).affinity, Some(60));
}

#[test]
fn localhost_node_ports_follow_node_port_addresses_as_upstream() {
    let state = seed(TrafficPolicy::Cluster, TWO_ON_NODE2);
    let with = |cidrs: &[&str], primary: bool| {
        let cfg = CompileConfig {
            localhost_node_ports: true,
            node_port_addresses: NodePortAddresses {
                cidrs: cidrs.iter().map(|c| c.parse().expect("cidr")).collect(),
                primary,
                all: false,
            },
            ..cluster_cidr()
        };
        plan_on("k8s-node1", &state, &cfg).localhost_node_ports
    };
    // Nothing configured, or only the other family's CIDRs: every address, loopback too.
    assert!(with(&[], false));
    assert!(with(&["fd00::/64"], false));
    // A CIDR containing 127.0.0.1 (upstream's ContainsIPv4Loopback).
    assert!(with(&["127.0.0.0/8"], false));
    assert!(with(&["0.0.0.0/0"], false));
    // The user narrowed NodePorts to other addresses.
    assert!(!with(&["10.1.1.0/24"], false));
    assert!(!with(&[], true));
    // `all` (upstream's 0.0.0.0/0 and ::/0) covers loopback, even mixed with `primary`.
    let all = CompileConfig {
        localhost_node_ports: true,
        node_port_addresses: NodePortAddresses {
            primary: true,
            all: true,
            ..NodePortAddresses::default()
        },
        ..cluster_cidr()
    };
    assert!(plan_on("k8s-node1", &state, &all).localhost_node_ports);
    // Off unless asked, whatever nodePortAddresses say; never by the kernel rules.
    let plan = plan_on("k8s-node1", &state, &cluster_cidr());
    assert!(!plan.localhost_node_ports);
    let cfg = CompileConfig {
        localhost_node_ports: true,
        node_port_addresses: NodePortAddresses {
            cidrs: vec!["127.0.0.0/8".parse().expect("cidr")],
            primary: false,
            all: false,
        },
        ..cluster_cidr()
    };
    assert!(plan_on("k8s-node1", &state, &cfg)
        .node_ports
        .covers_loopback());
}

#[test]
fn bind_address_is_the_node_ip_of_its_family_over_the_node_objects() {
    let state = seed(TrafficPolicy::Cluster, TWO_ON_NODE2);
    let cfg = CompileConfig {
        node_ip: Some("10.1.1.250".parse().expect("ip")),
        ..CompileConfig::default()
    };
    let plan = plan_on("k8s-node1", &state, &cfg);
    assert_eq!(plan.node_ips, ["10.1.1.250".parse::<IpAddr>().expect("ip")]);
    assert_eq!(
        plan.node_ports,
        NodePortScope::LocalWithin(vec!["10.1.1.250/32".parse().expect("net")])
    );
    // Without a Node object too (upstream's bind address needs none), not every address.
    let unknown = plan_on("not-a-node", &state, &cfg);
    assert_eq!(
        unknown.node_ports,
        NodePortScope::LocalWithin(vec!["10.1.1.250/32".parse().expect("net")])
    );
    // One of the other family leaves this family's Node IP alone.
    let v6 = CompileConfig {
        node_ip: Some("fd00::9".parse().expect("ip")),
        ..CompileConfig::default()
    };
    assert_eq!(
        plan_on("k8s-node1", &state, &v6).node_ports,
        NodePortScope::LocalWithin(vec!["10.1.1.17/32".parse().expect("net")])
    );
}

#[test]
fn external_ips_are_not_planned_with_allow_service_external_ips_off() {
    let mut state = ClusterState::new();
    let mut svc = ferry_model::fixtures::mk_service("default", "web", "10.96.0.10", 80);
    svc.external_ips = vec!["203.0.113.7".parse().expect("ip")];
    state.apply(Object::from(svc));
    state.apply(Object::from(seed_node("k8s-node1")));
    let on = plan_on("k8s-node1", &state, &CompileConfig::default());
    assert_eq!(only(&on).external_ips.len(), 1);
    assert!(only(&on).external.is_some());
    let cfg = CompileConfig {
        external_ips: false,
        ..CompileConfig::default()
    };
    let off = plan_on("k8s-node1", &state, &cfg);
    assert!(only(&off).external_ips.is_empty());
    // A ClusterIP service whose only outside frontend was an external IP is internal only.
    assert_eq!(only(&off).external, None);
}
