//! Typed desired state of Ferry's iptables chains.

use std::collections::BTreeMap;

use ferry_model::{IpFamily, ServiceName};

use super::names::{KUBE_EXTERNAL_SERVICES, KUBE_NODEPORTS, KUBE_PROXY_FIREWALL, KUBE_SERVICES};

/// An iptables table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Table {
    /// `filter`.
    Filter,
    /// `nat`.
    Nat,
    /// `mangle` (only the canary lives there).
    Mangle,
}

impl Table {
    /// The name iptables uses (`-t …`, `*…` in restore input).
    pub fn as_str(self) -> &'static str {
        match self {
            Table::Filter => "filter",
            Table::Nat => "nat",
            Table::Mangle => "mangle",
        }
    }
}

/// A chain Ferry owns and its rules. Each rule is the `iptables-restore` text after
/// `-A <chain> ` (quoted where a comment has spaces).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    /// Chain name.
    pub name: String,
    /// Rules, in order.
    pub rules: Vec<String>,
}

impl Chain {
    /// An empty chain.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            rules: Vec::new(),
        }
    }
}

/// A rule in a built-in chain (`PREROUTING`, `INPUT`, …) that jumps to one of Ferry's chains.
/// Built-in chains are never part of a restore: each jump is checked (`-C`) and inserted
/// (`-I`) on its own, so nothing else in those chains is touched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JumpRule {
    /// The table.
    pub table: Table,
    /// The built-in chain.
    pub chain: &'static str,
    /// The rule's arguments, one per element (no shell quoting), ending in `-j <target>`.
    pub args: Vec<String>,
}

/// Everything one Service contributes: its own nat chains and its rules in the shared
/// top-level chains.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ServiceRules {
    /// nat chains of the service's ports (`KUBE-SVC-`, `KUBE-SVL-`, `KUBE-EXT-`, `KUBE-SEP-`),
    /// sorted by name.
    pub chains: Vec<Chain>,
    /// Rules in nat `KUBE-SERVICES` (ClusterIP and external IP dispatch).
    pub nat_services: Vec<String>,
    /// Rules in nat `KUBE-NODEPORTS`.
    pub nat_nodeports: Vec<String>,
    /// Rules in filter `KUBE-SERVICES` (ClusterIP without usable endpoints).
    pub filter_services: Vec<String>,
    /// Rules in filter `KUBE-EXTERNAL-SERVICES` (external destinations without usable
    /// endpoints).
    pub filter_external: Vec<String>,
    /// Rules in filter `KUBE-PROXY-FIREWALL` (load-balancer IP traffic that the service's
    /// `KUBE-FW-` chain did not accept, so it was not DNATed: dropped).
    pub filter_firewall: Vec<String>,
    /// Endpoint chains of the service (what large cluster mode counts).
    pub endpoints: usize,
    /// Set once the per-service chains' rules were let go ([`ServiceRules::slim`]): each
    /// chain's rule count and digest, in `chains` order. What the dataplane keeps of the
    /// rules it installed: their names, the top-level rules, and enough to tell a changed
    /// chain from an unchanged one.
    pub slimmed: Option<Box<[ChainDigest]>>,
}

/// A chain's rules in brief: how many, and a digest of their text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChainDigest {
    /// Rules in the chain.
    pub rules: usize,
    /// A 64-bit hash of the rules' text, in order (the same in every process).
    pub digest: u64,
}

impl Chain {
    /// Its rules in brief.
    pub fn digest(&self) -> ChainDigest {
        use std::hash::{Hash, Hasher};
        // Fixed keys: the same digest for the same rules, whoever computes it.
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.rules.hash(&mut h);
        ChainDigest {
            rules: self.rules.len(),
            digest: h.finish(),
        }
    }
}

impl ServiceRules {
    /// Lets go of the per-service chains' rules (most of the text at scale: ~30 MB at 10 000
    /// Services × 10 endpoints), keeping their names, their [`ChainDigest`]s and the
    /// top-level rules.
    pub fn slim(&mut self) {
        if self.slimmed.is_some() {
            return;
        }
        let digests = self.chains.iter().map(Chain::digest).collect();
        for chain in &mut self.chains {
            chain.rules = Vec::new();
        }
        self.slimmed = Some(digests);
    }

    /// True once [`slim`](Self::slim) let the chains' rules go.
    pub fn is_slim(&self) -> bool {
        self.slimmed.is_some()
    }

    /// The `i`th chain's rules in brief (kept, or computed from its rules).
    pub fn chain_digest(&self, i: usize) -> ChainDigest {
        match &self.slimmed {
            Some(digests) => digests[i],
            None => self.chains[i].digest(),
        }
    }

    /// True when both say the same, slim or not: the same top-level rules, endpoint count,
    /// chain names and chain digests.
    pub fn same_as(&self, other: &ServiceRules) -> bool {
        self.nat_services == other.nat_services
            && self.nat_nodeports == other.nat_nodeports
            && self.filter_services == other.filter_services
            && self.filter_external == other.filter_external
            && self.filter_firewall == other.filter_firewall
            && self.endpoints == other.endpoints
            && self.chains.len() == other.chains.len()
            && self.chains.iter().enumerate().all(|(i, c)| {
                other.chains[i].name == c.name && other.chain_digest(i) == self.chain_digest(i)
            })
    }

