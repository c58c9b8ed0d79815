//! Node ports and external frontends (an external or load-balancer IP with a protocol and
//! port) written twice: the first Service keeps them, the other is refused and named, and
//! taken in as soon as they are free; what one Service may share with itself or with others.

use std::sync::Arc;

use ferry_model::{Object, Protocol, Service, ServiceType, TrafficPolicy};

use super::{apply, file, gone, service, service_key, texts, update};
use crate::manifest::store::Store;
use crate::SourceEvent;

/// Service `dev/name` on a ClusterIP of its own, port `http` 80/TCP, then `edit`ed.
fn svc(name: &str, edit: impl FnOnce(&mut Service)) -> Object {
    let Object::Service(mut s) = service(name, 80) else {
        unreachable!()
    };
    edit(Arc::make_mut(&mut s));
    Object::from(s)
}

/// A NodePort Service on node port `np`.
fn node_port(name: &str, np: u16) -> Object {
    svc(name, |s| {
        s.service_type = ServiceType::NodePort;
        s.ports[0].node_port = Some(np);
    })
}

/// A Service with external IPs `ips` on port `port`/TCP.
fn external(name: &str, ips: &[&str], port: u16) -> Object {
    svc(name, |s| {
        s.ports[0].port = port;
        s.external_ips = ips.iter().map(|ip| ip.parse().expect("an IP")).collect();
    })
}

#[test]
fn a_node_port_claimed_twice_stays_with_the_first_whatever_the_protocol() {
    // The API server's allocator hands a number out once, to one Service: a UDP port of
    // another Service may not have it either.
    let mut store = Store::default();
    let a = node_port("a", 30080);
    let b = svc("b", |s| {
        s.service_type = ServiceType::NodePort;
        s.ports[0].protocol = Protocol::Udp;
        s.ports[0].node_port = Some(30080);
    });
    let first = update(
        &mut store,
        vec![
            file("/m/b.yaml", vec![b.clone()]),
            file("/m/a.yaml", vec![a.clone()]),
        ],
    );
    assert_eq!(first.events, [apply(&a)]);
    assert_eq!(
        texts(&first.errors),
        [
            "/m/b.yaml: Service dev/b: spec.ports[0].nodePort: NodePort 30080 is already \
             Service dev/a's (in /m/a.yaml); this one is skipped"
        ]
    );

    // The holder goes: the refused Service is taken in with the same update.
    let change = update(&mut store, vec![gone("/m/a.yaml")]);
    assert_eq!(
        change.events,
        [SourceEvent::Delete(service_key("a")), apply(&b)]
    );
    assert!(change.errors.is_empty(), "{:?}", change.errors);
}

#[test]
fn one_service_uses_one_node_port_for_tcp_and_udp() {
    let mut store = Store::default();
    let dns = svc("dns", |s| {
        s.service_type = ServiceType::NodePort;
        s.ports[0].node_port = Some(30053);
        let mut udp = s.ports[0].clone();
        udp.name = "dns-udp".into();
        udp.protocol = Protocol::Udp;
        s.ports.push(udp);
    });
    let first = update(&mut store, vec![file("/m/dns.yaml", vec![dns.clone()])]);
    assert_eq!(first.events, [apply(&dns)]);
    assert!(first.errors.is_empty(), "{:?}", first.errors);
}

#[test]
fn a_health_check_node_port_is_a_node_port() {
    let mut store = Store::default();
    let b = svc("b", |s| {
        s.service_type = ServiceType::LoadBalancer;
        s.external_traffic_policy = TrafficPolicy::Local;
        s.ports[0].node_port = Some(30200);
        s.health_check_node_port = Some(30100);
    });
    let first = update(
        &mut store,
        vec![
            file("/m/a.yaml", vec![node_port("a", 30100)]),
            file("/m/b.yaml", vec![b]),
        ],
    );
    assert_eq!(
        texts(&first.errors),
        [
            "/m/b.yaml: Service dev/b: spec.healthCheckNodePort: NodePort 30100 is already \
             Service dev/a's (in /m/a.yaml); this one is skipped"
        ]
    );
}

#[test]
fn an_external_ip_and_port_claimed_twice_stays_with_the_first() {
    let mut store = Store::default();
    let b = external("b", &["192.0.2.9", "192.0.2.1"], 80);
    let first = update(
        &mut store,
        vec![
            file("/m/a.yaml", vec![external("a", &["192.0.2.1"], 80)]),
            file("/m/b.yaml", vec![b.clone()]),
        ],
    );
    assert_eq!(first.events.len(), 1, "{:?}", first.events);
    assert_eq!(
        texts(&first.errors),
        [
            "/m/b.yaml: Service dev/b: spec.externalIPs[1]: external IP 192.0.2.1 with port \
             80/TCP (spec.ports[0]) is already Service dev/a's (in /m/a.yaml); this one is \
             skipped"
        ]
    );
    // The holder moves to another port: the refused Service is taken in.
    let a = external("a", &["192.0.2.1"], 443);
    let change = update(&mut store, vec![file("/m/a.yaml", vec![a.clone()])]);
    assert_eq!(change.events, [apply(&a), apply(&b)]);
    assert!(change.errors.is_empty(), "{:?}", change.errors);
}

#[test]
fn services_share_an_external_ip_on_different_ports_or_protocols() {
    let mut store = Store::default();
    let a = external("a", &["192.0.2.1"], 80);
    let b = external("b", &["192.0.2.1"], 443);
    let Object::Service(mut c) = external("c", &["192.0.2.1"], 80) else {
        unreachable!()
    };
    Arc::make_mut(&mut c).ports[0].protocol = Protocol::Udp;
    let c = Object::from(c);
    let first = update(
        &mut store,
        vec![file("/m/all.yaml", vec![a.clone(), b.clone(), c.clone()])],
    );
    assert_eq!(first.events, [apply(&a), apply(&b), apply(&c)]);
    assert!(first.errors.is_empty(), "{:?}", first.errors);
}

