use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::discovery::v1 as discovery;
use kube::core::{ObjectList, WatchEvent};
use serde_json::{json, Value};

use super::*;
use crate::convert::ANNOTATION_TRIGGER_TIME;

/// What a real API server adds to an object's metadata: managed fields, kubectl's copy of the
/// object, and a large annotation of someone else's.
fn with_noise(mut object: Value) -> Value {
    let meta = &mut object["metadata"];
    meta["managedFields"] = json!([{
        "manager": "kube-controller-manager",
        "operation": "Update",
        "apiVersion": "v1",
        "fieldsType": "FieldsV1",
        "fieldsV1": { "f:metadata": { "f:labels": { ".": {} } } },
    }]);
    meta["annotations"] = json!({
        "kubectl.kubernetes.io/last-applied-configuration": "{\"apiVersion\":\"v1\"}",
        "huge": "x".repeat(1 << 20),
    });
    object
}

fn lean<K: DeserializeOwned + ReadAnnotations>(object: &Value) -> K {
    let text = object.to_string();
    serde_json::from_str::<Lean<K>>(&text).expect("parse").0
}

fn plain<K: DeserializeOwned>(object: Value) -> K {
    serde_json::from_value(object).expect("parse")
}

#[test]
fn a_service_loses_its_managed_fields_and_every_annotation_and_keeps_the_rest() {
    let mut clean = ferry_testkit::objects::service("dev", "web", "10.96.0.10", 80, 8080);
    clean["metadata"]["labels"] = json!({ "app": "web" });
    clean["metadata"]["resourceVersion"] = json!("42");
    let parsed: core::Service = lean(&with_noise(clean.clone()));
    assert_eq!(parsed.metadata.managed_fields, None);
    assert_eq!(parsed.metadata.annotations, None);
    assert_eq!(parsed, plain(clean), "everything else is parsed as before");
}

#[test]
fn a_slice_keeps_its_trigger_time_and_labels() {
    let clean = ferry_testkit::objects::endpoint_slice(
        "dev",
        "web-abc",
        "web",
        8080,
        &[("192.168.1.2", true, "k8s-node2")],
    );
    let mut noisy = with_noise(clean.clone());
    let time = "2026-12-02T03:00:00Z";
    noisy["metadata"]["annotations"][ANNOTATION_TRIGGER_TIME] = json!(time);
    let parsed: discovery::EndpointSlice = lean(&noisy);
    assert_eq!(parsed.metadata.managed_fields, None);
    let mut expected = clean;
    expected["metadata"]["annotations"] = json!({ ANNOTATION_TRIGGER_TIME: time });
    assert_eq!(parsed, plain(expected));
    assert_eq!(
        parsed.metadata.labels.expect("labels")["kubernetes.io/service-name"],
        "web"
    );
}

#[test]
fn a_node_keeps_its_topology_labels() {
    let mut clean = ferry_testkit::objects::node("k8s-node2", "10.1.1.9", "192.168.169.128/26");
    clean["metadata"]["labels"] = json!({ "topology.kubernetes.io/zone": "zone-a" });
    let parsed: core::Node = lean(&with_noise(clean.clone()));
    assert_eq!(parsed.metadata.annotations, None);
    assert_eq!(parsed, plain(clean));
}

#[test]
fn null_metadata_and_annotations_parse_and_bad_values_still_fail() {
    let mut object = ferry_testkit::objects::service("dev", "web", "10.96.0.10", 80, 8080);
    object["metadata"]["annotations"] = Value::Null;
    object["metadata"]["managedFields"] = Value::Null;
    let parsed: core::Service = lean(&object);
    assert_eq!(parsed.metadata.annotations, None);
    object["metadata"] = Value::Null;
    let _: core::Service = lean(&object);
    object["spec"]["ports"] = json!("not a list");
    let text = object.to_string();
    assert!(serde_json::from_str::<Lean<core::Service>>(&text).is_err());
}

#[test]
fn lists_and_watch_events_parse_lean() {
    let object = with_noise(ferry_testkit::objects::service(
        "dev",
        "web",
        "10.96.0.10",
        80,
        8080,
    ));
    let list = json!({
        "apiVersion": "v1",
        "kind": "ServiceList",
        "metadata": { "resourceVersion": "7" },
        "items": [object],
    });
    let list: ObjectList<Lean<core::Service>> =
        serde_json::from_str(&list.to_string()).expect("list");
    assert_eq!(list.items[0].0.metadata.annotations, None);
    // The object before the event's type: serde buffers it before parsing it.
    let event = json!({ "object": object, "type": "MODIFIED" }).to_string();
    let event: WatchEvent<Lean<core::Service>> = serde_json::from_str(&event).expect("event");
    let WatchEvent::Modified(service) = event else {
        panic!("{event:?}")
    };
    assert_eq!(service.0.metadata.managed_fields, None);
}
