//! Transactions: the `nft -f` text that moves the kernel from one ruleset to another.
//!
//! Every transaction is applied atomically by the kernel: all of it or none of it.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use ferry_model::{IpFamily, ServiceName};

use super::model::{
    shared_keys, Element, Key, Ruleset, ServiceRules, SetDef, NODE_LEVEL_SETS, SHARED_SETS,
};
use super::rule::DispatchChain;

/// Ferry's table name (in the `ip` and `ip6` families).
pub const TABLE: &str = "ferry";

/// One atomic nft transaction, as `nft -f` input.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Transaction {
    /// The script.
    pub text: String,
    /// Chains whose rules it rewrites (for logs, metrics and tests).
    pub chains_written: usize,
    /// Elements it adds or deletes.
    pub elements_changed: usize,
}

use crate::family::nft_family as family;

struct Writer {
    prefix: String,
    tx: Transaction,
}

impl Writer {
    fn new(f: IpFamily) -> Self {
        Self {
            prefix: format!("{} {TABLE}", family(f)),
            tx: Transaction::default(),
        }
    }

    fn line(&mut self, verb: &str, what: &str, rest: &str) {
        let _ = writeln!(self.tx.text, "{verb} {what} {} {rest}", self.prefix);
    }

    fn set_def(&mut self, s: &SetDef) {
        let flags = match (s.interval, s.dynamic) {
            (true, _) => " flags interval;",
            (false, true) => " flags dynamic,timeout; size 1048576;",
            (false, false) => "",
        };
        self.line(
            "add",
            s.kind(),
            &format!(
                "{} {{ {};{flags} comment \"{}\"; }}",
                s.name, s.decl, s.comment
            ),
        );
    }

    fn rules<R: std::fmt::Display>(&mut self, chain: &str, rules: &[R]) {
        self.tx.chains_written += 1;
        for rule in rules {
            self.line("add", "rule", &format!("{chain} {rule}"));
        }
    }

    /// `add table`, the base and fixed chains, and the set declarations.
    fn declare(&mut self, desired: &Ruleset, recreate: bool) {
        let table = format!(
            "add table {} {{ comment \"rules for Ferry\"; }}\n",
            self.prefix
        );
        self.tx.text.push_str(&table);
        if recreate {
            let _ = writeln!(self.tx.text, "delete table {}", self.prefix);
            self.tx.text.push_str(&table);
        }
        for b in &desired.base_chains {
            let spec = format!(
                "{} {{ type {} hook {} priority {}; policy accept; }}",
                b.chain.name, b.kind, b.hook, b.priority
            );
            self.line("add", "chain", &spec);
        }
        for c in &desired.chains {
            self.line("add", "chain", &c.name);
        }
        for s in &desired.sets {
            self.set_def(s);
        }
    }

    /// Rewrites the rules of the base and fixed chains (flushing them first unless the table
    /// was just created).
    fn fixed_rules(&mut self, desired: &Ruleset, flush: bool) {
        let fixed = || {
            desired
                .base_chains
                .iter()
                .map(|b| &b.chain)
                .chain(&desired.chains)
        };
        if flush {
            for c in fixed() {
                self.line("flush", "chain", &c.name);
            }
        }
        for c in fixed() {
            self.rules(&c.name, &c.rules);
        }
    }

    fn elements<E: std::ops::Deref<Target = Element>>(
        &mut self,
        verb: &str,
        set: &str,
        els: &[E],
        with_value: bool,
    ) {
        if els.is_empty() {
            return;
        }
        self.tx.elements_changed += els.len();
        let _ = write!(self.tx.text, "{verb} element {} {set} {{ ", self.prefix);
        for (i, e) in els.iter().enumerate() {
            let sep = if i == 0 { "" } else { ", " };
            if with_value {
                let _ = write!(self.tx.text, "{sep}{}", &**e);
            } else {
                let _ = write!(self.tx.text, "{sep}{}", e.key);
            }
        }
        self.tx.text.push_str(" }\n");
    }
}

