//! `trace`: where does the first packet of a new connection go on this node, and why?
//!
//! Computed from the same [`Plan`] and [`NodeView`] the dataplane is rendered from — not from a
//! second implementation of the rules — so `ferry explain` agrees with what the kernel does.
//! Each step names the decision (frontend, policy, endpoint set, masquerade, verdict), the
//! Kubernetes rule behind it, and the nftables objects that implement it, so the user can check
//! them with `nft list …`.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use ipnet::IpNet;

use ferry_model::{NodeView, Protocol, ServicePortName, TargetRef};

use crate::nft::{Key, Ruleset};
use crate::plan::{EndpointSet, Plan};

mod affinity;
mod frontend;
mod iptables;
mod ipvs;
mod masquerade;
mod node_port;
mod pre_dnat;
mod proxied;
mod steps;
mod text;
mod topology;
mod userspace;

use frontend::svc_label;
pub use ipvs::EMPTY_VIRTUAL_SERVER;
pub use masquerade::{Masquerade, Target, HAIRPIN};
pub use node_port::{NodeAddresses, NodePortAnswer};
use pre_dnat::firewall;
pub use proxied::PROXIED;
pub use steps::candidates;
use steps::{external, internal, Objects};
pub use topology::note as topology_note;

/// The first packet of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// Destination port.
    pub port: u16,
    /// Protocol.
    pub protocol: Protocol,
}

/// Where the packet comes from, as far as Kubernetes' rules care.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Origin {
    /// The node itself (one of its addresses): takes the output hook.
    ThisNode,
    /// A pod, per the local-traffic detector (cluster CIDR or this node's pod CIDR).
    Pod(IpNet),
    /// Anything else: a client outside the cluster (or a source the detector cannot place).
    Outside,
}

/// How the packet reached a service.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Frontend {
    /// The ClusterIP.
    ClusterIp,
    /// A node port on one of this node's addresses.
    NodePort,
    /// An external IP.
    ExternalIp,
    /// A load-balancer IP (`status.loadBalancer.ingress[].ip`).
    LoadBalancerIp,
}

/// One candidate endpoint, in or out of the set used, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Endpoint address.
    pub addr: SocketAddr,
    /// Its node.
    pub node: Option<String>,
    /// `None` when it may receive the packet; otherwise why not.
    pub excluded: Option<String>,
    /// Excluded because it is not ready (`excluded` says `not ready`): a caller that knows why
    /// (a readiness probe's results) may say so instead.
    pub not_ready: bool,
    /// Its `targetRef` (the Pod behind it), when the slice names one.
    pub target: Option<TargetRef>,
    /// What a caller adds from what the compiler cannot know (a readiness probe's state),
    /// shown under the endpoint.
    pub note: Option<String>,
}

/// The outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// DNATed to one of `targets`, chosen at random with equal probability.
    Forwarded {
        /// The endpoints it may go to, each with whether the connection is then masqueraded.
        targets: Vec<Target>,
    },
    /// Silently dropped (the client times out).
    Dropped,
    /// Rejected: ICMP port unreachable, the client sees "connection refused".
    Rejected,
    /// No service matches: Ferry leaves the packet alone.
    NotAService,
}

