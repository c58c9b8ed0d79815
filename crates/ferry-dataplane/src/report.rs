//! What one applied sync did, in any mode: for the log line, the metrics and the benchmark.

use std::time::Duration;

/// Full or incremental.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncKind {
    /// Everything rewritten.
    Full,
    /// Only changed services.
    Partial,
}

/// What one applied sync did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncReport {
    /// Full or partial.
    pub kind: SyncKind,
    /// Chains whose rules were written.
    pub chains_written: usize,
    /// Set and map elements added or deleted.
    pub elements_changed: usize,
    /// Bytes of script handed to a tool (`nft -f`, `iptables-restore`; 0 when everything went
    /// over netlink).
    pub script_bytes: usize,
    /// True when the change went over Ferry's netlink socket instead of a tool.
    pub netlink: bool,
    /// Time spent in the kernel transaction (including the tools), without compiling.
    pub apply_time: Duration,
    /// iptables mode: the rules of each table Ferry owns after the sync, and those it wrote
    /// (upstream's `sync_proxy_rules_iptables_total` / `_last`); empty in the other modes.
    pub table_rules: Vec<TableRules>,
}

/// One iptables table's rules after a sync.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableRules {
    /// `filter` or `nat`.
    pub table: &'static str,
    /// Rules Ferry owns in it.
    pub total: usize,
    /// Rules the sync wrote.
    pub written: usize,
}

impl SyncReport {
    /// A sync that had nothing to change.
    pub fn nothing(kind: SyncKind) -> Self {
        Self {
            kind,
            chains_written: 0,
            elements_changed: 0,
            script_bytes: 0,
            netlink: false,
            apply_time: Duration::ZERO,
            table_rules: Vec::new(),
        }
    }
}
