//! iptables mode's part of `ferry status`: each service's chains and rules in `iptables-save`,
//! compared with the compiled ones.
//!
//! iptables-save writes a rule in its own canonical form (`-d 10.96.0.10/32`, match order), so
//! rules are not compared as text: a service's own chains must exist with as many rules as
//! Ferry would write and DNAT to the same endpoints, and the shared chains (`KUBE-SERVICES`,
//! `KUBE-NODEPORTS`, …) must hold as many rules for it, recognised by their comment (upstream's
//! `namespace/name:port …`).

use std::collections::{BTreeMap, BTreeSet};

use ferry_compile::iptables::{
    Ruleset, ServiceRules, KUBE_EXTERNAL_SERVICES, KUBE_NODEPORTS, KUBE_PROXY_FIREWALL,
    KUBE_SERVICES, SERVICE_CHAIN_PREFIXES,
};
use ferry_model::ServiceName;

use crate::live::KernelReport;

/// `iptables-save` output, by table and chain: the rules (without `-A CHAIN`).
#[derive(Debug, Default)]
struct Save {
    chains: BTreeMap<(String, String), Vec<String>>,
}

impl Save {
    fn parse(text: &str) -> Save {
        let mut save = Save::default();
        let mut table = String::new();
        for line in text.lines() {
            if let Some(t) = line.strip_prefix('*') {
                table = t.trim().to_owned();
            } else if let Some(rest) = line.strip_prefix(':') {
                let chain = rest.split_whitespace().next().unwrap_or_default();
                save.chains
                    .entry((table.clone(), chain.to_owned()))
                    .or_default();
            } else if let Some(rest) = line.strip_prefix("-A ") {
                let (chain, rule) = rest.split_once(' ').unwrap_or((rest, ""));
                save.chains
                    .entry((table.clone(), chain.to_owned()))
                    .or_default()
                    .push(rule.to_owned());
            }
        }
        save
    }

    fn rules(&self, table: &str, chain: &str) -> Option<&Vec<String>> {
        self.chains.get(&(table.to_owned(), chain.to_owned()))
    }
}

/// The value of a rule's `--comment`, quoted or not.
fn comment(rule: &str) -> Option<&str> {
    let rest = rule.split_once("--comment ")?.1;
    match rest.strip_prefix('"') {
        Some(quoted) => quoted.split_once('"').map(|(c, _)| c),
        None => rest.split_whitespace().next(),
    }
}

/// The service a rule of a shared chain is for: its comment starts with `namespace/name`.
fn service_of(rule: &str) -> Option<String> {
    let c = comment(rule)?;
    let end = c.find([':', ' ']).unwrap_or(c.len());
    let name = &c[..end];
    name.contains('/').then(|| name.to_owned())
}

/// The DNAT targets of rules.
fn dnat_targets<'a>(rules: impl IntoIterator<Item = &'a String>) -> BTreeSet<String> {
    rules
        .into_iter()
        .filter_map(|r| r.split("--to-destination ").nth(1))
        .filter_map(|d| d.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

/// The shared chains a service has rules in: (table, chain, its rules there).
fn shared(rules: &ServiceRules) -> [(&'static str, &'static str, &[String]); 5] {
    [
        ("nat", KUBE_SERVICES, &rules.nat_services),
        ("nat", KUBE_NODEPORTS, &rules.nat_nodeports),
        ("filter", KUBE_SERVICES, &rules.filter_services),
        ("filter", KUBE_EXTERNAL_SERVICES, &rules.filter_external),
        ("filter", KUBE_PROXY_FIREWALL, &rules.filter_firewall),
    ]
}

/// Compares every compiled service with the `iptables-save` output of the nat and filter
/// tables (`save`, empty when Ferry's chains are not there).
pub(super) fn compare(compiled: &Ruleset, save: &str) -> KernelReport {
    let save = Save::parse(save);
    if save.rules("nat", KUBE_SERVICES).is_none() {
        return KernelReport::absent(compiled.services.keys().cloned(), "nat chain KUBE-SERVICES");
    }
    let services = compiled
        .services
        .iter()
        .map(|(name, rules)| (name.clone(), differences(name, rules, &save)))
        .collect();
    KernelReport {
        present: true,
        services,
        stray: stray(compiled, &save),
    }
}

/// Where one service's chains and rules in the kernel differ from the compiled ones.
fn differences(name: &ServiceName, rules: &ServiceRules, save: &Save) -> Vec<String> {
    let mut out = Vec::new();
    let mut held = Vec::new();
    for chain in &rules.chains {
        match save.rules("nat", &chain.name) {
            None => out.push(format!("chain {} is missing from the kernel", chain.name)),
            Some(have) if have.len() != chain.rules.len() => out.push(format!(
                "chain {} has {} rules, Ferry would write {}",
                chain.name,
                have.len(),
                chain.rules.len()
            )),
            Some(have) => held.extend(have),
        }
    }
    let want = dnat_targets(rules.chains.iter().flat_map(|c| &c.rules));
    let have = dnat_targets(held);
    if out.is_empty() && want != have {
        out.push(format!(
            "the kernel DNATs to {}, Ferry would DNAT to {}",
            list(&have),
            list(&want)
        ));
    }
    let me = name.to_string();
    for (table, chain, want) in shared(rules) {
        let have = save
            .rules(table, chain)
            .map(|rs| {
                rs.iter()
                    .filter(|r| service_of(r).as_deref() == Some(&me))
                    .count()
            })
            .unwrap_or(0);
        if have != want.len() {
            out.push(format!(
                "{table} chain {chain} has {have} rules for it, Ferry would write {}",
                want.len()
            ));
        }
    }
    out
}

fn list(items: &BTreeSet<String>) -> String {
    if items.is_empty() {
        return "nothing".to_owned();
    }
    items.iter().cloned().collect::<Vec<_>>().join(", ")
}

/// Per-service chains, and rules of the shared chains, of services Ferry would not program.
fn stray(compiled: &Ruleset, save: &Save) -> Vec<String> {
    let own: BTreeSet<&str> = compiled.service_chain_names().collect();
    let services: BTreeSet<String> = compiled.services.keys().map(ToString::to_string).collect();
    let mut out = Vec::new();
    for ((table, chain), rules) in &save.chains {
        let per_service = SERVICE_CHAIN_PREFIXES.iter().any(|p| chain.starts_with(p));
        if table == "nat" && per_service && !own.contains(chain.as_str()) {
            out.push(format!("nat chain {chain} ({} rules)", rules.len()));
        }
        let is_shared = [
            KUBE_SERVICES,
            KUBE_NODEPORTS,
            KUBE_EXTERNAL_SERVICES,
            KUBE_PROXY_FIREWALL,
        ]
        .contains(&chain.as_str());
        for svc in rules
            .iter()
            .filter(|_| is_shared)
            .filter_map(|r| service_of(r))
        {
            if !services.contains(&svc) {
                out.push(format!("{table} chain {chain}: a rule for {svc}"));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