/// What a step is, so each backend can name its own objects for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StepKind {
    /// The service dispatch matched a frontend.
    Dispatch,
    /// Marked for masquerade.
    Masquerade,
    /// Pod or node traffic skips the Local policy.
    ShortCircuit,
    /// The source is allowed by `loadBalancerSourceRanges`.
    FirewallAllowed,
    /// The source is not allowed by `loadBalancerSourceRanges`: dropped before DNAT.
    FirewallDropped,
    /// Session affinity: a pinned client goes back to its endpoint (set, timeout in seconds).
    Affinity(EndpointSet, u32),
    /// DNAT to one endpoint of a set.
    Forward(EndpointSet),
    /// Ferry's userspace proxy connects to one endpoint of a set (userspace mode, localhost
    /// NodePorts).
    Proxied(EndpointSet),
    /// A NodePort on loopback, served by Ferry's userspace proxy.
    LocalhostNodePort,
    /// Hairpin: masqueraded if the endpoint is the sender.
    Hairpin,
    /// The port is a NodePort, but it does not answer on the destination address.
    NodePortNotHere(NodePortAnswer),
    /// iptables mode's filter drops or rejects a NodePort without (local) endpoints on any
    /// local address, even where the NodePort does not answer.
    LocalAddressFilter,
    /// Not translated, and addressed to the node: delivered to it.
    DeliveredLocally,
    /// Dropped for lack of a local endpoint.
    Dropped,
    /// Rejected for lack of any endpoint.
    Rejected,
    /// A ClusterIP, but not a service port: rejected.
    UnknownPort,
    /// Inside a service CIDR, but no Service's ClusterIP: dropped (nftables mode).
    UnallocatedServiceIp,
    /// Not a service.
    NotAService,
}

/// One step of the explanation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    /// What kind of step.
    pub kind: StepKind,
    /// What happens.
    pub what: String,
    /// Why (the Kubernetes rule).
    pub why: String,
    /// The mode's objects involved, as its tools name them (`nft list`, `iptables -vnL`).
    pub objects: Vec<String>,
}

/// The whole explanation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trace {
    /// The packet.
    pub packet: Packet,
    /// The node.
    pub node: String,
    /// Where it comes from.
    pub origin: Origin,
    /// The service port it matched.
    pub service: Option<ServicePortName>,
    /// Through which frontend.
    pub frontend: Option<Frontend>,
    /// The steps, in packet order.
    pub steps: Vec<Step>,
    /// What the steps' objects are (`nft`, `iptables`): the label they are printed with.
    pub objects_label: &'static str,
    /// Every endpoint of the service port with why it is in or out.
    pub candidates: Vec<Candidate>,
    /// The outcome; a forwarded (or proxied) connection says per target whether it is
    /// masqueraded
    /// ([`Trace::masquerade`] sums it up).
    pub verdict: Verdict,
    /// The load-balancer firewall dropped a packet of a service without any endpoint. In
    /// iptables mode (as upstream's) such a service has no `KUBE-FW-` chain, so the packet is
    /// rejected like every other packet to it.
    pub firewall_without_endpoints: bool,
    /// Where the iptables backend sends the packet when it differs from nftables (the node's
    /// own traffic to an external IP of a Local-policy service without local endpoints).
    pub iptables_variant: Option<Box<Trace>>,
}

fn step(
    kind: StepKind,
    what: impl Into<String>,
    why: impl Into<String>,
    objects: Vec<String>,
) -> Step {
    Step {
        kind,
        what: what.into(),
        why: why.into(),
        objects,
    }
}

/// Traces `packet` through what this node programs, the node's addresses being its Node
/// object's.
pub fn trace(view: &NodeView, plan: &Plan, ruleset: &Ruleset, packet: Packet) -> Trace {
    trace_at(view, plan, ruleset, packet, &NodeAddresses::default())
}

