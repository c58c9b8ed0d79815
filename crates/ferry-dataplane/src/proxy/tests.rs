//! Endpoint choice: frontends and sources → endpoint set, round-robin, session affinity.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use ferry_compile::plan::{ClusterIpMasquerade, External};
use ferry_compile::{Dispatch, EndpointSet, ServicePlan};
use ferry_model::{Protocol, ServiceName, ServicePortName, TrafficPolicy};

use super::route::{endpoint_set, Balancer, Listener, Sources};

fn sa(s: &str) -> SocketAddr {
    s.parse().expect("socket address")
}

fn ip(s: &str) -> IpAddr {
    s.parse().expect("ip")
}

/// `dev/web:http`, ClusterIP 10.96.0.10:80, NodePort 30080, external IP 203.0.113.7, two
/// endpoints elsewhere and one on this node.
fn plan(policy: TrafficPolicy, local: &[&str]) -> ServicePlan {
    let local: Vec<SocketAddr> = local.iter().map(|s| sa(s)).collect();
    let dispatch = match (policy, local.is_empty()) {
        (TrafficPolicy::Local, true) => Dispatch::Drop,
        (TrafficPolicy::Local, false) => Dispatch::Forward(EndpointSet::Local),
        (TrafficPolicy::Cluster, _) => Dispatch::Forward(EndpointSet::Cluster),
    };
    ServicePlan {
        name: ServicePortName {
            service: ServiceName::new("dev", "web"),
            port: "http".into(),
            protocol: Protocol::Tcp,
        },
        cluster_ip: ip("10.96.0.10"),
        port: 80,
        node_port: Some(30080),
        health_check_node_port: None,
        external_ips: vec![ip("203.0.113.7")],
        load_balancer_ips: vec![],
        firewall: None,
        cluster_endpoints: vec![
            sa("10.0.1.5:8080"),
            sa("10.0.2.5:8080"),
            sa("10.0.3.5:8080"),
        ],
        node_endpoints: local.clone(),
        hairpin_sources: local.iter().map(SocketAddr::ip).collect(),
        local_endpoints: local,
        internal: Dispatch::Forward(EndpointSet::Cluster),
        cluster_ip_masquerade: ClusterIpMasquerade::Never,
        external: Some(External { policy, dispatch }),
        affinity: None,
    }
}

#[test]
fn the_frontend_the_client_used_selects_the_policy() {
    let p = plan(TrafficPolicy::Local, &["10.0.3.5:8080"]);
    let set = |dst: &str, near| endpoint_set(&p, Listener::Proxy, &sa(dst), near);
    assert_eq!(set("10.96.0.10:80", false), Some(EndpointSet::Cluster));
    assert_eq!(set("10.1.1.9:30080", false), Some(EndpointSet::Local));
    assert_eq!(set("203.0.113.7:80", false), Some(EndpointSet::Local));
    // The node and its pods reach a Local external frontend cluster-wide.
    assert_eq!(set("10.1.1.9:30080", true), Some(EndpointSet::Cluster));
    // Localhost NodePorts are always the node's own traffic.
    let lo = endpoint_set(&p, Listener::Localhost, &sa("127.0.0.1:30080"), false);
    assert_eq!(lo, Some(EndpointSet::Cluster));
}

#[test]
fn local_policy_without_local_endpoint_refuses_outsiders_only() {
    let p = plan(TrafficPolicy::Local, &[]);
    assert_eq!(
        endpoint_set(&p, Listener::Proxy, &sa("10.1.1.9:30080"), false),
        None
    );
    assert_eq!(
        endpoint_set(&p, Listener::Proxy, &sa("10.1.1.9:30080"), true),
        Some(EndpointSet::Cluster)
    );
    let mut none = plan(TrafficPolicy::Cluster, &[]);
    none.cluster_endpoints.clear();
    none.internal = Dispatch::Reject;
    none.external = Some(External {
        policy: TrafficPolicy::Cluster,
        dispatch: Dispatch::Reject,
    });
    for (listener, near) in [(Listener::Proxy, false), (Listener::Localhost, true)] {
        assert_eq!(
            endpoint_set(&none, listener, &sa("10.96.0.10:80"), near),
            None
        );
    }
}

#[test]
fn sources_know_the_node_and_its_pods() {
    let s = Sources {
        node: vec![ip("10.1.1.9")],
        pods: vec!["10.244.0.0/16".parse().expect("cidr")],
    };
    assert!(s.is_node_or_pod(&ip("10.1.1.9")));
    assert!(s.is_node_or_pod(&ip("127.0.0.1")));
    assert!(s.is_node_or_pod(&ip("10.244.3.4")));
    assert!(!s.is_node_or_pod(&ip("203.0.113.50")));
}

#[test]
fn round_robin_takes_each_endpoint_in_turn() {
    let p = plan(TrafficPolicy::Cluster, &[]);
    let b = Balancer::default();
    let now = Instant::now();
    let picks: Vec<SocketAddr> = (0..6)
        .filter_map(|_| b.pick(&p, EndpointSet::Cluster, ip("203.0.113.50"), false, now))
        .collect();
    assert_eq!(&picks[..3], &p.cluster_endpoints[..]);
    assert_eq!(&picks[3..], &p.cluster_endpoints[..]);
    assert_eq!(
        b.pick(&p, EndpointSet::Local, ip("203.0.113.50"), false, now),
        None
    );
}

#[test]
fn affinity_pins_a_client_until_its_timeout_or_a_failure() {
    let mut p = plan(TrafficPolicy::Cluster, &[]);
    p.affinity = Some(10);
    let b = Balancer::default();
    let t0 = Instant::now();
    let (a, c) = (ip("203.0.113.50"), ip("203.0.113.51"));
    let first = b.pick(&p, EndpointSet::Cluster, a, false, t0);
    let other = b.pick(&p, EndpointSet::Cluster, c, false, t0);
    assert_ne!(first, other);
    for s in 1..=9 {
        let t = t0 + Duration::from_secs(s);
        assert_eq!(
            b.pick(&p, EndpointSet::Cluster, a, false, t),
            first,
            "{s}s later"
        );
    }
    // 10 s without a new connection: the pin is gone.
    let late = t0 + Duration::from_secs(19);
    assert_ne!(b.pick(&p, EndpointSet::Cluster, a, false, late), first);
    // A failed endpoint is replaced by the next one, which becomes the pin.
    let now = b.pick(&p, EndpointSet::Cluster, a, false, late);
    let next = b.pick(&p, EndpointSet::Cluster, a, true, late);
    assert_ne!(now, next);
    assert_eq!(b.pick(&p, EndpointSet::Cluster, a, false, late), next);
}

#[test]
fn pins_to_endpoints_that_left_are_forgotten_at_the_sync() {
    let mut p = plan(TrafficPolicy::Cluster, &[]);
    p.affinity = Some(10_800);
    let b = Balancer::default();
    let now = Instant::now();
    let pinned = b
        .pick(&p, EndpointSet::Cluster, ip("203.0.113.50"), false, now)
        .expect("endpoint");
    b.pick(&p, EndpointSet::Cluster, ip("203.0.113.51"), false, now);
    assert_eq!(b.pins(), 2);
    p.cluster_endpoints.retain(|e| *e != pinned);
    b.forget_stale(&p, now);
    assert_eq!(b.pins(), 1);
    b.forget_stale(&p, now + Duration::from_secs(10_800));
    assert_eq!(b.pins(), 0);
}
