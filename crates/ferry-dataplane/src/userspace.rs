//! The userspace proxy mode (upstream's long-removed `userspace` mode): every service port is
//! served by Ferry's userspace proxy ([`crate::proxy`]), behind redirect rules in Ferry's own
//! nftables table ([`crate::nft_table`]); its line in the mode table.
//!
//! The proxy's types are re-exported here under the names the other crates have always used.

mod applier;
mod mode;
mod restore;

pub use crate::proxy::{
    ephemeral, names, CopyMode, ListenError, PortMetrics, ProxiedPort, ProxyConfig, Stats,
    SyncReport, UserspaceProxy,
};
pub(crate) use mode::MODE;
