//! A full sync's restore: its sections, and their transactions as [`Transactions`] says.

use super::options::{FullSync, Transactions};
use super::{sections, top_level, Section};
use crate::iptables::model::{Ruleset, Table};
use crate::iptables::names::CANARY;

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
