//! Plan → [`Ruleset`], rule for rule as upstream kube-proxy's iptables proxier writes them.

use crate::local::LocalTraffic;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::net::SocketAddr;

use ferry_model::{IpFamily, ServiceName, TrafficPolicy};

use super::affinity;
use super::base::chain;
pub use super::base::{jump_rules, render_base};
use super::load_balancer::load_balancer;
use super::model::{Chain, Ruleset, ServiceRules};
use super::names::*;
use super::port::{quote, Port};
use crate::plan::{ClusterIpMasquerade, Dispatch, Plan, ServicePlan};

/// Above this many endpoint chains, per-endpoint rules carry no comment (upstream's
/// `largeClusterEndpointsThreshold`): upstream measured the comments at 40 % of the restore
/// input of large clusters, and trades readability for size there.
pub const LARGE_CLUSTER_ENDPOINTS: usize = 1000;

/// What rendering one service needs from the node-wide plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderContext {
    /// The family.
    pub family: IpFamily,
    /// The local-traffic detector.
    pub local: LocalTraffic,
    /// Upstream's "large cluster mode": more than [`LARGE_CLUSTER_ENDPOINTS`] endpoint chains,
    /// so `KUBE-SEP-` rules and the `KUBE-SVC-`/`KUBE-SVL-` rules jumping to them carry no
    /// comment.
    pub large_cluster: bool,
    /// Connections to localhost NodePorts count in upstream's nfacct counter
    /// ([`Plan::nfacct`]).
    pub count_localhost_node_ports: bool,
}

impl RenderContext {
    /// The context of a plan, with the plan's services deciding large cluster mode.
    pub fn of(plan: &Plan) -> Self {
        let endpoints: usize = plan.services.values().map(endpoint_count).sum();
        Self {
            family: plan.family,
            local: plan.local.clone(),
            large_cluster: endpoints > LARGE_CLUSTER_ENDPOINTS,
            count_localhost_node_ports: plan.nfacct.localhost_node_ports,
        }
    }
}

/// Endpoint chains of one service port (its cluster and local sets, each endpoint once).
fn endpoint_count(sp: &ServicePlan) -> usize {
    let mut eps: BTreeSet<&SocketAddr> = BTreeSet::new();
    for set in sp.used_sets() {
        eps.extend(sp.endpoints(set));
    }
    eps.len()
}

/// Renders a whole plan.
pub fn render(plan: &Plan) -> Ruleset {
    render_each(plan, |_| {})
}

/// [`render`], with each service's chains' rules let go as soon as they are rendered
/// ([`ServiceRules::slim`]): what a full sync holds while it writes the rules out, rendering
/// each service again ([`NodeRules::service`](super::NodeRules::service)) when its chains
/// are written.
pub fn render_slim(plan: &Plan) -> Ruleset {
    render_each(plan, ServiceRules::slim)
}

fn render_each(plan: &Plan, mut each: impl FnMut(&mut ServiceRules)) -> Ruleset {
    let ctx = RenderContext::of(plan);
    let mut ruleset = render_base(plan);
    ruleset.large_cluster = ctx.large_cluster;
    let mut by_service: BTreeMap<&ServiceName, Vec<&ServicePlan>> = BTreeMap::new();
    for sp in plan.services.values() {
        by_service.entry(&sp.name.service).or_default().push(sp);
    }
    for (name, ports) in by_service {
        let mut rules = render_service(&ports, &ctx);
        each(&mut rules);
        ruleset.set_service(name.clone(), Some(rules));
    }
    ruleset
}

/// Renders all ports of one service.
pub fn render_service(ports: &[&ServicePlan], ctx: &RenderContext) -> ServiceRules {
    let mut out = ServiceRules::default();
    for sp in ports {
        render_port(sp, ctx, &mut out);
    }
    out.chains.sort_by(|a, b| a.name.cmp(&b.name));
    out.chains.dedup_by(|a, b| a.name == b.name);
    out.endpoints = ports.iter().map(|sp| endpoint_count(sp)).sum();
    shrink(&mut out);
    out
}

/// Gives back the slack `format!` leaves in each rule (a quarter of the text on average):
/// the dataplane keeps the installed rules, 330 000 of them at 10 000 services × 10
/// endpoints.
fn shrink(rules: &mut ServiceRules) {
    let ServiceRules {
        chains,
        nat_services,
        nat_nodeports,
        filter_services,
        filter_external,
        filter_firewall,
        endpoints: _,
        slimmed: _,
    } = rules;
    let lists = chains.iter_mut().map(|c| &mut c.rules).chain([
        nat_services,
        nat_nodeports,
        filter_services,
        filter_external,
        filter_firewall,
    ]);
    for list in lists {
        list.shrink_to_fit();
        for rule in list.iter_mut() {
            rule.shrink_to_fit();
        }
    }
}

