//! The steps after the frontend matched: endpoint sets, masquerade, forward, drop, reject —
//! each naming the nft objects, read from the compiled ruleset.

use ferry_model::{Exclusion, ServicePortView, TrafficPolicy};

use super::masquerade::hairpin_step;
use super::topology;
use super::{step, Candidate, Origin, Packet, StepKind, Target, Trace, Verdict};
use crate::nft::dispatch::endpoint_map;
use crate::nft::{Key, ServiceRules, Value, Verdict as NftVerdict};
use crate::plan::{ClusterIpMasquerade, Dispatch, EndpointSet, Plan, ServicePlan};

/// Every endpoint of the service port, in or out of `set` (the cluster-wide set when `None`),
/// and why not (`ferry explain`'s endpoint list, `ferry status`'s backends).
pub fn candidates(sview: Option<&ServicePortView>, set: Option<EndpointSet>) -> Vec<Candidate> {
    let Some(sview) = sview else {
        return Vec::new();
    };
    sview
        .endpoints
        .iter()
        .map(|e| {
            let membership = match set {
                Some(EndpointSet::Local) => e.local,
                Some(EndpointSet::Cluster) | None => e.cluster,
            };
            let excluded = match (membership, e.conditions.ready) {
                (Ok(()), _) => None,
                (Err(Exclusion::NotReady), _) => Some("not ready".to_owned()),
                (Err(Exclusion::Terminating), _) => {
                    Some("terminating (ready endpoints exist, so no fallback)".to_owned())
                }
                (Err(Exclusion::Topology), _) => Some(topology::excluded(sview, e)),
                (Err(Exclusion::OtherNode), _) => Some(format!(
                    "on another node ({})",
                    e.node_name.as_deref().unwrap_or("unknown")
                )),
                (Err(Exclusion::SetUnused), true) => Some("not used by this policy".to_owned()),
                (Err(Exclusion::SetUnused), false) => Some("not ready".to_owned()),
            };
            let not_ready = matches!(
                (membership, e.conditions.ready),
                (Err(Exclusion::NotReady), _) | (Err(Exclusion::SetUnused), false)
            );
            Candidate {
                addr: e.addr,
                node: e.node_name.as_deref().map(str::to_owned),
                excluded,
                not_ready,
                target: e.target.as_ref().and_then(|t| t.target_ref.clone()),
                note: None,
            }
        })
        .collect()
}

/// The nftables objects of the matched frontend, read from the compiled ruleset (the same one
/// the dataplane applies), so the names shown are the names in the kernel.
pub(super) struct Objects<'a> {
    pub(super) rules: Option<&'a ServiceRules>,
    pub(super) by_node_port: bool,
    pub(super) key: Key,
    pub(super) dispatch_map: &'static str,
}

impl Objects<'_> {
    /// `map M element K : V` as compiled (or says that there is none).
    pub(super) fn element(&self, map: &str) -> String {
        let found = self.rules.and_then(|r| {
            r.elements
                .iter()
                .find(|e| e.set == map && e.key == self.key)
        });
        match found.and_then(|e| e.value.as_ref()) {
            Some(Value::Verdict(NftVerdict::Goto(c))) => {
                format!("map {map} element {} : goto {c}", self.key)
            }
            Some(Value::Verdict(NftVerdict::Drop)) => {
                format!("map {map} element {} : drop", self.key)
            }
            Some(Value::Endpoint(ep)) => format!("map {map} element {} : {ep}", self.key),
            Some(Value::Port(p)) => format!("map {map} element {} : {p}", self.key),
            None if found.is_some() => format!("map {map} element {}", self.key),
            None => format!("map {map} (no element {})", self.key),
        }
    }

    /// The chain the frontend's dispatch element goes to.
    fn chain(&self) -> String {
        self.rules
            .and_then(|r| {
                r.elements
                    .iter()
                    .find(|e| e.set == self.dispatch_map && e.key == self.key)
            })
            .and_then(|e| match &e.value {
                Some(Value::Verdict(NftVerdict::Goto(c))) => Some(c.clone()),
                _ => None,
            })
            .unwrap_or_else(|| "(none)".to_owned())
    }

    /// The endpoint map of a set, with the frontend's slots.
    fn slots(&self, set: EndpointSet, n: usize) -> String {
        let map = endpoint_map(self.by_node_port, set);
        let last = n.saturating_sub(1);
        format!("map {map} elements {} . 0..{last}", self.key)
    }
}

/// How the connection is forwarded: to which endpoint set, why, and why it is masqueraded
/// whatever the target (`None`: only hairpin traffic is).
struct Forward<'a> {
    set: EndpointSet,
    why: &'a str,
    masquerade: Option<&'a str>,
}

