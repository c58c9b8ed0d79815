//! IPVS in the kernel: Ferry's own IPVS client over generic netlink ([`IpvsClient`]), links and
//! their addresses over rtnetlink ([`Links`]: the `kube-ipvs0` dummy interface), the `ipset`
//! tool ([`ipset`]) and the sysctls IPVS needs ([`sysctl`]).
//!
//! Machinery, not a mode: it knows no mode and imports none; IPVS mode composes it with the
//! iptables tool ([`crate::iptables_tool`]). Everything works in the network namespace of the
//! calling thread (IPVS tables, links and ipsets are all per namespace).

mod client;
mod genl;
pub mod ipset;
mod link;
pub mod sysctl;

use std::io;

pub use client::{Change, IpvsClient, Refused, Table};
pub use genl::LiveRealServer;
pub use link::Links;

/// Why an IPVS operation failed. Each variant prints its cause and has no `source()` (STYLE.md
/// §2.5: one or the other), so [`crate::Error::with_causes`] names it once.
#[derive(Debug, thiserror::Error)]
pub enum IpvsError {
    /// The kernel has no IPVS (no `ip_vs` module, or it cannot be loaded).
    #[error("the kernel has no IPVS (generic netlink family \"IPVS\" not found): {0}")]
    NoIpvs(io::Error),
    /// The netlink socket failed.
    #[error("netlink socket: {0}")]
    Socket(io::Error),
    /// The kernel refused a request.
    #[error("the kernel refused an IPVS request: {0}")]
    Kernel(io::Error),
    /// A reply could not be decoded.
    #[error("undecodable IPVS netlink reply: {0}")]
    Decode(String),
    /// Some changes to the IPVS table were refused (the others are done).
    #[error("{} IPVS change(s) refused, first: {}: {}", .0.len(), .0[0].change, .0[0].error)]
    Refused(Vec<Refused>),
    /// kube-ipvs0 or its addresses could not be changed.
    #[error("{what}: {error}")]
    Link {
        /// What was being done.
        what: String,
        /// The kernel's error.
        error: io::Error,
    },
    /// A tool (`ipset`) failed.
    #[error("{0} failed: {1}")]
    Tool(String, String),
    /// A sysctl could not be set.
    #[error("sysctl: {0}")]
    Sysctl(io::Error),
}
