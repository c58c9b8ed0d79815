//! `convert::endpoint_slice`.

use std::sync::Arc;

use ferry_model::fixtures::{ip, mk_endpoint, mk_slice};
use ferry_model::{EndpointConditions, EndpointPort, IpFamily, Protocol};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::{json, Value};

use super::{assert_rejected, from_json};
use crate::convert::endpoint_slice;

const SLICE: &str = "EndpointSlice dev/web-abc";

/// `dev/web-abc` of Service `web`, with the given body fields over a valid IPv4 body.
fn slice(extra: Value) -> EndpointSlice {
    let mut body = json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "web-abc", "namespace": "dev",
                     "labels": {"kubernetes.io/service-name": "web"}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}],
        "endpoints": [{"addresses": ["10.0.0.1"], "nodeName": "node-a"}],
    });
    if let (Some(body), Value::Object(extra)) = (body.as_object_mut(), extra) {
        body.extend(extra);
    }
    from_json(body)
}

fn rejected(extra: Value, field: &str, reason: &str) {
    assert_rejected(endpoint_slice(&slice(extra)), SLICE, field, reason);
}

#[test]
fn slice_converts_with_defaults() {
    let converted = endpoint_slice(&slice(json!({})))
        .expect("valid")
        .expect("not ignored");
    assert_eq!(
        converted,
        mk_slice("dev", "web", 8080, vec![mk_endpoint("10.0.0.1", "node-a")])
    );
}

#[test]
fn conditions_default_like_kube_proxy() {
    let converted = endpoint_slice(&slice(json!({"endpoints": [
        {"addresses": ["10.0.0.1"]},
        {"addresses": ["10.0.0.2"], "conditions": {"ready": false}},
        {"addresses": ["10.0.0.3"], "conditions": {"ready": false, "serving": true, "terminating": true}},
        {"addresses": ["10.0.0.4"], "conditions": {"serving": false}},
    ]})))
    .expect("valid")
    .expect("not ignored");
    let conditions: Vec<EndpointConditions> =
        converted.endpoints.iter().map(|e| e.conditions).collect();
    let c = |ready, serving, terminating| EndpointConditions {
        ready,
        serving,
        terminating,
    };
    assert_eq!(
        conditions,
        vec![
            c(true, true, false),
            c(false, true, false),
            c(false, true, true),
            c(true, false, false)
        ]
    );
}

#[test]
fn ports_default_name_and_protocol_and_skip_missing_numbers() {
    let converted = endpoint_slice(&slice(json!({"ports": [
        {"port": 53, "protocol": "UDP"}, {"name": "all"}, {"name": "web", "port": 80},
    ]})))
    .expect("valid")
    .expect("not ignored");
    let want = vec![
        EndpointPort {
            name: String::new(),
            port: 53,
            protocol: Protocol::Udp,
        },
        EndpointPort {
            name: "web".into(),
            port: 80,
            protocol: Protocol::Tcp,
        },
    ];
    assert_eq!(converted.ports, want);
}

#[test]
fn zone_hints_and_trigger_time_are_kept() {
    let mut object = slice(json!({"endpoints": [{"addresses": ["10.0.0.1", "10.0.0.9"],
        "zone": "z1", "hints": {"forZones": [{"name": "z1"}, {"name": "z2"}]}}]}));
    object.metadata.annotations = Some(
        [(
            "endpoints.kubernetes.io/last-change-trigger-time".to_owned(),
            "2021-11-21T13:03:14Z".to_owned(),
        )]
        .into(),
    );
    let converted = endpoint_slice(&object)
        .expect("valid")
        .expect("not ignored");
    let endpoint = &converted.endpoints[0];
    assert_eq!(
        endpoint.address,
        ip("10.0.0.1"),
        "first address only, like upstream"
    );
    assert_eq!(endpoint.zone(), Some("z1"));
    assert_eq!(
        endpoint.zone_hints(),
        Some(&["z1", "z2"].map(Arc::from)[..])
    );
    assert_eq!(
        converted.trigger_time.as_deref(),
        Some("2021-11-21T13:03:14Z")
    );
}

#[test]
fn ipv6_slice_converts() {
    let converted = endpoint_slice(&slice(json!({"addressType": "IPv6",
        "endpoints": [{"addresses": ["fd00::1"]}]})))
    .expect("valid")
    .expect("not ignored");
    assert_eq!(converted.family, IpFamily::V6);
    assert_eq!(converted.endpoints[0].address, ip("fd00::1"));
}

