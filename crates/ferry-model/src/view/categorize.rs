//! Upstream `CategorizeEndpoints`: which endpoints form the cluster-wide and the node-local set.

use super::topology::{decide, Topology};
use super::{EndpointView, Exclusion, ServicePortView};
use crate::EndpointConditions;

pub(super) fn serving_terminating(c: &EndpointConditions) -> bool {
    c.serving && c.terminating
}

/// Sorts every endpoint into the sets the service's policies use, and says how topology shaped
/// the cluster-wide set.
///
/// - Cluster-wide set: ready endpoints, narrowed by topology hints when they apply on this
///   node (`node_name`, `zone`); with no ready endpoint anywhere, every serving-and-terminating
///   one instead (topology is not considered for that fallback).
/// - Node-local set: this node's ready endpoints; with none, this node's serving-and-terminating
///   ones. Topology never applies to it: Local already is as close as it gets.
pub(super) fn categorize(
    view: &ServicePortView,
    mut eps: Vec<EndpointView>,
    node_name: &str,
    zone: Option<&str>,
) -> (Topology, Vec<EndpointView>) {
    let mut topology = Topology::Unused;
    if view.uses_cluster_endpoints() {
        topology = decide(&eps, node_name, zone);
        let any_ready = eps.iter().any(|e| e.conditions.ready);
        for e in &mut eps {
            e.cluster = match membership(&e.conditions, any_ready) {
                Ok(()) if e.conditions.ready && !topology.admits(e, node_name) => {
                    Err(Exclusion::Topology)
                }
                other => other,
            };
        }
    }
    if view.uses_local_endpoints() {
        let any_local_ready = eps.iter().any(|e| e.is_local && e.conditions.ready);
        for e in &mut eps {
            e.local = if e.is_local {
                membership(&e.conditions, any_local_ready)
            } else {
                Err(Exclusion::OtherNode)
            };
        }
    }
    (topology, eps)
}

/// Ready endpoints are used; serving-and-terminating ones only when no ready one exists.
fn membership(c: &EndpointConditions, any_ready: bool) -> Result<(), Exclusion> {
    if c.ready {
        Ok(())
    } else if serving_terminating(c) {
        if any_ready {
            Err(Exclusion::Terminating)
        } else {
            Ok(())
        }
    } else {
        Err(Exclusion::NotReady)
    }
}
