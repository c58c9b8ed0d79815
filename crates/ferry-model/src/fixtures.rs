//! Builders for test objects, so tests state only what matters to them.
//!
//! Addresses follow the seed cluster (`examples/seed`): nodes 10.1.1.0/24, pods
//! 192.168.0.0/16, services 10.96.0.0/16.

use std::collections::BTreeMap;
use std::net::IpAddr;

use crate::{
    Endpoint, EndpointConditions, EndpointPort, EndpointSlice, IpFamily, Node, NodeAddress,
    NodeAddressType, Protocol, Service, ServiceName, ServicePort, ServiceType, SessionAffinity,
    TrafficPolicy,
};

/// Parses an IP literal; panics on a typo in a test.
pub fn ip(s: &str) -> IpAddr {
    s.parse()
        .unwrap_or_else(|e| panic!("bad test IP {s:?}: {e}"))
}

/// A ClusterIP service `ns/name` with one TCP port `http` `port`.
pub fn mk_service(ns: &str, name: &str, cluster_ip: &str, port: u16) -> Service {
    Service {
        name: ServiceName::new(ns, name),
        service_type: ServiceType::ClusterIp,
        cluster_ips: vec![ip(cluster_ip)],
        ports: vec![ServicePort {
            name: "http".into(),
            protocol: Protocol::Tcp,
            port,
            node_port: None,
            target_port: crate::PortRef::Number(port),
        }],
        external_ips: Vec::new(),
        load_balancer_ips: Vec::new(),
        load_balancer_source_ranges: Vec::new(),
        external_traffic_policy: TrafficPolicy::Cluster,
        internal_traffic_policy: TrafficPolicy::Cluster,
        session_affinity: SessionAffinity::None,
        health_check_node_port: None,
        traffic_distribution: None,
        selector: None,
        publish_not_ready_addresses: false,
    }
}

/// Makes `svc` a NodePort service on `node_port` with the given external policy.
pub fn with_node_port(mut svc: Service, node_port: u16, policy: TrafficPolicy) -> Service {
    svc.service_type = ServiceType::NodePort;
    svc.external_traffic_policy = policy;
    for p in &mut svc.ports {
        p.node_port = Some(node_port);
    }
    svc
}

/// A ready endpoint on `node`.
pub fn mk_endpoint(addr: &str, node: &str) -> Endpoint {
    Endpoint {
        address: ip(addr),
        conditions: EndpointConditions::default(),
        location: crate::EndpointLocation::on_node(Some(node)),
        target: None,
    }
}

/// `ep` with hints: `hints.forZones` `zones` and `hints.forNodes` `nodes` (empty: unset).
pub fn with_hints(mut ep: Endpoint, zones: &[&str], nodes: &[&str]) -> Endpoint {
    let list = |names: &[&str]| {
        (!names.is_empty()).then(|| names.iter().map(|n| std::sync::Arc::from(*n)).collect())
    };
    let mut location = ep.location.as_deref().cloned().unwrap_or_default();
    location.zone_hints = list(zones);
    location.node_hints = list(nodes);
    ep.location = location.shared();
    ep
}

/// An endpoint with explicit conditions.
pub fn mk_endpoint_with(
    addr: &str,
    node: &str,
    ready: bool,
    serving: bool,
    terminating: bool,
) -> Endpoint {
    Endpoint {
        conditions: EndpointConditions {
            ready,
            serving,
            terminating,
        },
        ..mk_endpoint(addr, node)
    }
}

/// A slice `<svc>-abc` for service `ns/svc`, port `http`/TCP `port`, with `endpoints`.
pub fn mk_slice(ns: &str, svc: &str, port: u16, endpoints: Vec<Endpoint>) -> EndpointSlice {
    EndpointSlice {
        namespace: ns.into(),
        name: format!("{svc}-abc").into(),
        service: ServiceName::new(ns, svc),
        family: IpFamily::V4,
        ports: vec![EndpointPort {
            name: "http".into(),
            port,
            protocol: Protocol::Tcp,
        }],
        endpoints,
        trigger_time: None,
    }
}

/// A node with one InternalIP and one pod CIDR.
pub fn mk_node(name: &str, internal_ip: &str, pod_cidr: &str) -> Node {
    Node {
        name: name.into(),
        labels: BTreeMap::new(),
        addresses: vec![NodeAddress {
            kind: NodeAddressType::InternalIp,
            address: ip(internal_ip),
        }],
        pod_cidrs: vec![pod_cidr
            .parse()
            .unwrap_or_else(|e| panic!("bad CIDR {pod_cidr}: {e}"))],
        deletion_timestamp: None,
        taints: Vec::new(),
    }
}