#[test]
fn missing_service_name_label_is_rejected() {
    let mut object = slice(json!({}));
    object.metadata.labels = None;
    assert_rejected(
        endpoint_slice(&object),
        SLICE,
        "metadata.labels[kubernetes.io/service-name]",
        "must be set",
    );
}

#[test]
fn slices_filtered_by_kube_proxy_labels_are_ignored() {
    for label in [
        "service.kubernetes.io/service-proxy-name",
        "service.kubernetes.io/headless",
    ] {
        let mut object = slice(json!({}));
        if let Some(labels) = object.metadata.labels.as_mut() {
            labels.insert(label.to_owned(), String::new());
        }
        assert_eq!(endpoint_slice(&object), Ok(None), "{label}");
    }
}

#[test]
fn fqdn_slice_is_ignored() {
    let object = slice(json!({"addressType": "FQDN", "endpoints": [{"addresses": ["a.example"]}]}));
    assert_eq!(endpoint_slice(&object), Ok(None));
}

#[test]
fn unknown_address_type_is_rejected() {
    rejected(
        json!({"addressType": "IPX"}),
        "addressType",
        "unsupported value \"IPX\"",
    );
}

#[test]
fn port_out_of_range_is_rejected() {
    rejected(
        json!({"ports": [{"name": "http", "port": 0}]}),
        "ports[0].port",
        "got 0",
    );
}

#[test]
fn unknown_port_protocol_is_rejected() {
    rejected(
        json!({"ports": [{"port": 80, "protocol": "tcp"}]}),
        "ports[0].protocol",
        "\"tcp\"",
    );
}

#[test]
fn endpoint_without_addresses_is_rejected() {
    let extra = json!({"endpoints": [{"addresses": ["10.0.0.1"]}, {"addresses": []}]});
    rejected(extra, "endpoints[1].addresses", "at least one address");
}

#[test]
fn bad_endpoint_address_is_rejected() {
    let extra = json!({"endpoints": [{"addresses": ["10.0.0.1", "10.0.0.256"]}]});
    rejected(extra, "endpoints[0].addresses[1]", "must be an IP address");
}

#[test]
fn endpoint_address_of_the_wrong_family_is_rejected() {
    let extra = json!({"endpoints": [{"addresses": ["fd00::1"]}]});
    rejected(
        extra,
        "endpoints[0].addresses[0]",
        "must be an IPv4 address",
    );
}

#[test]
fn endpoints_on_one_node_share_their_location() {
    let converted = endpoint_slice(&slice(json!({"endpoints": [
        {"addresses": ["10.0.0.1"], "nodeName": "node-a"},
        {"addresses": ["10.0.0.2"], "nodeName": "node-b"},
        {"addresses": ["10.0.0.3"], "nodeName": "node-a"},
        {"addresses": ["10.0.0.4"]},
    ]})))
    .expect("valid")
    .expect("not ignored");
    let eps = &converted.endpoints;
    let location = |i: usize| eps[i].location.as_ref().expect("a location");
    assert!(Arc::ptr_eq(location(0), location(2)));
    assert!(!Arc::ptr_eq(location(0), location(1)));
    assert_eq!(eps[2].node_name(), Some("node-a"));
    assert_eq!(eps[3].location, None, "no node, zone or hints: no location");
}

#[test]
fn hostname_and_target_ref_are_kept_with_the_slice_namespace_by_default() {
    let converted = endpoint_slice(&slice(json!({"endpoints": [
        {"addresses": ["10.0.0.1"], "hostname": "web-0",
         "targetRef": {"kind": "Pod", "name": "web-0", "uid": "1234"}},
        {"addresses": ["10.0.0.2"], "targetRef": {"kind": "VirtualMachineInstance",
                                                  "namespace": "vms", "name": "vm-1"}},
        {"addresses": ["10.0.0.3"], "targetRef": {"kind": "Pod"}},
    ]})))
    .expect("valid")
    .expect("not ignored");
    let eps = &converted.endpoints;
    let pod = eps[0].target_ref().expect("a targetRef");
    assert_eq!(pod.to_string(), "Pod dev/web-0");
    assert!(Arc::ptr_eq(&pod.namespace, &converted.namespace));
    assert_eq!(
        eps[0].target.as_ref().and_then(|t| t.hostname.as_deref()),
        Some("web-0")
    );
    assert_eq!(
        eps[1].target_ref().map(ToString::to_string).as_deref(),
        Some("VirtualMachineInstance vms/vm-1")
    );
    // A targetRef without a name names nothing: left out.
    assert_eq!(eps[2].target, None);
}
