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

use super::model::{Chain, ChainDigest, JumpRule, Ruleset, ServiceRules, Table};
use super::names::{
    KUBE_EXTERNAL_SERVICES, KUBE_FORWARD, KUBE_MARK_MASQ, KUBE_NODEPORTS, KUBE_POSTROUTING,
    KUBE_PROXY_FIREWALL, KUBE_SERVICES, NON_POD_MASQ,
};

mod full;
mod sections;

use full::{full_sections, full_transactions};
pub use full::{FullSync, Transactions};

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
    /// Chains deleted.
    pub chains_deleted: usize,
}

/// The rules of one chain: its own, those of a shared top-level chain (`head`, then
/// assembled from every service, then `tail`), or those of a per-service chain of a slim
/// ruleset, rendered again when written.
#[derive(Clone, Copy)]
enum Rules<'a> {
    Own(&'a [String]),
    Assembled {
        ruleset: &'a Ruleset,
        head: &'a [String],
        pick: fn(&ServiceRules) -> &Vec<String>,
        tail: &'a [String],
    },
    /// The `chain`th chain of `service`, whose rules were let go ([`ServiceRules::slim`]).
    Rendered {
        service: &'a ServiceName,
        chain: usize,
        digest: ChainDigest,
    },
}

impl<'a> Rules<'a> {
    /// The rules, when they are at hand (not for [`Rules::Rendered`]).
    fn iter(self) -> Box<dyn Iterator<Item = &'a String> + 'a> {
        match self {
            Rules::Own(rules) => Box::new(rules.iter()),
            Rules::Assembled {
                ruleset,
                head,
                pick,
                tail,
            } => Box::new(
                head.iter()
                    .chain(ruleset.services.values().flat_map(move |s| pick(s).iter()))
                    .chain(tail),
            ),
            Rules::Rendered { .. } => Box::new(std::iter::empty()),
        }
    }

    fn count(self) -> usize {
        match self {
            Rules::Rendered { digest, .. } => digest.rules,
            rules => rules.iter().count(),
        }
    }
}

/// Renders the chains of a slim ruleset's services again as they are written, one service at
/// a time (each service's chains are written together), and checks that each is what the slim
/// ruleset says it is (name, rule count, digest).
pub struct Rerender<'r> {
    render: &'r mut dyn FnMut(&ServiceName) -> Option<ServiceRules>,
    last: Option<(ServiceName, Option<ServiceRules>)>,
    /// Why a chain could not be written, if one could not.
    pub mismatch: Option<String>,
}

impl<'r> Rerender<'r> {
    /// Renders a service's rules with `render` when its chains are written.
    pub fn new(render: &'r mut dyn FnMut(&ServiceName) -> Option<ServiceRules>) -> Self {
        Self {
            render,
            last: None,
            mismatch: None,
        }
    }

    fn chain(
        &mut self,
        service: &ServiceName,
        i: usize,
        name: &str,
        digest: ChainDigest,
    ) -> Result<&[String], fmt::Error> {
        if self.last.as_ref().map(|(n, _)| n) != Some(service) {
            self.last = Some((service.clone(), (self.render)(service)));
        }
        let chain = self
            .last
            .as_ref()
            .and_then(|(_, rules)| rules.as_ref())
            .and_then(|rules| rules.chains.get(i))
            .filter(|c| c.name == name && c.digest() == digest);
        match chain {
            Some(c) => Ok(&c.rules),
            None => {
                self.mismatch = Some(format!(
                    "{service}: chain {name} rendered again differs from the full render"
                ));
                Err(fmt::Error)
            }
        }
    }
}

/// One `*table` … `COMMIT` section, applied atomically.
struct Section<'a> {
    table: Table,
    /// Chains declared (created, or emptied) and filled, in order.
    chains: Vec<(&'a str, Rules<'a>)>,
    /// Chains declared only (the canary): created if missing, emptied otherwise.
    declared: Vec<&'a str>,
    /// Chains deleted (declared first, so that they are empty).
    deleted: Vec<&'a str>,
    /// Jumps inserted at the top of built-in chains, after every chain is filled.
    jumps: Vec<String>,
    /// Chains declared in descending name order (see `sections`); their rules are written
    /// in `chains` order all the same.
    descending: bool,
}

