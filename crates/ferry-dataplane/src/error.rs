//! Why a sync (or a read of the kernel) failed, in any mode. The kernel holds what it held
//! before.
//!
//! A variant prints its cause or returns it as `source()`, never both (STYLE.md §2.5), so
//! [`Error::with_causes`] names each cause once: Ferry's own errors (netlink, IPVS) are printed
//! whole by the variant that wraps them; an operating-system error (a tool that could not be
//! started, the interface addresses) is the variant's source.

use crate::ipvs_kernel::IpvsError;
use crate::netlink::NetlinkError;

/// Why a transaction was not applied, or the kernel could not be read.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A tool (`nft`, `iptables-restore` …) could not be started.
    #[error("could not run {program}")]
    Spawn {
        /// The program.
        program: String,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// An incremental sync was asked for before any full sync succeeded.
    #[error("no full sync has succeeded yet; an incremental sync has nothing to start from")]
    NoBaseline,
    /// No netlink socket is open.
    #[error("no nfnetlink socket")]
    NoNetlink,
    /// The kernel rejected a batch sent over netlink.
    #[error("netlink batch failed: {0}")]
    Netlink(NetlinkError),
    /// IPVS mode: the IPVS table, kube-ipvs0, the ipsets or a sysctl could not be changed or
    /// read.
    #[error(transparent)]
    Ipvs(#[from] IpvsError),
    /// The node's addresses could not be read from its interfaces.
    #[error("could not read this node's interface addresses")]
    Addresses(#[source] nix::errno::Errno),
    /// A tool rejected the transaction (or a listing failed).
    #[error("{program} failed ({status}): {stderr}")]
    Rejected {
        /// The program and its mode of use (`nft -f -`).
        program: String,
        /// Its exit status.
        status: String,
        /// What it printed.
        stderr: String,
    },
    /// A cleanup could not remove a chain: a rule of a chain it does not remove (not a
    /// built-in one, whose jumps it removes) still jumps to it.
    #[error(
        "{tool}: cannot remove {table} chain {chain}: a rule of a chain that is neither Ferry's \
         nor kube-proxy's jumps to it (`{rule}`); the {table} table was left as it was: remove \
         that rule, then run the cleanup again"
    )]
    StillReferenced {
        /// The tool (`iptables-nft`).
        tool: String,
        /// The table.
        table: String,
        /// The chain that could not go.
        chain: String,
        /// The rule jumping to it, as `iptables-save` prints it.
        rule: String,
    },
}

impl From<NetlinkError> for Error {
    fn from(e: NetlinkError) -> Self {
        Error::Netlink(e)
    }
}

impl Error {
    /// The error and its causes, for a log line: `could not run nft: No such file or directory
    /// (os error 2)`.
    pub fn with_causes(&self) -> String {
        let mut out = self.to_string();
        let mut cause = std::error::Error::source(self);
        while let Some(c) = cause {
            out.push_str(": ");
            out.push_str(&c.to_string());
            cause = c.source();
        }
        out
    }
}

#[cfg(test)]
mod tests;