    /// The digest of the chain named `name`, if the service has it.
    pub fn digest_of(&self, name: &str) -> Option<ChainDigest> {
        let i = self.chains.iter().position(|c| c.name == name)?;
        Some(self.chain_digest(i))
    }
}

/// The whole desired state for one family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ruleset {
    /// The family (`iptables` or `ip6tables`).
    pub family: IpFamily,
    /// Fixed nat chains (`KUBE-POSTROUTING`, `KUBE-MARK-MASQ`, …), rules complete.
    pub nat: Vec<Chain>,
    /// Fixed filter chains (`KUBE-FORWARD`, …), rules complete.
    pub filter: Vec<Chain>,
    /// The rules that end nat `KUBE-SERVICES`: the jump(s) to `KUBE-NODEPORTS`.
    pub nodeport_jumps: Vec<String>,
    /// The rules that start filter `KUBE-EXTERNAL-SERVICES`, before the services' own: with
    /// localhost NodePorts, loopback destinations return (Ferry's proxy serves them).
    pub external_first: Vec<String>,
    /// Rendered in upstream's large cluster mode (no per-endpoint comments).
    pub large_cluster: bool,
    /// Per-service chains and rules.
    pub services: BTreeMap<ServiceName, ServiceRules>,
}

impl Ruleset {
    /// The rules Ferry owns in the filter and nat tables once this ruleset is installed
    /// (upstream's `sync_proxy_rules_iptables_total`): the fixed chains', and every service's
    /// own and top-level rules (a slim service by its chains' digests).
    pub fn rule_counts(&self) -> [(Table, usize); 2] {
        let fixed = |chains: &[Chain]| chains.iter().map(|c| c.rules.len()).sum::<usize>();
        let mut nat = fixed(&self.nat) + self.nodeport_jumps.len();
        let mut filter = fixed(&self.filter) + self.external_first.len();
        for s in self.services.values() {
            let own: usize = match &s.slimmed {
                Some(digests) => digests.iter().map(|d| d.rules).sum(),
                None => s.chains.iter().map(|c| c.rules.len()).sum(),
            };
            nat += own + s.nat_services.len() + s.nat_nodeports.len();
            filter += s.filter_services.len() + s.filter_external.len() + s.filter_firewall.len();
        }
        [(Table::Filter, filter), (Table::Nat, nat)]
    }

    /// True when everything but the services is equal (a partial sync is possible).
    pub fn same_base(&self, other: &Ruleset) -> bool {
        self.family == other.family
            && self.nat == other.nat
            && self.filter == other.filter
            && self.nodeport_jumps == other.nodeport_jumps
            && self.external_first == other.external_first
    }

    /// Endpoint chains of all services (large cluster mode is decided on this).
    pub fn endpoint_count(&self) -> usize {
        self.services.values().map(|s| s.endpoints).sum()
    }

    /// Replaces (or removes, with `None`) one service's rules.
    pub fn set_service(&mut self, name: ServiceName, rules: Option<ServiceRules>) {
        match rules {
            Some(r) => {
                self.services.insert(name, r);
            }
            None => {
                self.services.remove(&name);
            }
        }
    }

    /// Every per-service nat chain name.
    pub fn service_chain_names(&self) -> impl Iterator<Item = &str> {
        self.services
            .values()
            .flat_map(|s| s.chains.iter().map(|c| c.name.as_str()))
    }

    /// Ferry's top-level chains (the ones assembled from every service's rules and the fixed
    /// ones; not the per-service chains) with the number of rules a full sync writes into
    /// each: what the periodic check compares with the kernel.
    pub fn top_level_rules(&self) -> Vec<(Table, &str, usize)> {
        let sum = |pick: fn(&ServiceRules) -> usize| self.services.values().map(pick).sum();
        let mut out = vec![
            (
                Table::Filter,
                KUBE_SERVICES,
                sum(|r| r.filter_services.len()),
            ),
            (
                Table::Filter,
                KUBE_EXTERNAL_SERVICES,
                self.external_first.len() + sum(|r| r.filter_external.len()),
            ),
            (
                Table::Filter,
                KUBE_PROXY_FIREWALL,
                sum(|r| r.filter_firewall.len()),
            ),
            (
                Table::Nat,
                KUBE_SERVICES,
                sum(|r| r.nat_services.len()) + self.nodeport_jumps.len(),
            ),
            (Table::Nat, KUBE_NODEPORTS, sum(|r| r.nat_nodeports.len())),
        ];
        for (table, chains) in [(Table::Filter, &self.filter), (Table::Nat, &self.nat)] {
            out.extend(
                chains
                    .iter()
                    .map(|c| (table, c.name.as_str(), c.rules.len())),
            );
        }
        out
    }

    /// Rules in all chains (top-level and per service).
    pub fn rule_count(&self) -> usize {
        let fixed: usize = self
            .nat
            .iter()
            .chain(&self.filter)
            .map(|c| c.rules.len())
            .sum();
        let services: usize = self
            .services
            .values()
            .map(|s| {
                s.nat_services.len()
                    + s.nat_nodeports.len()
                    + s.filter_services.len()
                    + s.filter_external.len()
                    + s.filter_firewall.len()
                    + (0..s.chains.len())
                        .map(|i| s.chain_digest(i).rules)
                        .sum::<usize>()
            })
            .sum();
        fixed + services + self.nodeport_jumps.len()
    }
}
