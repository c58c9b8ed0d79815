//! The dataplane: the only part of Ferry that touches the kernel.
//!
//! Place in the data flow (source → cluster state → node view → compiler → **applier**): it
//! makes the kernel hold what the compiler's plan asks for, one atomic transaction per sync.
//! On failure nothing changes in the kernel (the last good rules stay) and the next sync is a
//! full one.
//!
//! # Two layers: machinery and modes
//! *Machinery* modules drive one kernel facility and know no proxy mode (none imports a mode):
//! - [`nft_table`]: Ferry's own nftables table (`ip ferry`, `ip6 ferry`): the skeleton through
//!   `nft -f`, dispatch chains and elements over Ferry's own nfnetlink batches, reading it back;
//! - [`iptables_tool`]: the iptables tools of either backend (restore, save, backend detection);
//! - [`ipvs_kernel`]: IPVS over generic netlink, links (`kube-ipvs0`), ipsets, sysctls;
//! - [`proxy`]: the userspace proxy engine (also the kernel modes' localhost NodePorts);
//! - [`nfacct`]: named packet counters (nfnetlink_acct) that iptables rules count into;
//! - [`conntrack`]: UDP conntrack cleanup over ctnetlink; [`cleanup`]: what a cleanup removed,
//!   and which of the two `KUBE-*` layouts ran on a node.
//!
//! *Mode* modules only compose machinery, and never import each other. Each has an
//! [`Applier`] (one per IP family: full and incremental syncs) and one line in the [`modes`]
//! table ([`mode::ModeEntry`]), which joins it with the mode's pure renderer in
//! `ferry-compile` and says how to prepare the mode on a node (what it needs there:
//! [`preflight`]), how to clean it up ([`cleanup`]), which of kube-proxy's leftovers are of its
//! kind ([`leftovers`]), how `ferry explain --live` and `ferry status` read it back ([`live`]),
//! and which metric counts its failures. The modes:
//! - [`nft`]: nftables mode, Ferry's own table plus the proxy for localhost NodePorts;
//! - [`iptables`]: only the chains of upstream kube-proxy's layout (`KUBE-SERVICES`,
//!   `KUBE-SVC-…`, …) and its jumps from the built-in chains, with `iptables-restore
//!   --noflush`, on the nft or the legacy backend;
//! - [`ipvs`]: upstream's IPVS mode: virtual servers, the `kube-ipvs0` dummy link, upstream's
//!   ipsets and the iptables chains that match them;
//! - [`userspace`]: every service port served by the userspace proxy, behind redirect rules in
//!   Ferry's table.
//!
//! How to add a mode, and the files it touches: docs/src/architecture/modes.md.
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
pub mod nfacct;
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
/// Not part of the dataplane's interface: public only for `ferry-fuzz`'s round-trip target of
/// the netlink encoder (it encodes, never sends), hidden from the docs for that reason.
#[doc(hidden)]
pub use netlink::encode_delta;
pub use netlink::NetlinkError;
pub use report::{SyncKind, SyncReport, TableRules};
