//! What `ferry explain` says about topology: which hints chose the cluster-wide set, or why
//! they were ignored (the decision is made once, in `ferry_model::Topology`).

use ferry_model::{EndpointView, HintsIgnored, ServicePortView, Topology};

/// How the DNAT step names the cluster-wide set.
pub(super) fn cluster_label(sview: Option<&ServicePortView>) -> String {
    match sview.map(|v| &v.topology) {
        Some(Topology::SameZone(zone)) => format!("a ready endpoint hinted for zone {zone}"),
        Some(Topology::SameNode) => "a ready endpoint hinted for this node".to_owned(),
        _ => "any ready endpoint in the cluster".to_owned(),
    }
}

/// The topology clause of the DNAT step's reason, when there is something to say (also
/// `ferry status`'s topology line).
pub fn note(sview: Option<&ServicePortView>) -> Option<String> {
    let sview = sview?;
    let hinted = |f: fn(&EndpointView) -> bool| {
        let ready = sview.endpoints.iter().filter(|e| e.conditions.ready);
        (ready.clone().filter(|e| f(e)).count(), ready.count())
    };
    match &sview.topology {
        Topology::Unused => None,
        Topology::NoHints => sview.traffic_distribution.map(|td| {
            format!(
                "trafficDistribution {} is set but no ready endpoint carries hints (the \
                 EndpointSlice controller writes them; the proxy follows hints only), so every \
                 ready endpoint is used",
                td.as_str()
            )
        }),
        Topology::SameZone(zone) => {
            let (n, of) = hinted(|e| !e.zone_hints.is_empty() && e.cluster.is_ok());
            Some(format!(
                "topology: zone {zone} hints used (every ready endpoint has a zone hint; {n} of \
                 {of} are for this node's zone)"
            ))
        }
        Topology::SameNode => {
            let (n, of) = hinted(|e| e.cluster.is_ok());
            Some(format!(
                "topology: node hints used (every ready endpoint has a node hint; {n} of {of} \
                 are for this node)"
            ))
        }
        Topology::Ignored(why) => Some(format!(
            "topology hints ignored: {}, so every ready endpoint is used",
            match why {
                HintsIgnored::EndpointWithoutHint(addr) => format!(
                    "endpoint {addr} has none (hints count only when every ready endpoint has one)"
                ),
                HintsIgnored::NodeWithoutZone => {
                    "this node has no topology.kubernetes.io/zone label".to_owned()
                }
                HintsIgnored::NoEndpointForZone(zone) => {
                    format!("no ready endpoint is hinted for this node's zone {zone}")
                }
                HintsIgnored::NoEndpointForNode => {
                    "no ready endpoint is hinted for this node".to_owned()
                }
            }
        )),
    }
}

/// Why a ready endpoint is left out of the cluster-wide set by topology.
pub(super) fn excluded(sview: &ServicePortView, e: &EndpointView) -> String {
    match &sview.topology {
        Topology::SameZone(zone) => format!(
            "hinted for zone {}, not this node's zone {zone}",
            e.zone_hints.join(", ")
        ),
        Topology::SameNode => format!("hinted for node {}, not this node", e.node_hints.join(", ")),
        _ => "left out by topology hints".to_owned(),
    }
}

#[cfg(test)]
mod tests;