/// Counts the first packet of each connection to the localhost NodePort `np` in upstream's
/// nfacct counter, and lets it go on: upstream counts it in nat `KUBE-NODEPORTS` before its
/// DNAT; here loopback destinations never reach that chain (Ferry's proxy serves them, and
/// the kernel never translates them), so the rule sits in nat `KUBE-SERVICES`, after the
/// service's own, and has no target.
fn localhost_node_port_count(p: &Port<'_>, family: IpFamily, np: u16) -> String {
    format!(
        "{} -d {} --dport {np} -m nfacct --nfacct-name {LOCALHOST_NODE_PORTS_COUNTER}",
        p.head(&format!("{} localhost NodePort", p.name)),
        super::base::loopback(family)
    )
}

/// The filter verdict and comment for traffic that is not forwarded.
fn filter_verdict(d: Dispatch, name: &str) -> Option<(&'static str, String)> {
    match d {
        Dispatch::Forward(_) => None,
        Dispatch::Drop => Some(("DROP", format!("{name} has no local endpoints"))),
        Dispatch::Reject => Some(("REJECT", format!("{name} has no endpoints"))),
    }
}

fn render_port(sp: &ServicePlan, ctx: &RenderContext, out: &mut ServiceRules) {
    let p = Port::new(sp);
    let has_endpoints = sp.internal != Dispatch::Reject;
    let cluster_ip = p.dest(sp.cluster_ip, sp.port);

    // ClusterIP: DNAT dispatch in nat, or REJECT/DROP in filter.
    match (sp.internal, filter_verdict(sp.internal, &p.name)) {
        (Dispatch::Forward(set), _) => out.nat_services.push(format!(
            "{} {cluster_ip} -j {}",
            p.head(&format!("{} cluster IP", p.name)),
            p.set_chain(set)
        )),
        (_, Some((target, comment))) => out
            .filter_services
            .push(format!("{} {cluster_ip} -j {target}", p.head(&comment))),
        (_, None) => {}
    }

    // External destinations: external IPs and the node port.
    if let Some(ext) = &sp.external {
        let verdict = filter_verdict(ext.dispatch, &p.name);
        for addr in &sp.external_ips {
            let dest = p.dest(addr, sp.port);
            if has_endpoints {
                out.nat_services.push(format!(
                    "{} {dest} -j {}",
                    p.head(&format!("{} external IP", p.name)),
                    p.ext
                ));
            }
            if let Some((target, comment)) = &verdict {
                out.filter_external
                    .push(format!("{} {dest} -j {target}", p.head(comment)));
            }
        }
        load_balancer(&p, has_endpoints, verdict.as_ref(), out);
        if let Some(np) = sp.node_port {
            if has_endpoints {
                out.nat_nodeports
                    .push(format!("{} --dport {np} -j {}", p.head(&p.name), p.ext));
                if ctx.count_localhost_node_ports {
                    out.nat_services
                        .push(localhost_node_port_count(&p, ctx.family, np));
                }
            }
            if let Some((target, comment)) = &verdict {
                out.filter_external.push(format!(
                    "-m comment --comment {} -m addrtype --dst-type LOCAL -m {pr} -p {pr} --dport {np} -j {target}",
                    quote(comment),
                    pr = p.proto
                ));
            }
        }
        if has_endpoints {
            out.chains
                .push(external_chain(&p, ext.policy, ext.dispatch, ctx));
        }
    }

    // Endpoint dispatch chains, and one chain per endpoint they reach.
    let mut endpoints: BTreeSet<SocketAddr> = BTreeSet::new();
    for set in sp.used_sets() {
        let mut rules = Vec::new();
        if sp.internal == Dispatch::Forward(set) {
            if let Some(rule) = cluster_ip_masquerade(&p, ctx) {
                rules.push(rule);
            }
        }
        let eps = sp.endpoints(set);
        if let Some(timeout) = sp.affinity {
            rules.extend(affinity::checks(
                &p.sp.name,
                eps,
                timeout,
                ctx.large_cluster,
            ));
        }
        rules.extend(endpoint_dispatch(&p, eps, ctx.large_cluster));
        endpoints.extend(eps.iter().copied());
        out.chains.push(chain(p.set_chain(set), rules));
    }
    for ep in &endpoints {
        out.chains
            .push(endpoint_chain_rules(&p, ep, ctx.large_cluster));
    }
}

