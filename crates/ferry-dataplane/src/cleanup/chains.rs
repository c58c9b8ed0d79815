//! Removing a layout's iptables chains and the jumps into them: iptables and IPVS modes differ
//! only in which chains are theirs, so both cleanups share this.
//!
//! The jumps are found in the built-in chains as the kernel lists them (`iptables -S`), not
//! by the rule text Ferry writes: kube-proxy's jumps differ from version to version (a
//! `--ctstate NEW` here, a comment there), and a jump left behind keeps its chain busy
//! (`CHAIN_DEL failed (Device or resource busy)`).

use std::collections::BTreeSet;
use std::fmt::Write as _;

use ferry_compile::iptables::{Table, SERVICE_CHAIN_PREFIXES};

use super::some_of;
use crate::iptables_tool::IptablesRunner;
use crate::Error;

/// Fixed chain names a cleanup line shows before `and N more`.
const SHOWN: usize = 12;

/// The built-in chains of `table`.
fn built_in(table: Table) -> &'static [&'static str] {
    match table {
        Table::Filter => &["INPUT", "FORWARD", "OUTPUT"],
        Table::Nat => &["PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"],
        Table::Mangle => &["PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"],
    }
}

/// The chain a rule of `iptables -S` (`-A CHAIN … -j TARGET`) jumps or goes to.
pub(crate) fn target_of(rule: &str) -> Option<&str> {
    let mut tokens = rule.split_whitespace();
    let mut target = None;
    while let Some(t) = tokens.next() {
        if t == "-j" || t == "-g" {
            target = tokens.next();
        }
    }
    target
}

/// The chains of a list, named for a log line: every fixed chain, and the per-service
/// chains (`KUBE-SVC-…`, `KUBE-SEP-…`, thousands on a large cluster) counted.
fn describe(chains: &[String]) -> String {
    let (per_service, fixed): (Vec<&String>, Vec<&String>) = chains
        .iter()
        .partition(|c| SERVICE_CHAIN_PREFIXES.iter().any(|p| c.starts_with(p)));
    let fixed: Vec<String> = fixed.into_iter().cloned().collect();
    let mut out = some_of(&fixed, SHOWN);
    if !per_service.is_empty() {
        if !out.is_empty() {
            out.push_str(", ");
        }
        let _ = write!(
            out,
            "{} per-service chain{} ({}, …)",
            per_service.len(),
            if per_service.len() == 1 { "" } else { "s" },
            per_service[0]
        );
    }
    out
}

/// Removes, through one runner (whose tools `tool` names, `iptables-nft`), the chains
/// `chains_of` selects and every jump from a built-in chain into them, one table per
/// atomic restore section; with `dry_run`, only finds them. `whose` (`Ferry's`,
/// `kube-proxy's`) starts each phrase. Tables with no such chain are not touched. Returns
/// what it removed (or would), one phrase per kind.
pub(crate) fn remove_chains(
    runner: &mut impl IptablesRunner,
    tool: &str,
    whose: &str,
    chains_of: &impl Fn(Table) -> Vec<String>,
    dry_run: bool,
) -> Result<Vec<String>, Error> {
    let mut jumps = Vec::new();
    let mut objects = Vec::new();
    let mut input = String::new();
    let mut tables = Vec::new();
    for table in [Table::Filter, Table::Nat, Table::Mangle] {
        let chains = chains_of(table);
        if chains.is_empty() {
            continue;
        }
        tables.push((table, chains.clone()));
        let set: BTreeSet<&str> = chains.iter().map(String::as_str).collect();
        let _ = writeln!(input, "*{}", table.as_str());
        for from in built_in(table) {
            for rule in runner.list_rules(table, from)? {
                let Some(target) = target_of(&rule).filter(|t| set.contains(t)) else {
                    continue;
                };
                jumps.push(format!("{} {from} → {target}", table.as_str()));
                if let Some(spec) = rule.strip_prefix("-A ") {
                    let _ = writeln!(input, "-D {spec}");
                }
            }
        }
        objects.push(format!(
            "{whose} {tool} {} chains: {}",
            table.as_str(),
            describe(&chains)
        ));
        for c in &chains {
            let _ = writeln!(input, ":{c} - [0:0]");
        }
        for c in &chains {
            let _ = writeln!(input, "-X {c}");
        }
        input.push_str("COMMIT\n");
    }
    if !jumps.is_empty() {
        objects.insert(0, format!("{whose} {tool} jumps: {}", jumps.join(", ")));
    }
    if !dry_run && !input.is_empty() {
        if let Err(e) = runner.restore(&input) {
            return Err(still_referenced(runner, tool, &tables).unwrap_or(e));
        }
    }
    Ok(objects)
}

/// Why a removal failed when a rule outside the removed chains still jumps into one of them
/// (someone else's chain: only built-in chains' jumps are removed): the error naming it.
fn still_referenced(
    runner: &mut impl IptablesRunner,
    tool: &str,
    tables: &[(Table, Vec<String>)],
) -> Option<Error> {
    for (table, chains) in tables {
        let set: BTreeSet<&str> = chains.iter().map(String::as_str).collect();
        let save = runner.save(Some(*table)).ok()?;
        for rule in save.lines().filter_map(|l| l.strip_prefix("-A ")) {
            let from = rule.split_whitespace().next().unwrap_or_default();
            if set.contains(from) || built_in(*table).contains(&from) {
                continue;
            }
            if let Some(target) = target_of(rule).filter(|t| set.contains(t)) {
                return Some(Error::StillReferenced {
                    tool: tool.to_owned(),
                    table: table.as_str().to_owned(),
                    chain: target.to_owned(),
                    rule: format!("-A {rule}"),
                });
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_target_is_the_chain_after_the_last_jump_or_goto() {
        assert_eq!(
            target_of("-A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES"),
            Some("KUBE-SERVICES")
        );
        assert_eq!(target_of("-A KUBE-EXT-X -g KUBE-SVC-Y"), Some("KUBE-SVC-Y"));
        assert_eq!(target_of("-P INPUT ACCEPT"), None);
    }

    #[test]
    fn per_service_chains_are_counted_fixed_ones_named() {
        let chains: Vec<String> = [
            "KUBE-SERVICES",
            "KUBE-SVC-A",
            "KUBE-SEP-B",
            "KUBE-MARK-MASQ",
        ]
        .map(str::to_owned)
        .to_vec();
        assert_eq!(
            describe(&chains),
            "KUBE-SERVICES, KUBE-MARK-MASQ, 2 per-service chains (KUBE-SVC-A, …)"
        );
    }
}