/// Traces `packet` through what this node programs, the node having `addresses` (where its
/// NodePorts may answer, and which sources are the node itself).
pub fn trace_at(
    view: &NodeView,
    plan: &Plan,
    ruleset: &Ruleset,
    packet: Packet,
    addresses: &NodeAddresses,
) -> Trace {
    let local = node_port::LocalAddresses::new(view, addresses, plan.family);
    let origin = frontend::origin(view, plan, &local, &packet.src);
    let hook = match origin {
        Origin::ThisNode => "nat-output",
        _ => "nat-prerouting",
    };
    let mut t = Trace {
        packet,
        node: view.context.node_name.clone(),
        origin: origin.clone(),
        service: None,
        frontend: None,
        steps: Vec::new(),
        objects_label: "nft",
        candidates: Vec::new(),
        verdict: Verdict::NotAService,
        firewall_without_endpoints: false,
        iptables_variant: None,
    };
    let Some((sp, frontend)) = frontend::find(plan, &local, &packet) else {
        frontend::not_a_service(view, plan, &local, &mut t);
        return t;
    };
    t.service = Some(sp.name.clone());
    t.frontend = Some(frontend);
    let (map, frontend_key) = match frontend {
        Frontend::NodePort => (
            "service-nodeports",
            Key::NodePort(packet.protocol, packet.port),
        ),
        _ => (
            "service-ips",
            Key::Frontend(packet.dst, packet.protocol, packet.port),
        ),
    };
    let objs = Objects {
        rules: ruleset.services.get(&sp.name.service),
        by_node_port: frontend == Frontend::NodePort,
        key: frontend_key,
        dispatch_map: map,
    };
    // The load-balancer firewall runs before DNAT (filter hooks at dstnat - 10).
    if frontend == Frontend::LoadBalancerIp && !firewall(sp, &packet, &origin, &mut t) {
        return t;
    }
    let what = match frontend {
        Frontend::ClusterIp => format!(
            "matches the ClusterIP of {} (port {})",
            svc_label(sp),
            sp.port
        ),
        Frontend::NodePort => format!(
            "matches NodePort {}/{} of {}",
            packet.port,
            packet.protocol,
            svc_label(sp)
        ),
        Frontend::ExternalIp => format!("matches external IP {} of {}", packet.dst, svc_label(sp)),
        Frontend::LoadBalancerIp => format!(
            "matches load-balancer IP {} of {}",
            packet.dst,
            svc_label(sp)
        ),
    };
    t.steps.push(step(
        StepKind::Dispatch,
        what,
        format!(
            "{}: new connections are matched by {} before routing{}",
            if hook == "nat-output" {
                "the node's own traffic (output)"
            } else {
                "prerouting"
            },
            if frontend == Frontend::NodePort {
                "protocol and port on a node address"
            } else {
                "address, protocol and port"
            },
            frontend::also_claimed(view, &packet),
        ),
        vec![
            format!("chain {hook}"),
            "chain services".into(),
            objs.element(map),
        ],
    ));
    let sview = view.services.get(&sp.name);
    match frontend {
        Frontend::ClusterIp => internal(sp, sview, plan, &packet, &origin, &objs, &mut t),
        _ => external(sp, sview, plan, &packet, &origin, &objs, &mut t),
    }
    t
}

impl Trace {
    /// The explanation as iptables mode programs it, each step naming iptables chains. iptables
    /// mode (like upstream's) has no rule rejecting unknown ports of a ClusterIP, nor one
    /// dropping unallocated addresses of a service CIDR: such a packet is routed as is.
    pub fn for_iptables(mut self) -> Trace {
        if let Some(variant) = self.iptables_variant.take() {
            return variant.for_iptables();
        }
        if self.packet.dst.is_loopback() && self.frontend == Some(Frontend::NodePort) {
            // A localhost NodePort: Ferry's proxy, the same in every mode.
            self.objects_label = "iptables";
            return self;
        }
        if self.steps.iter().any(|s| s.kind == StepKind::UnknownPort) {
            self.verdict = Verdict::NotAService;
        }
        frontend::unallocated_routed(&mut self, "iptables");
        self.reject_without_firewall();
        self.hairpin_for_iptables();
        let objects: Vec<Vec<String>> = self
            .steps
            .iter()
            .map(|s| self.iptables_objects(s))
            .collect();
        for (step, objects) in self.steps.iter_mut().zip(objects) {
            step.objects = objects;
        }
        self.objects_label = "iptables";
        self
    }
}

impl fmt::Display for Origin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Origin::ThisNode => f.write_str("this node itself"),
            Origin::Pod(net) => write!(f, "a pod (in {net})"),
            Origin::Outside => f.write_str("outside the cluster"),
        }
    }
}

#[cfg(test)]
mod tests;
