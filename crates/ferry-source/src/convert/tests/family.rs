//! Dual-stack conversion: `ipFamilies` / `ipFamilyPolicy` / `clusterIPs` of Services, IPv6
//! EndpointSlices, dual-stack Nodes.

use ferry_model::fixtures::ip;
use ferry_model::IpFamily;
use k8s_openapi::api::core::v1::{Node, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::{json, Value};

use super::{assert_rejected, from_json};
use crate::convert::{endpoint_slice, node, service};

const WEB: &str = "Service dev/web";

fn svc(spec: Value) -> Service {
    let mut spec = spec;
    spec["ports"] = json!([{"name": "http", "port": 80, "targetPort": 8080}]);
    from_json(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": "dev"},
        "spec": spec,
    }))
}

fn cluster_ips(spec: Value) -> Vec<std::net::IpAddr> {
    service(&svc(spec))
        .expect("valid")
        .expect("not ignored")
        .cluster_ips
}

fn rejected(spec: Value, field: &str, reason: &str) {
    assert_rejected(service(&svc(spec)), WEB, field, reason);
}

#[test]
fn dual_stack_service_keeps_one_cluster_ip_per_family() {
    let ips = cluster_ips(json!({
        "clusterIP": "fd00:10:96::a", "clusterIPs": ["fd00:10:96::a", "10.96.0.10"],
        "ipFamilies": ["IPv6", "IPv4"], "ipFamilyPolicy": "RequireDualStack",
    }));
    assert_eq!(ips, vec![ip("fd00:10:96::a"), ip("10.96.0.10")]);
    let svc = service(&svc(json!({"clusterIPs": ["10.96.0.10", "fd00:10:96::a"],
                                  "ipFamilyPolicy": "PreferDualStack"})))
    .expect("valid")
    .expect("not ignored");
    assert_eq!(svc.cluster_ip(IpFamily::V4), Some(ip("10.96.0.10")));
    assert_eq!(svc.cluster_ip(IpFamily::V6), Some(ip("fd00:10:96::a")));
}

#[test]
fn ipv6_only_and_prefer_dual_stack_with_one_address_are_single_stack() {
    let v6 = cluster_ips(json!({"clusterIP": "fd00:10:96::b", "ipFamilies": ["IPv6"],
                                "ipFamilyPolicy": "SingleStack"}));
    assert_eq!(v6, vec![ip("fd00:10:96::b")]);
    // A single-stack cluster gives a PreferDualStack Service one ClusterIP.
    let one = cluster_ips(json!({"clusterIPs": ["10.96.0.10"], "ipFamilies": ["IPv4"],
                                 "ipFamilyPolicy": "PreferDualStack"}));
    assert_eq!(one, vec![ip("10.96.0.10")]);
}

#[test]
fn unknown_policy_is_rejected() {
    rejected(
        json!({"clusterIP": "10.96.0.10", "ipFamilyPolicy": "DualStack"}),
        "spec.ipFamilyPolicy",
        "unsupported value \"DualStack\"",
    );
}

#[test]
fn single_stack_with_two_cluster_ips_is_rejected() {
    rejected(
        json!({"clusterIPs": ["10.96.0.10", "fd00::a"], "ipFamilyPolicy": "SingleStack"}),
        "spec.ipFamilyPolicy",
        "SingleStack allows one ClusterIP",
    );
}

#[test]
fn require_dual_stack_with_one_cluster_ip_is_rejected() {
    rejected(
        json!({"clusterIP": "10.96.0.10", "ipFamilyPolicy": "RequireDualStack"}),
        "spec.clusterIPs",
        "RequireDualStack needs one ClusterIP per family",
    );
}

#[test]
fn families_must_match_the_cluster_ips_in_order() {
    rejected(
        json!({"clusterIPs": ["10.96.0.10", "fd00::a"], "ipFamilies": ["IPv6", "IPv4"],
               "ipFamilyPolicy": "RequireDualStack"}),
        "spec.ipFamilies[0]",
        "must be the family of spec.clusterIPs[0] (10.96.0.10, IPv4), got IPv6",
    );
    rejected(
        json!({"clusterIP": "10.96.0.10", "ipFamilies": ["IPv4", "IPv4"]}),
        "spec.ipFamilies[1]",
        "duplicate family",
    );
    rejected(
        json!({"clusterIP": "10.96.0.10", "ipFamilies": ["IPv5"]}),
        "spec.ipFamilies[0]",
        "want IPv4 or IPv6",
    );
}

#[test]
fn headless_dual_stack_service_is_ignored_whatever_its_families() {
    let s = svc(json!({"clusterIP": "None", "ipFamilyPolicy": "RequireDualStack"}));
    assert_eq!(service(&s), Ok(None));
}

#[test]
fn ipv6_slice_converts_and_rejects_ipv4_addresses() {
    let body = |addr: &str| -> EndpointSlice {
        from_json(json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "web-v6", "namespace": "dev",
                         "labels": {"kubernetes.io/service-name": "web"}},
            "addressType": "IPv6",
            "ports": [{"name": "http", "port": 8080}],
            "endpoints": [{"addresses": [addr], "nodeName": "node-a"}],
        }))
    };
    let s = endpoint_slice(&body("fd00:10:244:1::5"))
        .expect("valid")
        .expect("not ignored");
    assert_eq!(s.family, IpFamily::V6);
    assert_eq!(s.endpoints[0].address, ip("fd00:10:244:1::5"));
    assert_rejected(
        endpoint_slice(&body("10.0.0.5")),
        "EndpointSlice dev/web-v6",
        "endpoints[0].addresses[0]",
        "must be an IPv6 address",
    );
}

#[test]
fn dual_stack_node_keeps_both_families() {
    let n: Node = from_json(json!({
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
        "spec": {"podCIDR": "10.244.1.0/24", "podCIDRs": ["10.244.1.0/24", "fd00:10:244:1::/64"]},
        "status": {"addresses": [{"type": "InternalIP", "address": "10.1.1.9"},
                                 {"type": "InternalIP", "address": "fd00:10:1::9"}]},
    }));
    let n = node(&n).expect("valid");
    assert_eq!(n.primary_ips(), vec![ip("10.1.1.9"), ip("fd00:10:1::9")]);
    assert_eq!(
        n.pod_cidrs,
        vec![
            "10.244.1.0/24".parse().expect("cidr"),
            "fd00:10:244:1::/64".parse().expect("cidr")
        ]
    );
}