impl Transaction {
    /// A full sync in one `nft -f` run, used when Ferry cannot talk netlink itself and as the
    /// fallback when the table's declarations conflict (e.g. after an upgrade): declares every
    /// object, empties every chain, set and map Ferry owns, loads the whole ruleset and deletes
    /// `stale_chains`. With `recreate`, the table is deleted and created anew first, which is
    /// the only way nft 1.0.6 can write the dispatch chains' rules (see [`super::rule`]);
    /// established connections are unaffected because their NAT bindings live in conntrack.
    pub fn full(desired: &Ruleset, stale_chains: &[String], recreate: bool) -> Transaction {
        let mut w = Writer::new(desired.family);
        w.declare(desired, recreate);
        for c in desired.dispatch_chains() {
            w.line("add", "chain", &c.name);
        }
        if !recreate {
            for c in desired.dispatch_chains() {
                w.line("flush", "chain", &c.name);
            }
            for name in stale_chains {
                w.line("flush", "chain", name);
            }
            // No rule refers to a set any more: recreate the `typeof` maps, empty the others.
            for s in desired.typeof_sets() {
                w.line("delete", s.kind(), s.name);
                w.set_def(s);
            }
            for s in desired.sets.iter().filter(|s| !s.dynamic) {
                if !s.decl.starts_with("typeof") {
                    w.line("flush", s.kind(), s.name);
                }
            }
        }
        w.fixed_rules(desired, !recreate);
        for c in desired.dispatch_chains() {
            w.rules(&c.name, &c.rules);
        }
        for (set, els) in desired.all_elements() {
            w.elements("add", set, &els, true);
        }
        if !recreate {
            for name in stale_chains {
                w.line("delete", "chain", name);
            }
        }
        w.tx
    }

    /// The part of a full sync that `nft` writes when the rest goes over netlink: the table,
    /// the base and fixed chains with their rules (flushed first), the set declarations and
    /// the node port addresses ([`NODE_LEVEL_SETS`]). No dispatch chain and no other element: these rules
    /// read only `type` maps, so nft can always write them again, and the script stays small
    /// whatever the number of services. Nothing here refers to a dispatch chain, so the
    /// dispatch chains and elements already in the kernel keep working until the netlink
    /// batch replaces them.
    pub fn skeleton(desired: &Ruleset) -> Transaction {
        let mut w = Writer::new(desired.family);
        w.declare(desired, false);
        w.fixed_rules(desired, true);
        // The node port addresses; service elements (even of interval sets such as
        // `firewall-allow`) go over netlink, so their sets are not flushed here.
        for s in desired
            .sets
            .iter()
            .filter(|s| NODE_LEVEL_SETS.contains(&s.name))
        {
            w.line("flush", s.kind(), s.name);
            let els: Vec<&Element> = desired
                .elements
                .iter()
                .filter(|e| e.set == s.name)
                .collect();
            w.elements("add", s.name, &els, true);
        }
        w.tx
    }

    /// An incremental sync from `installed` (what the kernel holds) after replacing the given
    /// services' rules (`None`: the service is gone). Touches only those services' elements,
    /// the dispatch chains whose first user came or last user went, and shared elements whose
    /// last contributor came or went.
    pub fn delta(
        installed: &Ruleset,
        changes: &BTreeMap<ServiceName, Option<ServiceRules>>,
    ) -> Transaction {
        Delta::between(installed, changes).transaction(installed.family)
    }

    /// True when the transaction does nothing.
    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }
}

/// What an incremental sync changes, typed (the text [`Transaction`] is rendered from it; a
/// netlink applier can send element-only deltas without the `nft` tool).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Delta<'a> {
    /// Dispatch chains to create (first user came), with their rules.
    pub add_chains: Vec<&'a DispatchChain>,
    /// Dispatch chains to delete (last user went), after their elements.
    pub delete_chains: Vec<&'a str>,
    /// Elements to delete, by set (a key whose value changed is deleted and added again).
    pub delete: BTreeMap<&'static str, Vec<Cow<'a, Element>>>,
    /// Elements to add, by set.
    pub add: BTreeMap<&'static str, Vec<Cow<'a, Element>>>,
}

