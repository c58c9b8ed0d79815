//! The drills' lab: ferry-lab's scale lab (shared with `ferry-bench-e2e`): a node between a
//! client and its pods, in three network namespaces, the real `ferry run` on the node, and the
//! generated cluster it programs; plus the drills' own traffic ([`streams`], [`watch`]).
//!
//! ```text
//!  client 10.200.0.2 ──veth── 10.200.0.1 node 10.201.0.1 ──veth── 10.201.0.2 pods
//!   default via node          ferry runs here                 local 10.64.0.0/12 (AnyIP)
//! ```
//!
//! The pods namespace holds the whole pod range as one local route, so one listener answers
//! every endpoint address and says which address it was reached on. Nothing is added to the
//! namespace the drills start in: the veths are created inside the node namespace, and every
//! rule is written by the `ferry run` (or the drill's own `nft`/`iptables` commands) inside the
//! node namespace.

pub mod ruleset;
pub mod streams;
pub mod watch;

pub use ferry_lab::scale::{cluster, echo, ferry, net, probe};
pub use ferry_lab::scale::{Cluster, Endpoints, Ferry, Net};

/// Prefix of every namespace the drills create: `fdrill-<pid>-<tag>-<role>`.
pub const PREFIX: &str = "fdrill-";

/// Fresh `fdrill-<pid>-<tag>-{node,client,pods}`, wired, after deleting those of drill
/// processes that no longer run.
pub fn create_net(tag: &str) -> anyhow::Result<Net> {
    net::reap_stale(PREFIX)?;
    Net::create(PREFIX, tag)
}
