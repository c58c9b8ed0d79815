//! `v1 Node` → [`ferry_model::Node`].

use ferry_model::{Node, NodeAddress, NodeAddressType, NodeTaint, ObjectRef};
use k8s_openapi::api::core::v1 as k8s;

use super::{cidr, ip, non_empty, UNNAMED};
use crate::InvalidObject;

/// Converts a Node: name, labels, the `InternalIP` and `ExternalIP` entries of
/// `status.addresses` (other types, such as `Hostname`, are ignored), and `spec.podCIDRs`
/// (or `spec.podCIDR` when `podCIDRs` is unset), `metadata.deletionTimestamp` and `spec.taints`
/// (the proxy health server reports a node that is going away unhealthy).
pub fn node(node: &k8s::Node) -> Result<Node, InvalidObject> {
    let Some(name) = non_empty(node.metadata.name.as_deref()) else {
        let object = ObjectRef::new("Node", "", UNNAMED);
        return Err(InvalidObject::new(&object, "metadata.name", "must be set"));
    };
    let object = ObjectRef::new("Node", "", name);

    let mut addresses = Vec::new();
    let status_addresses = node.status.as_ref().and_then(|s| s.addresses.as_deref());
    for (i, a) in status_addresses.unwrap_or_default().iter().enumerate() {
        let kind = match a.type_.as_str() {
            "InternalIP" => NodeAddressType::InternalIp,
            "ExternalIP" => NodeAddressType::ExternalIp,
            _ => continue,
        };
        let address = ip(
            &a.address,
            &object,
            &format!("status.addresses[{i}].address"),
        )?;
        addresses.push(NodeAddress { kind, address });
    }

    let spec = node.spec.as_ref();
    let pod_cidrs = match spec
        .and_then(|s| s.pod_cidrs.as_deref())
        .filter(|c| !c.is_empty())
    {
        Some(list) => list
            .iter()
            .enumerate()
            .map(|(i, c)| cidr(c, &object, &format!("spec.podCIDRs[{i}]")))
            .collect::<Result<_, _>>()?,
        None => match non_empty(spec.and_then(|s| s.pod_cidr.as_deref())) {
            Some(c) => vec![cidr(c, &object, "spec.podCIDR")?],
            None => Vec::new(),
        },
    };

    let mut taints = Vec::new();
    for (i, t) in spec
        .and_then(|s| s.taints.as_deref())
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        if t.key.is_empty() {
            return Err(InvalidObject::new(
                &object,
                format!("spec.taints[{i}].key"),
                "must be set",
            ));
        }
        taints.push(NodeTaint {
            key: t.key.clone(),
            value: t.value.clone().unwrap_or_default(),
            effect: t.effect.clone(),
        });
    }

    Ok(Node {
        name: name.to_owned(),
        labels: node.metadata.labels.clone().unwrap_or_default(),
        addresses,
        pod_cidrs,
        deletion_timestamp: node
            .metadata
            .deletion_timestamp
            .as_ref()
            .map(|t| t.0.to_string()),
        taints,
    })
}
