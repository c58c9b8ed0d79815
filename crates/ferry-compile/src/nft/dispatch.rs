//! One service port → its elements and the shared dispatch chains they `goto`.
//!
//! Endpoints are data: map elements `frontend . slot : endpoint`, slot 0..n for n endpoints.
//! A dispatch chain picks a slot with `numgen random mod n` (uniform, exactly) and DNATs to
//! the endpoint the map holds for it. A chain's name says everything its rules depend on
//! (frontend kind, endpoint set, n, policy), so all services with the same shape share it,
//! and an endpoint change that keeps n changes map elements only: no rule, no chain, so the
//! kernel does not re-validate the table.

use std::sync::Arc;

use super::affinity;
use super::model::{Element, Key, ServiceRules, Value, Verdict};
use super::render::RenderContext;
use super::rule::{DispatchChain, DispatchRule, DnatKey, RuleAction, RuleMatch};
use super::slots::{Frontend, Slots};
use crate::plan::{ClusterIpMasquerade, Dispatch, EndpointSet, ServicePlan};
use ferry_model::TrafficPolicy;

fn set_name(set: EndpointSet) -> &'static str {
    match set {
        EndpointSet::Cluster => "cluster",
        EndpointSet::Local => "local",
    }
}

/// The endpoint map of a frontend kind and an endpoint set.
pub(crate) fn endpoint_map(by_node_port: bool, set: EndpointSet) -> &'static str {
    match (by_node_port, set) {
        (false, EndpointSet::Cluster) => "cluster-endpoints",
        (false, EndpointSet::Local) => "local-endpoints",
        (true, EndpointSet::Cluster) => "nodeport-cluster-endpoints",
        (true, EndpointSet::Local) => "nodeport-local-endpoints",
    }
}

/// `[matches] meta l4proto { tcp, udp, sctp } dnat ip to <frontend> . numgen random mod n map @m`
fn dnat(
    ctx: &RenderContext,
    key: DnatKey,
    set: EndpointSet,
    n: usize,
    matches: Vec<RuleMatch>,
) -> DispatchRule {
    DispatchRule {
        family: ctx.family,
        matches,
        action: RuleAction::Dnat {
            key,
            slots: u32::try_from(n).unwrap_or(u32::MAX),
            map: endpoint_map(key == DnatKey::NodePort, set),
        },
    }
}

fn jump_masquerade(ctx: &RenderContext, matches: Vec<RuleMatch>) -> DispatchRule {
    DispatchRule {
        family: ctx.family,
        matches,
        action: RuleAction::Jump("mark-for-masquerade"),
    }
}

/// The name suffix of a shape with session affinity (its chain reads the pin map first).
fn affinity_suffix(affinity: bool) -> &'static str {
    if affinity {
        "-affinity"
    } else {
        ""
    }
}

/// "From a pod" (`negate`: not); only asked for where the detector is implemented.
fn from_pods(ctx: &RenderContext, negate: bool) -> RuleMatch {
    ctx.local.rule_match(negate).unwrap_or(RuleMatch::Saddr {
        negate,
        nets: Vec::new(),
    })
}

/// The chain for ClusterIP traffic to `set` with `n` endpoints.
fn cluster_ip_chain(
    ctx: &RenderContext,
    masq: ClusterIpMasquerade,
    set: EndpointSet,
    n: usize,
    affinity: bool,
) -> DispatchChain {
    let (suffix, rule) = match masq {
        ClusterIpMasquerade::Never => ("-no-masquerade", None),
        ClusterIpMasquerade::NotFromPods => {
            ("", Some(jump_masquerade(ctx, vec![from_pods(ctx, true)])))
        }
        ClusterIpMasquerade::Always => ("-masquerade-all", Some(jump_masquerade(ctx, vec![]))),
    };
    let mut rules: Vec<DispatchRule> = rule.into_iter().collect();
    if affinity {
        rules.push(affinity::pinned_dnat(ctx, DnatKey::ServiceIp));
    }
    rules.push(dnat(ctx, DnatKey::ServiceIp, set, n, vec![]));
    DispatchChain {
        name: format!(
            "cluster-ip-{}-{n}{suffix}{}",
            set_name(set),
            affinity_suffix(affinity)
        ),
        rules,
    }
}

