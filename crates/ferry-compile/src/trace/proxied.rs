//! Connections Ferry's userspace proxy serves: a listener accepts them and the proxy opens its
//! own connection to an endpoint. Localhost NodePorts in every mode (`127.0.0.1:NODEPORT`,
//! `[::1]:NODEPORT`: the kernel rules never translate loopback destinations, which would need
//! `route_localnet`), and every service port in the userspace mode.

use std::net::{IpAddr, SocketAddr};

use ferry_model::ServicePortView;

use super::steps::candidates;
use super::{step, svc_label, topology, Frontend, Packet, StepKind, Target, Trace, Verdict};
use crate::plan::{EndpointSet, ServicePlan};

/// Why the endpoint of a proxied connection sees the node: the proxy connects from it.
pub const PROXIED: &str =
    "proxied in user space: the proxy connects to the endpoint from the node's own address";

/// `0.0.0.0:46744/tcp`, `[::1]:32223/udp`.
pub(super) fn listener(ip: IpAddr, port: u16, sp: &ServicePlan) -> String {
    format!(
        "listener {}/{} ({})",
        SocketAddr::new(ip, port),
        sp.name.protocol,
        sp.name
    )
}

/// The proxy's step: which endpoints, in turn, from which listener.
pub(super) fn proxy_step(
    sp: &ServicePlan,
    sview: Option<&ServicePortView>,
    set: EndpointSet,
    why: &str,
    listener: String,
    t: &mut Trace,
) {
    let targets: Vec<Target> = sp
        .endpoints(set)
        .iter()
        .map(|ep| Target::new(*ep, t.packet.src, Some(PROXIED), false))
        .collect();
    if let Some(timeout) = sp.affinity {
        affinity(sp, set, timeout, t);
    }
    let label = match set {
        EndpointSet::Cluster => topology::cluster_label(sview),
        EndpointSet::Local => "a ready endpoint on this node".to_owned(),
    };
    let why = match (set, topology::note(sview)) {
        (EndpointSet::Cluster, Some(note)) => format!("{why}; {note}"),
        _ => why.to_owned(),
    };
    t.steps.push(step(
        StepKind::Proxied(set),
        format!(
            "proxied in user space by Ferry to {label}: one of {}, in turn (round-robin)",
            targets.len()
        ),
        format!(
            "{why}; Ferry's listener accepts the connection and opens its own to the endpoint, \
             which sees the node as the source; each new connection takes the next endpoint"
        ),
        vec![listener],
    ));
    t.verdict = Verdict::Forwarded { targets };
}

/// The proxy's session affinity: client IP → the endpoint it reached.
fn affinity(sp: &ServicePlan, set: EndpointSet, timeout: u32, t: &mut Trace) {
    t.steps.push(step(
        StepKind::Affinity(set, timeout),
        format!(
            "session affinity: if {} made a new connection to this service port within the \
             last {timeout} s, the proxy sends it to the same endpoint again; otherwise the \
             endpoint chosen below is pinned for it",
            t.packet.src
        ),
        format!(
            "sessionAffinity ClientIP (timeoutSeconds {timeout}): a client keeps reaching one \
             endpoint until {timeout} s pass without a new connection; every new connection \
             renews the pin"
        ),
        vec![format!(
            "the proxy's affinity table of {} (client IP → endpoint, in memory)",
            sp.name
        )],
    ));
}

/// A NodePort on loopback, served by Ferry's userspace proxy (`plan.localhost_node_ports`):
/// the node's own traffic, so the endpoints are cluster-wide whatever the policy, as in
/// upstream's iptables mode. Without any endpoint the listener is closed and the kernel
/// refuses the connection.
pub(super) fn localhost_node_port(
    sp: &ServicePlan,
    sview: Option<&ServicePortView>,
    t: &mut Trace,
) {
    let p: Packet = t.packet;
    t.service = Some(sp.name.clone());
    t.frontend = Some(Frontend::NodePort);
    let listener = listener(p.dst, p.port, sp);
    if sp.cluster_endpoints.is_empty() {
        t.candidates = candidates(sview, None);
        t.verdict = Verdict::Rejected;
        t.steps.push(step(
            StepKind::Rejected,
            format!(
                "rejected: NodePort {}/{} of {} is served on localhost by Ferry's userspace \
                 proxy, which has no listener while the service has no endpoint",
                p.port,
                p.protocol,
                svc_label(sp)
            ),
            "nothing listens on the port, so the node refuses the connection at once, as the \
             rules' reject would",
            vec![format!("{listener}: closed")],
        ));
        return;
    }
    t.candidates = candidates(sview, Some(EndpointSet::Cluster));
    t.steps.push(step(
        StepKind::LocalhostNodePort,
        format!(
            "NodePort {}/{} of {} on localhost ({}): served by Ferry's userspace proxy",
            p.port,
            p.protocol,
            svc_label(sp),
            p.dst
        ),
        "the kernel rules never translate loopback destinations (that would need \
         route_localnet, CVE-2020-8558), so Ferry listens there itself; only the node's own \
         programs can connect",
        Vec::new(),
    ));
    proxy_step(
        sp,
        sview,
        EndpointSet::Cluster,
        "the node's own traffic is not subject to the Local policy (upstream's iptables mode \
         serves it cluster-wide)",
        listener,
        t,
    );
}

#[cfg(test)]
mod tests;
