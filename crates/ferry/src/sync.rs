//! One sync at a time: cluster state → node view → plan → ruleset → kernel.
//!
//! [`Syncer`] owns the cluster state (single owner, events applied in order), remembers which
//! services changed since the last successful sync, and decides between a full sync (start-up,
//! periodic resync, this node's Node changed, after a failure) and an incremental one that
//! recompiles and rewrites only the changed services.
//!
//! It also keeps what operators watch: the pending Service and EndpointSlice changes (for
//! kube-proxy's `…_changes_pending` / `…_changes_total` metrics and the slices' trigger times),
//! and, after each successful sync, per-service health-check and no-local-endpoint figures
//! ([`status::ServiceStatus`]).

use std::collections::BTreeSet;

use ferry_compile::{CompileConfig, NodeCompiler};
use ferry_dataplane::{ApplyError, SyncReport};
use ferry_model::{ClusterState, NodeContext, Object, ObjectKey, ServiceName, Touched};
use ferry_source::SourceEvent;

pub mod conntrack;
mod dataplane;
pub mod status;

pub use dataplane::Dataplane;
use status::ServiceStatus;

/// Changes received since the last successful sync, as upstream's change trackers count them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PendingChanges {
    /// Services whose Service object changed.
    pub services: BTreeSet<ServiceName>,
    /// EndpointSlices (namespace, name) that changed.
    pub slices: BTreeSet<(String, String)>,
    /// `endpoints.kubernetes.io/last-change-trigger-time` of every changed slice that has one
    /// (RFC 3339): the start of the network programming latency.
    pub trigger_times: Vec<String>,
    /// Service changes seen since start (`…_service_changes_total`).
    pub services_total: u64,
    /// EndpointSlice changes seen since start (`…_endpoint_changes_total`).
    pub slices_total: u64,
}

impl PendingChanges {
    fn record(&mut self, key: &ObjectKey, touched: &Touched, trigger_time: Option<String>) {
        if touched.is_empty() {
            return;
        }
        match key {
            ObjectKey::Service(name) => {
                self.services.insert(name.clone());
                self.services_total += 1;
            }
            ObjectKey::EndpointSlice { namespace, name } => {
                self.slices.insert((namespace.clone(), name.clone()));
                self.slices_total += 1;
                self.trigger_times.extend(trigger_time);
            }
            // Pods never reach the syncer: the EndpointSlice controller stage consumes them.
            ObjectKey::Node(_) | ObjectKey::Pod { .. } => {}
        }
    }

    fn clear(&mut self) {
        self.services.clear();
        self.slices.clear();
        self.trigger_times.clear();
    }
}

/// The sync engine for one IP family, over one dataplane (nftables or iptables).
pub struct Syncer<D: Dataplane = Box<dyn Dataplane>> {
    state: ClusterState,
    context: NodeContext,
    config: CompileConfig,
    dataplane: D,
    dirty: BTreeSet<ServiceName>,
    full_pending: bool,
    changes: PendingChanges,
    status: ServiceStatus,
    stale_flows: conntrack::StaleFlows,
}

impl<D: Dataplane> Syncer<D> {
    /// A syncer that has not synced yet.
    pub fn new(context: NodeContext, config: CompileConfig, dataplane: D) -> Self {
        Self {
            state: ClusterState::new(),
            context,
            config,
            dataplane,
            dirty: BTreeSet::new(),
            full_pending: true,
            changes: PendingChanges::default(),
            status: ServiceStatus::default(),
            stale_flows: conntrack::StaleFlows::default(),
        }
    }

    /// Applies one source event to the cluster state. Returns true when something changed that
    /// needs a sync.
    pub fn handle(&mut self, event: SourceEvent) -> bool {
        let touched = match event {
            SourceEvent::Apply(obj) => self.apply(obj),
            SourceEvent::Delete(key) => self.delete(&key),
            SourceEvent::Resync(objects) => self.resync(objects),
        };
        self.note(touched)
    }

    fn apply(&mut self, obj: Object) -> Touched {
        let key = obj.key();
        let trigger_time = match &obj {
            Object::EndpointSlice(slice) => slice.trigger_time.clone(),
            _ => None,
        };
        let touched = self.state.apply(obj);
        self.changes.record(&key, &touched, trigger_time);
        touched
    }

    fn delete(&mut self, key: &ObjectKey) -> Touched {
        let touched = self.state.delete(key);
        self.changes.record(key, &touched, None);
        touched
    }

    fn resync(&mut self, objects: Vec<Object>) -> Touched {
        let keep: BTreeSet<_> = objects.iter().map(Object::key).collect();
        let mut touched = Touched::default();
        for key in self.state.keys() {
            if !keep.contains(&key) {
                touched.merge(self.delete(&key));
            }
        }
        for obj in objects {
            touched.merge(self.apply(obj));
        }
        touched
    }

    fn note(&mut self, touched: Touched) -> bool {
        if touched.nodes.contains(&self.context.node_name) {
            // Node IPs, pod CIDRs and labels feed every service: recompile everything.
            self.full_pending = true;
        }
        let changed = !touched.services.is_empty() || self.full_pending;
        self.dirty.extend(touched.services);
        changed
    }

    /// Services changed since the last successful sync.
    pub fn pending_services(&self) -> usize {
        self.dirty.len()
    }

    /// Changes received since the last successful sync.
    pub fn pending_changes(&self) -> &PendingChanges {
        &self.changes
    }

    /// Health-check and no-local-endpoint figures as of the last successful sync.
    pub fn status(&self) -> &ServiceStatus {
        &self.status
    }

    /// The UDP conntrack flows the last successful syncs made stale, as filters for
    /// [`conntrack::clean`] (taken: each is returned once).
    pub fn take_stale_flows(&mut self) -> Vec<ferry_compile::conntrack::StaleFlowFilter> {
        self.stale_flows.take()
    }

    /// The last conntrack cleanup failed: the next sync checks every UDP frontend.
    pub fn conntrack_failed(&mut self) {
        self.stale_flows.failed();
    }

    /// The IP family this syncer programs.
    pub fn family(&self) -> ferry_model::IpFamily {
        self.context.family
    }

    /// True when this family has a service port to program on this node.
    pub fn has_services(&self) -> bool {
        !self.compiler().plan(&self.state).services.is_empty()
    }

    /// This node's Node object, when the sources delivered one.
    pub fn this_node(&self) -> Option<&ferry_model::Node> {
        self.state.node(&self.context.node_name)
    }

    fn compiler(&self) -> NodeCompiler {
        NodeCompiler::new(&self.state, &self.context, &self.config)
    }

    /// The full rules for the current state, as the dataplane's input (what `ferry rules`
    /// prints).
    pub fn desired(&self) -> String {
        self.dataplane.render(&self.compiler(), &self.state)
    }

    /// Syncs the kernel. `full` forces a full sync (the periodic resync).
    pub fn sync(&mut self, full: bool) -> Result<SyncReport, ApplyError> {
        let compiler = self.compiler();
        let full = full || self.full_pending || self.dataplane.needs_full(&compiler)?;
        let report = if full {
            self.dataplane.sync_full(&compiler, &self.state)?
        } else {
            self.dataplane
                .sync_partial(&compiler, &self.state, &self.dirty)?
        };
        if full {
            self.status.rebuild(&self.state, &self.context);
        } else {
            self.status.update(&self.state, &self.context, &self.dirty);
        }
        self.stale_flows
            .synced(&self.state, &self.context, full, &self.dirty);
        self.changes.clear();
        self.dirty.clear();
        self.full_pending = false;
        Ok(report)
    }
}

#[cfg(test)]
mod tests;