/// The chain for external traffic (node port, external or load-balancer IP) with `n` cluster-wide and `m`
/// node-local endpoints (`m` only counts with the Local policy).
fn external_chain(
    ctx: &RenderContext,
    by: DnatKey,
    policy: TrafficPolicy,
    (n, m): (usize, usize),
    affinity: bool,
) -> DispatchChain {
    let kind = match by {
        DnatKey::ServiceIp => "external-ip",
        DnatKey::NodePort => "nodeport",
    };
    let mut rules = Vec::new();
    let name = match policy {
        TrafficPolicy::Cluster => {
            // May cross nodes: masquerade so the reply comes back through this node.
            rules.push(jump_masquerade(ctx, vec![]));
            if affinity {
                rules.push(affinity::pinned_dnat(ctx, by));
            }
            rules.push(dnat(ctx, by, EndpointSet::Cluster, n, vec![]));
            format!("{kind}-cluster-{n}")
        }
        TrafficPolicy::Local => {
            // The node's own traffic has a node address as source, which the endpoint could
            // not answer directly: masquerade it.
            let masquerade_node = jump_masquerade(ctx, vec![RuleMatch::SaddrLocal]);
            // Pod and node traffic to an external destination is not subject to the policy
            // (it behaves as if it went out to a load balancer and came back in).
            let from_pods = (n > 0 && ctx.local.is_implemented()).then(|| {
                dnat(
                    ctx,
                    by,
                    EndpointSet::Cluster,
                    n,
                    vec![from_pods(ctx, false)],
                )
            });
            if affinity {
                // The node's own traffic is masqueraded whether or not it is pinned; every
                // client class (pod, node, outside) is pinned to an endpoint of the set it was
                // sent to.
                rules.push(masquerade_node);
                rules.push(affinity::pinned_dnat(ctx, by));
                rules.extend(from_pods);
            } else {
                rules.extend(from_pods);
                rules.push(masquerade_node);
            }
            if n > 0 {
                let local = vec![RuleMatch::SaddrLocal];
                rules.push(dnat(ctx, by, EndpointSet::Cluster, n, local));
            }
            if m > 0 {
                rules.push(dnat(ctx, by, EndpointSet::Local, m, vec![]));
            }
            format!("{kind}-local-{n}-{m}")
        }
    };
    DispatchChain {
        name: format!("{name}{}", affinity_suffix(affinity)),
        rules,
    }
}

fn verdict(d: Dispatch, forward_to: &str) -> Value {
    Value::Verdict(match d {
        Dispatch::Forward(_) => Verdict::Goto(forward_to.to_owned()),
        Dispatch::Drop => Verdict::Drop,
        Dispatch::Reject => Verdict::Goto("reject-chain".to_owned()),
    })
}

