//! `convert::service`.

use ferry_model::fixtures::{ip, mk_service, with_node_port};
use ferry_model::{PortRef, SessionAffinity, TrafficPolicy};
use k8s_openapi::api::core::v1::Service;
use serde_json::{json, Value};

use super::{assert_rejected, from_json};
use crate::convert::service;

mod ports;

const WEB: &str = "Service dev/web";

/// `dev/web` with the given spec (and optional status).
fn svc(spec: Value) -> Service {
    from_json(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": "dev"},
        "spec": spec,
    }))
}

/// A valid ClusterIP spec with one port `http` 80, plus `extra` fields.
fn spec_with(extra: Value) -> Value {
    let mut spec = json!({
        "clusterIP": "10.96.0.10",
        "ports": [{"name": "http", "port": 80, "targetPort": 8080}],
    });
    if let (Some(spec), Value::Object(extra)) = (spec.as_object_mut(), extra) {
        spec.extend(extra);
    }
    spec
}

fn rejected(spec: Value, field: &str, reason: &str) {
    assert_rejected(service(&svc(spec)), WEB, field, reason);
}

#[test]
fn cluster_ip_service_gets_upstream_defaults() {
    let converted = service(&svc(spec_with(json!({}))))
        .expect("valid")
        .expect("not ignored");
    let mut want = mk_service("dev", "web", "10.96.0.10", 80);
    want.ports[0].target_port = PortRef::Number(8080);
    assert_eq!(converted, want);
}

#[test]
fn seed_node_port_service_converts() {
    let spec = json!({
        "type": "NodePort", "clusterIP": "10.96.198.86", "clusterIPs": ["10.96.198.86"],
        "externalTrafficPolicy": "Cluster",
        "ports": [{"name": "http", "protocol": "TCP", "port": 8080, "targetPort": 56010,
                   "nodePort": 32223}],
    });
    let converted = service(&svc(spec)).expect("valid").expect("not ignored");
    let mut want = with_node_port(
        mk_service("dev", "web", "10.96.198.86", 8080),
        32223,
        TrafficPolicy::Cluster,
    );
    want.ports[0].target_port = PortRef::Number(56010);
    assert_eq!(converted, want);
}

#[test]
fn missing_namespace_defaults_to_default() {
    let object: Service = from_json(json!({
        "metadata": {"name": "web"}, "spec": spec_with(json!({})),
    }));
    let converted = service(&object).expect("valid").expect("not ignored");
    assert_eq!(&*converted.name.namespace, "default");
}

#[test]
fn missing_name_is_rejected() {
    let object: Service =
        from_json(json!({"metadata": {"namespace": "dev"}, "spec": spec_with(json!({}))}));
    assert_rejected(
        service(&object),
        "Service dev/<unnamed>",
        "metadata.name",
        "must be set",
    );
}

#[test]
fn headless_service_is_ignored() {
    assert_eq!(
        service(&svc(spec_with(json!({"clusterIP": "None"})))),
        Ok(None)
    );
    let spec = spec_with(json!({"clusterIP": null, "clusterIPs": ["None"]}));
    assert_eq!(service(&svc(spec)), Ok(None));
}

#[test]
fn external_name_service_is_ignored() {
    let spec = json!({"type": "ExternalName", "externalName": "example.com"});
    assert_eq!(service(&svc(spec)), Ok(None));
}

#[test]
fn service_proxy_name_label_is_ignored_whatever_its_value() {
    for value in ["other-proxy", ""] {
        let object: Service = from_json(json!({
            "metadata": {"name": "web", "namespace": "dev",
                         "labels": {"service.kubernetes.io/service-proxy-name": value}},
            "spec": spec_with(json!({})),
        }));
        assert_eq!(service(&object), Ok(None), "label value {value:?}");
    }
}

#[test]
fn missing_cluster_ip_is_rejected_as_nothing_allocates_one() {
    rejected(
        spec_with(json!({"clusterIP": null})),
        "spec.clusterIP",
        "nothing allocates",
    );
    rejected(
        spec_with(json!({"clusterIP": ""})),
        "spec.clusterIP",
        "must be set",
    );
}

#[test]
fn bad_cluster_ip_is_rejected() {
    rejected(
        spec_with(json!({"clusterIP": "10.96.0.300"})),
        "spec.clusterIP",
        "\"10.96.0.300\"",
    );
}

#[test]
fn bad_cluster_ips_entry_is_rejected() {
    let spec = spec_with(json!({"clusterIPs": ["10.96.0.10", "fd00::zz"]}));
    rejected(spec, "spec.clusterIPs[1]", "must be an IP address");
}

#[test]
fn two_cluster_ips_of_one_family_are_rejected() {
    let spec = spec_with(json!({"clusterIPs": ["10.96.0.10", "10.96.0.11"]}));
    rejected(spec, "spec.clusterIPs[1]", "other IP family");
}

#[test]
fn three_cluster_ips_are_rejected() {
    let spec = spec_with(json!({"clusterIPs": ["10.96.0.10", "fd00::10", "10.96.0.11"]}));
    rejected(spec, "spec.clusterIPs", "at most two");
}

#[test]
fn cluster_ip_must_equal_first_cluster_ips_entry() {
    let spec = spec_with(json!({"clusterIPs": ["10.96.0.11"]}));
    rejected(
        spec,
        "spec.clusterIP",
        "must equal spec.clusterIPs[0] (10.96.0.11)",
    );
}

