//! `iptables-restore --noflush` input: a full sync, or a partial one that rewrites only the
//! chains of changed services (upstream's `MinimizeIPTablesRestore`).
//!
//! With `--noflush`, a `:CHAIN - [0:0]` line creates the chain or empties it, and nothing that
//! is not named is touched; each table between `*table` and `COMMIT` is applied atomically.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::{self, Write as _};

use ferry_model::ServiceName;

use super::model::{Chain, Ruleset, ServiceRules, Table};
use super::names::{
    CANARY, KUBE_EXTERNAL_SERVICES, KUBE_FORWARD, KUBE_MARK_MASQ, KUBE_NODEPORTS, KUBE_POSTROUTING,
    KUBE_PROXY_FIREWALL, KUBE_SERVICES, NON_POD_MASQ,
};

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

struct Writer {
    chains: String,
    rules: String,
    out: Restore,
}

impl Writer {
    fn new() -> Self {
        Self {
            chains: String::new(),
            rules: String::new(),
            out: Restore::default(),
        }
    }

    fn declare(&mut self, name: &str) {
        let _ = writeln!(self.chains, ":{name} - [0:0]");
    }

    fn chain<'a>(&mut self, name: &str, rules: impl IntoIterator<Item = &'a String>) {
        self.declare(name);
        self.out.chains_written += 1;
        for r in rules {
            self.out.rules_written += 1;
            let _ = writeln!(self.rules, "-A {name} {r}");
        }
    }

    fn delete(&mut self, name: &str) {
        self.declare(name);
        self.out.chains_deleted += 1;
        let _ = writeln!(self.rules, "-X {name}");
    }

    /// Ends a table: `*table`, chain lines, rules, `COMMIT`.
    fn commit(&mut self, table: Table) {
        let _ = writeln!(self.out.text, "*{}", table.as_str());
        self.out.text.push_str(&self.chains);
        self.out.text.push_str(&self.rules);
        self.out.text.push_str("COMMIT\n");
        self.chains.clear();
        self.rules.clear();
    }
}

/// The shared chains of `table`, assembled from every service, then the fixed ones.
fn top_level(w: &mut Writer, rs: &Ruleset, table: Table) {
    let all = |pick: fn(&ServiceRules) -> &Vec<String>| {
        rs.services.values().flat_map(move |s| pick(s).iter())
    };
    match table {
        Table::Filter => {
            w.chain(KUBE_SERVICES, all(|s| &s.filter_services));
            w.chain(
                KUBE_EXTERNAL_SERVICES,
                rs.external_first.iter().chain(all(|s| &s.filter_external)),
            );
            for c in &rs.filter {
                w.chain(&c.name, &c.rules);
            }
            w.chain(KUBE_PROXY_FIREWALL, all(|s| &s.filter_firewall));
        }
        Table::Nat => {
            w.chain(
                KUBE_SERVICES,
                all(|s| &s.nat_services).chain(rs.nodeport_jumps.iter()),
            );
            w.chain(KUBE_NODEPORTS, all(|s| &s.nat_nodeports));
            for c in &rs.nat {
                w.chain(&c.name, &c.rules);
            }
        }
        Table::Mangle => {}
    }
}

impl Restore {
    /// Declares (so empties) and fills the given chains of each table, and nothing else:
    /// what a mode with a fixed set of chains (IPVS mode) writes at every sync.
    pub fn tables(tables: &[(Table, &[Chain])]) -> Restore {
        let mut w = Writer::new();
        for (table, chains) in tables {
            for c in chains.iter() {
                w.chain(&c.name, &c.rules);
            }
            w.commit(*table);
        }
        w.out
    }

    /// A full sync: every chain Ferry owns declared (so emptied) and refilled, the canaries
    /// (re)created, and `stale` nat chains (per-service chains no longer wanted) deleted.
    pub fn full(desired: &Ruleset, stale: &[String]) -> Restore {
        let mut w = Writer::new();
        top_level(&mut w, desired, Table::Filter);
        w.declare(CANARY);
        w.commit(Table::Filter);
        top_level(&mut w, desired, Table::Nat);
        for c in desired.services.values().flat_map(|s| &s.chains) {
            w.chain(&c.name, &c.rules);
        }
        w.declare(CANARY);
        for name in stale {
            w.delete(name);
        }
        w.commit(Table::Nat);
        w.declare(CANARY);
        w.commit(Table::Mangle);
        w.out
    }

    /// A partial sync: `desired` is the new state, `previous` holds the changed services'
    /// rules before the change (`None`: the service was absent). The shared top-level chains
    /// are rewritten (they are assembled from every service, like upstream); of the
    /// per-service chains only those of changed services whose rules differ are rewritten, and
    /// those that disappeared are deleted.
    pub fn partial(
        desired: &Ruleset,
        previous: &BTreeMap<ServiceName, Option<ServiceRules>>,
    ) -> Restore {
        let mut w = Writer::new();
        top_level(&mut w, desired, Table::Filter);
        w.commit(Table::Filter);
        top_level(&mut w, desired, Table::Nat);
        let mut stale = BTreeSet::new();
        for (name, old) in previous {
            let new: &[Chain] = desired
                .services
                .get(name)
                .map_or(&[], |s| s.chains.as_slice());
            let old: &[Chain] = old.as_ref().map_or(&[], |s| s.chains.as_slice());
            for c in new {
                if !old.contains(c) {
                    w.chain(&c.name, &c.rules);
                }
            }
            for c in old {
                if !new.iter().any(|n| n.name == c.name) {
                    stale.insert(c.name.as_str());
                }
            }
        }
        for name in stale {
            w.delete(name);
        }
        w.commit(Table::Nat);
        w.out
    }
}

impl Ruleset {
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
    /// hold).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&Restore::full(self, &[]).text)
    }
}
