//! ipsets with the `ipset` tool, as upstream does: `ipset save` reads them, one
//! `ipset restore -exist` per sync writes only what changed (sets created, entries added and
//! deleted).

use std::collections::{BTreeMap, BTreeSet};
use std::io::Write as _;
use std::process::{Command, Stdio};

use ferry_compile::ipvs::sets::{IpSets, ALL};
use ferry_model::IpFamily;

use super::IpvsError;

/// Entries of the sets that exist, by set name, as `ipset save` prints them.
pub type LiveSets = BTreeMap<String, BTreeSet<String>>;

/// Reads every set of upstream's (both families' names) that exists.
pub fn read() -> Result<LiveSets, IpvsError> {
    let out = Command::new("ipset")
        .arg("save")
        .output()
        .map_err(|e| IpvsError::Tool("ipset save".into(), e.to_string()))?;
    if !out.status.success() {
        return Err(IpvsError::Tool(
            "ipset save".into(),
            String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        ));
    }
    Ok(parse_save(&String::from_utf8_lossy(&out.stdout)))
}

/// Like [`read`], `None` when the `ipset` tool is not installed (nothing can have used
/// ipsets then).
pub fn read_if_present() -> Result<Option<LiveSets>, IpvsError> {
    match Command::new("ipset").arg("version").output() {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        _ => read().map(Some),
    }
}

/// Parses `ipset save` output, keeping upstream's sets only.
pub fn parse_save(text: &str) -> LiveSets {
    let ours = |name: &str| {
        ALL.iter().any(|k| {
            [IpFamily::V4, IpFamily::V6]
                .map(|f| k.name_in(f))
                .contains(&name.to_owned())
        })
    };
    let mut sets = LiveSets::new();
    for line in text.lines() {
        let mut words = line.splitn(3, ' ');
        match (words.next(), words.next(), words.next()) {
            (Some("create"), Some(name), _) if ours(name) => {
                sets.entry(name.to_owned()).or_default();
            }
            (Some("add"), Some(name), Some(entry)) if ours(name) => {
                sets.entry(name.to_owned())
                    .or_default()
                    .insert(entry.trim().to_owned());
            }
            _ => {}
        }
    }
    sets
}

/// The `ipset restore` input that turns `live` into `desired`: missing sets created, missing
/// entries added, stale entries deleted. Empty when nothing changes.
pub fn restore_input(desired: &IpSets, live: &LiveSets) -> (String, usize) {
    let mut text = String::new();
    let mut changes = 0;
    for (kind, entries) in desired.iter() {
        let name = kind.name_in(desired.family);
        let have = live.get(&name);
        if have.is_none() {
            text.push_str(&kind.create_line(desired.family));
            text.push('\n');
            changes += 1;
        }
        let want: BTreeSet<String> = entries.iter().map(ToString::to_string).collect();
        let empty = BTreeSet::new();
        let have = have.unwrap_or(&empty);
        for e in have.difference(&want) {
            text.push_str(&format!("del {name} {e}\n"));
            changes += 1;
        }
        for e in want.difference(have) {
            text.push_str(&format!("add {name} {e}\n"));
            changes += 1;
        }
    }
    (text, changes)
}

/// Runs `ipset restore -exist` with `input`.
pub fn restore(input: &str) -> Result<(), IpvsError> {
    if input.is_empty() {
        return Ok(());
    }
    let tool = || "ipset restore -exist".to_owned();
    let mut child = Command::new("ipset")
        .args(["restore", "-exist"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| IpvsError::Tool(tool(), e.to_string()))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(input.as_bytes())
            .map_err(|e| IpvsError::Tool(tool(), e.to_string()))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| IpvsError::Tool(tool(), e.to_string()))?;
    if !out.status.success() {
        return Err(IpvsError::Tool(
            tool(),
            String::from_utf8_lossy(&out.stderr).trim().to_owned(),
        ));
    }
    Ok(())
}

/// Destroys upstream's sets that exist (after the iptables rules that use them are gone).
pub fn destroy_all(live: &LiveSets) -> Result<(), IpvsError> {
    let input: String = live.keys().map(|n| format!("destroy {n}\n")).collect();
    restore(&input)
}
