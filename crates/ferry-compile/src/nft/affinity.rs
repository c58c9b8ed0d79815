//! `sessionAffinity: ClientIP`: pins as kernel-written map elements, in the endpoint-map layout.
//!
//! A dispatch chain of an affinity shape (`…-affinity`) first DNATs through a pin map keyed by
//! `frontend . client` (`affinity`, `nodeport-affinity`); a client without a pin falls through
//! to the usual `numgen` draw. The choice is recorded after DNAT, in `filter-prerouting-post-dnat`
//! / `filter-output-post-dnat` (dstnat + 10), where the packet carries the endpoint and conntrack
//! the frontend: `affinity-record` looks the pair `frontend . endpoint` up in
//! `affinity-service-ips` / `affinity-nodeports` — present only for affinity service ports and
//! their current endpoints — and goes to a shared chain per timeout whose
//! `update @affinity { … timeout T : endpoint }` adds the pin or refreshes its timeout. nft
//! cannot record the endpoint in the DNAT chain itself: `dnat` ends the rule evaluation, and a map
//! lookup cannot feed an `update` statement. Endpoint changes stay element-only; a pin to an
//! endpoint that went away is deleted by the applier (it reads the pin maps back).
//!
//! The pinned DNAT and the `update` are typed dispatch rules ([`RuleAction::PinnedDnat`],
//! [`RuleAction::RecordPin`]), written over netlink with the other dispatch chains;
//! `affinity-record` reads only `type` maps and is a fixed chain of the nft skeleton. The pin
//! maps are `dynamic`: a full sync's netlink batch never flushes them.

use super::slots::Frontend;
use std::net::SocketAddr;
use std::sync::Arc;

use super::model::{Chain, Element, Key, Value, Verdict};
use super::render::RenderContext;
use super::rule::{DispatchChain, DispatchRule, DnatKey, RuleAction};

/// The map holding pins of a frontend kind.
pub(crate) fn pin_map(by_node_port: bool) -> &'static str {
    if by_node_port {
        "nodeport-affinity"
    } else {
        "affinity"
    }
}

/// The map of `frontend . endpoint` pairs a pin may be recorded for.
pub(crate) fn record_map(by_node_port: bool) -> &'static str {
    if by_node_port {
        "affinity-nodeports"
    } else {
        "affinity-service-ips"
    }
}

/// `affinity-record`: runs for new DNATed connections after DNAT; sends the affinity ones to
/// the chain recording their pin.
pub(crate) fn record_chain(ip: &str) -> Chain {
    let protos = "meta l4proto { tcp, udp, sctp }";
    let endpoint = format!("{ip} daddr . th dport");
    Chain {
        name: "affinity-record".to_owned(),
        rules: vec![
            format!(
                "{protos} ct original {ip} daddr . meta l4proto . ct original proto-dst . {endpoint} vmap @{}",
                record_map(false)
            ),
            format!(
                "{protos} meta l4proto . ct original proto-dst . {endpoint} vmap @{}",
                record_map(true)
            ),
        ],
    }
}

/// The chain that adds (or refreshes) the pin of a new connection, for one timeout.
pub(crate) fn pin_chain(ctx: &RenderContext, key: DnatKey, timeout: u32) -> DispatchChain {
    let kind = match key {
        DnatKey::ServiceIp => "ip",
        DnatKey::NodePort => "nodeport",
    };
    DispatchChain {
        name: format!("affinity-{kind}-{timeout}"),
        rules: vec![DispatchRule {
            family: ctx.family,
            matches: Vec::new(),
            action: RuleAction::RecordPin {
                key,
                timeout,
                map: pin_map(key == DnatKey::NodePort),
            },
        }],
    }
}

/// The rule of an affinity dispatch chain that sends a pinned client to its endpoint.
pub(crate) fn pinned_dnat(ctx: &RenderContext, key: DnatKey) -> DispatchRule {
    DispatchRule {
        family: ctx.family,
        matches: Vec::new(),
        action: RuleAction::PinnedDnat {
            key,
            map: pin_map(key == DnatKey::NodePort),
        },
    }
}

/// Adds the chain recording pins for `frontend` with `timeout` and one `frontend . endpoint`
/// element per endpoint its traffic may reach.
pub(crate) fn record(
    ctx: &RenderContext,
    frontend: Frontend,
    endpoints: &[SocketAddr],
    timeout: u32,
    chains: &mut Vec<Arc<DispatchChain>>,
    elements: &mut Vec<Element>,
) {
    let by_node_port = matches!(frontend, Frontend::NodePort(..));
    let key = if by_node_port {
        DnatKey::NodePort
    } else {
        DnatKey::ServiceIp
    };
    let chain = pin_chain(ctx, key, timeout);
    for ep in endpoints {
        let key = match frontend {
            Frontend::Ip(a, p, port) => Key::FrontendEndpoint(a, p, port, *ep),
            Frontend::NodePort(p, port) => Key::NodePortEndpoint(p, port, *ep),
        };
        let value = Value::Verdict(Verdict::Goto(chain.name.clone()));
        elements.push(Element::new(record_map(by_node_port), key, Some(value)));
    }
    chains.push(Arc::new(chain));
}
