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
