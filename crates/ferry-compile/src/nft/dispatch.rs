//! One service port → its elements and the shared dispatch chains they `goto`.
//!
//! Endpoints are data: map elements `frontend . slot : endpoint`, slot 0..n for n endpoints.
//! A dispatch chain picks a slot with `numgen random mod n` (uniform, exactly) and DNATs to
//! the endpoint the map holds for it. A chain's name says everything its rules depend on
//! (frontend kind, endpoint set, n, policy), so all services with the same shape share it,
//! and an endpoint change that keeps n changes map elements only: no rule, no chain, so the
//! kernel does not re-validate the table.

use ferry_model::TrafficPolicy;
use ipnet::IpNet;

use super::affinity::{self, Frontend};
use super::model::{Chain, Element, Key, ServiceRules, Value, Verdict};
use super::render::RenderContext;
use crate::plan::{ClusterIpMasquerade, Dispatch, EndpointSet, ServicePlan};

/// How a dispatch chain's DNAT finds the frontend in the endpoint maps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum By {
    /// Service IPs: `ip daddr . meta l4proto . th dport` (ClusterIPs, external IPs).
    Ip,
    /// Node ports: `meta l4proto . th dport` (the destination is any node address).
    NodePort,
}

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

/// `[match ]meta l4proto { tcp, udp, sctp } dnat ip to <frontend> . numgen random mod n map @m`
fn dnat(ctx: &RenderContext, by: By, set: EndpointSet, n: usize, matching: &str) -> String {
    let ip = ctx.ip();
    let (key, map) = match by {
        By::Ip => (
            format!("{ip} daddr . meta l4proto . th dport"),
            endpoint_map(false, set),
        ),
        By::NodePort => (
            "meta l4proto . th dport".to_owned(),
            endpoint_map(true, set),
        ),
    };
    format!(
        "{matching}meta l4proto {{ tcp, udp, sctp }} dnat {ip} to {key} . numgen random mod {n} map @{map}"
    )
}

