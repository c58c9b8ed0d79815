//! What a mode needs before it can run on this node: its tools on `PATH` and its capabilities
//! ([`Requirements`], each mode's from `NodeMode::requirements`), checked once at start-up so a
//! node without them stops at once with one line naming the package or capability, instead of
//! failing every sync.
//!
//! The facts are read once ([`Facts::read`]: `PATH`, `CapEff` of `/proc/self/status`); the
//! decision ([`missing`]) is pure.

use std::path::Path;

/// A program a mode runs, and the Debian/Ubuntu package that has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tool {
    /// The program, looked up on `PATH` (`nft`, `iptables-nft-restore`).
    pub program: String,
    /// The package to install.
    pub package: &'static str,
}

impl Tool {
    /// `program` from `package`.
    pub fn new(program: impl Into<String>, package: &'static str) -> Self {
        Self {
            program: program.into(),
            package,
        }
    }
}

/// A Linux capability a mode needs (linux/capability.h).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Capability {
    /// `CAP_NET_ADMIN`: nftables, iptables over nf_tables, conntrack, netlink.
    NetAdmin,
    /// `CAP_NET_RAW`: iptables-legacy talks to the kernel over a raw socket.
    NetRaw,
}

impl Capability {
    /// The capability's bit in the capability sets.
    pub fn bit(self) -> u32 {
        match self {
            Capability::NetAdmin => 12,
            Capability::NetRaw => 13,
        }
    }

    /// Its name in a pod's `securityContext.capabilities.add` (`NET_ADMIN`).
    pub fn name(self) -> &'static str {
        match self {
            Capability::NetAdmin => "NET_ADMIN",
            Capability::NetRaw => "NET_RAW",
        }
    }
}

/// What a mode needs on this node.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Requirements {
    /// Programs it runs.
    pub tools: Vec<Tool>,
    /// Capabilities it needs (effective).
    pub capabilities: Vec<Capability>,
}

/// What the checks look at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts {
    /// The wanted programs found on `PATH`.
    pub programs: Vec<String>,
    /// The effective capability set (`CapEff` of `/proc/self/status`), when readable.
    pub effective_caps: Option<u64>,
}

impl Facts {
    /// Looks for `requirements`' tools on `PATH` and reads this process's capabilities.
    pub fn read(requirements: &Requirements) -> Facts {
        let path = std::env::var_os("PATH").unwrap_or_default();
        let programs = requirements
            .tools
            .iter()
            .map(|t| t.program.clone())
            .filter(|p| std::env::split_paths(&path).any(|dir| is_executable(&dir.join(p))))
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

/// What is missing for `mode` (its start-up description, `nftables mode`), one phrase per
/// piece; empty when it can run. Capabilities are not judged when they cannot be read.
pub fn missing(mode: &str, requirements: &Requirements, facts: &Facts) -> Vec<String> {
    let mut out = Vec::new();
    for tool in &requirements.tools {
        if !facts.programs.contains(&tool.program) {
            out.push(format!(
                "{mode} needs `{}`, which is not on PATH (Debian/Ubuntu package `{}`)",
                tool.program, tool.package
            ));
        }
    }
    if let Some(caps) = facts.effective_caps {
        for cap in &requirements.capabilities {
            if caps & (1 << cap.bit()) == 0 {
                out.push(format!(
                    "{mode} needs CAP_{name}: run as root, or add it to the container \
                     (securityContext.capabilities.add: [{name}])",
                    name = cap.name()
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn needs(tools: &[(&str, &'static str)], caps: &[Capability]) -> Requirements {
        Requirements {
            tools: tools.iter().map(|(p, k)| Tool::new(*p, k)).collect(),
            capabilities: caps.to_vec(),
        }
    }

    fn facts(programs: &[&str], caps: Option<u64>) -> Facts {
        Facts {
            programs: programs.iter().map(|p| (*p).to_owned()).collect(),
            effective_caps: caps,
        }
    }

    #[test]
    fn a_missing_tool_names_its_package_and_a_missing_capability_how_to_add_it() {
        let req = needs(&[("nft", "nftables")], &[Capability::NetAdmin]);
        let lines = missing("nftables mode", &req, &facts(&[], Some(0)));
        assert_eq!(
            lines,
            [
                "nftables mode needs `nft`, which is not on PATH (Debian/Ubuntu package \
                 `nftables`)",
                "nftables mode needs CAP_NET_ADMIN: run as root, or add it to the container \
                 (securityContext.capabilities.add: [NET_ADMIN])"
            ]
        );
        let ok = facts(&["nft"], Some(1 << 12));
        assert!(missing("nftables mode", &req, &ok).is_empty());
    }

    #[test]
    fn capabilities_are_not_judged_when_unreadable() {
        let req = needs(&[], &[Capability::NetAdmin, Capability::NetRaw]);
        assert!(missing("m", &req, &facts(&[], None)).is_empty());
        let lines = missing("m", &req, &facts(&[], Some(1 << 12)));
        assert_eq!(lines.len(), 1, "{lines:?}");
        assert!(lines[0].contains("CAP_NET_RAW"), "{lines:?}");
    }

    #[test]
    fn reads_the_effective_set_and_finds_programs_on_path() {
        let status = "Name:\tferry\nCapInh:\t0000000000000000\nCapEff:\t0000000000001000\n";
        assert_eq!(parse_cap_eff(status), Some(1 << 12));
        let req = needs(&[("sh", "dash"), ("no-such-program-here", "x")], &[]);
        assert_eq!(Facts::read(&req).programs, ["sh"]);
    }
}
