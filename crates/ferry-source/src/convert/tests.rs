//! Conversion tests: one per rejected field, each asserting the object and the field are named.

use serde_json::Value;

use crate::InvalidObject;

mod endpoints;
mod family;
mod node;
mod pod;
mod service;
mod service_cidr;
mod slice;
mod topology;

/// A k8s-openapi object from JSON; panics on a typo in a test.
fn from_json<T: serde::de::DeserializeOwned>(value: Value) -> T {
    serde_json::from_value(value).unwrap_or_else(|e| panic!("bad test object: {e}"))
}

/// Asserts that `result` failed on `field` of `object` (e.g. `Service dev/web`), with a reason
/// containing `reason`.
#[track_caller]
fn assert_rejected<T: std::fmt::Debug>(
    result: Result<T, InvalidObject>,
    object: &str,
    field: &str,
    reason: &str,
) {
    let error = result.expect_err("conversion should fail");
    let text = error.to_string();
    assert_eq!(error.field, field, "{text}");
    assert!(text.starts_with(&format!("{object}: {field}: ")), "{text}");
    assert!(error.reason.contains(reason), "{text}");
}

#[test]
fn display_names_file_object_and_field() {
    let error = InvalidObject::new(
        &ferry_model::ObjectRef::new("Service", "dev", "web"),
        "spec.ports[1].port",
        "must be between 1 and 65535, got 70000",
    )
    .in_file(std::path::Path::new("examples/bad.yaml"));
    assert_eq!(
        error.to_string(),
        "examples/bad.yaml: Service dev/web: spec.ports[1].port: must be between 1 and 65535, got \
         70000"
    );
}

#[test]
fn display_of_a_file_error_has_no_object_or_field() {
    let error = InvalidObject::file(std::path::Path::new("a.yaml"), "not valid YAML");
    assert!(error.is_file_error());
    assert_eq!(error.to_string(), "a.yaml: not valid YAML");
}

#[test]
fn display_of_a_node_error_has_no_namespace() {
    let error = InvalidObject::new(
        &ferry_model::ObjectRef::new("Node", "", "n1"),
        "spec.podCIDR",
        "bad",
    );
    assert_eq!(error.to_string(), "Node n1: spec.podCIDR: bad");
}
