//! `ferry cleanup` for iptables: removes Ferry's jumps and chains from both backends.
//!
//! iptables and IPVS modes share chain names (`KUBE-SERVICES`, `KUBE-POSTROUTING`, …, as
//! upstream's do), so each mode's cleanup acts only where a chain that mode alone writes
//! shows it ran ([`iptables_mode_ran`]): at start-up each mode removes the other's leftovers,
//! never its own live chains.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use ferry_compile::iptables::{
    jump_rules, JumpRule, Table, BASE_CHAINS_FILTER, BASE_CHAINS_NAT, CANARY,
    SERVICE_CHAIN_PREFIXES,
};

use ferry_model::IpFamily;

use super::chains_in;
use super::cli::{IptablesCli, IptablesRunner};
use crate::mode::IptablesBackend;
use crate::Error;

/// Chains of each table in an `iptables-save` output of several tables.
pub(crate) fn save_tables(save: &str) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut current = None;
    for line in save.lines() {
        if let Some(t) = line.strip_prefix('*') {
            current = Some(t.to_owned());
            out.entry(t.to_owned()).or_default();
        } else if let (Some(t), Some(chain)) = (&current, chains_in(line).next()) {
            out.entry(t.clone()).or_default().push(chain.to_owned());
        }
    }
    out
}

/// Whether iptables mode's rules are here: its canary, or a per-service chain.
fn iptables_mode_ran(existing: &BTreeMap<String, Vec<String>>) -> bool {
    existing
        .values()
        .flatten()
        .any(|c| c == CANARY || SERVICE_CHAIN_PREFIXES.iter().any(|p| c.starts_with(p)))
}

fn ours(table: Table, chain: &str) -> bool {
    chain == CANARY
        || match table {
            Table::Filter => BASE_CHAINS_FILTER.contains(&chain),
            Table::Nat => {
                BASE_CHAINS_NAT.contains(&chain)
                    || SERVICE_CHAIN_PREFIXES.iter().any(|p| chain.starts_with(p))
            }
            Table::Mangle => false,
        }
}

/// Removes Ferry's chains through one runner when iptables mode ran here: the jumps from
/// built-in chains first, then every chain of Ferry's in one restore. Tables that do not exist
/// are not created.
pub fn cleanup_with(runner: &mut impl IptablesRunner) -> Result<(), Error> {
    let existing = save_tables(&runner.save(None)?);
    if !iptables_mode_ran(&existing) {
        return Ok(());
    }
    remove_chains(runner, &existing, &jump_rules(), ours)
}

/// Removes the jumps (every copy) into the chains `ours` selects among `existing` (chains per
/// table, from [`save_tables`]), then those chains, in one restore.
pub(crate) fn remove_chains(
    runner: &mut impl IptablesRunner,
    existing: &BTreeMap<String, Vec<String>>,
    jumps: &[JumpRule],
    ours: impl Fn(Table, &str) -> bool,
) -> Result<(), Error> {
    let chains_of = |t: Table| -> Vec<&str> {
        existing
            .get(t.as_str())
            .map(|cs| {
                cs.iter()
                    .map(String::as_str)
                    .filter(|c| ours(t, c))
                    .collect()
            })
            .unwrap_or_default()
    };
    for jump in jumps {
        let target = jump.args.last().map(String::as_str).unwrap_or_default();
        if !chains_of(jump.table).contains(&target) {
            continue;
        }
        let mut args = vec!["-t", jump.table.as_str(), "-D", jump.chain];
        args.extend(jump.args.iter().map(String::as_str));
        // Delete every copy (a crashed run may have inserted one twice).
        while runner.iptables(&args)? {}
    }
    let mut input = String::new();
    for table in [Table::Filter, Table::Nat, Table::Mangle] {
        let chains = chains_of(table);
        if chains.is_empty() {
            continue;
        }
        let _ = writeln!(input, "*{}", table.as_str());
        for c in &chains {
            let _ = writeln!(input, ":{c} - [0:0]");
        }
        for c in &chains {
            let _ = writeln!(input, "-X {c}");
        }
        input.push_str("COMMIT\n");
    }
    if !input.is_empty() {
        runner.restore(&input)?;
    }
    Ok(())
}

/// Removes Ferry's iptables and ip6tables chains and jumps from both backends in the current
/// network namespace. A tool that is not installed is skipped.
pub fn cleanup() -> Result<(), Error> {
    for family in [IpFamily::V4, IpFamily::V6] {
        for backend in IptablesBackend::ALL {
            let mut cli = IptablesCli::for_family(backend, family);
            match cleanup_with(&mut cli) {
                Err(Error::Spawn { .. }) => continue,
                other => other?,
            }
        }
    }
    Ok(())
}
