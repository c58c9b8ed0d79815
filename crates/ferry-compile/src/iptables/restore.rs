//! `iptables-restore --noflush` input: a full sync, or a partial one that rewrites only the
//! chains of changed services (upstream's `MinimizeIPTablesRestore`).
//!
//! With `--noflush`, a `:CHAIN - [0:0]` line creates the chain or empties it, and nothing that
//! is not named is touched; each table between `*table` and `COMMIT` is applied atomically.
//!
//! The text is written straight from the [`Ruleset`] into one buffer of exactly the right size,
//! into the formatter (`Display`), or for a full sync into the tool's input as it is produced
//! ([`Restore::write_full_with`]): at 10 000 services × 10 endpoints it is 32 MB, and building
//! it through intermediate buffers used to cost three times that.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use ferry_model::ServiceName;

use super::model::{Chain, Ruleset, ServiceRules, Table};
use super::names::{
    KUBE_EXTERNAL_SERVICES, KUBE_FORWARD, KUBE_MARK_MASQ, KUBE_NODEPORTS, KUBE_POSTROUTING,
    KUBE_PROXY_FIREWALL, KUBE_SERVICES, NON_POD_MASQ,
};

mod full;
mod options;
mod section;
mod sections;

use full::{full_sections, full_transactions};
pub use options::{FullSync, Transactions};
pub use section::Rerender;
use section::{Rules, Section};

/// Ferry's fixed filter chains (besides the canary).
pub const BASE_CHAINS_FILTER: [&str; 5] = [
    KUBE_SERVICES,
    KUBE_EXTERNAL_SERVICES,
    KUBE_FORWARD,
    KUBE_NODEPORTS,
    KUBE_PROXY_FIREWALL,
];
/// Ferry's fixed nat chains (besides the canary and the per-service chains).
pub const BASE_CHAINS_NAT: [&str; 5] = [
    KUBE_SERVICES,
    KUBE_NODEPORTS,
    KUBE_POSTROUTING,
    KUBE_MARK_MASQ,
    NON_POD_MASQ,
];

/// One `iptables-restore --noflush` input.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Restore {
    /// The input text.
    pub text: String,
    /// Chains rewritten (declared and filled).
    pub chains_written: usize,
    /// Rules written.
    pub rules_written: usize,
    /// Rules written, by table.
    pub rules_written_by_table: BTreeMap<Table, usize>,
    /// Chains deleted.
    pub chains_deleted: usize,
}

/// The shared chains of `table` (assembled from every service), then the fixed ones.
fn top_level<'a>(s: &mut Section<'a>, rs: &'a Ruleset) {
    let all = |head: &'a [String], pick: fn(&ServiceRules) -> &Vec<String>, tail: &'a [String]| {
        Rules::Assembled {
            ruleset: rs,
            head,
            pick,
            tail,
        }
    };
    match s.table {
        Table::Filter => {
            s.chain(KUBE_SERVICES, all(&[], |r| &r.filter_services, &[]));
            s.chain(
                KUBE_EXTERNAL_SERVICES,
                all(&rs.external_first, |r| &r.filter_external, &[]),
            );
            for c in &rs.filter {
                s.own(c);
            }
            s.chain(KUBE_PROXY_FIREWALL, all(&[], |r| &r.filter_firewall, &[]));
        }
        Table::Nat => {
            s.chain(
                KUBE_SERVICES,
                all(&[], |r| &r.nat_services, &rs.nodeport_jumps),
            );
            s.chain(KUBE_NODEPORTS, all(&[], |r| &r.nat_nodeports, &[]));
            for c in &rs.nat {
                s.own(c);
            }
        }
        Table::Mangle => {}
    }
}

