//! The nftables backend: a [`Plan`](crate::Plan) rendered into Ferry's own table.
//!
//! Layout (see docs/src/modes/nft-layout.md): upstream kube-proxy's base chains, dispatch verdict
//! maps and no-endpoint maps, so first-packet cost is O(1) in the number of services; endpoints are
//! map data (`frontend . slot : endpoint`, the slot drawn by `numgen random mod n`) read by a few
//! shared dispatch chains, one per shape; hairpin masquerade from one `saddr . daddr` set. An
//! endpoint change is then map elements only: no rule, so the kernel re-validates nothing.

pub(crate) mod affinity;
pub(crate) mod dispatch;
mod element;
mod model;
mod node;
mod render;
mod rule;
mod script;
mod shared;
mod slots;
mod text;

pub use model::{
    BaseChain, Chain, Element, Key, Ruleset, ServiceRules, SetDef, Value, Verdict, FILLED_LAST,
    NODE_LEVEL_SETS,
};
pub use node::NodeRules;
pub(crate) use render::{base, chain, node_port_match};
pub use render::{render, render_base, render_service, RenderContext};
pub use rule::{DispatchChain, DispatchRule, DnatKey, RuleAction, RuleMatch};
pub use script::{Delta, Transaction, TABLE};
pub use slots::{Frontend, Slots};

#[cfg(test)]
mod tests;
