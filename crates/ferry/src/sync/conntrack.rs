//! UDP conntrack cleanup after a sync: which flows are stale ([`StaleFlows`], from the UDP
//! service ports before and after each successful sync); the sync round deletes them.
//!
//! The cleanup runs only after the rules are in the kernel, like upstream's: a flow deleted
//! earlier would be re-created by its next packet through the old rules. A failure is logged
//! and counted, never fatal; the next sync then checks every UDP frontend.

use std::collections::BTreeSet;

use ferry_compile::conntrack::{stale_flows, udp_service_ports, StaleFlowFilter, UdpServicePorts};
use ferry_model::{ClusterState, NodeContext, NodeView, Protocol, ServiceName};

/// The UDP service ports as of the last successful sync, and the filters of flows still to
/// delete.
#[derive(Debug, Default)]
pub struct StaleFlows {
    ports: UdpServicePorts,
    pending: Vec<StaleFlowFilter>,
    reconcile: bool,
}

impl StaleFlows {
    /// Records a successful sync: a full one (every service) or one of the `dirty` services.
    /// A full sync, and the first sync after a failed cleanup, checks every UDP frontend.
    pub fn synced(
        &mut self,
        state: &ClusterState,
        context: &NodeContext,
        full: bool,
        dirty: &BTreeSet<ServiceName>,
    ) {
        let mut ports = if full {
            UdpServicePorts::new()
        } else {
            let mut kept = self.ports.clone();
            kept.retain(|name, _| !dirty.contains(&name.service));
            kept
        };
        let services: Vec<&ServiceName> = if full {
            state
                .services()
                .filter(|s| s.ports.iter().any(|p| p.protocol == Protocol::Udp))
                .map(|s| &s.name)
                .collect()
        } else {
            dirty.iter().collect()
        };
        for name in services {
            let views = NodeView::build_service_ports(state, context, name);
            ports.extend(udp_service_ports(&views));
        }
        let reconcile = full || std::mem::take(&mut self.reconcile);
        self.pending
            .extend(stale_flows(&self.ports, &ports, reconcile));
        self.pending.sort();
        self.pending.dedup();
        self.ports = ports;
    }

    /// The filters of the flows to delete now.
    pub fn take(&mut self) -> Vec<StaleFlowFilter> {
        std::mem::take(&mut self.pending)
    }

    /// The last cleanup failed: check every frontend at the next sync.
    pub fn failed(&mut self) {
        self.reconcile = true;
    }
}

#[cfg(test)]
mod tests;
