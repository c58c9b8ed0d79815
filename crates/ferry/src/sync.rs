//! One sync at a time: cluster state → node view → plan → ruleset → kernel.
//!
//! [`Syncer`] owns the cluster state (single owner, events applied in order), remembers which
//! services changed since the last successful sync, and decides between a full sync (start-up,
//! periodic resync, this node's Node changed, after a failure) and an incremental one that
//! recompiles and rewrites only the changed services.

use std::collections::BTreeSet;

use ferry_compile::{CompileConfig, NodeCompiler};
use ferry_dataplane::{ApplyError, SyncReport};
use ferry_model::{ClusterState, NodeContext, Object, ServiceName, Touched};
use ferry_source::SourceEvent;

mod dataplane;

pub use dataplane::Dataplane;

/// The sync engine for one IP family, over one dataplane (nftables or iptables).
pub struct Syncer<D: Dataplane = Box<dyn Dataplane>> {
    state: ClusterState,
    context: NodeContext,
    config: CompileConfig,
    dataplane: D,
    dirty: BTreeSet<ServiceName>,
    full_pending: bool,
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
        }
    }

    /// Applies one source event to the cluster state. Returns true when something changed that
    /// needs a sync.
    pub fn handle(&mut self, event: SourceEvent) -> bool {
        let touched = match event {
            SourceEvent::Apply(obj) => self.state.apply(obj),
            SourceEvent::Delete(key) => self.state.delete(&key),
            SourceEvent::Resync(objects) => self.resync(objects),
        };
        self.note(touched)
    }

    fn resync(&mut self, objects: Vec<Object>) -> Touched {
        let keep: BTreeSet<_> = objects.iter().map(Object::key).collect();
        let mut touched = Touched::default();
        for key in self.state.keys() {
            if !keep.contains(&key) {
                touched.merge(self.state.delete(&key));
            }
        }
        for obj in objects {
            touched.merge(self.state.apply(obj));
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
        let report = if full || self.full_pending || self.dataplane.needs_full(&compiler)? {
            self.dataplane.sync_full(&compiler, &self.state)?
        } else {
            self.dataplane
                .sync_partial(&compiler, &self.state, &self.dirty)?
        };
        self.dirty.clear();
        self.full_pending = false;
        Ok(report)
    }
}

#[cfg(test)]
mod tests;