fn forward(
    sp: &ServicePlan,
    sview: Option<&ServicePortView>,
    fwd: Forward<'_>,
    p: &Packet,
    objs: &Objects<'_>,
    t: &mut Trace,
) {
    let Forward {
        set,
        why,
        masquerade,
    } = fwd;
    // nftables' `hairpin` set holds only the addresses that may send from here.
    let hairpin = sp.hairpin_sources.binary_search(&p.src).is_ok();
    let targets: Vec<Target> = sp
        .endpoints(set)
        .iter()
        .map(|ep| Target::new(*ep, p.src, masquerade, hairpin))
        .collect();
    super::affinity::pinned(sp, set, p, &objs.chain(), objs.by_node_port, t);
    let (label, why) = match set {
        EndpointSet::Cluster => (
            topology::cluster_label(sview),
            match topology::note(sview) {
                Some(note) => format!("{why}; {note}"),
                None => why.to_owned(),
            },
        ),
        EndpointSet::Local => ("a ready endpoint on this node".to_owned(), why.to_owned()),
    };
    t.steps.push(step(
        StepKind::Forward(set),
        format!(
            "DNAT to {label}: one of {} at random, equal probability",
            targets.len()
        ),
        if sp.affinity.is_some() {
            format!("{why}; for a client without a pin; the choice is made once per connection (conntrack keeps it)")
        } else {
            format!("{why}; the choice is made once per connection (conntrack keeps it)")
        },
        vec![
            format!("chain {}", objs.chain()),
            objs.slots(set, targets.len()),
        ],
    ));
    // A pod known to be on another node gets no hairpin step: its own node masquerades it
    // if it ever reaches itself (iptables mode adds the step back: `hairpin_for_iptables`).
    if hairpin && targets.iter().any(|e| e.addr.ip() == p.src) {
        t.steps.push(hairpin_step(&targets, p));
    }
    t.verdict = Verdict::Forwarded { targets };
}

/// Why ClusterIP traffic from `p`'s source is masqueraded (`None`: it is not).
pub(super) fn cluster_ip_masquerade(
    sp: &ServicePlan,
    plan: &Plan,
    p: &Packet,
    origin: &Origin,
) -> Option<String> {
    match sp.cluster_ip_masquerade {
        ClusterIpMasquerade::Always => Some("masqueradeAll".to_owned()),
        ClusterIpMasquerade::NotFromPods if !from_pods(plan, p, origin) => Some(format!(
            "the source is not a pod ({})",
            plan.local.not_a_pod()
        )),
        _ => None,
    }
}

/// Whether the local-traffic detector counts `p` as pod traffic: a CIDR detector by its
/// source; an interface detector is taken to see this node's pods (`origin`).
fn from_pods(plan: &Plan, p: &Packet, origin: &Origin) -> bool {
    let node_pods = match origin {
        Origin::Pod(net) => vec![*net],
        _ => Vec::new(),
    };
    plan.local.from_pods(&p.src, &node_pods)
}

pub(super) fn internal(
    sp: &ServicePlan,
    sview: Option<&ServicePortView>,
    plan: &Plan,
    p: &Packet,
    origin: &Origin,
    objs: &Objects<'_>,
    t: &mut Trace,
) {
    let policy = sview.map(|v| v.internal_policy).unwrap_or_default();
    match sp.internal {
        Dispatch::Forward(set) => {
            t.candidates = candidates(sview, Some(set));
            let chain = objs.chain();
            let masquerade = cluster_ip_masquerade(sp, plan, p, origin);
            if let Some(why) = &masquerade {
                t.steps.push(step(
                    StepKind::Masquerade,
                    "marked for masquerade",
                    format!("ClusterIP traffic is masqueraded when {why}, so replies come back through this node"),
                    vec![format!("chain {chain}"), "chain mark-for-masquerade".into(), "chain masquerading".into()],
                ));
            }
            let why = format!("internalTrafficPolicy {policy:?}");
            let fwd = Forward {
                set,
                why: &why,
                masquerade: masquerade.as_deref(),
            };
            forward(sp, sview, fwd, p, objs, t);
        }
        Dispatch::Drop => {
            t.candidates = candidates(sview, Some(EndpointSet::Local));
            t.verdict = Verdict::Dropped;
            t.steps.push(step(
                StepKind::Dropped,
                "dropped: no endpoint on this node",
                "internalTrafficPolicy Local sends ClusterIP traffic only to this node's endpoints",
                vec![objs.element("no-endpoint-services")],
            ));
        }
        Dispatch::Reject => reject(sview, objs.element("no-endpoint-services"), t),
    }
}