/// Adds one service port's elements and chains to `out`.
pub(crate) fn render_port(sp: &ServicePlan, ctx: &RenderContext, out: &mut ServiceRules) {
    let proto = sp.name.protocol;
    let port = sp.port;
    // `namespace/name:port`, or `namespace/name` for an unnamed port.
    let comment = if sp.name.port.is_empty() {
        sp.name.service.to_string()
    } else {
        sp.name.to_string()
    };
    let els = &mut out.elements;
    els.push(Element::new("cluster-ips", Key::Addr(sp.cluster_ip), None));
    // `hairpin`: from the endpoint elements, by render_service (model::shared_keys).
    let dispatch_el = |set, key, value: Value| Element {
        set,
        key,
        value: Some(value),
        comment: Some(comment.clone()),
    };
    let mut slots = |map, frontend, set| {
        let endpoints = sp.endpoints(set);
        if !endpoints.is_empty() {
            out.slots.push(Slots::new(map, frontend, endpoints));
        }
    };

    // ClusterIP traffic.
    let vip = Key::Frontend(sp.cluster_ip, proto, port);
    match sp.internal {
        Dispatch::Forward(set) => {
            let n = sp.endpoints(set).len();
            let affinity = sp.affinity.is_some();
            let chain = cluster_ip_chain(ctx, sp.cluster_ip_masquerade, set, n, affinity);
            els.push(dispatch_el(
                "service-ips",
                vip,
                verdict(sp.internal, &chain.name),
            ));
            let frontend = Frontend::Ip(sp.cluster_ip, proto, port);
            slots(endpoint_map(false, set), frontend, set);
            out.chains.push(Arc::new(chain));
            if let Some(timeout) = sp.affinity {
                let frontend = Frontend::Ip(sp.cluster_ip, proto, port);
                let eps = sp.endpoints(set);
                affinity::record(ctx, frontend, eps, timeout, &mut out.chains, els);
            }
        }
        d => els.push(dispatch_el("no-endpoint-services", vip, verdict(d, ""))),
    }

    // loadBalancerSourceRanges: checked before DNAT by the fixed `firewall-check` rules,
    // whatever happens to the traffic afterwards (upstream nftables mode).
    if let Some(fw) = &sp.firewall {
        for lb in &sp.load_balancer_ips {
            els.push(Element {
                set: "firewall-ips",
                key: Key::Frontend(*lb, proto, port),
                value: None,
                comment: Some(comment.clone()),
            });
            for src in &fw.allowed {
                let key = Key::FrontendSource(*lb, proto, port, *src);
                els.push(Element::new("firewall-allow", key, None));
            }
        }
    }

    // External traffic: node port, external IPs and load-balancer IPs.
    let Some(ext) = &sp.external else { return };
    let n = sp.cluster_endpoints.len();
    let m = match ext.dispatch {
        Dispatch::Forward(_) => sp.local_endpoints.len(),
        _ => 0,
    };
    let reaches_chain = ext.dispatch != Dispatch::Reject;
    // The endpoint sets the external chain reads.
    let mut sets = Vec::new();
    if reaches_chain && n > 0 {
        sets.push(EndpointSet::Cluster);
    }
    if ext.policy == TrafficPolicy::Local && m > 0 {
        sets.push(EndpointSet::Local);
    }
    let forwards = matches!(ext.dispatch, Dispatch::Forward(_));
    let affinity = sp.affinity.is_some();
    // The endpoints external traffic may be pinned to: those of the sets its chain reads.
    let mut reachable: Vec<_> = sets
        .iter()
        .flat_map(|&s| sp.endpoints(s))
        .copied()
        .collect();
    reachable.sort();
    reachable.dedup();
    if let Some(np) = sp.node_port {
        let key = Key::NodePort(proto, np);
        if reaches_chain {
            let chain = external_chain(ctx, DnatKey::NodePort, ext.policy, (n, m), affinity);
            els.push(dispatch_el(
                "service-nodeports",
                key.clone(),
                verdict(Dispatch::Forward(EndpointSet::Cluster), &chain.name),
            ));
            for &set in &sets {
                let frontend = Frontend::NodePort(proto, np);
                slots(endpoint_map(true, set), frontend, set);
            }
            out.chains.push(Arc::new(chain));
            if let Some(timeout) = sp.affinity {
                let frontend = Frontend::NodePort(proto, np);
                affinity::record(ctx, frontend, &reachable, timeout, &mut out.chains, els);
            }
        }
        if !forwards {
            els.push(dispatch_el(
                "no-endpoint-nodeports",
                key,
                verdict(ext.dispatch, ""),
            ));
        }
    }
    for addr in sp.external_ips.iter().chain(&sp.load_balancer_ips) {
        let key = Key::Frontend(*addr, proto, port);
        if reaches_chain {
            let chain = external_chain(ctx, DnatKey::ServiceIp, ext.policy, (n, m), affinity);
            els.push(dispatch_el(
                "service-ips",
                key.clone(),
                verdict(Dispatch::Forward(EndpointSet::Cluster), &chain.name),
            ));
            for &set in &sets {
                let frontend = Frontend::Ip(*addr, proto, port);
                slots(endpoint_map(false, set), frontend, set);
            }
            out.chains.push(Arc::new(chain));
            if let Some(timeout) = sp.affinity {
                let frontend = Frontend::Ip(*addr, proto, port);
                affinity::record(ctx, frontend, &reachable, timeout, &mut out.chains, els);
            }
        }
        if !forwards {
            els.push(dispatch_el(
                "no-endpoint-services",
                key,
                verdict(ext.dispatch, ""),
            ));
        }
    }
}
