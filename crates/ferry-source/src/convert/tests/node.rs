//! `convert::node`.

use ferry_model::fixtures::mk_node;
use ferry_model::{NodeAddress, NodeAddressType};
use k8s_openapi::api::core::v1::Node;
use serde_json::{json, Value};

use super::{assert_rejected, from_json};
use crate::convert::node;

fn mk(spec: Value, addresses: Value) -> Node {
    from_json(json!({
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": "k8s-node2", "labels": {"kubernetes.io/hostname": "k8s-node2"}},
        "spec": spec,
        "status": {"addresses": addresses},
    }))
}

#[test]
fn seed_node_converts() {
    let object = mk(
        json!({"podCIDR": "192.168.169.128/26", "podCIDRs": ["192.168.169.128/26"]}),
        json!([{"type": "InternalIP", "address": "10.1.1.9"}, {"type": "Hostname", "address": "k8s-node2"}]),
    );
    let mut want = mk_node("k8s-node2", "10.1.1.9", "192.168.169.128/26");
    want.labels
        .insert("kubernetes.io/hostname".into(), "k8s-node2".into());
    assert_eq!(node(&object), Ok(want));
}

#[test]
fn external_ips_are_kept_and_pod_cidr_is_the_fallback() {
    let object = mk(
        json!({"podCIDR": "192.168.36.64/26"}),
        json!([{"type": "ExternalIP", "address": "203.0.113.9"}]),
    );
    let converted = node(&object).expect("valid");
    let want = NodeAddress {
        kind: NodeAddressType::ExternalIp,
        address: "203.0.113.9".parse().expect("ip"),
    };
    assert_eq!(converted.addresses, vec![want]);
    assert_eq!(
        converted.pod_cidrs,
        vec!["192.168.36.64/26".parse().expect("cidr")]
    );
}

#[test]
fn bad_node_address_is_rejected() {
    let object = mk(
        json!({}),
        json!([{"type": "InternalIP", "address": "10.1.1"}]),
    );
    assert_rejected(
        node(&object),
        "Node k8s-node2",
        "status.addresses[0].address",
        "\"10.1.1\"",
    );
}

#[test]
fn bad_pod_cidrs_entry_is_rejected() {
    let object = mk(
        json!({"podCIDRs": ["192.168.169.128/26", "fd00::/129"]}),
        json!([]),
    );
    assert_rejected(
        node(&object),
        "Node k8s-node2",
        "spec.podCIDRs[1]",
        "must be a CIDR",
    );
}

#[test]
fn bad_pod_cidr_is_rejected() {
    let object = mk(json!({"podCIDR": "192.168.169.128"}), json!([]));
    assert_rejected(
        node(&object),
        "Node k8s-node2",
        "spec.podCIDR",
        "must be a CIDR",
    );
}

#[test]
fn node_without_name_is_rejected() {
    let object: Node = from_json(json!({"metadata": {}}));
    assert_rejected(
        node(&object),
        "Node <unnamed>",
        "metadata.name",
        "must be set",
    );
}

#[test]
fn deletion_timestamp_and_taints_are_kept() {
    let mut object = mk(
        json!({"taints": [
            {"key": "ToBeDeletedByClusterAutoscaler", "value": "1718000000", "effect": "NoSchedule"},
            {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"},
        ]}),
        json!([]),
    );
    let converted = node(&object).expect("valid");
    assert_eq!(converted.deletion_timestamp, None);
    assert_eq!(converted.taints.len(), 2);
    assert_eq!(converted.taints[0].key, ferry_model::TO_BE_DELETED_TAINT);
    assert_eq!(converted.taints[0].value, "1718000000");
    assert_eq!(converted.taints[1].value, "");
    assert!(converted.is_being_removed());

    object.spec = None;
    object.metadata.deletion_timestamp = Some(from_json(json!("2024-05-01T10:00:00Z")));
    let converted = node(&object).expect("valid");
    assert_eq!(
        converted.deletion_timestamp.as_deref(),
        Some("2024-05-01T10:00:00Z")
    );
    assert!(converted.taints.is_empty());
    assert!(converted.is_being_removed());
}

#[test]
fn a_node_without_deletion_or_autoscaler_taint_is_not_being_removed() {
    let object = mk(
        json!({"taints": [{"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}]}),
        json!([]),
    );
    assert!(!node(&object).expect("valid").is_being_removed());
}

#[test]
fn taint_without_key_is_rejected() {
    let object = mk(
        json!({"taints": [{"key": "", "effect": "NoSchedule"}]}),
        json!([]),
    );
    assert_rejected(
        node(&object),
        "Node k8s-node2",
        "spec.taints[0].key",
        "must be set",
    );
}
