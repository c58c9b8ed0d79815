//! The periodic check's comparison (upstream kube-proxy's canary, made cheap): every chain
//! this process installed still exists, and every top-level chain (base chains and the fixed
//! ones: `services`, `nodeports`, masquerading, firewall …) still holds the rules written
//! into it. The per-service dispatch chains are only checked to exist: counting their rules
//! would read most of the table at 10 000 services.

use std::collections::HashSet;
use std::fmt;

use ferry_compile::nft::{Ruleset, TABLE};

use crate::Error;

/// What the check found missing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Damage<'a> {
    /// A chain this process installed is gone (`nft flush ruleset`, the table deleted).
    Gone(&'a str),
    /// A top-level chain holds another number of rules than was written (`nft flush chain`).
    Rules {
        chain: &'a str,
        written: usize,
        found: usize,
    },
}

impl fmt::Display for Damage<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Damage::Gone(chain) => write!(f, "chain {chain} of table {TABLE} is gone"),
            Damage::Rules {
                chain,
                written,
                found,
            } => write!(
                f,
                "chain {chain} of table {TABLE} holds {found} rules, {written} were written"
            ),
        }
    }
}

/// The top-level chains of `installed` with the number of rules written into each.
pub(super) fn top_level(installed: &Ruleset) -> impl Iterator<Item = (&str, usize)> {
    let base = installed.base_chains.iter().map(|b| &b.chain);
    base.chain(&installed.chains)
        .map(|c| (c.name.as_str(), c.rules.len()))
}

/// The first damage found: `existing` holds the chain names the kernel has, `rules` counts one
/// chain's rules in the kernel (`None`: cannot tell, the chain is taken as intact). Chains are
/// checked to exist before any rule is counted.
pub(super) fn first_damage<'a>(
    installed: &'a Ruleset,
    existing: &[String],
    mut rules: impl FnMut(&str) -> Result<Option<usize>, Error>,
) -> Result<Option<Damage<'a>>, Error> {
    let existing: HashSet<&str> = existing.iter().map(String::as_str).collect();
    if let Some(gone) = installed.chain_names().find(|c| !existing.contains(c)) {
        return Ok(Some(Damage::Gone(gone)));
    }
    for (chain, written) in top_level(installed) {
        match rules(chain)? {
            Some(found) if found != written => {
                return Ok(Some(Damage::Rules {
                    chain,
                    written,
                    found,
                }))
            }
            _ => {}
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests;
