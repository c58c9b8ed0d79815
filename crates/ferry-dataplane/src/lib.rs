//! The dataplane: the only part of Ferry that touches the kernel.
//!
//! Place in the data flow (source → cluster state → node view → compiler → **applier**): it
//! makes the kernel hold what the compiler's plan asks for, one atomic transaction per sync.
//! On failure nothing changes in the kernel (the last good rules stay) and the next sync is a
//! full one.
//!
//! # The mode seam
//! Every proxy mode is one module here with an [`Applier`] (one per IP family: full and
//! incremental syncs) and one line in the [`modes`] table ([`mode::ModeEntry`]), which joins it with the mode's pure
//! renderer in `ferry-compile` and says how to prepare the mode on a node (what it needs there:
//! [`preflight`]), how to clean it up ([`cleanup`]), which of kube-proxy's leftovers are of
//! its kind ([`leftovers`]), how `ferry explain --live` and `ferry status` read it back
//! ([`live`]), and which metric counts its failures. The binary
//! asks the table and never matches on the mode. Modes:
//! - [`nft`]: Ferry's own table (`ip ferry`, `ip6 ferry`): the skeleton through `nft -f`,
//!   dispatch chains and elements over Ferry's own nfnetlink batches;
//! - [`iptables`]: only the chains of upstream kube-proxy's layout (`KUBE-SERVICES`,
//!   `KUBE-SVC-…`, …) and its jumps from the built-in chains, with `iptables-restore
//!   --noflush`, on the nft or the legacy backend;
//! - [`ipvs`]: upstream's IPVS mode: virtual servers over Ferry's own generic netlink client,
//!   the `kube-ipvs0` dummy link, upstream's ipsets and the chains that match them.
//!
//! Errors ([`Error`]) and reports ([`SyncReport`]) are the same for every mode. It never
//! touches anything a mode does not own, except that after a sync it deletes the UDP
//! conntrack entries the compiler found stale ([`conntrack`]), as kube-proxy does.

pub mod addresses;
mod applier;
pub mod cleanup;
pub mod conntrack;
mod error;
pub mod iptables;
pub mod iptables_tool;
pub mod ipvs;
pub mod ipvs_kernel;
pub mod leftovers;
pub mod live;
pub mod mode;
pub mod modes;
mod netlink;
pub mod nft;
pub mod nft_table;
pub mod preflight;
pub mod proxy;
mod report;
pub mod support;
pub mod sysctls;
pub mod userspace;

pub use applier::Applier;
pub use error::Error;
pub use netlink::{encode_delta, NetlinkError};
pub use report::{SyncKind, SyncReport, TableRules};
