//! The iptables tools of one backend and family: the runner ([`IptablesRunner`], run for real
//! by [`IptablesCli`]: `iptables`, `iptables-restore --noflush`, `iptables-save`), which backend
//! the host uses ([`detect_backend`]), and reading what the tools print ([`saved`]).
//!
//! Machinery, not a mode: iptables mode and IPVS mode both program the kernel through it (as
//! upstream's proxiers share `pkg/util/iptables`), and it imports neither.

use ferry_model::IpFamily;

mod detect;
mod runner;
pub(crate) mod saved;

pub use detect::{choose as choose_backend, detect as detect_backend};
#[cfg(test)]
pub(crate) use runner::count_rules;
pub use runner::{IptablesCli, IptablesRunner};

/// Which iptables the host uses: the nf_tables-based one or the legacy (x_tables) one. Both
/// can be installed side by side; rules in one are invisible to the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum IptablesBackend {
    /// `iptables-nft` (`iptables` on current distributions).
    Nft,
    /// `iptables-legacy`.
    Legacy,
}

impl IptablesBackend {
    /// Both backends.
    pub const ALL: [IptablesBackend; 2] = [IptablesBackend::Nft, IptablesBackend::Legacy];

    /// `nft` or `legacy`.
    pub fn as_str(self) -> &'static str {
        match self {
            IptablesBackend::Nft => "nft",
            IptablesBackend::Legacy => "legacy",
        }
    }

    /// The program for `tool` (`""`, `"-save"`, `"-restore"`): `iptables-nft-restore`, ….
    pub fn program(self, tool: &str) -> String {
        self.program_for(IpFamily::V4, tool)
    }

    /// The program for `tool` of `family`'s tools: `ip6tables-nft-restore` for IPv6, ….
    pub fn program_for(self, family: IpFamily, tool: &str) -> String {
        let base = ferry_compile::family::iptables_tool(family);
        format!("{base}-{}{tool}", self.as_str())
    }
}
