//! `convert::service_cidr`.

use ferry_model::ServiceCidr;
use k8s_openapi::api::networking::v1::ServiceCIDR;
use serde_json::{json, Value};

use super::{assert_rejected, from_json};
use crate::convert::service_cidr;

fn mk(cidrs: Value) -> ServiceCIDR {
    from_json(json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR",
        "metadata": {"name": "kubernetes"},
        "spec": {"cidrs": cidrs},
    }))
}

#[test]
fn a_dual_stack_service_cidr_converts() {
    let converted = service_cidr(&mk(json!(["172.30.0.0/16", "fd00:172:30::/112"])));
    let want = ServiceCidr {
        name: "kubernetes".into(),
        cidrs: vec![
            "172.30.0.0/16".parse().expect("cidr"),
            "fd00:172:30::/112".parse().expect("cidr"),
        ],
    };
    assert_eq!(converted, Ok(want));
}

#[test]
fn a_service_cidr_without_a_name_is_rejected() {
    let object: ServiceCIDR = from_json(json!({
        "apiVersion": "networking.k8s.io/v1", "kind": "ServiceCIDR",
        "metadata": {}, "spec": {"cidrs": ["172.30.0.0/16"]},
    }));
    assert_rejected(
        service_cidr(&object),
        "ServiceCIDR <unnamed>",
        "metadata.name",
        "must be set",
    );
}

#[test]
fn a_service_cidr_without_cidrs_is_rejected() {
    for cidrs in [json!([]), Value::Null] {
        assert_rejected(
            service_cidr(&mk(cidrs)),
            "ServiceCIDR kubernetes",
            "spec.cidrs",
            "at least one CIDR required",
        );
    }
}

#[test]
fn more_than_two_cidrs_are_rejected() {
    let three = json!(["172.30.0.0/16", "fd00:172:30::/112", "172.31.0.0/16"]);
    assert_rejected(
        service_cidr(&mk(three)),
        "ServiceCIDR kubernetes",
        "spec.cidrs",
        "up to 2 values",
    );
}

#[test]
fn a_cidr_that_is_not_one_is_rejected() {
    assert_rejected(
        service_cidr(&mk(json!(["172.30.0.0/16", "fd00::/300"]))),
        "ServiceCIDR kubernetes",
        "spec.cidrs[1]",
        "\"fd00::/300\"",
    );
    assert_rejected(
        service_cidr(&mk(json!(["172.30.0.10"]))),
        "ServiceCIDR kubernetes",
        "spec.cidrs[0]",
        "must be a CIDR",
    );
}

#[test]
fn a_cidr_with_host_bits_is_rejected_naming_its_network() {
    assert_rejected(
        service_cidr(&mk(json!(["172.30.0.10/16"]))),
        "ServiceCIDR kubernetes",
        "spec.cidrs[0]",
        "must be a network address (host bits unset, e.g. 172.30.0.0/16)",
    );
}

#[test]
fn two_cidrs_of_one_family_are_rejected() {
    assert_rejected(
        service_cidr(&mk(json!(["172.30.0.0/16", "172.31.0.0/16"]))),
        "ServiceCIDR kubernetes",
        "spec.cidrs[1]",
        "no more than one CIDR for each IP family",
    );
}
