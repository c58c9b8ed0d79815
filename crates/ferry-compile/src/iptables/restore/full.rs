//! A full sync's restore: what it writes besides the desired chains ([`FullSync`]), and how
//! it is cut into transactions ([`Transactions`], the backend's trade-off).

use std::collections::BTreeSet;

use super::{sections, top_level, Section};
use crate::iptables::model::{JumpRule, Ruleset, Table};
use crate::iptables::names::CANARY;

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

/// A full sync's sections: filter, nat (every chain, canary, `stale` deleted), mangle.
pub(super) fn full_sections<'a>(desired: &'a Ruleset, o: &FullSync<'a>) -> [Section<'a>; 3] {
    let mut filter = Section::new(Table::Filter);
    top_level(&mut filter, desired);
    filter.declared.push(CANARY);
    filter.insert_jumps(o.jumps);
    let mut nat = Section::new(Table::Nat);
    top_level(&mut nat, desired);
    for (name, rules) in &desired.services {
        nat.service(name, rules, o.unchanged);
    }
    nat.declared.push(CANARY);
    nat.insert_jumps(o.jumps);
    nat.deleted.extend(o.stale.iter().map(String::as_str));
    let mut mangle = Section::new(Table::Mangle);
    mangle.declared.push(CANARY);
    [filter, nat, mangle]
}

/// A full sync's transactions, cut as `o.transactions` says.
pub(super) fn full_transactions<'a>(desired: &'a Ruleset, o: &FullSync<'a>) -> Vec<Section<'a>> {
    match o.transactions {
        Transactions::PerTable => full_sections(desired, o).into(),
        Transactions::Nft { whole_up_to, .. } if desired.nat_chain_count() <= whole_up_to => {
            let [filter, nat, mangle] = full_sections(desired, o);
            vec![filter, sections::descending(nat), mangle]
        }
        Transactions::Nft { per_section, .. } => {
            sections::full_in_sections(desired, o, per_section)
        }
    }
}
