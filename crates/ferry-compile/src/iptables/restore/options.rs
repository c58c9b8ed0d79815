//! A full sync's options: what it writes besides the desired chains ([`FullSync`]), and how it
//! is cut into transactions ([`Transactions`], the backend's trade-off).

use std::collections::BTreeSet;

use crate::iptables::model::JumpRule;

/// What a full sync writes besides the desired chains.
#[derive(Debug, Clone, Copy, Default)]
pub struct FullSync<'a> {
    /// Per-service nat chains the kernel holds that are no longer wanted: deleted.
    pub stale: &'a [String],
    /// Jumps from the built-in chains that are missing: inserted in the same transaction as
    /// their targets, so that no separate `iptables -I` has to read the table again.
    pub jumps: &'a [JumpRule],
    /// How the restore is cut into transactions (the backend's trade-off).
    pub transactions: Transactions,
    /// Per-service nat chains the kernel already holds with exactly the desired rules (read
    /// back and compared in canonical form at a process's first sync): neither declared nor
    /// written, so a restart over unchanged rules does not rewrite 110 000 chains.
    pub unchanged: Option<&'a BTreeSet<String>>,
}

/// How a full sync is cut into transactions. A transaction is atomic: a process killed during
/// the restore leaves the kernel with each transaction's old or new chains, never a mix.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Transactions {
    /// One transaction per table, chains in the compiler's order (iptables-legacy: each
    /// transaction rewrites its whole table, so one is cheapest).
    #[default]
    PerTable,
    /// iptables-nft, whose `--noflush` restore is quadratic in the chains of one transaction
    /// declared in hash order (see `sections`): up to `whole_up_to` nat chains, one
    /// transaction per table with the nat chains declared in descending name order (the whole
    /// ruleset changes at once); above it, transactions of about `per_section` nat chains
    /// (whole services: each Service changes at once, not the whole ruleset).
    Nft {
        /// The most nat chains still written as one transaction.
        whole_up_to: usize,
        /// Nat chains per transaction above `whole_up_to`.
        per_section: usize,
    },
}