/// A running, ready Pod `ns/name` on `node` with IP `pod_ip`, labelled `app: <app>`, whose
/// one container `app` has port `http` 8080/TCP and no probe.
pub fn mk_pod(ns: &str, name: &str, app: &str, pod_ip: &str, node: &str) -> crate::Pod {
    crate::Pod {
        namespace: ns.into(),
        name: name.into(),
        labels: crate::Labels::new([("app", app)]),
        node_name: Some(node.into()),
        hostname: None,
        subdomain: None,
        ips: vec![ip(pod_ip)],
        phase: crate::PodPhase::Running,
        ready: true,
        deletion_timestamp: None,
        containers: vec![crate::Container {
            name: "app".into(),
            sidecar: false,
            ports: vec![crate::ContainerPort {
                name: "http".into(),
                port: 8080,
                protocol: Protocol::Tcp,
            }],
            readiness_probe: None,
            ready: Some(true),
            started_at: None,
        }],
    }
}

/// Gives `svc` the selector `app: <app>`.
pub fn with_selector(mut svc: Service, app: &str) -> Service {
    svc.selector = crate::Selector::new(crate::Labels::new([("app", app)]));
    svc
}

/// An `httpGet` readiness probe of `path` on port `port`, with kubelet's defaults but
/// `initialDelaySeconds` and `periodSeconds` (the seed's: `/hello`, 56010, 15, 10).
pub fn mk_http_probe(path: &str, port: u16, initial_delay: u32, period: u32) -> crate::Probe {
    crate::Probe {
        handler: crate::ProbeHandler::HttpGet(crate::HttpGetAction {
            scheme: crate::HttpScheme::Http,
            host: None,
            path: path.into(),
            port: crate::PortRef::Number(port),
            headers: Vec::new(),
        }),
        initial_delay_seconds: initial_delay,
        period_seconds: period,
        timeout_seconds: 1,
        success_threshold: 1,
        failure_threshold: 3,
    }
}

/// The seed's `dev/web` into `state`: ClusterIP 10.96.198.86:8080, NodePort 32223 (`policy`),
/// and one EndpointSlice (target port 56010) of `endpoints` (address, node).
pub fn add_seed_web(
    state: &mut crate::ClusterState,
    policy: TrafficPolicy,
    endpoints: &[(&str, &str)],
) {
    let svc = with_node_port(
        mk_service("dev", "web", "10.96.198.86", 8080),
        32223,
        policy,
    );
    state.apply(crate::Object::from(svc));
    let eps = endpoints.iter().map(|(a, n)| mk_endpoint(a, n)).collect();
    state.apply(crate::Object::from(mk_slice("dev", "web", 56010, eps)));
}

/// The seed's node `name` (k8s-master, k8s-node1 or k8s-node2) with its InternalIP and pod
/// CIDR; panics on another name.
pub fn seed_node(name: &str) -> Node {
    let (ip, cidr) = match name {
        "k8s-master" => ("10.1.1.12", "192.168.235.192/26"),
        "k8s-node1" => ("10.1.1.17", "192.168.36.64/26"),
        "k8s-node2" => ("10.1.1.9", "192.168.169.128/26"),
        other => panic!("no seed node {other}"),
    };
    mk_node(name, ip, cidr)
}

/// The seed's `dev/web` ([`add_seed_web`]) with two endpoints on k8s-node2, and node k8s-node1.
pub fn seed_web_state(policy: TrafficPolicy) -> crate::ClusterState {
    let mut state = crate::ClusterState::new();
    let eps = [
        ("192.168.169.166", "k8s-node2"),
        ("192.168.169.168", "k8s-node2"),
    ];
    add_seed_web(&mut state, policy, &eps);
    state.apply(crate::Object::from(seed_node("k8s-node1")));
    state
}

/// `dev/web` (ClusterIP 10.96.0.10:80, NodePort 30080, `policy`) with `endpoints` (target port
/// 8080) on node-b; node-a is 10.1.1.17 (pods 10.244.1.0/24), node-b 10.1.1.9.
pub fn two_node_web_state(policy: TrafficPolicy, endpoints: &[&str]) -> crate::ClusterState {
    let mut state = crate::ClusterState::new();
    let svc = with_node_port(mk_service("dev", "web", "10.96.0.10", 80), 30080, policy);
    state.apply(crate::Object::from(svc));
    let eps = endpoints.iter().map(|a| mk_endpoint(a, "node-b")).collect();
    state.apply(crate::Object::from(mk_slice("dev", "web", 8080, eps)));
    state.apply(crate::Object::from(mk_node(
        "node-a",
        "10.1.1.17",
        "10.244.1.0/24",
    )));
    state.apply(crate::Object::from(mk_node(
        "node-b",
        "10.1.1.9",
        "10.244.2.0/24",
    )));
    state
}
