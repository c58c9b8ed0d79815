//! A full sync in several nat transactions, for iptables-nft.
//!
//! `iptables-nft-restore --noflush` (1.8.9) spends time quadratic in the number of chains one
//! transaction (`*nat` … `COMMIT`) declares: at 2 000 services × 10 endpoints (22 000 chains)
//! one transaction took 58 s against 2.8 s for a plain restore of the same text, and at
//! 10 000 × 10 it did not finish in 30 minutes. The same chains split into transactions of a
//! few hundred chains each, in one run of the tool, load in about the time of a plain restore.
//!
//! Within a transaction, chains are declared in descending name order (their rules follow
//! in the order of their services). iptables-nft keeps its
//! cache of a table's chains in a list sorted by name and inserts each chain by walking that
//! list from its smallest name, so chains created in ascending (or hash, that is random)
//! order cost a walk over all chains each, and so does every later reading of the table
//! (the kernel lists chains in creation order): a resync of 10 000 × 10 over existing chains
//! took 107 s with hash-ordered transactions and 30 s with descending ones, the time of a
//! plain restore.
//!
//! The order keeps every transaction valid on its own: the fixed nat chains (the targets of
//! per-service rules) first, then the per-service chains, each service's chains in one
//! transaction (they jump to each other), then the top-level chains that jump to them, and
//! last the deletion of chains no longer wanted. On a node that already holds rules, each
//! service's chains change atomically, as in a partial sync; the whole is no longer one
//! transaction, and a failure half-way is followed by a full sync, as any failure is.
//! iptables-legacy gains nothing from this (each transaction rewrites its whole table), so
//! its full sync stays one transaction.

use super::{top_level, FullSync, Rules, Section};
use crate::iptables::model::{Ruleset, ServiceRules, Table};
use crate::iptables::names::{CANARY, KUBE_NODEPORTS, KUBE_SERVICES};

/// `section` with its chains in descending name order (see the module documentation).
pub(super) fn descending(mut section: Section<'_>) -> Section<'_> {
    section.descending = true;
    section
}

/// A full sync (see [`Restore::full_with`]) whose per-service nat chains are spread over
/// transactions of about `per_section` chains each (whole services).
pub(super) fn full_in_sections<'a>(
    desired: &'a Ruleset,
    o: &FullSync<'a>,
    per_section: usize,
) -> Vec<Section<'a>> {
    let mut sections = Vec::new();
    let mut filter = Section::new(Table::Filter);
    top_level(&mut filter, desired);
    filter.declared.push(CANARY);
    filter.insert_jumps(o.jumps);
    sections.push(filter);

    let mut nat = Section::new(Table::Nat);
    for c in &desired.nat {
        nat.own(c);
    }
    for (name, service) in &desired.services {
        let written = service
            .chains
            .iter()
            .filter(|c| !o.unchanged.is_some_and(|u| u.contains(&c.name)))
            .count();
        if nat.chains.len() + written > per_section && !nat.chains.is_empty() {
            sections.push(descending(std::mem::replace(
                &mut nat,
                Section::new(Table::Nat),
            )));
        }
        nat.service(name, service, o.unchanged);
    }
    sections.push(descending(nat));

    let mut last = Section::new(Table::Nat);
    let assembled = |pick: fn(&ServiceRules) -> &Vec<String>, tail| Rules::Assembled {
        ruleset: desired,
        head: &[],
        pick,
        tail,
    };
    last.chain(
        KUBE_SERVICES,
        assembled(|r| &r.nat_services, &desired.nodeport_jumps),
    );
    last.chain(KUBE_NODEPORTS, assembled(|r| &r.nat_nodeports, &[]));
    last.declared.push(CANARY);
    last.insert_jumps(o.jumps);
    last.deleted.extend(o.stale.iter().map(String::as_str));
    sections.push(last);

    let mut mangle = Section::new(Table::Mangle);
    mangle.declared.push(CANARY);
    sections.push(mangle);
    sections
}
