//! Trace steps of the filter chains that run before DNAT (dstnat - 10): the load-balancer
//! firewall (`loadBalancerSourceRanges`), for every source, the node's own traffic included
//! (upstream's `filter-output-pre-dnat`).

use super::{step, Origin, Packet, StepKind, Trace, Verdict};
use crate::nft::Key;
use crate::plan::{Dispatch, ServicePlan};

/// `loadBalancerSourceRanges`, checked before DNAT (filter-prerouting / filter-output).
/// Returns false when the packet is dropped (the trace is complete then).
pub(super) fn firewall(sp: &ServicePlan, p: &Packet, origin: &Origin, t: &mut Trace) -> bool {
    let Some(fw) = &sp.firewall else { return true };
    let no_endpoints = sp.external.as_ref().map(|e| e.dispatch) == Some(Dispatch::Reject);
    let hook = if *origin == Origin::ThisNode {
        "filter-output"
    } else {
        "filter-prerouting"
    };
    let frontend = format!("{} . {} . {}", p.dst, p.protocol, p.port);
    let ranges = fw
        .allowed
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let mut objects = vec![
        format!("chain {hook} → firewall-check"),
        format!("set firewall-ips element {frontend}"),
        "chain firewall-allow-check".to_owned(),
    ];
    if let Some(allowed) = fw.allowed.iter().find(|n| n.contains(&p.src)) {
        let key = Key::FrontendSource(p.dst, p.protocol, p.port, *allowed);
        objects.push(format!("set firewall-allow element {key}"));
        t.steps.push(step(
            StepKind::FirewallAllowed,
            format!("allowed by loadBalancerSourceRanges ({allowed})"),
            format!("only these sources may reach the load-balancer IP: {ranges}"),
            objects,
        ));
        return true;
    }
    objects.push(format!("set firewall-allow (no element for {})", p.src));
    t.steps.push(step(
        StepKind::FirewallDropped,
        format!(
            "dropped: the source is not in loadBalancerSourceRanges of {} (load-balancer IP {})",
            sp.name, p.dst
        ),
        format!(
            "only these sources may reach the load-balancer IP: {ranges}; the rest is dropped \
             before DNAT (the client times out)"
        ),
        objects,
    ));
    t.verdict = Verdict::Dropped;
    t.firewall_without_endpoints = no_endpoints;
    false
}

impl Trace {
    /// iptables mode (as upstream's) has no `KUBE-FW-` chain for a service without endpoints:
    /// a source the nftables firewall drops is rejected like every other one.
    pub(super) fn reject_without_firewall(&mut self) {
        if !self.firewall_without_endpoints {
            return;
        }
        // No KUBE-FW- chain without endpoints (upstream iptables mode): rejected.
        self.steps.retain(|s| s.kind != StepKind::FirewallDropped);
        self.steps.push(step(
            StepKind::Rejected,
            "rejected: the service has no ready (or serving terminating) endpoint anywhere",
            "iptables mode has no load-balancer firewall for a service without endpoints; \
             every client gets \"connection refused\"",
            Vec::new(),
        ));
        self.verdict = Verdict::Rejected;
    }
}
