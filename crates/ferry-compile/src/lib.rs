//! Ferry's rule compiler.
//!
//! Place in the data flow (source → cluster state → node view → **compile** → applier): a
//! [`NodeView`](ferry_model::NodeView) and a [`CompileConfig`] become a backend-neutral
//! [`Plan`] (what each service port's traffic must do: forward to which endpoint set, masquerade
//! when, drop or reject), and the plan is rendered into a backend's desired state
//! ([`nft::Ruleset`]) and into the text transactions that install it ([`nft::script`]).
//!
//! Everything here is pure and deterministic: the same input gives byte-identical output, so
//! golden files and diffs mean something. It must never do I/O.

pub mod config;
pub mod conntrack;
pub mod iptables;
pub mod ipvs;
pub mod nft;
mod node;
pub mod plan;
pub mod trace;

pub use config::{CompileConfig, NodePortAddresses};
pub use node::NodeCompiler;
#[cfg(test)]
mod load_balancer_tests;

pub use plan::{ClusterIpMasquerade, Dispatch, EndpointSet, External, Plan, ServicePlan};
