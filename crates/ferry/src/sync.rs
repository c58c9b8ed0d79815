//! One sync at a time: cluster state → node view → plan → ruleset → kernel.
//!
//! [`Syncer`] owns the cluster state (single owner, events applied in order), remembers which
//! services changed since the last successful sync, and decides between a full sync (start-up,
//! periodic resync, this node's Node changed, after a failure) and an incremental one that
//! recompiles and rewrites only the changed services.

use std::collections::BTreeSet;

use ferry_compile::nft::Ruleset;
use ferry_compile::{CompileConfig, NodeCompiler};
use ferry_dataplane::{ApplyError, NftCli, NftDataplane, NftRunner, SyncReport};
use ferry_model::{ClusterState, NodeContext, Object, ServiceName, Touched};
use ferry_source::SourceEvent;

/// The sync engine for one IP family.
pub struct Syncer<R: NftRunner = NftCli> {
    state: ClusterState,
    context: NodeContext,
    config: CompileConfig,
    dataplane: NftDataplane<R>,
    dirty: BTreeSet<ServiceName>,
    full_pending: bool,
}

impl<R: NftRunner> Syncer<R> {
    /// A syncer that has not synced yet.
    pub fn new(context: NodeContext, config: CompileConfig, dataplane: NftDataplane<R>) -> Self {
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

    /// The full ruleset for the current state (what `ferry rules` prints).
    pub fn desired(&self) -> Ruleset {
        self.compiler().full(&self.state)
    }

    /// Syncs the kernel. `full` forces a full sync (the periodic resync).
    pub fn sync(&mut self, full: bool) -> Result<SyncReport, ApplyError> {
        let compiler = self.compiler();
        let base_changed = match self.dataplane.installed() {
            Some(installed) => !installed.same_base(&compiler.base_ruleset()),
            None => true,
        };
        let report = if full || self.full_pending || base_changed {
            self.dataplane.apply_full(compiler.full(&self.state))?
        } else {
            let changes = self
                .dirty
                .iter()
                .map(|name| (name.clone(), compiler.service(&self.state, name)))
                .collect();
            self.dataplane.apply_changes(changes)?
        };
        self.dirty.clear();
        self.full_pending = false;
        Ok(report)
    }
}

#[cfg(test)]
mod tests;