fn cidr_match(ip: &str, dir: &str, negate: bool, cidrs: &[IpNet]) -> String {
    let op = if negate { "!= " } else { "" };
    if cidrs.len() == 1 {
        format!("{ip} {dir} {op}{}", cidrs[0])
    } else {
        let list: Vec<String> = cidrs.iter().map(ToString::to_string).collect();
        format!("{ip} {dir} {op}{{ {} }}", list.join(", "))
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

/// The chain for ClusterIP traffic to `set` with `n` endpoints.
fn cluster_ip_chain(
    ctx: &RenderContext,
    masq: ClusterIpMasquerade,
    set: EndpointSet,
    n: usize,
    affinity: bool,
) -> Chain {
    let (suffix, rule) = match masq {
        ClusterIpMasquerade::Never => ("-no-masquerade", None),
        ClusterIpMasquerade::NotFromPods => (
            "",
            Some(format!(
                "{} jump mark-for-masquerade",
                cidr_match(ctx.ip(), "saddr", true, &ctx.pod_cidrs)
            )),
        ),
        ClusterIpMasquerade::Always => (
            "-masquerade-all",
            Some("jump mark-for-masquerade".to_owned()),
        ),
    };
    let mut rules: Vec<String> = rule.into_iter().collect();
    if affinity {
        rules.push(affinity::pinned_dnat(ctx, false));
    }
    rules.push(dnat(ctx, By::Ip, set, n, ""));
    Chain {
        name: format!(
            "cluster-ip-{}-{n}{suffix}{}",
            set_name(set),
            affinity_suffix(affinity)
        ),
        rules,
    }
}

/// The chain for external traffic (node port or external IP) with `n` cluster-wide and `m`
/// node-local endpoints (`m` only counts with the Local policy).
fn external_chain(
    ctx: &RenderContext,
    by: By,
    policy: TrafficPolicy,
    (n, m): (usize, usize),
    affinity: bool,
) -> Chain {
    let kind = match by {
        By::Ip => "external-ip",
        By::NodePort => "nodeport",
    };
    let mut rules = Vec::new();
    let pinned = affinity::pinned_dnat(ctx, by == By::NodePort);
    let name = match policy {
        TrafficPolicy::Cluster => {
            // May cross nodes: masquerade so the reply comes back through this node.
            rules.push("jump mark-for-masquerade".to_owned());
            if affinity {
                rules.push(pinned);
            }
            rules.push(dnat(ctx, by, EndpointSet::Cluster, n, ""));
            format!("{kind}-cluster-{n}")
        }
        TrafficPolicy::Local if affinity => {
            // The node's own traffic is masqueraded whether or not it is pinned; every client
            // class (pod, node, outside) is pinned to an endpoint of the set it was sent to.
            rules.push("fib saddr type local jump mark-for-masquerade".to_owned());
            rules.push(pinned);
            if n > 0 && !ctx.pod_cidrs.is_empty() {
                let pods = cidr_match(ctx.ip(), "saddr", false, &ctx.pod_cidrs);
                rules.push(dnat(ctx, by, EndpointSet::Cluster, n, &format!("{pods} ")));
            }
            if n > 0 {
                let local = "fib saddr type local ";
                rules.push(dnat(ctx, by, EndpointSet::Cluster, n, local));
            }
            if m > 0 {
                rules.push(dnat(ctx, by, EndpointSet::Local, m, ""));
            }
            format!("{kind}-local-{n}-{m}")
        }
        TrafficPolicy::Local => {
            // Pod and node traffic to an external destination is not subject to the policy
            // (it behaves as if it went out to a load balancer and came back in).
            if n > 0 && !ctx.pod_cidrs.is_empty() {
                let pods = cidr_match(ctx.ip(), "saddr", false, &ctx.pod_cidrs);
                rules.push(dnat(ctx, by, EndpointSet::Cluster, n, &format!("{pods} ")));
            }
            // The node's own traffic has a node address as source, which the endpoint could
            // not answer directly: masquerade it.
            rules.push("fib saddr type local jump mark-for-masquerade".to_owned());
            if n > 0 {
                let local = "fib saddr type local ";
                rules.push(dnat(ctx, by, EndpointSet::Cluster, n, local));
            }
            if m > 0 {
                rules.push(dnat(ctx, by, EndpointSet::Local, m, ""));
            }
            format!("{kind}-local-{n}-{m}")
        }
    };
    Chain {
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
    for e in sp.cluster_endpoints.iter().chain(&sp.local_endpoints) {
        els.push(Element::new("hairpin", Key::AddrPair(e.ip(), e.ip()), None));
    }
    let dispatch_el = |set, key, value: Value| Element {
        set,
        key,
        value: Some(value),
        comment: Some(comment.clone()),
    };
    let slots = |els: &mut Vec<Element>, map, key: &dyn Fn(u32) -> Key, set| {
        for (i, ep) in (0u32..).zip(sp.endpoints(set)) {
            els.push(Element::new(map, key(i), Some(Value::Endpoint(*ep))));
        }
    };

    // ClusterIP traffic.
    let vip = Key::Frontend(sp.cluster_ip, proto, port);
    match sp.internal {
        Dispatch::Forward(set) => {
            let affinity = sp.affinity.is_some();
            let n = sp.endpoints(set).len();
            let chain = cluster_ip_chain(ctx, sp.cluster_ip_masquerade, set, n, affinity);
            els.push(dispatch_el(
                "service-ips",
                vip,
                verdict(sp.internal, &chain.name),
            ));
            let key = |i| Key::FrontendSlot(sp.cluster_ip, proto, port, i);
            slots(els, endpoint_map(false, set), &key, set);
            out.chains.push(chain);
            if let Some(timeout) = sp.affinity {
                let frontend = Frontend::Ip(sp.cluster_ip, proto, port);
                let eps = sp.endpoints(set);
                affinity::record(ctx, frontend, eps, timeout, &mut out.chains, els);
            }
        }
        d => els.push(dispatch_el("no-endpoint-services", vip, verdict(d, ""))),
    }

    // External traffic: node port and external IPs.
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
            let chain = external_chain(ctx, By::NodePort, ext.policy, (n, m), affinity);
            els.push(dispatch_el(
                "service-nodeports",
                key.clone(),
                verdict(Dispatch::Forward(EndpointSet::Cluster), &chain.name),
            ));
            for &set in &sets {
                let key = |i| Key::NodePortSlot(proto, np, i);
                slots(els, endpoint_map(true, set), &key, set);
            }
            out.chains.push(chain);
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
    for addr in &sp.external_ips {
        let key = Key::Frontend(*addr, proto, port);
        if reaches_chain {
            let chain = external_chain(ctx, By::Ip, ext.policy, (n, m), affinity);
            els.push(dispatch_el(
                "service-ips",
                key.clone(),
                verdict(Dispatch::Forward(EndpointSet::Cluster), &chain.name),
            ));
            for &set in &sets {
                let key = |i| Key::FrontendSlot(*addr, proto, port, i);
                slots(els, endpoint_map(false, set), &key, set);
            }
            out.chains.push(chain);
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
