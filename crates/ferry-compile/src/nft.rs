//! The nftables backend: a [`Plan`](crate::Plan) rendered into Ferry's own table.
//!
//! Layout (see docs/nft-layout.md): upstream kube-proxy's base chains, dispatch verdict maps and
//! no-endpoint maps, so first-packet cost is O(1) in the number of services; but per service port
//! only one chain per endpoint set (random choice by a `numgen` cascade of DNAT rules) instead of
//! one chain per endpoint, and hairpin masquerade from one `saddr . daddr` set in postrouting
//! instead of a rule per endpoint. An endpoint change then rewrites one chain and adds no jump or
//! goto, so the kernel has no chain graph to re-validate.

mod dispatch;
mod element;
mod model;
mod names;
mod render;
mod script;
mod text;

pub use model::{BaseChain, Chain, Element, Key, Ruleset, ServiceRules, SetDef, Value, Verdict};
pub use names::{chain_base, EXTERNAL_PREFIX, LOCAL_PREFIX, SERVICE_PREFIX};
pub use render::{render, render_base, render_service, RenderContext};
pub use script::{Transaction, TABLE};

#[cfg(test)]
mod tests;
