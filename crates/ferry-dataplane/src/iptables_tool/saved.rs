//! Reading what `iptables-save` and `iptables -S` print: the chains of each table, and whether
//! the top-level chains still hold the rules written into them.

use std::collections::BTreeMap;

use ferry_compile::iptables::Table;

use crate::Error;

/// Chains of each table in an `iptables-save` output of several tables.
pub(crate) fn tables(save: &str) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut current = None;
    for line in save.lines() {
        declaration(line, &mut current, &mut out);
    }
    out
}

/// One line of `iptables-save`'s output: a table (`*nat`) becomes `current`, a chain
/// declaration of `current` is added to `out`; anything else is ignored.
pub(crate) fn declaration(
    line: &str,
    current: &mut Option<String>,
    out: &mut BTreeMap<String, Vec<String>>,
) {
    if let Some(t) = line.strip_prefix('*') {
        *current = Some(t.to_owned());
        out.entry(t.to_owned()).or_default();
    } else if let (Some(t), Some(chain)) = (&*current, chains_in(line).next()) {
        out.entry(t.clone()).or_default().push(chain.to_owned());
    }
}

/// Names of chains in an `iptables-save` output of one table.
pub(crate) fn chains_in(save: &str) -> impl Iterator<Item = &str> {
    save.lines()
        .filter_map(|l| l.strip_prefix(':'))
        .filter_map(|l| l.split_whitespace().next())
}

/// The first top-level chain whose rules in the kernel (`rules`: how many `table`'s `chain`
/// holds, `None` when the runner cannot tell) are not as many as were written (`written`:
/// table, chain, rules), described. Chains written empty are not asked about: flushing one
/// changes nothing.
pub(crate) fn first_changed(
    written: &[(Table, &str, usize)],
    mut rules: impl FnMut(Table, &str) -> Result<Option<usize>, Error>,
) -> Result<Option<String>, Error> {
    for &(table, chain, count) in written.iter().filter(|(_, _, n)| *n > 0) {
        match rules(table, chain)? {
            Some(found) if found != count => {
                return Ok(Some(format!(
                    "chain {} {chain} holds {found} rules, {count} were written",
                    table.as_str()
                )))
            }
            _ => {}
        }
    }
    Ok(None)
}