#[test]
fn a_load_balancer_ip_on_another_services_external_ip_and_port_is_refused() {
    let mut store = Store::default();
    let b = svc("b", |s| {
        s.service_type = ServiceType::LoadBalancer;
        // Its own external IP and load-balancer IP may be one address.
        s.external_ips = vec!["192.0.2.5".parse().expect("an IP")];
        s.load_balancer_ips = vec![
            "192.0.2.5".parse().expect("an IP"),
            "192.0.2.1".parse().expect("an IP"),
        ];
    });
    let first = update(
        &mut store,
        vec![
            file("/m/a.yaml", vec![external("a", &["192.0.2.1"], 80)]),
            file("/m/b.yaml", vec![b]),
        ],
    );
    assert_eq!(
        texts(&first.errors),
        [
            "/m/b.yaml: Service dev/b: status.loadBalancer.ingress: load-balancer IP 192.0.2.1 \
             with port 80/TCP (spec.ports[0]) is already Service dev/a's (in /m/a.yaml); this \
             one is skipped"
        ]
    );
}

#[test]
fn an_external_ip_on_another_services_cluster_ip_and_port_is_refused() {
    // `service(name, 80)` gives dev/a the ClusterIP 10.96.x.y of its name; b's external IP
    // is that address.
    let Object::Service(a) = service("a", 80) else {
        unreachable!()
    };
    let cluster_ip = a.cluster_ips[0].to_string();
    let a = Object::Service(a);
    let b = external("b", &[&cluster_ip], 80);
    let mut store = Store::default();
    let first = update(
        &mut store,
        vec![
            file("/m/a.yaml", vec![a.clone()]),
            file("/m/b.yaml", vec![b.clone()]),
        ],
    );
    assert_eq!(first.events, [apply(&a)]);
    assert_eq!(
        texts(&first.errors),
        [format!(
            "/m/b.yaml: Service dev/b: spec.externalIPs[0]: external IP {cluster_ip} with port \
             80/TCP (spec.ports[0]) is already Service dev/a's (in /m/a.yaml); this one is \
             skipped"
        )]
    );
    // Written the other way round, the first still keeps it: the ClusterIP's Service is named.
    let mut store = Store::default();
    let first = update(
        &mut store,
        vec![
            file("/m/a.yaml", vec![b.clone()]),
            file("/m/b.yaml", vec![a.clone()]),
        ],
    );
    assert_eq!(first.events, [apply(&b)]);
    assert_eq!(
        texts(&first.errors),
        [format!(
            "/m/b.yaml: Service dev/a: spec.clusterIP: ClusterIP {cluster_ip} with port \
             80/TCP (spec.ports[0]) is already Service dev/b's (in /m/a.yaml); this one is \
             skipped"
        )]
    );
    // Another port on the same address is another frontend.
    let mut store = Store::default();
    let c = external("c", &[&cluster_ip], 443);
    let first = update(
        &mut store,
        vec![file("/m/all.yaml", vec![a.clone(), c.clone()])],
    );
    assert_eq!(first.events, [apply(&a), apply(&c)]);
    assert!(first.errors.is_empty(), "{:?}", first.errors);
}

#[test]
fn the_verdict_after_changes_is_the_verdict_of_a_fresh_read() {
    // b alone holds its node port and external frontend; a, written before it, comes and
    // takes the node port, then gives it up for the frontend: b stays refused, named for
    // what a holds now, and a fresh read of the same files says the same.
    let mut store = Store::default();
    let b = svc("b", |s| {
        s.service_type = ServiceType::NodePort;
        s.ports[0].node_port = Some(30080);
        s.external_ips = vec!["192.0.2.1".parse().expect("an IP")];
    });
    let c = node_port("c", 30090);
    update(
        &mut store,
        vec![
            file("/m/b.yaml", vec![b.clone()]),
            file("/m/c.yaml", vec![c]),
        ],
    );
    let a = node_port("a", 30080);
    let change = update(&mut store, vec![file("/m/a.yaml", vec![a.clone()])]);
    assert_eq!(
        change.events,
        [apply(&a), SourceEvent::Delete(service_key("b"))]
    );
    assert_eq!(texts(&change.errors).len(), 1, "{:?}", change.errors);
    assert!(texts(&change.errors)[0].contains("spec.ports[0].nodePort: NodePort 30080"));

    let a = external("a", &["192.0.2.1"], 80);
    let change = update(&mut store, vec![file("/m/a.yaml", vec![a.clone()])]);
    assert_eq!(change.events, [apply(&a)]);
    let [error] = &texts(&change.errors)[..] else {
        panic!("one error expected: {:?}", change.errors)
    };
    assert!(
        error.starts_with("/m/b.yaml: Service dev/b: spec.externalIPs[0]: external IP 192.0.2.1"),
        "{error}"
    );

    // A change sharing nothing with them re-decides neither.
    let c = node_port("c", 30091);
    let change = update(&mut store, vec![file("/m/c.yaml", vec![c.clone()])]);
    assert_eq!(change.events, [apply(&c)]);
    assert!(change.errors.is_empty(), "{:?}", change.errors);

    let mut fresh = Store::default();
    let read = update(
        &mut fresh,
        vec![
            file("/m/c.yaml", vec![c]),
            file("/m/b.yaml", vec![b]),
            file("/m/a.yaml", vec![a]),
        ],
    );
    assert_eq!(fresh.objects(), store.objects());
    assert_eq!(texts(&read.errors), std::slice::from_ref(error));
}
