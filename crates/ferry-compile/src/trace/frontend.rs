//! Which frontend (if any) a packet meets on this node, and where it comes from: the first
//! decisions of a trace, before any service-specific step.

use std::net::IpAddr;

use ferry_model::NodeView;

use super::node_port::{self, LocalAddresses, NodePortAnswer};
use super::{step, Frontend, Origin, Packet, StepKind, Trace, Verdict};
use crate::plan::{Plan, ServicePlan};

/// "Service ns/name port p".
pub(super) fn svc_label(sp: &ServicePlan) -> String {
    let port = if sp.name.port.is_empty() {
        String::new()
    } else {
        format!(" port {}", sp.name.port)
    };
    format!("Service {}{port}", sp.name.service)
}

/// Where the packet comes from: the node itself (any of its addresses), a pod, or outside.
pub(super) fn origin(view: &NodeView, plan: &Plan, local: &LocalAddresses, src: &IpAddr) -> Origin {
    if local.has(src) {
        return Origin::ThisNode;
    }
    let pod_nets = plan
        .local
        .cidrs()
        .iter()
        .chain(view.node.iter().flat_map(|n| n.pod_cidrs.iter()));
    for net in pod_nets {
        if net.contains(src) {
            return Origin::Pod(*net);
        }
    }
    Origin::Outside
}

/// The service port and frontend the packet matches, in the rules' order: ClusterIP, external
/// IP, load-balancer IP, then NodePort where NodePorts answer.
pub(super) fn find<'a>(
    plan: &'a Plan,
    local: &LocalAddresses,
    p: &Packet,
) -> Option<(&'a ServicePlan, Frontend)> {
    let services = || {
        plan.services
            .values()
            .filter(|sp| sp.name.protocol == p.protocol)
    };
    if let Some(sp) = services().find(|sp| sp.cluster_ip == p.dst && sp.port == p.port) {
        return Some((sp, Frontend::ClusterIp));
    }
    if let Some(sp) = services().find(|sp| sp.port == p.port && sp.external_ips.contains(&p.dst)) {
        return Some((sp, Frontend::ExternalIp));
    }
    if let Some(sp) =
        services().find(|sp| sp.port == p.port && sp.load_balancer_ips.contains(&p.dst))
    {
        return Some((sp, Frontend::LoadBalancerIp));
    }
    if node_port::answer(&plan.node_ports, local, &p.dst) == NodePortAnswer::Answers {
        if let Some(sp) = services().find(|sp| sp.node_port == Some(p.port)) {
            return Some((sp, Frontend::NodePort));
        }
    }
    None
}

/// The Services that claim the packet's destination as an external or load-balancer IP with
/// its protocol and port but do not get it, said after why the matched frontend is the one
/// (`; Service dev/b also claims it …`); empty when none does.
pub(super) fn also_claimed(view: &NodeView, p: &Packet) -> String {
    let claims = view
        .services
        .values()
        .filter(|v| v.port == p.port && v.name.protocol == p.protocol)
        .flat_map(|v| {
            v.unserved.iter().filter(|u| u.ip == p.dst).map(|u| {
                format!(
                    "; Service {} also claims it ({}), which is not programmed for it: {}",
                    v.name.service,
                    u.what(),
                    u.why()
                )
            })
        });
    claims.collect()
}

/// No frontend matched: an unknown port of a ClusterIP (rejected), an unallocated address of a
/// service CIDR (dropped), a NodePort's port where the NodePort does not answer, or no service
/// at all.
pub(super) fn not_a_service(view: &NodeView, plan: &Plan, local: &LocalAddresses, t: &mut Trace) {
    let p = t.packet;
    if plan.services.values().any(|sp| sp.cluster_ip == p.dst) {
        t.verdict = Verdict::Rejected;
        t.steps.push(step(
            StepKind::UnknownPort,
            format!(
                "{} is a ClusterIP, but no service port is {}/{}",
                p.dst, p.port, p.protocol
            ),
            "traffic to unknown ports of a ClusterIP is rejected, as upstream does",
            vec![
                "chain cluster-ips-check".into(),
                format!("set cluster-ips element {}", p.dst),
            ],
        ));
        return;
    }
    if unallocated(view, plan, local, t) {
        return;
    }
    let node_port = plan
        .services
        .values()
        .find(|sp| sp.name.protocol == p.protocol && sp.node_port == Some(p.port));
    if let Some(sp) = node_port {
        let answer = node_port::answer(&plan.node_ports, local, &p.dst);
        let sview = view.services.get(&sp.name);
        if answer == NodePortAnswer::Loopback && plan.localhost_node_ports {
            super::proxied::localhost_node_port(sp, sview, t);
            return;
        }
        node_port::not_answered(sp, sview, &plan.node_ports, local, answer, t);
        return;
    }
    t.steps.push(step(
        StepKind::NotAService,
        "no Service matches this destination",
        "Ferry only translates service addresses; the packet is routed normally",
        vec!["map service-ips".into(), "map service-nodeports".into()],
    ));
}

/// An address inside a service CIDR that no Service holds: nftables mode's `cluster-ips-check`
/// drops new connections to it (forward and output hooks), as upstream's does, instead of
/// letting them be routed off the node. A local address of the node reached from elsewhere
/// takes the input hook, which that chain is not on. True when it pushed the step.
fn unallocated(view: &NodeView, plan: &Plan, local: &LocalAddresses, t: &mut Trace) -> bool {
    let p = t.packet;
    let Some(range) = plan.service_cidrs.iter().find(|n| n.contains(&p.dst)) else {
        return false;
    };
    if local.has(&p.dst) && t.origin != Origin::ThisNode {
        return false;
    }
    let objects: Vec<String> = view
        .service_cidrs
        .iter()
        .filter(|(net, _)| net.contains(&p.dst))
        .flat_map(|(net, names)| {
            names.iter().map(move |n| match net == range {
                true => n.clone(),
                false => format!("{n}: {net}"),
            })
        })
        .collect();
    let ip = crate::family::nft_family(plan.family);
    let ranges: Vec<String> = plan.service_cidrs.iter().map(ToString::to_string).collect();
    t.verdict = Verdict::Dropped;
    t.steps.push(step(
        StepKind::UnallocatedServiceIp,
        format!(
            "{} is inside service CIDR {range} (ServiceCIDR {}), but no Service holds it",
            p.dst,
            objects.join(", ")
        ),
        "new connections to an unallocated address of a service range are dropped, as \
         upstream's nftables mode does, rather than routed off the node",
        vec![
            "chain cluster-ips-check".into(),
            format!("rule {ip} daddr {{ {} }} drop", ranges.join(", ")),
        ],
    ));
    true
}

/// The trace of a mode without service-CIDR rules (`mode`: iptables, as upstream's iptables
/// and IPVS modes, which do nothing with ServiceCIDRs): an unallocated address of a service
/// CIDR is not a service, and is routed as is.
pub(super) fn unallocated_routed(t: &mut Trace, mode: &str) {
    let Some(s) = t
        .steps
        .iter_mut()
        .find(|s| s.kind == StepKind::UnallocatedServiceIp)
    else {
        return;
    };
    *s = step(
        StepKind::NotAService,
        "no Service matches this destination",
        format!(
            "{mode} mode, like upstream's, does nothing with ServiceCIDRs: an address of a \
             service range that no Service holds is routed normally"
        ),
        Vec::new(),
    );
    t.verdict = Verdict::NotAService;
}
