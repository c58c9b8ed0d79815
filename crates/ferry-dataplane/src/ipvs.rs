//! IPVS mode's kernel half: Ferry's own IPVS client over generic netlink ([`IpvsClient`]), the
//! `kube-ipvs0` dummy interface ([`Links`]), upstream's ipsets ([`ipset`]), the sysctls upstream
//! sets ([`sysctl`]), and the applier that keeps all of them, plus the iptables chains of IPVS
//! mode, equal to the compiler's desired state ([`IpvsApplier`]); its line in the mode table,
//! its cleanup and its `explain --live` reading. See docs/ipvs.md.
//!
//! Everything works in the network namespace of the calling thread (IPVS tables, links,
//! ipsets and iptables are all per namespace).

mod applier;
mod cleanup;
mod client;
mod genl;
pub mod ipset;
mod jumps;
mod link;
mod live;
mod mode;
mod node;
mod set_counts;
mod sync;
pub mod sysctl;

use std::io;

use ferry_compile::mode::{IpvsRenderer, ProxyMode};

use crate::mode::{FailureCounter, ModeEntry, ModeOptions};

pub use applier::{IpvsApplier, IpvsReport};
pub(crate) use cleanup::ipvs_mode_ran;
pub use cleanup::{cleanup, leftovers};
pub use client::{Change, IpvsClient, Refused, Table};
pub use genl::LiveRealServer;
pub use link::Links;
pub use node::local_addresses;

/// IPVS mode's line in the mode table. Failed syncs count as upstream counts them in IPVS
/// mode: as `iptables-restore` failures.
pub(crate) const MODE: ModeEntry = ModeEntry {
    mode: ProxyMode::Ipvs,
    renderer: &IpvsRenderer,
    open: |options: &ModeOptions| Box::new(mode::IpvsMode::open(options)),
    cleanup,
    leftovers,
    sync_failures: FailureCounter::IptablesRestore,
    writes_iptables: true,
};

/// Why an IPVS-mode operation failed.
#[derive(Debug, thiserror::Error)]
pub enum IpvsError {
    /// The kernel has no IPVS (no `ip_vs` module, or it cannot be loaded).
    #[error("the kernel has no IPVS (generic netlink family \"IPVS\" not found): {0}")]
    NoIpvs(#[source] io::Error),
    /// The netlink socket failed.
    #[error("netlink socket: {0}")]
    Socket(#[source] io::Error),
    /// The kernel refused a request.
    #[error("the kernel refused an IPVS request: {0}")]
    Kernel(#[source] io::Error),
    /// A reply could not be decoded.
    #[error("undecodable IPVS netlink reply: {0}")]
    Decode(String),
    /// Some changes to the IPVS table were refused (the others are done).
    #[error("{} IPVS change(s) refused, first: {}: {}", .0.len(), .0[0].change, .0[0].error)]
    Refused(Vec<Refused>),
    /// kube-ipvs0 or its addresses could not be changed.
    #[error("{what}: {source}")]
    Link {
        /// What was being done.
        what: String,
        /// The kernel's error.
        #[source]
        source: io::Error,
    },
    /// A tool (`ipset`) failed.
    #[error("{0} failed: {1}")]
    Tool(String, String),
    /// A sysctl could not be set.
    #[error("sysctl: {0}")]
    Sysctl(#[source] io::Error),
}