impl<'a> Section<'a> {
    fn new(table: Table) -> Self {
        Self {
            table,
            chains: Vec::new(),
            declared: Vec::new(),
            deleted: Vec::new(),
            jumps: Vec::new(),
            descending: false,
        }
    }

    /// Inserts those of `jumps` that belong to this section's table.
    fn insert_jumps(&mut self, jumps: &[JumpRule]) {
        for jump in jumps.iter().filter(|j| j.table == self.table) {
            self.jumps.push(jump_line(jump));
        }
    }

    fn chain(&mut self, name: &'a str, rules: Rules<'a>) {
        self.chains.push((name, rules));
    }

    fn own(&mut self, chain: &'a Chain) {
        self.chain(&chain.name, Rules::Own(&chain.rules));
    }

    /// Every chain of one service: its own rules, or rendered again when it is slim.
    fn service(&mut self, name: &'a ServiceName, rules: &'a ServiceRules) {
        for (i, chain) in rules.chains.iter().enumerate() {
            let what = if rules.is_slim() {
                Rules::Rendered {
                    service: name,
                    chain: i,
                    digest: rules.chain_digest(i),
                }
            } else {
                Rules::Own(&chain.rules)
            };
            self.chain(&chain.name, what);
        }
    }

    /// Every chain declared, in order.
    fn declarations(&self) -> impl Iterator<Item = &'a str> + '_ {
        let mut chains: Vec<&'a str> = self.chains.iter().map(|(name, _)| *name).collect();
        if self.descending {
            chains.sort_by(|a, b| b.cmp(a));
        }
        chains
            .into_iter()
            .chain(self.declared.iter().copied())
            .chain(self.deleted.iter().copied())
    }

    fn write(&self, out: &mut impl fmt::Write) -> fmt::Result {
        self.write_rendering(out, None)
    }

    /// [`write`](Self::write), rendering the chains of slim services again with `again`.
    fn write_rendering(
        &self,
        out: &mut impl fmt::Write,
        mut again: Option<&mut Rerender<'_>>,
    ) -> fmt::Result {
        writeln!(out, "*{}", self.table.as_str())?;
        for name in self.declarations() {
            writeln!(out, ":{name} - [0:0]")?;
        }
        for (name, rules) in &self.chains {
            if let Rules::Rendered {
                service,
                chain,
                digest,
            } = *rules
            {
                let again = again.as_deref_mut().ok_or(fmt::Error)?;
                for rule in again.chain(service, chain, name, digest)? {
                    writeln!(out, "-A {name} {rule}")?;
                }
                continue;
            }
            for rule in rules.iter() {
                writeln!(out, "-A {name} {rule}")?;
            }
        }
        for jump in &self.jumps {
            writeln!(out, "{jump}")?;
        }
        for name in &self.deleted {
            writeln!(out, "-X {name}")?;
        }
        out.write_str("COMMIT\n")
    }

    /// The length of [`Section::write`]'s text, without writing it.
    fn len(&self) -> usize {
        let header = 1 + self.table.as_str().len() + 1 + "COMMIT\n".len();
        let declared: usize = self
            .declarations()
            .map(|n| n.len() + ": - [0:0]\n".len())
            .sum();
        let rules: usize = self
            .chains
            .iter()
            .map(|(name, rules)| {
                rules
                    .iter()
                    .map(|r| "-A ".len() + name.len() + 1 + r.len() + 1)
                    .sum::<usize>()
            })
            .sum();
        let deleted: usize = self.deleted.iter().map(|n| "-X ".len() + n.len() + 1).sum();
        let jumps: usize = self.jumps.iter().map(|j| j.len() + 1).sum();
        header + declared + rules + deleted + jumps
    }
}

/// `-I CHAIN args…`, quoting the arguments that hold spaces (comments) as iptables-save does.
fn jump_line(jump: &JumpRule) -> String {
    let mut line = format!("-I {}", jump.chain);
    for arg in &jump.args {
        line.push(' ');
        if arg.contains(' ') {
            line.push('"');
            line.push_str(arg);
            line.push('"');
        } else {
            line.push_str(arg);
        }
    }
    line
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
        out.rules_written += s.chains.iter().map(|(_, r)| r.count()).sum::<usize>();
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
    /// over several transactions.
    pub fn full_with(desired: &Ruleset, o: &FullSync<'_>) -> Restore {
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
