//! Removing a mode's iptables chains and the jumps into them: iptables and IPVS modes differ
//! only in which chains and jumps are theirs, so both cleanups share this.

use std::fmt::Write as _;

use ferry_compile::iptables::{JumpRule, Table};

use super::some_of;
use crate::iptables::IptablesRunner;
use crate::Error;

/// Chain names a cleanup line shows before `and N more`.
const SHOWN: usize = 6;

/// Removes, through one runner (whose tools `tool` names, `iptables-nft`), the jumps of `jumps`
/// into the chains `chains_of` selects, then those chains in one restore; with `dry_run`, only
/// finds them. Tables with no such chain are not touched. Returns what it removed (or would),
/// one phrase per kind.
pub(crate) fn remove_chains(
    runner: &mut impl IptablesRunner,
    tool: &str,
    jumps: Vec<JumpRule>,
    chains_of: &impl Fn(Table) -> Vec<String>,
    dry_run: bool,
) -> Result<Vec<String>, Error> {
    let jumps = remove_jumps(runner, jumps, chains_of, dry_run)?;
    let mut objects = Vec::new();
    if !jumps.is_empty() {
        objects.push(format!("{tool} jumps: {}", jumps.join(", ")));
    }
    let mut input = String::new();
    for table in [Table::Filter, Table::Nat, Table::Mangle] {
        let chains = chains_of(table);
        if chains.is_empty() {
            continue;
        }
        objects.push(format!(
            "{tool} {} chains: {}",
            table.as_str(),
            some_of(&chains, SHOWN)
        ));
        let _ = writeln!(input, "*{}", table.as_str());
        for c in &chains {
            let _ = writeln!(input, ":{c} - [0:0]");
        }
        for c in &chains {
            let _ = writeln!(input, "-X {c}");
        }
        input.push_str("COMMIT\n");
    }
    if !dry_run && !input.is_empty() {
        runner.restore(&input)?;
    }
    Ok(objects)
}

/// Deletes every copy of each jump from a built-in chain into a chain `chains_of` selects (a
/// crashed run may have inserted one twice), or with `dry_run` only finds them. Returns them
/// (`nat PREROUTING → KUBE-SERVICES`).
fn remove_jumps(
    runner: &mut impl IptablesRunner,
    jumps: Vec<JumpRule>,
    chains_of: &impl Fn(Table) -> Vec<String>,
    dry_run: bool,
) -> Result<Vec<String>, Error> {
    let mut found_jumps = Vec::new();
    for jump in jumps {
        let target = jump.args.last().cloned().unwrap_or_default();
        if !chains_of(jump.table).contains(&target) {
            continue;
        }
        let mut args = vec!["-t", jump.table.as_str(), "-C", jump.chain];
        args.extend(jump.args.iter().map(String::as_str));
        let found = if dry_run {
            runner.iptables(&args)?
        } else {
            args[2] = "-D";
            let mut deleted = false;
            while runner.iptables(&args)? {
                deleted = true;
            }
            deleted
        };
        if found {
            found_jumps.push(format!("{} {} → {target}", jump.table.as_str(), jump.chain));
        }
    }
    Ok(found_jumps)
}
