//! Topology fields: `endpoints[].hints` of a slice and `spec.trafficDistribution` of a Service.

use std::sync::Arc;

use ferry_model::TrafficDistribution;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::{json, Value};

use super::{assert_rejected, from_json};
use crate::convert::{endpoint_slice, service};

fn slice(endpoints: Value) -> EndpointSlice {
    from_json(json!({
        "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "web-abc", "namespace": "dev",
                     "labels": {"kubernetes.io/service-name": "web"}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "port": 8080}],
        "endpoints": endpoints,
    }))
}

fn svc(distribution: Value) -> Service {
    from_json(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": "dev"},
        "spec": {"clusterIP": "10.96.0.10", "ports": [{"name": "http", "port": 80}],
                 "trafficDistribution": distribution},
    }))
}

#[test]
fn zone_and_node_hints_are_kept_in_order() {
    let converted = endpoint_slice(&slice(json!([
        {"addresses": ["10.0.0.1"], "nodeName": "node-a1", "zone": "zone-a",
         "hints": {"forZones": [{"name": "zone-a"}, {"name": "zone-c"}],
                   "forNodes": [{"name": "node-a1"}]}},
        {"addresses": ["10.0.0.2"], "hints": {"forZones": [], "forNodes": []}},
        {"addresses": ["10.0.0.3"]},
    ])))
    .expect("valid")
    .expect("not ignored");
    let eps = &converted.endpoints;
    assert_eq!(eps[0].zone(), Some("zone-a"));
    assert_eq!(
        eps[0].zone_hints(),
        Some(&["zone-a", "zone-c"].map(Arc::from)[..])
    );
    assert_eq!(eps[0].node_hints(), Some(&["node-a1"].map(Arc::from)[..]));
    assert_eq!(
        (eps[1].zone_hints(), eps[1].node_hints()),
        (None, None),
        "empty lists are no hints, as upstream's Len() == 0"
    );
    assert_eq!((eps[2].zone_hints(), eps[2].node_hints()), (None, None));
}

#[test]
fn duplicate_zone_hints_are_rejected_naming_the_entry() {
    let result = endpoint_slice(&slice(json!([
        {"addresses": ["10.0.0.1"]},
        {"addresses": ["10.0.0.2"],
         "hints": {"forZones": [{"name": "zone-a"}, {"name": "zone-a"}]}},
    ])));
    assert_rejected(
        result,
        "EndpointSlice dev/web-abc",
        "endpoints[1].hints.forZones[1].name",
        "duplicate value \"zone-a\"",
    );
}

#[test]
fn more_than_eight_node_hints_are_rejected() {
    let nodes: Vec<Value> = (0..9)
        .map(|i| json!({"name": format!("node-{i}")}))
        .collect();
    let result = endpoint_slice(&slice(json!([
        {"addresses": ["10.0.0.1"], "hints": {"forNodes": nodes}},
    ])));
    assert_rejected(
        result,
        "EndpointSlice dev/web-abc",
        "endpoints[0].hints.forNodes",
        "at most 8 entries, got 9",
    );
}

#[test]
fn traffic_distribution_values_are_read() {
    let cases = [
        (json!("PreferClose"), Some(TrafficDistribution::PreferClose)),
        (
            json!("PreferSameZone"),
            Some(TrafficDistribution::PreferSameZone),
        ),
        (
            json!("PreferSameNode"),
            Some(TrafficDistribution::PreferSameNode),
        ),
        (Value::Null, None),
        (json!(""), None),
    ];
    for (value, want) in cases {
        let converted = service(&svc(value.clone()))
            .expect("valid")
            .expect("not ignored");
        assert_eq!(converted.traffic_distribution, want, "{value}");
    }
}

#[test]
fn unknown_traffic_distribution_is_ignored_not_rejected() {
    // kube-proxy never reads the field, so a value it does not know (a newer API server's, or
    // the wrong case) changes nothing and must not cost the Service its rules.
    for value in ["PreferRegion", "preferclose"] {
        let converted = service(&svc(json!(value)))
            .expect("a Service with an unknown trafficDistribution is still valid")
            .expect("not ignored");
        assert_eq!(converted.traffic_distribution, None, "{value}");
    }
}