#[test]
fn dual_stack_cluster_ips_are_kept_in_order() {
    let spec = spec_with(json!({"clusterIP": null, "clusterIPs": ["fd00::10", "10.96.0.10"]}));
    let converted = service(&svc(spec)).expect("valid").expect("not ignored");
    assert_eq!(
        converted.cluster_ips,
        vec![ip("fd00::10"), ip("10.96.0.10")]
    );
}

#[test]
fn unknown_type_is_rejected() {
    rejected(
        spec_with(json!({"type": "Ingress"})),
        "spec.type",
        "unsupported value \"Ingress\"",
    );
}

#[test]
fn external_traffic_policy_must_be_spelled_as_upstream() {
    let spec = spec_with(json!({"externalTrafficPolicy": "local"}));
    rejected(spec, "spec.externalTrafficPolicy", "want Cluster or Local");
    let spec = spec_with(json!({"externalTrafficPolicy": "Local"}));
    let converted = service(&svc(spec)).expect("valid").expect("not ignored");
    assert_eq!(converted.external_traffic_policy, TrafficPolicy::Local);
}

#[test]
fn bad_internal_traffic_policy_is_rejected() {
    let spec = spec_with(json!({"internalTrafficPolicy": "Node"}));
    rejected(
        spec,
        "spec.internalTrafficPolicy",
        "unsupported value \"Node\"",
    );
}

#[test]
fn bad_session_affinity_is_rejected() {
    rejected(
        spec_with(json!({"sessionAffinity": "Cookie"})),
        "spec.sessionAffinity",
        "ClientIP",
    );
}

#[test]
fn client_ip_affinity_timeout_defaults_to_three_hours() {
    let spec = spec_with(json!({"sessionAffinity": "ClientIP"}));
    let converted = service(&svc(spec)).expect("valid").expect("not ignored");
    assert_eq!(
        converted.session_affinity,
        SessionAffinity::ClientIp {
            timeout_seconds: 10800
        }
    );
}

#[test]
fn client_ip_affinity_timeout_out_of_range_is_rejected() {
    for timeout in [0, 86_401] {
        let spec = spec_with(json!({"sessionAffinity": "ClientIP",
            "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": timeout}}}));
        rejected(
            spec,
            "spec.sessionAffinityConfig.clientIP.timeoutSeconds",
            &format!("must be between 1 and 86400, got {timeout}"),
        );
    }
}

#[test]
fn bad_external_ip_is_rejected() {
    let spec = spec_with(json!({"externalIPs": ["203.0.113.7", "example.com"]}));
    rejected(spec, "spec.externalIPs[1]", "\"example.com\"");
}

#[test]
fn bad_load_balancer_ingress_ip_is_rejected() {
    let mut object = svc(spec_with(json!({})));
    object.status = Some(from_json(
        json!({"loadBalancer": {"ingress": [{"ip": "1.2.3"}]}}),
    ));
    assert_rejected(
        service(&object),
        WEB,
        "status.loadBalancer.ingress[0].ip",
        "\"1.2.3\"",
    );
}

#[test]
fn proxy_mode_and_hostname_only_ingress_entries_are_skipped() {
    let mut object = svc(spec_with(json!({})));
    object.status = Some(from_json(json!({"loadBalancer": {"ingress": [
        {"ip": "203.0.113.1", "ipMode": "Proxy"},
        {"hostname": "lb.example.com"},
        {"ip": "203.0.113.2", "ipMode": "VIP"},
        {"ip": "203.0.113.3"},
    ]}})));
    let converted = service(&object).expect("valid").expect("not ignored");
    assert_eq!(
        converted.load_balancer_ips,
        vec![ip("203.0.113.2"), ip("203.0.113.3")]
    );
}

#[test]
fn unknown_ingress_ip_mode_is_rejected() {
    let mut object = svc(spec_with(json!({})));
    object.status = Some(from_json(json!({"loadBalancer": {"ingress": [
        {"ip": "203.0.113.1"},
        {"ip": "203.0.113.2", "ipMode": "proxy"},
    ]}})));
    assert_rejected(
        service(&object),
        WEB,
        "status.loadBalancer.ingress[1].ipMode",
        "want VIP or Proxy",
    );
}

#[test]
fn load_balancer_source_range_with_a_bad_prefix_length_is_rejected() {
    let spec = spec_with(json!({"loadBalancerSourceRanges": ["10.0.0.0/8", "10.0.0.0/33"]}));
    rejected(spec, "spec.loadBalancerSourceRanges[1]", "10.0.0.0/33");
}

#[test]
fn load_balancer_source_range_must_be_a_cidr_not_a_bare_ip() {
    let spec = spec_with(json!({"loadBalancerSourceRanges": ["203.0.113.7"]}));
    rejected(spec, "spec.loadBalancerSourceRanges[0]", "must be a CIDR");
}

#[test]
fn load_balancer_source_ranges_are_trimmed_and_normalised() {
    let spec =
        spec_with(json!({"loadBalancerSourceRanges": [" 203.0.113.7/24 ", "2001:db8::1/64"]}));
    let converted = service(&svc(spec)).expect("valid").expect("not ignored");
    let want: Vec<ipnet::IpNet> = vec![
        "203.0.113.0/24".parse().expect("cidr"),
        "2001:db8::/64".parse().expect("cidr"),
    ];
    assert_eq!(converted.load_balancer_source_ranges, want);
}

#[test]
fn health_check_node_port_out_of_range_is_rejected() {
    let spec = spec_with(json!({"healthCheckNodePort": -1}));
    rejected(spec, "spec.healthCheckNodePort", "got -1");
}
