//! Typed desired state of Ferry's nftables table.

use std::collections::BTreeMap;

use ferry_model::{IpFamily, ServiceName};

/// A chain and its rules (rule bodies in nft syntax).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    /// Chain name.
    pub name: String,
    /// Rules, in order.
    pub rules: Vec<String>,
}

/// A base chain: attached to a netfilter hook.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaseChain {
    /// `filter` or `nat`.
    pub kind: &'static str,
    /// `prerouting`, `input`, `forward`, `output` or `postrouting`.
    pub hook: &'static str,
    /// Priority (dstnat is -100, srcnat 100).
    pub priority: i32,
    /// The chain.
    pub chain: Chain,
}

/// A named set or map.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetDef {
    /// Name.
    pub name: &'static str,
    /// Key type, e.g. `ipv4_addr . inet_proto . inet_service`.
    pub key: String,
    /// Value type for maps (`verdict`); `None` for sets.
    pub value: Option<&'static str>,
    /// `interval` for prefix sets.
    pub interval: bool,
    /// What it is for.
    pub comment: &'static str,
}

/// One element of a set or map.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Element {
    /// The set or map.
    pub set: &'static str,
    /// Key, in nft syntax.
    pub key: String,
    /// Value for map elements (`goto chain`, `drop`).
    pub value: Option<String>,
}

/// Everything one Service contributes: its chains and its elements.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ServiceRules {
    /// Chains, sorted by name.
    pub chains: Vec<Chain>,
    /// Elements, sorted. Elements of the shared sets (`cluster-ips`, `hairpin`) may also be
    /// contributed by other services; the ruleset counts them.
    pub elements: Vec<Element>,
}

/// The whole desired table for one family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ruleset {
    /// `ip` or `ip6`.
    pub family: IpFamily,
    /// Hooked chains, in a fixed order.
    pub base_chains: Vec<BaseChain>,
    /// Fixed regular chains (services, masquerading, …).
    pub chains: Vec<Chain>,
    /// Sets and maps.
    pub sets: Vec<SetDef>,
    /// Elements that do not belong to a service (node port addresses).
    pub elements: Vec<Element>,
    /// Per-service chains and elements.
    pub services: BTreeMap<ServiceName, ServiceRules>,
    /// How many services contribute each element of a shared set.
    pub(crate) shared: BTreeMap<(&'static str, String), usize>,
}

/// Sets whose elements several services may contribute.
pub(crate) const SHARED_SETS: [&str; 2] = ["cluster-ips", "hairpin"];

impl Ruleset {
    /// True when everything but the services is equal (an incremental sync is possible).
    pub fn same_base(&self, other: &Ruleset) -> bool {
        self.family == other.family
            && self.base_chains == other.base_chains
            && self.chains == other.chains
            && self.sets == other.sets
            && self.elements == other.elements
    }

    /// Replaces (or removes, with `None`) one service's rules, keeping shared counts.
    pub fn set_service(&mut self, name: ServiceName, rules: Option<ServiceRules>) {
        if let Some(old) = self.services.remove(&name) {
            for e in old.elements.iter().filter(|e| SHARED_SETS.contains(&e.set)) {
                let key = (e.set, e.key.clone());
                if let Some(n) = self.shared.get_mut(&key) {
                    *n -= 1;
                    if *n == 0 {
                        self.shared.remove(&key);
                    }
                }
            }
        }
        if let Some(new) = rules {
            for e in new.elements.iter().filter(|e| SHARED_SETS.contains(&e.set)) {
                *self.shared.entry((e.set, e.key.clone())).or_default() += 1;
            }
            self.services.insert(name, new);
        }
    }

    /// How many services contribute a shared element.
    pub fn shared_count(&self, set: &'static str, key: &str) -> usize {
        self.shared
            .get(&(set, key.to_owned()))
            .copied()
            .unwrap_or(0)
    }

    /// Every chain name (base, fixed and per-service).
    pub fn chain_names(&self) -> impl Iterator<Item = &str> {
        self.base_chains
            .iter()
            .map(|b| b.chain.name.as_str())
            .chain(self.chains.iter().map(|c| c.name.as_str()))
            .chain(
                self.services
                    .values()
                    .flat_map(|s| s.chains.iter().map(|c| c.name.as_str())),
            )
    }

    /// Every element, each shared element once, grouped by set in definition order.
    pub fn all_elements(&self) -> BTreeMap<&'static str, Vec<&Element>> {
        let mut by_set: BTreeMap<&'static str, BTreeMap<&str, &Element>> = BTreeMap::new();
        let service_elements = self.services.values().flat_map(|s| s.elements.iter());
        for e in self.elements.iter().chain(service_elements) {
            by_set.entry(e.set).or_default().insert(e.key.as_str(), e);
        }
        by_set
            .into_iter()
            .map(|(set, els)| (set, els.into_values().collect()))
            .collect()
    }
}
