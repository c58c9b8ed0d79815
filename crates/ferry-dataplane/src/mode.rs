//! The mode table: every proxy mode's line, joining its pure renderer (ferry-compile) with its
//! kernel half (this crate). The binary asks this table for whatever depends on the mode and
//! never matches on the mode itself.
//!
//! Adding a mode: a renderer in ferry-compile, a module here with an [`Applier`] and a
//! [`ModeEntry`], and its line in [`MODES`].

use ferry_compile::mode::{ProxyMode, Renderer};
use ferry_compile::trace::Trace;
use ferry_compile::NodeCompiler;
use ferry_model::{ClusterState, IpFamily};

use crate::iptables::IptablesBackend;
use crate::live::LiveReport;
use crate::support::Unsupported;
use crate::{Applier, Error};

/// Every mode, in [`ProxyMode::ALL`]'s order.
pub const MODES: [ModeEntry; 2] = [crate::nft::MODE, crate::iptables::MODE];

/// The line of `mode`.
pub fn entry(mode: ProxyMode) -> &'static ModeEntry {
    MODES
        .iter()
        .find(|e| e.mode == mode)
        .expect("every ProxyMode has a line in MODES")
}

/// What a mode is made of.
pub struct ModeEntry {
    /// The mode.
    pub mode: ProxyMode,
    /// Its pure half: the text `ferry rules` prints, the objects `ferry explain` names. Using
    /// it never touches the kernel.
    pub renderer: &'static dyn Renderer,
    /// Prepares the mode on this node (e.g. finds the iptables backend to use): the kernel
    /// half, for `ferry run` and `ferry explain --live`.
    pub open: fn(&ModeOptions) -> Box<dyn NodeMode>,
    /// Removes everything the mode programs in this network namespace (both families);
    /// nothing there is not an error.
    pub cleanup: fn() -> Result<(), Error>,
    /// The counter of failed syncs (upstream's name for this mode).
    pub sync_failures: FailureCounter,
}

impl std::fmt::Debug for ModeEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModeEntry")
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

/// Run-time choices of the modes that have any.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ModeOptions {
    /// iptables mode: the backend to program, or `None` to use the one that already holds
    /// Kubernetes' rules (upstream's detection).
    pub iptables_backend: Option<IptablesBackend>,
}

/// The counter a mode's failed syncs go to, as upstream names them (`kubeproxy_` +).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FailureCounter {
    /// `sync_proxy_rules_nftables_sync_failures_total`.
    NftablesSync,
    /// `sync_proxy_rules_iptables_restore_failures_total`.
    IptablesRestore,
}

impl FailureCounter {
    /// Every counter, for registration.
    pub const ALL: [FailureCounter; 2] = [
        FailureCounter::NftablesSync,
        FailureCounter::IptablesRestore,
    ];

    /// The metric's name (without `kubeproxy_` and `_total`) and help.
    pub fn metric(self) -> (&'static str, &'static str) {
        match self {
            FailureCounter::NftablesSync => (
                "sync_proxy_rules_nftables_sync_failures",
                "Cumulative proxy nftables sync failures",
            ),
            FailureCounter::IptablesRestore => (
                "sync_proxy_rules_iptables_restore_failures",
                "Cumulative proxy iptables restore failures",
            ),
        }
    }
}

/// A mode prepared on this node: its appliers and its reading of the kernel.
pub trait NodeMode: Send + Sync {
    /// One line for the start-up log (`iptables mode, nft backend`).
    fn describe(&self) -> String;

    /// Whether this mode can program `family` here (kernel support and the mode's tool),
    /// upstream's `platformCheckSupported`.
    fn supports(&self, family: IpFamily) -> Result<(), Unsupported>;

    /// A fresh applier of `family`'s rules, in the current network namespace.
    fn applier(&self, family: IpFamily) -> Box<dyn Applier>;

    /// `ferry explain --live`: what the kernel holds for the traced destination (the trace
    /// comes from this mode's renderer, for the compiler's family), compared with what the
    /// state compiles to.
    fn live(
        &self,
        trace: &Trace,
        compiler: &NodeCompiler,
        state: &ClusterState,
    ) -> Result<LiveReport, Error>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mode_has_one_line() {
        for mode in ProxyMode::ALL {
            assert_eq!(entry(mode).mode, mode);
            assert_eq!(entry(mode).renderer.mode(), mode);
        }
        assert_eq!(MODES.len(), ProxyMode::ALL.len());
    }
}