fn reject(sview: Option<&ServicePortView>, element: String, t: &mut Trace) {
    t.candidates = candidates(sview, None);
    t.verdict = Verdict::Rejected;
    t.steps.push(step(
        StepKind::Rejected,
        "rejected: the service has no ready (or serving terminating) endpoint anywhere",
        "the client gets \"connection refused\" at once instead of a timeout",
        vec![element, "chain reject-chain".into()],
    ));
}

#[allow(clippy::too_many_arguments)]
pub(super) fn external(
    sp: &ServicePlan,
    sview: Option<&ServicePortView>,
    plan: &Plan,
    p: &Packet,
    origin: &Origin,
    objs: &Objects<'_>,
    t: &mut Trace,
) {
    let Some(ext) = &sp.external else { return };
    let no_ep_map = if objs.by_node_port {
        "no-endpoint-nodeports"
    } else {
        "no-endpoint-services"
    };
    if ext.dispatch == Dispatch::Reject {
        return reject(sview, objs.element(no_ep_map), t);
    }
    let chain = objs.chain();
    let masq_objs = |c: &str| {
        vec![
            format!("chain {c}"),
            "chain mark-for-masquerade".into(),
            "chain masquerading".into(),
        ]
    };
    match (ext.policy, origin) {
        (TrafficPolicy::Cluster, _) => {
            t.candidates = candidates(sview, Some(EndpointSet::Cluster));
            t.steps.push(step(
                StepKind::Masquerade,
                "marked for masquerade",
                "external traffic with the Cluster policy is SNATed to this node, so the reply comes back through it",
                masq_objs(&chain),
            ));
            let fwd = Forward {
                set: EndpointSet::Cluster,
                why: "externalTrafficPolicy Cluster",
                masquerade: Some(
                    "externalTrafficPolicy Cluster: the endpoint may be on another node",
                ),
            };
            forward(sp, sview, fwd, p, objs, t);
        }
        (TrafficPolicy::Local, Origin::Pod(net)) if from_pods(plan, p, origin) => {
            t.candidates = candidates(sview, Some(EndpointSet::Cluster));
            t.steps.push(step(
StepKind::ShortCircuit,
                format!("short-circuit: the source is a pod ({net}), so the Local policy does not apply"),
                "pod traffic to an external destination behaves as if it went out to a load balancer and came back",
                vec![format!("chain {chain}")],
            ));
            let fwd = Forward {
                set: EndpointSet::Cluster,
                why: "short-circuit to the cluster-wide endpoints",
                masquerade: None,
            };
            forward(sp, sview, fwd, p, objs, t);
        }
        (TrafficPolicy::Local, Origin::ThisNode) => {
            t.candidates = candidates(sview, Some(EndpointSet::Cluster));
            t.steps.push(step(
StepKind::ShortCircuit,
                "short-circuit: the source is this node, masqueraded",
                "the node's own traffic is not subject to the Local policy; its source (a node address) must be SNATed",
                masq_objs(&chain),
            ));
            // Short-circuited in nat-output, before `filter-output-post-dnat` checks
            // `no-endpoint-services` (as upstream's filter-output, after DNAT).
            let fwd = Forward {
                set: EndpointSet::Cluster,
                why: "short-circuit to the cluster-wide endpoints",
                masquerade: Some("the source is this node"),
            };
            forward(sp, sview, fwd, p, objs, t);
        }
        (TrafficPolicy::Local, _) => {
            t.candidates = candidates(sview, Some(EndpointSet::Local));
            match ext.dispatch {
                Dispatch::Forward(set) => {
                    let fwd = Forward {
                        set,
                        why: "externalTrafficPolicy Local: only this node's endpoints; the client's source IP is kept",
                        masquerade: None,
                    };
                    forward(sp, sview, fwd, p, objs, t);
                }
                _ => {
                    t.verdict = Verdict::Dropped;
                    t.steps.push(step(
StepKind::Dropped,
                        "dropped: externalTrafficPolicy Local and no endpoint on this node",
                        "Local keeps the client's source IP by never forwarding to another node; with no local endpoint the packet is dropped (the client times out)",
                        vec![
                            format!("chain {chain} (no rule matches)"),
                            if objs.by_node_port {
                                "chain filter-input → nodeport-endpoints-check".into()
                            } else {
                                "chain filter-input/filter-forward → service-endpoints-check".into()
                            },
                            objs.element(no_ep_map),
                        ],
                    ));
                }
            }
        }
    }
}
