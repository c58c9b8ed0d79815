//! Where NodePorts answer: on this node's own addresses (`fib daddr type local`, `-m addrtype
//! --dst-type LOCAL`) that the plan's [`NodePortScope`] opens, never on loopback. Offline the
//! node's addresses are its Node object's plus those the user declares (`--node-address`);
//! `ferry explain --live` reads them from the node's interfaces instead.
//!
//! A packet to a NodePort's port on an address where it does not answer is not translated:
//! this module says why (the node lacks the address, nodePortAddresses leave it out, or it is
//! loopback), and what iptables mode's filter does with it (upstream's `KUBE-EXTERNAL-SERVICES`
//! drops or rejects a NodePort of a service without (local) endpoints on every local address).

use std::net::IpAddr;

use ferry_model::{IpFamily, NodeView, ServicePortView};

use super::steps::candidates;
use super::{step, svc_label, StepKind, Trace, Verdict};
use crate::plan::{Dispatch, EndpointSet, NodePortScope, ServicePlan};

/// The node's addresses, as the caller knows them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeAddresses {
    /// Offline: the Node object's `status.addresses`, plus these (`--node-address`).
    Declared(Vec<IpAddr>),
    /// Read from the node's interfaces (`--live`): exactly these (and loopback).
    Live(Vec<IpAddr>),
}

impl Default for NodeAddresses {
    fn default() -> Self {
        NodeAddresses::Declared(Vec::new())
    }
}

/// The node's addresses of the traced family, each with where it was learnt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct LocalAddresses {
    addrs: Vec<(IpAddr, &'static str)>,
    live: bool,
}

impl LocalAddresses {
    pub(super) fn new(view: &NodeView, given: &NodeAddresses, family: IpFamily) -> Self {
        let (mut addrs, live): (Vec<(IpAddr, &'static str)>, bool) = match given {
            NodeAddresses::Live(ips) => (ips.iter().map(|ip| (*ip, "interface")).collect(), true),
            NodeAddresses::Declared(extra) => {
                let object = view.node.iter().flat_map(|n| n.addresses.iter());
                let declared = object.map(|a| (a.address, "Node object"));
                let extra = extra.iter().map(|ip| (*ip, "--node-address"));
                (declared.chain(extra).collect(), false)
            }
        };
        addrs.retain(|(ip, _)| IpFamily::of(ip) == family && !ip.is_loopback());
        let mut seen = Vec::new();
        addrs.retain(|(ip, _)| {
            let new = !seen.contains(ip);
            seen.push(*ip);
            new
        });
        Self { addrs, live }
    }

    /// Whether the node has `ip` (every loopback address is local).
    pub(super) fn has(&self, ip: &IpAddr) -> bool {
        ip.is_loopback() || self.addrs.iter().any(|(a, _)| a == ip)
    }

    /// "10.1.1.9 (Node object), 10.1.1.19 (--node-address)", or how to declare some.
    fn describe(&self) -> String {
        if self.live {
            let ips: Vec<String> = self.addrs.iter().map(|(ip, _)| ip.to_string()).collect();
            return match ips.is_empty() {
                true => "none besides loopback on its interfaces".to_owned(),
                false => format!("{} (its interfaces)", ips.join(", ")),
            };
        }
        let each: Vec<String> = self
            .addrs
            .iter()
            .map(|(ip, from)| format!("{ip} ({from})"))
            .collect();
        let known = match each.is_empty() {
            true => "none known".to_owned(),
            false => each.join(", "),
        };
        format!("{known}; --node-address declares another, --live reads them from its interfaces")
    }
}

/// Whether a NodePort answers on a destination address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodePortAnswer {
    /// A local address the plan opens NodePorts on.
    Answers,
    /// The node does not have this address.
    NotLocal,
    /// A loopback address: the kernel rules never open NodePorts there (that would need
    /// `route_localnet`, CVE-2020-8558). When Ferry's userspace proxy serves localhost
    /// NodePorts (`Plan::localhost_node_ports`), the trace says "served by Ferry's userspace
    /// proxy" instead.
    Loopback,
    /// A local address outside the plan's scope (`nodePortAddresses`).
    OutOfScope,
}

/// Whether a NodePort answers on `dst`, per the plan's scope and the node's addresses.
pub(super) fn answer(
    scope: &NodePortScope,
    local: &LocalAddresses,
    dst: &IpAddr,
) -> NodePortAnswer {
    if dst.is_loopback() {
        return NodePortAnswer::Loopback;
    }
    if !local.has(dst) {
        return NodePortAnswer::NotLocal;
    }
    match scope {
        NodePortScope::AllLocal => NodePortAnswer::Answers,
        NodePortScope::LocalWithin(nets) if nets.iter().any(|n| n.contains(dst)) => {
            NodePortAnswer::Answers
        }
        NodePortScope::LocalWithin(_) => NodePortAnswer::OutOfScope,
    }
}

