//! Typed desired state of Ferry's nftables table.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;

use ferry_model::{IpFamily, ServiceName};

pub use super::element::{Element, Key, Value, Verdict};
use super::rule::DispatchChain;
use super::shared::SharedCounts;
use super::slots::Slots;

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
    /// True for a map, false for a set.
    pub map: bool,
    /// The type declaration: `type ipv4_addr . inet_proto . inet_service : verdict`, or
    /// `typeof …` for maps whose keys hold a `numgen` slot (so `nft list` can print them).
    pub decl: String,
    /// `interval` for prefix sets.
    pub interval: bool,
    /// `dynamic,timeout`: elements are added by rules (`update @set { … }`) and expire; Ferry
    /// never loads them, and a full sync keeps them (session affinity pins). Room for 2^20
    /// (the kernel's default for dynamic sets is 65 535).
    pub dynamic: bool,
    /// What it is for.
    pub comment: &'static str,
}

impl SetDef {
    /// A plain map (neither interval nor dynamic).
    pub fn map(name: &'static str, decl: String, comment: &'static str) -> Self {
        Self {
            name,
            map: true,
            decl,
            interval: false,
            dynamic: false,
            comment,
        }
    }

    /// A plain set.
    pub fn set(name: &'static str, decl: String, comment: &'static str) -> Self {
        Self {
            map: false,
            ..Self::map(name, decl, comment)
        }
    }

    /// `set` or `map`.
    pub fn kind(&self) -> &'static str {
        if self.map {
            "map"
        } else {
            "set"
        }
    }
}

/// Everything one Service contributes: the dispatch chains it uses and its elements.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ServiceRules {
    /// Dispatch chains its elements `goto`, sorted by name. They are shared: a chain's name
    /// determines its rules, and many services use the same chain; the ruleset counts users
    /// and, once a service is in a ruleset, its chains are the ruleset's one shared copy.
    pub chains: Vec<Arc<DispatchChain>>,
    /// Elements but the endpoint maps', sorted. Elements of the shared sets may also be
    /// contributed by other services; the ruleset counts them. `hairpin` is not stored as
    /// elements: see `hairpin`.
    pub elements: Vec<Element>,
    /// The endpoint maps' elements, per frontend and map, sorted (see [`Slots`]).
    pub slots: Vec<Slots>,
    /// The endpoint addresses of its endpoint maps that may be the sender of a connection
    /// DNATed here ([`ServicePlan::hairpin_sources`](crate::plan::ServicePlan)), sorted: each
    /// is `address . address` in the shared `hairpin` set (see [`shared_keys`]).
    pub hairpin: Vec<IpAddr>,
}

impl ServiceRules {
    /// Every element: `elements`, then the endpoint maps' (made here from `slots`).
    pub fn all(&self) -> impl Iterator<Item = Cow<'_, Element>> {
        let slots = self.slots.iter().flat_map(|s| s.elements().map(Cow::Owned));
        self.elements.iter().map(Cow::Borrowed).chain(slots)
    }
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
    /// How many services contribute each element of a shared set: one entry per endpoint
    /// address, the largest index Ferry keeps (18-byte keys: see `SharedCounts`). B-trees,
    /// not a hash map: under endpoint churn (keys removed, new ones added) a hash table near
    /// its load factor fills with tombstones and doubles once (~10 000 replaced endpoints at 10 000 × 10: +14 MiB RSS a minute into
    /// the soak drill, kept for good); a B-tree's size follows its entries.
    pub(crate) shared: SharedCounts,
    /// Dispatch chains in use, with the number of services using each.
    pub(crate) dispatch: BTreeMap<String, (usize, Arc<DispatchChain>)>,
}

/// Sets whose elements several services may contribute.
pub(crate) const SHARED_SETS: [&str; 2] = ["cluster-ips", "hairpin"];

/// The sets a full sync fills last, in this order. Written in several transactions (the first
/// sync into a new table), a frontend is served once its `service-ips` or `service-nodeports`
/// element is in, by which time everything its packets meet next (its chain, its endpoints,
/// the firewall and masquerade sets) is in place; `cluster-ips` comes after them, as it
/// rejects the ports of a ClusterIP that the dispatch maps do not hold.
pub const FILLED_LAST: [&str; 3] = ["service-ips", "service-nodeports", "cluster-ips"];

/// Sets that hold node-level elements only (the node port prefixes). The `nft` tool writes
/// them with the table's skeleton; every other set and map is written over netlink.
pub const NODE_LEVEL_SETS: [&str; 1] = ["nodeport-ips"];

/// The shared-set keys one service contributes, each once: its `cluster-ips` elements and
/// `hairpin` (`endpoint . endpoint`: a pod reaching itself through a service is masqueraded)
/// for each of its hairpin addresses. Keeping those as addresses instead of elements keeps
/// an element (128 bytes) per endpoint out of every service's rules.
pub(crate) fn shared_keys(rules: &ServiceRules) -> BTreeSet<(&'static str, Key)> {
    let mut keys = BTreeSet::new();
    for e in &rules.elements {
        if SHARED_SETS.contains(&e.set) {
            keys.insert((e.set, e.key.clone()));
        }
    }
    for ip in &rules.hairpin {
        keys.insert(("hairpin", Key::AddrPair(*ip, *ip)));
    }
    keys
}

