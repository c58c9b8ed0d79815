//! Start-up checks of what the proxy mode needs (issue 15, phase 2): its tools on `PATH` and
//! CAP_NET_ADMIN, each missing piece named in one line (which Debian package, which
//! capability), so a node without them exits at once instead of failing every sync.
//!
//! The facts are read once (`PATH`, `/proc/self/status`); the decision is a pure function. The
//! mode table of the mode seam (issue 11) will say which tools each mode needs; until then the
//! two modes' needs are listed here.
#![allow(dead_code)]

use std::path::Path;

use ferry_dataplane::iptables::IptablesBackend;

use crate::config::ProxyMode;

/// CAP_NET_ADMIN's bit in the capability sets (linux/capability.h).
const CAP_NET_ADMIN: u32 = 12;
/// CAP_NET_RAW's bit.
const CAP_NET_RAW: u32 = 13;

/// What the checks look at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts {
    /// Programs found on `PATH`.
    pub programs: Vec<String>,
    /// The effective capability set (`CapEff` of `/proc/self/status`), when readable.
    pub effective_caps: Option<u64>,
}

impl Facts {
    /// Reads `PATH` for `wanted` and this process's effective capabilities.
    pub fn read(wanted: &[&str]) -> Facts {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let programs = wanted
            .iter()
            .filter(|p| std::env::split_paths(&path).any(|dir| is_executable(&dir.join(p))))
            .map(|p| (*p).to_owned())
            .collect();
        let effective_caps = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| parse_cap_eff(&s));
        Facts {
            programs,
            effective_caps,
        }
    }
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt as _;
    p.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// `CapEff:` of `/proc/self/status` (hex).
pub fn parse_cap_eff(status: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
}

/// The programs a mode runs, with the Debian package that has them.
pub fn needs(
    mode: ProxyMode,
    backend: Option<IptablesBackend>,
) -> Vec<(&'static str, &'static str)> {
    match (mode, backend) {
        (ProxyMode::Nftables, _) => vec![("nft", "nftables")],
        (ProxyMode::Iptables, Some(IptablesBackend::Legacy)) => vec![
            ("iptables-legacy-restore", "iptables"),
            ("iptables-legacy-save", "iptables"),
        ],
        (ProxyMode::Iptables, _) => vec![
            ("iptables-nft-restore", "iptables"),
            ("iptables-nft-save", "iptables"),
        ],
    }
}

/// One line per missing piece; empty when the mode can run.
pub fn missing(mode: ProxyMode, backend: Option<IptablesBackend>, facts: &Facts) -> Vec<String> {
    let mut out = Vec::new();
    for (program, package) in needs(mode, backend) {
        if !facts.programs.iter().any(|p| p == program) {
            out.push(format!(
                "{} mode needs `{program}` (Debian/Ubuntu package `{package}`), not found on PATH",
                mode.as_str()
            ));
        }
    }
    if let Some(caps) = facts.effective_caps {
        if caps & (1 << CAP_NET_ADMIN) == 0 {
            out.push(
                "CAP_NET_ADMIN is missing: run as root, or add the capability \
                 (securityContext.capabilities.add: [NET_ADMIN])"
                    .to_owned(),
            );
        }
        if mode == ProxyMode::Iptables
            && backend == Some(IptablesBackend::Legacy)
            && caps & (1 << CAP_NET_RAW) == 0
        {
            out.push(
                "iptables-legacy needs CAP_NET_RAW: add it (securityContext.capabilities.add: \
                 [NET_RAW])"
                    .to_owned(),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(programs: &[&str], caps: u64) -> Facts {
        Facts {
            programs: programs.iter().map(|p| (*p).to_owned()).collect(),
            effective_caps: Some(caps),
        }
    }

    #[test]
    fn a_missing_tool_and_capability_are_each_one_line_naming_the_fix() {
        let lines = missing(ProxyMode::Nftables, None, &facts(&[], 0));
        assert_eq!(lines.len(), 2, "{lines:?}");
        assert!(
            lines[0].contains("`nft`") && lines[0].contains("`nftables`"),
            "{lines:?}"
        );
        assert!(lines[1].contains("CAP_NET_ADMIN"), "{lines:?}");
        let ok = facts(&["nft"], 1 << CAP_NET_ADMIN);
        assert!(missing(ProxyMode::Nftables, None, &ok).is_empty());
    }

    #[test]
    fn iptables_legacy_also_needs_net_raw() {
        let f = facts(
            &["iptables-legacy-restore", "iptables-legacy-save"],
            1 << CAP_NET_ADMIN,
        );
        let lines = missing(ProxyMode::Iptables, Some(IptablesBackend::Legacy), &f);
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].contains("CAP_NET_RAW"));
    }

    #[test]
    fn reads_the_effective_set_of_proc_status() {
        let status = "Name:\tferry\nCapInh:\t0000000000000000\nCapEff:\t0000000000001000\n";
        assert_eq!(parse_cap_eff(status), Some(1 << CAP_NET_ADMIN));
        assert!(Facts::read(&["sh"]).programs.contains(&"sh".to_owned()));
    }
}
