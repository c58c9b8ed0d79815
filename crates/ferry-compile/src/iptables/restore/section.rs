//! One `*table` … `COMMIT` section of a restore, the rules each of its chains is written
//! with, and the re-rendering of a slim ruleset's chains as they are written.

use std::collections::BTreeSet;
use std::fmt;

use ferry_model::ServiceName;

use crate::iptables::model::{Chain, ChainDigest, JumpRule, Ruleset, ServiceRules, Table};

/// The rules of one chain: its own, those of a shared top-level chain (`head`, then
/// assembled from every service, then `tail`), or those of a per-service chain of a slim
/// ruleset, rendered again when written.
#[derive(Clone, Copy)]
pub(super) enum Rules<'a> {
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
    pub(super) fn iter(self) -> Box<dyn Iterator<Item = &'a String> + 'a> {
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

    pub(super) fn count(self) -> usize {
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

    /// A service's rules, rendered again (`None`: the service has none).
    pub fn render(&mut self, service: &ServiceName) -> Option<ServiceRules> {
        (self.render)(service)
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
pub(super) struct Section<'a> {
    pub(super) table: Table,
    /// Chains declared (created, or emptied) and filled, in order.
    pub(super) chains: Vec<(&'a str, Rules<'a>)>,
    /// Chains declared only (the canary): created if missing, emptied otherwise.
    pub(super) declared: Vec<&'a str>,
    /// Chains deleted (declared first, so that they are empty).
    pub(super) deleted: Vec<&'a str>,
    /// Jumps inserted at the top of built-in chains, after every chain is filled.
    pub(super) jumps: Vec<String>,
    /// Chains declared in descending name order (see `sections`); their rules are written
    /// in `chains` order all the same.
    pub(super) descending: bool,
}

impl<'a> Section<'a> {
    pub(super) fn new(table: Table) -> Self {
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
    pub(super) fn insert_jumps(&mut self, jumps: &[JumpRule]) {
        for jump in jumps.iter().filter(|j| j.table == self.table) {
            self.jumps.push(jump_line(jump));
        }
    }

    pub(super) fn chain(&mut self, name: &'a str, rules: Rules<'a>) {
        self.chains.push((name, rules));
    }

    pub(super) fn own(&mut self, chain: &'a Chain) {
        self.chain(&chain.name, Rules::Own(&chain.rules));
    }

    /// Every chain of one service but the `unchanged` ones: its own rules, or rendered again
    /// when it is slim.
    pub(super) fn service(
        &mut self,
        name: &'a ServiceName,
        rules: &'a ServiceRules,
        unchanged: Option<&BTreeSet<String>>,
    ) {
        for (i, chain) in rules.chains.iter().enumerate() {
            if unchanged.is_some_and(|u| u.contains(&chain.name)) {
                continue;
            }
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

    pub(super) fn write(&self, out: &mut impl fmt::Write) -> fmt::Result {
        self.write_rendering(out, None)
    }

    /// [`write`](Self::write), rendering the chains of slim services again with `again`.
    pub(super) fn write_rendering(
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
    pub(super) fn len(&self) -> usize {
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
