//! A Service's `spec.ports`: numbers, protocols, names and node ports, checked as the API
//! server checks them.

use ferry_model::{PortRef, Protocol, ServicePort, ServiceType};
use serde_json::json;

use super::{rejected, spec_with, svc};
use crate::convert::service;

#[test]
fn port_out_of_range_is_rejected() {
    let spec = spec_with(json!({"ports": [
        {"name": "http", "port": 80}, {"name": "big", "port": 70000},
    ]}));
    rejected(
        spec,
        "spec.ports[1].port",
        "must be between 1 and 65535, got 70000",
    );
}

#[test]
fn unknown_protocol_is_rejected() {
    let spec = spec_with(json!({"ports": [{"name": "http", "port": 80, "protocol": "ICMP"}]}));
    rejected(spec, "spec.ports[0].protocol", "ICMP");
}

#[test]
fn protocols_default_to_tcp_and_are_parsed() {
    let spec = spec_with(json!({"ports": [
        {"name": "dns", "port": 53, "protocol": "UDP"}, {"name": "dns-tcp", "port": 53},
        {"name": "sctp", "port": 9, "protocol": "SCTP"},
    ]}));
    let converted = service(&svc(spec)).expect("valid").expect("not ignored");
    let protocols: Vec<Protocol> = converted.ports.iter().map(|p| p.protocol).collect();
    assert_eq!(
        protocols,
        vec![Protocol::Udp, Protocol::Tcp, Protocol::Sctp]
    );
}

#[test]
fn node_port_out_of_range_is_rejected() {
    let spec = spec_with(json!({"type": "NodePort",
        "ports": [{"name": "http", "port": 80, "nodePort": 65536}]}));
    rejected(spec, "spec.ports[0].nodePort", "got 65536");
}

#[test]
fn node_port_on_a_cluster_ip_service_is_rejected() {
    let spec = spec_with(json!({"ports": [{"name": "http", "port": 80, "nodePort": 30080}]}));
    rejected(
        spec,
        "spec.ports[0].nodePort",
        "may not be used when type is 'ClusterIP'",
    );
}

#[test]
fn node_port_service_without_node_port_is_rejected() {
    rejected(
        spec_with(json!({"type": "NodePort"})),
        "spec.ports[0].nodePort",
        "nothing allocates",
    );
}

#[test]
fn load_balancer_without_node_ports_is_programmed_without_one() {
    let converted = service(&svc(spec_with(json!({"type": "LoadBalancer"}))))
        .expect("valid, as the API server accepts it")
        .expect("not ignored");
    assert_eq!(converted.ports[0].node_port, None);
    let spec = spec_with(json!({"type": "LoadBalancer", "allocateLoadBalancerNodePorts": false}));
    let converted = service(&svc(spec)).expect("valid").expect("not ignored");
    assert_eq!(converted.service_type, ServiceType::LoadBalancer);
    assert_eq!(converted.ports[0].node_port, None);
}

#[test]
fn duplicate_port_names_are_rejected() {
    let spec =
        spec_with(json!({"ports": [{"name": "http", "port": 80}, {"name": "http", "port": 81}]}));
    rejected(
        spec,
        "spec.ports[1].name",
        "duplicate port name \"http\" (also spec.ports[0].name)",
    );
}

#[test]
fn unnamed_port_of_a_multi_port_service_is_rejected() {
    let spec = spec_with(json!({"ports": [{"name": "http", "port": 80}, {"port": 81}]}));
    rejected(spec, "spec.ports[1].name", "more than one port");
}

#[test]
fn single_unnamed_port_is_fine() {
    let spec = spec_with(json!({"ports": [{"port": 80}]}));
    let converted = service(&svc(spec)).expect("valid").expect("not ignored");
    let want = ServicePort {
        name: String::new(),
        protocol: Protocol::Tcp,
        port: 80,
        node_port: None,
        target_port: PortRef::Number(80),
    };
    assert_eq!(converted.ports, vec![want]);
}

#[test]
fn port_name_that_is_not_a_dns_label_is_rejected() {
    let spec = spec_with(json!({"ports": [{"name": "HTTP", "port": 80}]}));
    rejected(spec, "spec.ports[0].name", "DNS-1123 label");
}

#[test]
fn duplicate_port_and_protocol_is_rejected() {
    let spec = spec_with(json!({"ports": [{"name": "a", "port": 80}, {"name": "b", "port": 80}]}));
    rejected(spec, "spec.ports[1].port", "duplicate port 80/TCP");
}

#[test]
fn one_node_port_twice_for_one_protocol_is_rejected() {
    let spec = spec_with(json!({"type": "NodePort", "ports": [
        {"name": "a", "port": 80, "nodePort": 30080},
        {"name": "b", "port": 81, "nodePort": 30080},
    ]}));
    rejected(
        spec,
        "spec.ports[1].nodePort",
        "duplicate nodePort 30080/TCP (also spec.ports[0].nodePort)",
    );
}

#[test]
fn one_node_port_for_tcp_and_udp_is_accepted() {
    // Upstream allows it (DNS on one number): the allocator hands the number to one Service.
    let spec = spec_with(json!({"type": "NodePort", "ports": [
        {"name": "dns-tcp", "port": 53, "nodePort": 30053},
        {"name": "dns", "port": 53, "protocol": "UDP", "nodePort": 30053},
    ]}));
    let converted = service(&svc(spec)).expect("valid").expect("not ignored");
    let node_ports: Vec<_> = converted.ports.iter().map(|p| p.node_port).collect();
    assert_eq!(node_ports, [Some(30053), Some(30053)]);
}

#[test]
fn service_without_ports_is_rejected() {
    rejected(
        spec_with(json!({"ports": []})),
        "spec.ports",
        "at least one port",
    );
}
