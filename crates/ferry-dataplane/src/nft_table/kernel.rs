//! nftables mode's part of `ferry status`: each service's elements (and the chains they
//! `goto`) in the kernel's table, compared with the compiled ones.
//!
//! An element belongs to the service whose frontend starts its key (`address . protocol .
//! port`, or `protocol . port` in the node port sets), so an element the kernel holds and Ferry
//! would not program (a slot left over, a deleted service) is found too.

use std::collections::{BTreeMap, BTreeSet};

use ferry_compile::nft::Ruleset;
use ferry_model::ServiceName;

use super::LiveTable;
use crate::live::KernelReport;

/// Sets whose elements are not a service's own: the node's NodePort addresses, the hairpin
/// pairs (shared by every endpoint), and the session affinity pins (written by the kernel).
const NOT_PER_SERVICE: [&str; 4] = ["nodeport-ips", "hairpin", "affinity", "nodeport-affinity"];

/// The frontend at the start of an element's key, as text.
fn frontend(set: &str, key: &str) -> String {
    let parts = if set.contains("nodeport") { 2 } else { 3 };
    key.split(" . ").take(parts).collect::<Vec<_>>().join(" . ")
}

/// Per set, per key: the value, as the kernel's listing writes it.
type Elements = BTreeMap<(String, String), Option<String>>;

/// Compares every compiled service with what the live table holds for its frontends.
pub(crate) fn compare(compiled: &Ruleset, live: Option<&LiveTable>) -> KernelReport {
    let Some(live) = live else {
        return KernelReport::absent(compiled.services.keys().cloned(), "Ferry's table");
    };
    let mut owner: BTreeMap<(String, String), &ServiceName> = BTreeMap::new();
    let mut wanted: BTreeMap<&ServiceName, Elements> = BTreeMap::new();
    for (name, rules) in &compiled.services {
        let mine = wanted.entry(name).or_default();
        for e in rules.all().filter(|e| !NOT_PER_SERVICE.contains(&e.set)) {
            let key = e.key.to_string();
            owner.insert((e.set.to_owned(), frontend(e.set, &key)), name);
            mine.insert(
                (e.set.to_owned(), key),
                e.value.as_ref().map(ToString::to_string),
            );
        }
    }
    let mut held: BTreeMap<&ServiceName, Elements> = BTreeMap::new();
    let mut stray = Vec::new();
    for (set, elements) in live
        .elements
        .iter()
        .filter(|(s, _)| !NOT_PER_SERVICE.contains(&s.as_str()))
    {
        for (key, value) in elements {
            match owner.get(&(set.clone(), frontend(set, key))) {
                Some(name) => {
                    held.entry(name)
                        .or_default()
                        .insert((set.clone(), key.clone()), value.clone());
                }
                None => stray.push(format!("map {set} element {key}{}", shown(value))),
            }
        }
    }
    let services = wanted
        .into_iter()
        .map(|(name, want)| {
            let have = held.remove(name).unwrap_or_default();
            (name.clone(), differences(&want, &have, &live.chains))
        })
        .collect();
    KernelReport {
        present: true,
        services,
        stray,
    }
}

fn shown(value: &Option<String>) -> String {
    value
        .as_deref()
        .map(|v| format!(" : {v}"))
        .unwrap_or_default()
}

/// Where one service's elements in the kernel differ from the compiled ones.
fn differences(want: &Elements, have: &Elements, chains: &BTreeSet<String>) -> Vec<String> {
    let mut out = Vec::new();
    for ((set, key), value) in want {
        match have.get(&(set.clone(), key.clone())) {
            None => out.push(format!("map {set} lacks element {key}{}", shown(value))),
            Some(v) if v != value => out.push(format!(
                "map {set} element {key}: the kernel has {}, Ferry would program {}",
                v.as_deref().unwrap_or("-"),
                value.as_deref().unwrap_or("-")
            )),
            Some(_) => {}
        }
    }
    for ((set, key), value) in have {
        if !want.contains_key(&(set.clone(), key.clone())) {
            out.push(format!(
                "map {set} has element {key}{} that Ferry would not program",
                shown(value)
            ));
        }
    }
    let gotos: BTreeSet<&str> = want
        .values()
        .flatten()
        .filter_map(|v| v.strip_prefix("goto "))
        .collect();
    for chain in gotos {
        if !chains.contains(chain) {
            out.push(format!("chain {chain} is missing from the kernel"));
        }
    }
    out
}

#[cfg(test)]
mod tests;
