//! The session affinity step: a pinned client goes back to its endpoint; the others' choice
//! is recorded after DNAT.

use super::{step, Origin, Packet, StepKind, Trace};
use crate::nft::affinity::{pin_map, record_map};
use crate::plan::{EndpointSet, ServicePlan};

/// Adds the affinity step before the random choice, when the service port has affinity.
pub(super) fn pinned(
    sp: &ServicePlan,
    set: EndpointSet,
    p: &Packet,
    chain: &str,
    by_node_port: bool,
    t: &mut Trace,
) {
    let Some(timeout) = sp.affinity else { return };
    let frontend = if by_node_port {
        format!("{} . {}", p.protocol, p.port)
    } else {
        format!("{} . {} . {}", p.dst, p.protocol, p.port)
    };
    let hook = match t.origin {
        Origin::ThisNode => "filter-output-post-dnat",
        _ => "filter-prerouting-post-dnat",
    };
    let kind = if by_node_port { "nodeport" } else { "ip" };
    t.steps.push(step(
        StepKind::Affinity(set, timeout),
        format!(
            "session affinity: if {} made a new connection to this service port within the last {timeout} s (nftables: through this address and port), it is pinned and goes to the same endpoint again; otherwise the endpoint chosen below is pinned for it",
            p.src
        ),
        format!(
            "sessionAffinity ClientIP (timeoutSeconds {timeout}): a client keeps reaching one endpoint until {timeout} s pass without a new connection; every new connection renews the pin"
        ),
        vec![
            format!("chain {chain}"),
            format!("map {} key {frontend} . {}", pin_map(by_node_port), p.src),
            format!("chain {hook} → affinity-record"),
            format!("map {} elements {frontend} . <endpoint>", record_map(by_node_port)),
            format!("chain affinity-{kind}-{timeout}"),
        ],
    ));
}
