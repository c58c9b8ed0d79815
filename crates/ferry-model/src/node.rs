//! This node (and the others), as the proxy needs them.

use std::collections::BTreeMap;
use std::net::IpAddr;

use ipnet::IpNet;

/// `status.addresses[].type` values the proxy uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NodeAddressType {
    /// `InternalIP`.
    InternalIp,
    /// `ExternalIP`.
    ExternalIp,
}

/// One `status.addresses[]` entry.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeAddress {
    /// `type`.
    pub kind: NodeAddressType,
    /// `address`.
    pub address: IpAddr,
}

/// The taint the Cluster Autoscaler puts on a node it is about to delete. Upstream kube-proxy
/// reports such a node unhealthy on `/healthz`, so load balancers drain it first.
pub const TO_BE_DELETED_TAINT: &str = "ToBeDeletedByClusterAutoscaler";

/// One `spec.taints[]` entry.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NodeTaint {
    /// `key`.
    pub key: String,
    /// `value` (empty when unset).
    pub value: String,
    /// `effect` (`NoSchedule`, `PreferNoSchedule`, `NoExecute`).
    pub effect: String,
}

/// A `v1` Node.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Node {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.labels` (topology labels live here).
    pub labels: BTreeMap<String, String>,
    /// `status.addresses` (InternalIP and ExternalIP entries only).
    pub addresses: Vec<NodeAddress>,
    /// `spec.podCIDRs` (or `spec.podCIDR`).
    pub pod_cidrs: Vec<IpNet>,
    /// `metadata.deletionTimestamp` (RFC 3339), set once the node is being deleted.
    pub deletion_timestamp: Option<String>,
    /// `spec.taints`.
    pub taints: Vec<NodeTaint>,
}

impl Node {
    /// The node's primary IPs: its InternalIPs, or its ExternalIPs when it has no InternalIP.
    /// This is what upstream's `nodePortAddresses: [primary]` means.
    pub fn primary_ips(&self) -> Vec<IpAddr> {
        let of = |kind| {
            self.addresses
                .iter()
                .filter(|a| a.kind == kind)
                .map(|a| a.address)
                .collect::<Vec<_>>()
        };
        let internal = of(NodeAddressType::InternalIp);
        if internal.is_empty() {
            of(NodeAddressType::ExternalIp)
        } else {
            internal
        }
    }

    /// True when the node is going away: it has a `deletionTimestamp`, or the Cluster
    /// Autoscaler tainted it [`TO_BE_DELETED_TAINT`]. Upstream `ProxyHealthServer.SyncNode`.
    pub fn is_being_removed(&self) -> bool {
        self.deletion_timestamp.is_some()
            || self.taints.iter().any(|t| t.key == TO_BE_DELETED_TAINT)
    }

    /// `topology.kubernetes.io/zone`.
    pub fn zone(&self) -> Option<&str> {
        self.labels
            .get("topology.kubernetes.io/zone")
            .map(String::as_str)
    }
}
