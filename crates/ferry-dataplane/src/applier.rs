//! [`Applier`]: the kernel half of a proxy mode, for one IP family.

use std::collections::BTreeSet;

use ferry_compile::NodeCompiler;
use ferry_model::{ClusterState, ServiceName};

use crate::{Error, SyncReport};

/// Keeps one family's rules of one mode in the kernel equal to what the compiler's plan asks
/// for. Each sync is one atomic change: on failure the kernel keeps its last good rules, the
/// error is returned, and the next sync is full.
pub trait Applier: Send {
    /// True when only a full sync can be made: nothing installed by this process yet, the
    /// node-level rules changed, or someone removed the mode's objects (a canary is gone).
    fn needs_full(&mut self, compiler: &NodeCompiler) -> Result<bool, Error>;

    /// Rewrites everything from the state.
    fn sync_full(
        &mut self,
        compiler: &NodeCompiler,
        state: &ClusterState,
    ) -> Result<SyncReport, Error>;

    /// Rewrites the rules of the `dirty` services only (deleted ones included).
    fn sync_partial(
        &mut self,
        compiler: &NodeCompiler,
        state: &ClusterState,
        dirty: &BTreeSet<ServiceName>,
    ) -> Result<SyncReport, Error>;
}

impl<A: Applier + ?Sized> Applier for Box<A> {
    fn needs_full(&mut self, compiler: &NodeCompiler) -> Result<bool, Error> {
        (**self).needs_full(compiler)
    }

    fn sync_full(
        &mut self,
        compiler: &NodeCompiler,
        state: &ClusterState,
    ) -> Result<SyncReport, Error> {
        (**self).sync_full(compiler, state)
    }

    fn sync_partial(
        &mut self,
        compiler: &NodeCompiler,
        state: &ClusterState,
        dirty: &BTreeSet<ServiceName>,
    ) -> Result<SyncReport, Error> {
        (**self).sync_partial(compiler, state, dirty)
    }
}
