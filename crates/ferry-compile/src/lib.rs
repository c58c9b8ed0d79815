//! Ferry's rule compiler.
//!
//! Place in the data flow (source → cluster state → node view → **compile** → applier): a
//! [`NodeView`](ferry_model::NodeView) and a [`CompileConfig`] become a mode-neutral [`Plan`]
//! (what each service port's traffic must do: forward to which endpoint set, masquerade when,
//! drop or reject), compiled for a node by [`NodeCompiler`] (whole, or one service at a time
//! for incremental syncs). Each proxy mode then renders the plan into its own objects.
//!
//! # The mode seam
//! [`mode`] holds [`ProxyMode`](mode::ProxyMode) and the [`Renderer`](mode::Renderer) trait:
//! a mode's pure half, which turns a node's plan into the text `ferry rules` prints and names
//! the mode's objects in [`trace`]s ([`mode::NftRenderer`], [`mode::IptablesRenderer`],
//! [`mode::IpvsRenderer`], [`mode::UserspaceRenderer`]). Each mode renders its rules in one
//! module here:
//! - [`nft`]: nftables, Ferry's own table (`ip ferry` / `ip6 ferry`) and its transactions
//!   ([`nft::Transaction`], [`nft::Delta`]);
//! - [`iptables`]: upstream kube-proxy's iptables layout, as `iptables-restore` input;
//! - [`ipvs`]: upstream kube-proxy's IPVS mode: virtual servers, kube-ipvs0's addresses,
//!   upstream's ipsets and the chains that match them;
//! - [`userspace`]: the userspace mode's redirect rules, in Ferry's own table as an
//!   [`nft::Ruleset`], and the proxy ports they send service traffic to.
//!
//! The kernel half of each mode (its applier) lives in `ferry-dataplane`, whose mode table
//! joins both halves. A new mode is a module here with its rendering and a renderer in
//! [`mode`], a module there composing the kernel machinery, and one line in that table
//! (docs/src/architecture/modes.md lists every file it touches).
//!
//! Everything here is pure and deterministic: the same input gives byte-identical output, so
//! golden files and diffs mean something. It must never do I/O.

pub mod config;
pub mod conntrack;
pub mod family;
pub mod iptables;
pub mod ipvs;
pub mod local;
pub mod mode;
pub mod nft;
mod node;
pub mod plan;
pub mod trace;
pub mod userspace;

pub use config::{CompileConfig, NfacctCounters, NodePortAddresses};
pub use node::NodeCompiler;
#[cfg(test)]
mod load_balancer_tests;
#[cfg(test)]
mod service_cidr_tests;

pub use plan::{ClusterIpMasquerade, Dispatch, EndpointSet, External, Plan, ServicePlan};
