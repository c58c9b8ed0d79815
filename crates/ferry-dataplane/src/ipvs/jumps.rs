//! IPVS mode's jumps from the built-in chains, checked and inserted with as few tool runs as
//! possible: one `iptables-save` (before the restore) shows which are there; the missing ones
//! go into the same `iptables-restore` as the chains (`-I CHAIN 1 …`, first in their chain as
//! upstream inserts them). Only a jump whose target chain existed but which the save does not
//! show as expected is checked with `-C` first, so a jump printed differently is never doubled.
//! Under software emulation every tool run costs about 0.1 s.

use std::fmt::Write as _;

use ferry_compile::iptables::JumpRule;

/// `-A CHAIN args…` as `iptables-save` prints a rule (arguments with spaces in double quotes);
/// `-I CHAIN 1 args…` is the same rule for `iptables-restore` to insert first.
fn rule(jump: &JumpRule, verb: &str) -> String {
    let mut line = format!("{verb} {}", jump.chain);
    if verb == "-I" {
        line.push_str(" 1");
    }
    for a in &jump.args {
        if a.contains(' ') {
            let _ = write!(line, " \"{a}\"");
        } else {
            let _ = write!(line, " {a}");
        }
    }
    line
}

/// The saved rules of each table: `(table, line)`.
fn lines(saved: &str) -> impl Iterator<Item = (&str, &str)> {
    let mut table = "";
    saved
        .lines()
        .filter_map(move |l| match l.strip_prefix('*') {
            Some(t) => {
                table = t;
                None
            }
            None => Some((table, l)),
        })
}

/// Whether `saved` (`iptables-save` of any tables) holds `jump` in its table.
pub fn saved_has_jump(saved: &str, jump: &JumpRule) -> bool {
    let want = rule(jump, "-A");
    lines(saved).any(|(t, l)| t == jump.table.as_str() && l == want)
}

/// Splits the jumps `saved` does not show into those to insert at once (their target chain did
/// not exist, so neither can they) and those to check with `-C` first.
pub fn missing(saved: &str, jumps: Vec<JumpRule>) -> (Vec<JumpRule>, Vec<JumpRule>) {
    jumps
        .into_iter()
        .filter(|j| !saved_has_jump(saved, j))
        .partition(|j| {
            let target = j.args.last().map(String::as_str).unwrap_or_default();
            let declared = format!(":{target} ");
            !lines(saved).any(|(t, l)| t == j.table.as_str() && l.starts_with(&declared))
        })
}

/// `restore` (`iptables-restore` input of whole tables) with `jumps` inserted, each in its
/// table's section, after the chains are declared.
pub fn with_jumps(restore: &str, jumps: &[JumpRule]) -> String {
    let mut out = String::with_capacity(restore.len() + 128 * jumps.len());
    let mut table = String::new();
    let mut committed: Vec<String> = Vec::new();
    for l in restore.lines() {
        if let Some(t) = l.strip_prefix('*') {
            table = t.to_owned();
        }
        if l == "COMMIT" {
            for j in jumps.iter().filter(|j| j.table.as_str() == table) {
                let _ = writeln!(out, "{}", rule(j, "-I"));
            }
            committed.push(table.clone());
        }
        let _ = writeln!(out, "{l}");
    }
    for j in jumps
        .iter()
        .filter(|j| !committed.iter().any(|t| t == j.table.as_str()))
    {
        let _ = writeln!(out, "*{}\n{}\nCOMMIT", j.table.as_str(), rule(j, "-I"));
    }
    out
}

#[cfg(test)]
mod tests {
    use ferry_compile::ipvs::chains::jump_rules;

    use super::*;

    const SAVED: &str = "*nat\n:PREROUTING ACCEPT [0:0]\n:KUBE-SERVICES - [0:0]\n\
        -A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n\
        COMMIT\n*filter\n:OUTPUT ACCEPT [0:0]\n\
        -A OUTPUT -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n\
        COMMIT\n";

    #[test]
    fn jumps_are_found_as_iptables_save_prints_them() {
        let found: Vec<&str> = jump_rules()
            .iter()
            .filter(|j| saved_has_jump(SAVED, j))
            .map(|j| j.chain)
            .collect();
        // The filter OUTPUT line jumps to KUBE-SERVICES, which IPVS mode does not write there.
        assert_eq!(found, vec!["PREROUTING"]);
    }

    #[test]
    fn only_jumps_into_chains_that_existed_are_checked_first() {
        let (insert, check) = missing(SAVED, jump_rules());
        let chains = |js: &[JumpRule]| js.iter().map(|j| j.chain).collect::<Vec<_>>();
        assert_eq!(chains(&check), vec!["OUTPUT"], "nat OUTPUT → KUBE-SERVICES");
        assert_eq!(insert.len(), jump_rules().len() - 2);
    }

    #[test]
    fn inserted_jumps_go_into_their_tables_section() {
        let restore =
            "*nat\n:KUBE-SERVICES - [0:0]\nCOMMIT\n*filter\n:KUBE-FORWARD - [0:0]\nCOMMIT\n";
        let jumps = jump_rules();
        let text = with_jumps(restore, &jumps[..4]);
        assert_eq!(
            text,
            "*nat\n:KUBE-SERVICES - [0:0]\n\
             -I OUTPUT 1 -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n\
             -I PREROUTING 1 -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n\
             -I POSTROUTING 1 -m comment --comment \"kubernetes postrouting rules\" -j KUBE-POSTROUTING\n\
             COMMIT\n*filter\n:KUBE-FORWARD - [0:0]\n\
             -I FORWARD 1 -m comment --comment \"kubernetes forwarding rules\" -j KUBE-FORWARD\n\
             COMMIT\n"
        );
    }
}