impl<'a> Delta<'a> {
    /// The difference between `installed` and `installed` with `changes` applied.
    pub fn between(
        installed: &'a Ruleset,
        changes: &'a BTreeMap<ServiceName, Option<ServiceRules>>,
    ) -> Self {
        static EMPTY: ServiceRules = ServiceRules {
            chains: Vec::new(),
            elements: Vec::new(),
            slots: Vec::new(),
            hairpin: Vec::new(),
        };
        let empty = &EMPTY;
        let mut chain_delta: BTreeMap<&str, (isize, &DispatchChain)> = BTreeMap::new();
        let mut old_els: BTreeSet<Cow<'a, Element>> = BTreeSet::new();
        let mut new_els: BTreeSet<Cow<'a, Element>> = BTreeSet::new();
        let mut shared_delta: BTreeMap<(&'static str, Key), isize> = BTreeMap::new();
        for (name, new) in changes {
            let old = installed.services.get(name).unwrap_or(empty);
            let new = new.as_ref().unwrap_or(empty);
            for (rules, sign) in [(old, -1), (new, 1)] {
                for c in &rules.chains {
                    chain_delta
                        .entry(c.name.as_str())
                        .or_insert((0, c.as_ref()))
                        .0 += sign;
                }
                for key in shared_keys(rules) {
                    *shared_delta.entry(key).or_default() += sign;
                }
                for e in rules.all() {
                    if SHARED_SETS.contains(&e.set) {
                        // Counted above.
                    } else if sign < 0 {
                        old_els.insert(e);
                    } else {
                        new_els.insert(e);
                    }
                }
            }
        }
        // Dispatch chains are shared: one is added when its first user comes and deleted when
        // its last user goes. A chain's rules never change (its name says what they are).
        let mut added: Vec<&DispatchChain> = Vec::new();
        let mut removed: Vec<&str> = Vec::new();
        for (name, (delta, c)) in &chain_delta {
            let before = installed.chain_users(name) as isize;
            let after = before + delta;
            if before <= 0 && after > 0 {
                added.push(c);
            } else if before > 0 && after <= 0 {
                removed.push(name);
            }
        }
        // Element changes: a key whose value changed is deleted and added again.
        let mut delete: BTreeMap<&str, Vec<Cow<'a, Element>>> = BTreeMap::new();
        let mut add: BTreeMap<&str, Vec<Cow<'a, Element>>> = BTreeMap::new();
        for e in old_els.difference(&new_els) {
            delete.entry(e.set).or_default().push(e.clone());
        }
        for e in new_els.difference(&old_els) {
            add.entry(e.set).or_default().push(e.clone());
        }
        // Shared elements carry neither value nor comment.
        for ((set, key), delta) in shared_delta {
            let before = installed.shared_count(set, &key) as isize;
            let after = before + delta;
            if before > 0 && after <= 0 {
                delete
                    .entry(set)
                    .or_default()
                    .push(Cow::Owned(Element::new(set, key, None)));
            } else if before <= 0 && after > 0 {
                add.entry(set)
                    .or_default()
                    .push(Cow::Owned(Element::new(set, key, None)));
            }
        }
        Delta {
            add_chains: added,
            delete_chains: removed,
            delete,
            add,
        }
    }

    /// True when only elements change (no chain, so no rule the kernel must validate).
    pub fn elements_only(&self) -> bool {
        self.add_chains.is_empty() && self.delete_chains.is_empty()
    }

    /// Elements added or deleted.
    pub fn elements_changed(&self) -> usize {
        self.delete
            .values()
            .chain(self.add.values())
            .map(Vec::len)
            .sum()
    }

    /// The `nft -f` text of this delta: chains first (a `goto` needs its chain), then element
    /// deletions and additions, then chain deletions (no element refers to them any more).
    pub fn transaction(&self, family: IpFamily) -> Transaction {
        let mut w = Writer::new(family);
        for c in &self.add_chains {
            w.line("add", "chain", &c.name);
        }
        for name in &self.delete_chains {
            w.line("flush", "chain", name);
        }
        for c in &self.add_chains {
            w.rules(&c.name, &c.rules);
        }
        for (set, els) in &self.delete {
            w.elements("delete", set, els, false);
        }
        for (set, els) in &self.add {
            w.elements("add", set, els, true);
        }
        for name in &self.delete_chains {
            w.line("delete", "chain", name);
        }
        w.tx
    }
}
