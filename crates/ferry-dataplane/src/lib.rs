//! The dataplane: the only part of Ferry that touches the kernel.
//!
//! Place in the data flow (source → cluster state → node view → compiler → **applier**): it
//! takes the compiler's rulesets and transactions and makes the kernel hold them, one atomic
//! transaction per sync. On failure nothing changes in the kernel (the last good rules stay) and
//! the next sync is a full one.
//!
//! In nftables mode it owns only Ferry's table (`ip ferry`, `ip6 ferry`); in iptables mode
//! only the chains of upstream kube-proxy's layout (`KUBE-SERVICES`, `KUBE-SVC-…`, …) and its
//! jumps from the built-in chains. It never touches anything else, except that after a sync it
//! deletes the UDP conntrack entries the compiler found stale ([`conntrack`]), as kube-proxy does.

pub mod conntrack;
pub mod iptables;
pub mod ipvs;
mod netlink;
mod nft;
mod pins;
mod read_back;
pub mod support;

pub use nft::{cleanup, ApplyError, NftCli, NftDataplane, NftRunner, SyncKind, SyncReport};
pub use read_back::{read_back, read_back_iptables, read_back_iptables_of, LiveTable};
