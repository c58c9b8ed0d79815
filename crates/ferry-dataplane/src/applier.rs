//! [`Applier`]: the kernel half of a proxy mode, for one IP family.

use std::collections::BTreeSet;

use ferry_compile::NodeCompiler;
use ferry_model::{ClusterState, ServiceName};

use crate::{Error, SyncReport};

/// Keeps one family's rules of one mode in the kernel equal to what the compiler's plan asks
/// for. Each sync is one atomic change: on failure the kernel keeps its last good rules, the
/// error is returned, and the next sync is full.
pub trait Applier: Send {
    /// True when only a full sync can be made: nothing installed by this process yet (or it
    /// was forgotten after a failure or a failed [`intact`](Applier::intact) check), or the
    /// node-level rules changed. Decided from memory: the kernel is not asked.
    fn needs_full(&mut self, compiler: &NodeCompiler) -> Result<bool, Error>;

    /// Asks the kernel, cheaply, whether what this applier installed is still there: upstream
    /// kube-proxy's canary check, made once per sync period rather than on every sync. False
    /// when someone removed or flushed the mode's objects (`nft flush ruleset`, the table
    /// deleted, `iptables -t nat -F`, a firewall reload); what was installed is then forgotten,
    /// so the next sync is full. True when nothing is installed yet (the next sync is full
    /// anyway).
    fn intact(&mut self) -> Result<bool, Error>;

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

    fn intact(&mut self) -> Result<bool, Error> {
        (**self).intact()
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