/// The first rule of the ClusterIP traffic's chain: mark for masquerade what the policy says.
fn cluster_ip_masquerade(p: &Port<'_>, ctx: &RenderContext) -> Option<String> {
    let head = format!(
        "{} {}",
        p.head(&format!("{} cluster IP", p.name)),
        p.dest(p.sp.cluster_ip, p.sp.port)
    );
    match p.sp.cluster_ip_masquerade {
        ClusterIpMasquerade::Never => None,
        ClusterIpMasquerade::Always => Some(format!("{head} -j {KUBE_MARK_MASQ}")),
        ClusterIpMasquerade::NotFromPods => match ctx.local.iptables_match(true) {
            Some(not_pods) => Some(format!("{head} {not_pods} -j {KUBE_MARK_MASQ}")),
            None if ctx.local.cidrs().len() > 1 => Some(format!("{head} -j {NON_POD_MASQ}")),
            None => None,
        },
    }
}

fn external_chain(
    p: &Port<'_>,
    policy: TrafficPolicy,
    dispatch: Dispatch,
    ctx: &RenderContext,
) -> Chain {
    let mut rules = Vec::new();
    let name = &p.name;
    match policy {
        TrafficPolicy::Cluster => {
            // May cross nodes: masquerade so the reply comes back through this node.
            rules.push(format!(
                "-m comment --comment \"masquerade traffic for {name} external destinations\" -j {KUBE_MARK_MASQ}"
            ));
        }
        TrafficPolicy::Local => {
            // Pod traffic to an external destination is subject to no policy (as if it went
            // out to a load balancer and came back in).
            for pods in ctx.local.iptables_sources() {
                rules.push(format!(
                    "-m comment --comment \"pod traffic for {name} external destinations\" {pods} -j {}",
                    p.svc
                ));
            }
            // The node's own traffic has a local source the endpoint could not answer
            // directly: masquerade it, and route it cluster-wide.
            rules.push(format!(
                "-m comment --comment \"masquerade LOCAL traffic for {name} external destinations\" -m addrtype --src-type LOCAL -j {KUBE_MARK_MASQ}"
            ));
            rules.push(format!(
                "-m comment --comment \"route LOCAL traffic for {name} external destinations\" -m addrtype --src-type LOCAL -j {}",
                p.svc
            ));
        }
    }
    if let Dispatch::Forward(set) = dispatch {
        rules.push(format!("-j {}", p.set_chain(set)));
    }
    chain(&p.ext, rules)
}

/// upstream's probability text: 1/n with 10 decimals.
fn probability(n: usize) -> String {
    format!("{:.10}", 1.0 / n as f64)
}

/// Random choice with equal probability: rule `i` of `n` matches with probability 1/(n−i), the
/// last one always.
fn endpoint_dispatch(p: &Port<'_>, endpoints: &[SocketAddr], large: bool) -> Vec<String> {
    let n = endpoints.len();
    endpoints
        .iter()
        .enumerate()
        .map(|(i, ep)| {
            let mut rule = String::new();
            if !large {
                let _ = write!(rule, "-m comment --comment \"{} -> {ep}\" ", p.name);
            }
            if i + 1 < n {
                let _ = write!(
                    rule,
                    "-m statistic --mode random --probability {} ",
                    probability(n - i)
                );
            }
            let _ = write!(rule, "-j {}", endpoint_chain(&p.sp.name, ep));
            rule
        })
        .collect()
}

fn endpoint_chain_rules(p: &Port<'_>, ep: &SocketAddr, large: bool) -> Chain {
    let comment = if large {
        String::new()
    } else {
        format!("-m comment --comment {} ", quote(&p.name))
    };
    let name = endpoint_chain(&p.sp.name, ep);
    let recent = affinity::record(p.sp, &name);
    chain(
        &name,
        vec![
            // Hairpin: a pod reaching itself through the service must be masqueraded, or it
            // would answer itself directly.
            format!("{comment}-s {} -j {KUBE_MARK_MASQ}", ep.ip()),
            format!(
                "{comment}{recent}-m {pr} -p {pr} -j DNAT --to-destination {ep}",
                pr = p.proto
            ),
        ],
    )
}