impl Ruleset {
    /// Packs the per-service index and the shared counts after a whole ruleset was built
    /// service by service ([`ferry_model::btree`]).
    pub fn repack(&mut self) {
        ferry_model::btree::repack(&mut self.services);
        self.shared.repack();
    }

    /// The sets a full sync recreates rather than flushes: maps declared with `typeof`, which
    /// nft 1.0.6 cannot read from a new rule once they exist in the kernel.
    pub fn typeof_sets(&self) -> impl Iterator<Item = &SetDef> {
        self.sets.iter().filter(|s| s.decl.starts_with("typeof"))
    }

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
            for (set, key) in shared_keys(&old) {
                self.shared.remove(set, key);
            }
            for c in &old.chains {
                if let Some((n, _)) = self.dispatch.get_mut(&c.name) {
                    *n -= 1;
                    if *n == 0 {
                        self.dispatch.remove(&c.name);
                    }
                }
            }
        }
        if let Some(mut new) = rules {
            for (set, key) in shared_keys(&new) {
                self.shared.add(set, key);
            }
            for c in &mut new.chains {
                let (users, shared) = self
                    .dispatch
                    .entry(c.name.clone())
                    .or_insert_with(|| (0, c.clone()));
                *users += 1;
                // Keep one copy of each chain, however many services use it.
                *c = shared.clone();
            }
            self.services.insert(name, new);
        }
    }

    /// How many services contribute a shared element.
    pub fn shared_count(&self, set: &'static str, key: &Key) -> usize {
        self.shared.count(set, key) as usize
    }

    /// How many services use a dispatch chain.
    pub fn chain_users(&self, name: &str) -> usize {
        self.dispatch.get(name).map_or(0, |(n, _)| *n)
    }

    /// The dispatch chains in use, sorted by name.
    pub fn dispatch_chains(&self) -> impl Iterator<Item = &DispatchChain> {
        self.dispatch.values().map(|(_, c)| c.as_ref())
    }

    /// Every chain name (base, fixed and dispatch).
    pub fn chain_names(&self) -> impl Iterator<Item = &str> {
        self.base_chains
            .iter()
            .map(|b| b.chain.name.as_str())
            .chain(self.chains.iter().map(|c| c.name.as_str()))
            .chain(self.dispatch.keys().map(String::as_str))
    }

    /// The elements of one set, each shared element once, in no particular order. Unlike
    /// [`all_elements`](Self::all_elements) it builds no index of the whole table (a full sync
    /// streams a quarter of a million elements through this).
    pub fn set_elements<'a>(
        &'a self,
        set: &'static str,
    ) -> Box<dyn Iterator<Item = Cow<'a, Element>> + 'a> {
        if SHARED_SETS.contains(&set) {
            // Shared elements carry neither value nor comment; the counts hold their keys.
            return Box::new(
                self.shared
                    .keys()
                    .filter(move |(s, _)| *s == set)
                    .map(move |(_, k)| Cow::Owned(Element::new(set, k, None))),
            );
        }
        let node = self.elements.iter().filter(move |e| e.set == set);
        let services = self
            .services
            .values()
            .flat_map(|s| s.elements.iter())
            .filter(move |e| e.set == set);
        // Two services claiming the same frontend (conflicting manifests): the first wins, as
        // in `all_elements`, so the kernel never sees one key twice. A slot's key holds its
        // frontend: the slots are told apart by frontend.
        let mut seen = std::collections::HashSet::new();
        let mut seen_frontends = std::collections::HashSet::new();
        let slots = self
            .services
            .values()
            .flat_map(|s| s.slots.iter())
            .filter(move |s| s.map == set && seen_frontends.insert(&s.frontend))
            .flat_map(|s| s.elements().map(Cow::Owned));
        Box::new(
            node.chain(services)
                .filter(move |e| seen.insert(&e.key))
                .map(Cow::Borrowed)
                .chain(slots),
        )
    }

    /// Every element, each shared element once, grouped by set, sorted by key.
    pub fn all_elements(&self) -> BTreeMap<&'static str, Vec<Cow<'_, Element>>> {
        let mut by_set: BTreeMap<&'static str, BTreeMap<Key, Cow<'_, Element>>> = BTreeMap::new();
        let service_elements = self.services.values().flat_map(ServiceRules::all);
        for e in self
            .elements
            .iter()
            .map(Cow::Borrowed)
            .chain(service_elements)
        {
            if !SHARED_SETS.contains(&e.set) {
                by_set
                    .entry(e.set)
                    .or_default()
                    .entry(e.key.clone())
                    .or_insert(e);
            }
        }
        let mut out: BTreeMap<&'static str, Vec<Cow<'_, Element>>> = by_set
            .into_iter()
            .map(|(set, els)| (set, els.into_values().collect()))
            .collect();
        for (set, key) in self.shared.keys() {
            out.entry(set)
                .or_default()
                .push(Cow::Owned(Element::new(set, key, None)));
        }
        out
    }
}
