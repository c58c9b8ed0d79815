//! Topology-aware routing: whether EndpointSlice hints narrow the cluster-wide set on this node.
//!
//! Upstream kube-proxy's `topologyModeFromHints` and `availableForTopology`
//! (pkg/proxy/topology.go), as of Kubernetes 1.33 and later: the proxy acts on the hints alone
//! (the Service's `trafficDistribution` and the `service.kubernetes.io/topology-mode`
//! annotation only tell the EndpointSlice controller to write them), node hints are honoured
//! (`PreferSameTrafficDistribution`, GA in 1.35), and only ready endpoints are looked at.
//! Hints are all-or-nothing: they are used only when every ready endpoint carries one and at
//! least one is for this node (or zone); otherwise every ready endpoint is used.

use std::net::SocketAddr;
use std::sync::Arc;

use super::EndpointView;

/// How the cluster-wide endpoint set of a service port is chosen on this node.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Topology {
    /// The service's policies never use the cluster-wide set (both policies `Local`), so
    /// topology is not considered (upstream ignores topology for Local traffic).
    Unused,
    /// No ready endpoint carries a hint (or no endpoint is ready): every ready endpoint is used.
    NoHints,
    /// Every ready endpoint has a node hint and at least one names this node: only the
    /// endpoints hinted for this node are used (`PreferSameNode`).
    SameNode,
    /// Every ready endpoint has a zone hint and at least one names this node's zone: only the
    /// endpoints hinted for that zone are used (`PreferClose` / `PreferSameZone`).
    SameZone(String),
    /// Hints exist but cannot be used here, so every ready endpoint is used.
    Ignored(HintsIgnored),
}

/// Why hints are present but not used (upstream's fallbacks to cluster-wide routing).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum HintsIgnored {
    /// This ready endpoint has no hint while others have: hints are all-or-nothing.
    EndpointWithoutHint(SocketAddr),
    /// This node has no `topology.kubernetes.io/zone` label (or no Node object).
    NodeWithoutZone,
    /// No ready endpoint is hinted for this node's zone.
    NoEndpointForZone(String),
    /// Only node hints exist, and none names this node.
    NoEndpointForNode,
}

impl Topology {
    /// True when hints narrow the set (some ready endpoints may be left out).
    pub fn narrows(&self) -> bool {
        matches!(self, Topology::SameNode | Topology::SameZone(_))
    }

    /// Whether a ready endpoint may be used under this decision.
    pub fn admits(&self, e: &EndpointView, node_name: &str) -> bool {
        match self {
            Topology::SameNode => e.node_hints.iter().any(|n| **n == *node_name),
            Topology::SameZone(zone) => e.zone_hints.iter().any(|z| **z == **zone),
            Topology::Unused | Topology::NoHints | Topology::Ignored(_) => true,
        }
    }
}

/// Decides how hints apply on node `node_name` in `zone` (its `topology.kubernetes.io/zone`
/// label), looking only at ready endpoints, as upstream does.
pub(super) fn decide(eps: &[EndpointView], node_name: &str, zone: Option<&str>) -> Topology {
    let ready: Vec<&EndpointView> = eps.iter().filter(|e| e.conditions.ready).collect();
    if ready.is_empty() {
        // The serving-and-terminating fallback never considers topology.
        return Topology::NoHints;
    }
    let all_have =
        |hints: fn(&EndpointView) -> &[Arc<str>]| ready.iter().all(|e| !hints(e).is_empty());
    if all_have(node_hints)
        && ready
            .iter()
            .any(|e| e.node_hints.iter().any(|n| **n == *node_name))
    {
        return Topology::SameNode;
    }
    if all_have(zone_hints) {
        // Upstream reads a missing label as the empty string and compares it like any other.
        let zone = zone.unwrap_or("");
        return if ready
            .iter()
            .any(|e| e.zone_hints.iter().any(|h| **h == *zone))
        {
            Topology::SameZone(zone.to_owned())
        } else if zone.is_empty() {
            Topology::Ignored(HintsIgnored::NodeWithoutZone)
        } else {
            Topology::Ignored(HintsIgnored::NoEndpointForZone(zone.to_owned()))
        };
    }
    // Zone hints are not usable: say why, preferring the zone-level reason (what upstream
    // logs last), then the node-level one.
    let missing = |hints: fn(&EndpointView) -> &[Arc<str>]| {
        let some_have = ready.iter().any(|e| !hints(e).is_empty());
        let first_without = ready.iter().find(|e| hints(e).is_empty());
        first_without.filter(|_| some_have).map(|e| e.addr)
    };
    if let Some(addr) = missing(zone_hints) {
        return Topology::Ignored(HintsIgnored::EndpointWithoutHint(addr));
    }
    if all_have(node_hints) {
        return Topology::Ignored(HintsIgnored::NoEndpointForNode);
    }
    match missing(node_hints) {
        Some(addr) => Topology::Ignored(HintsIgnored::EndpointWithoutHint(addr)),
        None => Topology::NoHints,
    }
}

fn node_hints(e: &EndpointView) -> &[Arc<str>] {
    &e.node_hints
}

fn zone_hints(e: &EndpointView) -> &[Arc<str>] {
    &e.zone_hints
}

#[cfg(test)]
mod tests;