/// The packet's port is `sp`'s NodePort, which does not answer on its destination: nothing
/// translates the packet. In iptables mode a NodePort without (local) endpoints is still
/// filtered on every local address: that outcome is kept as the iptables variant.
pub(super) fn not_answered(
    sp: &ServicePlan,
    sview: Option<&ServicePortView>,
    scope: &NodePortScope,
    local: &LocalAddresses,
    answer: NodePortAnswer,
    t: &mut Trace,
) {
    let p = t.packet;
    let node_port = format!("NodePort {}/{} of {}", p.port, p.protocol, svc_label(sp));
    let (what, why) = match answer {
        NodePortAnswer::Answers => return,
        NodePortAnswer::NotLocal => (
            format!(
                "{} is not an address of node {}, so {node_port} does not answer there",
                p.dst, t.node
            ),
            format!(
                "NodePorts answer only on the node's own addresses; this node's: {}. The packet \
                 is routed on as it is",
                local.describe()
            ),
        ),
        // Not served on localhost (served ones never get here: see `proxied`).
        NodePortAnswer::Loopback => (
            format!("{node_port} is not opened on localhost ({})", p.dst),
            "opening NodePorts on loopback would need route_localnet (CVE-2020-8558), so the \
             rules leave it out; Ferry's userspace proxy serves localhost NodePorts instead when \
             asked to (iptables.localhostNodePorts, nftables.localhostNodePorts)"
                .to_owned(),
        ),
        NodePortAnswer::OutOfScope => (
            format!(
                "{} is an address of this node, but {node_port} does not answer on it",
                p.dst
            ),
            format!("NodePorts answer only on {}", scope_text(scope)),
        ),
    };
    t.service = Some(sp.name.clone());
    t.verdict = Verdict::NotAService;
    let objects = nft_objects(scope, answer, &p.dst);
    t.steps
        .push(step(StepKind::NodePortNotHere(answer), what, why, objects));
    if answer == NodePortAnswer::NotLocal {
        return;
    }
    // iptables mode filters before delivery: its variant ends there.
    t.iptables_variant = filtered_anyway(sp, sview, t).map(Box::new);
    t.steps.push(step(
        StepKind::DeliveredLocally,
        format!(
            "delivered to the node itself, untranslated, on port {}",
            p.port
        ),
        "no rule translates it; the node refuses the connection unless a process there \
         listens on that port",
        Vec::new(),
    ));
}

fn scope_text(scope: &NodePortScope) -> String {
    match scope {
        NodePortScope::AllLocal => "every local address but loopback".to_owned(),
        NodePortScope::LocalWithin(nets) if nets.is_empty() => {
            "no address of this family (nodePortAddresses)".to_owned()
        }
        NodePortScope::LocalWithin(nets) => {
            let nets: Vec<String> = nets.iter().map(ToString::to_string).collect();
            format!("local addresses in {} (nodePortAddresses)", nets.join(", "))
        }
    }
}

/// Why the `service-nodeports` rule of chain `services` does not match.
fn nft_objects(scope: &NodePortScope, answer: NodePortAnswer, dst: &IpAddr) -> Vec<String> {
    let rule = "chain services (its service-nodeports rule";
    let loopback = match dst {
        IpAddr::V4(_) => "127.0.0.0/8",
        IpAddr::V6(_) => "::1",
    };
    vec![match answer {
        NodePortAnswer::NotLocal => format!("{rule} needs fib daddr type local)"),
        NodePortAnswer::Loopback if scope.covers_loopback() => {
            format!("{rule} excludes {loopback})")
        }
        _ => format!("set nodeport-ips (no element for {dst})"),
    }]
}

/// iptables mode: `KUBE-EXTERNAL-SERVICES` drops (no local endpoint) or rejects (no endpoint)
/// new connections to the NodePort on every local address, loopback included, whatever
/// nodePortAddresses says (upstream's rule matches `-m addrtype --dst-type LOCAL`). `None`
/// when the service has endpoints to forward to.
fn filtered_anyway(sp: &ServicePlan, sview: Option<&ServicePortView>, t: &Trace) -> Option<Trace> {
    let dispatch = sp.external.as_ref()?.dispatch;
    let (verdict, set, what, without) = match dispatch {
        Dispatch::Drop => (
            Verdict::Dropped,
            Some(EndpointSet::Local),
            "dropped: externalTrafficPolicy Local and no endpoint on this node",
            "local endpoints",
        ),
        Dispatch::Reject => (
            Verdict::Rejected,
            None,
            "rejected: the service has no ready (or serving terminating) endpoint anywhere",
            "endpoints",
        ),
        Dispatch::Forward(_) => return None,
    };
    let mut variant = t.clone();
    variant.candidates = candidates(sview, set);
    variant.verdict = verdict;
    variant.steps.push(step(
        StepKind::LocalAddressFilter,
        what,
        format!(
            "iptables mode (as upstream's) filters the NodePort of a service without {without} \
             on every local address, whatever nodePortAddresses say"
        ),
        Vec::new(),
    ));
    Some(variant)
}

#[cfg(test)]
mod tests;