/// Writes `sections` into one buffer of exactly the right size, and counts what they do.
fn assemble(sections: &[Section<'_>]) -> Restore {
    let mut text = String::with_capacity(sections.iter().map(Section::len).sum());
    for s in sections {
        // Writing into a String cannot fail.
        let _ = s.write(&mut text);
    }
    Restore {
        text,
        ..count(sections)
    }
}

/// What `sections` do (chains written and deleted, rules written), without their text.
fn count(sections: &[Section<'_>]) -> Restore {
    let mut out = Restore::default();
    for s in sections {
        out.chains_written += s.chains.len();
        let rules = s.chains.iter().map(|(_, r)| r.count()).sum::<usize>();
        out.rules_written += rules;
        *out.rules_written_by_table.entry(s.table).or_default() += rules;
        out.chains_deleted += s.deleted.len();
    }
    out
}

impl Restore {
    /// Declares (so empties) and fills the given chains of each table, and nothing else:
    /// what a mode with a fixed set of chains (IPVS mode) writes at every sync.
    pub fn tables(tables: &[(Table, &[Chain])]) -> Restore {
        let sections: Vec<Section<'_>> = tables
            .iter()
            .map(|(table, chains)| {
                let mut section = Section::new(*table);
                for c in chains.iter() {
                    section.own(c);
                }
                section
            })
            .collect();
        assemble(&sections)
    }

    /// A full sync: every chain Ferry owns declared (so emptied) and refilled, the canaries
    /// (re)created, and `stale` nat chains (per-service chains no longer wanted) deleted.
    pub fn full(desired: &Ruleset, stale: &[String]) -> Restore {
        Self::full_with(
            desired,
            &FullSync {
                stale,
                ..FullSync::default()
            },
        )
    }

    /// A full sync with missing jumps inserted and, for iptables-nft, the nat chains spread
    /// over several transactions. `desired` holds its rules (not slim: a slim ruleset is
    /// written with [`write_full_with`](Restore::write_full_with)).
    pub fn full_with(desired: &Ruleset, o: &FullSync<'_>) -> Restore {
        debug_assert!(
            desired.services.values().all(|s| !s.is_slim()),
            "a slim ruleset has no rules to hold"
        );
        assemble(&full_transactions(desired, o))
    }

    /// [`full_with`](Restore::full_with), written to `out` as it is produced rather than
    /// held (about 30 MiB of text at 10 000 Services × 10 endpoints, besides the ruleset it
    /// is written from). The returned restore counts what was written; its `text` is empty.
    ///
    /// `desired` may be slim ([`NodeRules::full_slim`](super::NodeRules::full_slim)): the
    /// chains of its slim services are rendered again by `again` as they are written, one
    /// service at a time, so that the whole text is never held, nor every chain's rules.
    pub fn write_full_with(
        desired: &Ruleset,
        o: &FullSync<'_>,
        out: &mut impl fmt::Write,
        again: &mut Rerender<'_>,
    ) -> Result<Restore, fmt::Error> {
        let sections = full_transactions(desired, o);
        for s in &sections {
            s.write_rendering(out, Some(again))?;
        }
        Ok(count(&sections))
    }

    /// A partial sync: `desired` is the new state, `previous` holds the changed services'
    /// rules before the change (`None`: the service was absent). Of the per-service chains
    /// only those of changed services whose rules differ are rewritten, and those that
    /// disappeared are deleted. A shared top-level chain (assembled from every service, like
    /// upstream) is rewritten only when a changed service's rules in it changed: an endpoint
    /// change touches none of them, and rewriting nat `KUBE-SERVICES` (a rule per service
    /// port) is most of the cost of a small restore.
    pub fn partial(
        desired: &Ruleset,
        previous: &BTreeMap<ServiceName, Option<ServiceRules>>,
    ) -> Restore {
        let changed = |pick: fn(&ServiceRules) -> &Vec<String>| {
            previous.iter().any(|(name, old)| {
                let new = desired.services.get(name).map_or(&[][..], |s| &pick(s)[..]);
                old.as_ref().map_or(&[][..], |s| &pick(s)[..]) != new
            })
        };
        let mut sections = Vec::new();
        let filter_changed = changed(|r| &r.filter_services)
            || changed(|r| &r.filter_external)
            || changed(|r| &r.filter_firewall);
        if filter_changed {
            let mut filter = Section::new(Table::Filter);
            top_level(&mut filter, desired);
            sections.push(filter);
        }
        let mut nat = Section::new(Table::Nat);
        if changed(|r| &r.nat_services) || changed(|r| &r.nat_nodeports) {
            top_level(&mut nat, desired);
        }
        let mut stale = BTreeSet::new();
        for (name, old) in previous {
            let new: &[Chain] = desired
                .services
                .get(name)
                .map_or(&[], |s| s.chains.as_slice());
            // The old rules may be slim: chains are compared by name and digest.
            for c in new {
                let same = old
                    .as_ref()
                    .and_then(|o| o.digest_of(&c.name))
                    .is_some_and(|d| d == c.digest());
                if !same {
                    nat.own(c);
                }
            }
            let old: &[Chain] = old.as_ref().map_or(&[], |s| s.chains.as_slice());
            for c in old {
                if !new.iter().any(|n| n.name == c.name) {
                    stale.insert(c.name.as_str());
                }
            }
        }
        nat.deleted.extend(stale);
        if !nat.chains.is_empty() || !nat.deleted.is_empty() {
            sections.push(nat);
        }
        assemble(&sections)
    }
}

impl Ruleset {
    /// How many nat chains a full sync writes (top-level and per-service).
    pub fn nat_chain_count(&self) -> usize {
        self.nat.len()
            + self
                .services
                .values()
                .map(|s| s.chains.len())
                .sum::<usize>()
    }

    /// Every nat chain Ferry owns in this state, except the canary.
    pub fn nat_chain_names(&self) -> BTreeSet<&str> {
        [KUBE_SERVICES, KUBE_NODEPORTS]
            .into_iter()
            .chain(self.nat.iter().map(|c| c.name.as_str()))
            .chain(self.service_chain_names())
            .collect()
    }
}

impl fmt::Display for Ruleset {
    /// The full sync's `iptables-restore` input (what `ferry rules` prints and golden files
    /// hold), written straight into the formatter.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for section in full_sections(self, &FullSync::default()) {
            section.write(f)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
