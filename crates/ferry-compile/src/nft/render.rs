//! Plan → [`Ruleset`].

use crate::local::LocalTraffic;
use std::collections::BTreeMap;
use std::net::IpAddr;

use ferry_model::{IpFamily, ServiceName};

use super::affinity;
use super::dispatch::render_port;
use super::model::{BaseChain, Chain, Element, Key, Ruleset, ServiceRules, SetDef};
use super::slots::Slots;
use crate::plan::{NodePortScope, Plan, ServicePlan};

/// What rendering one service needs from the node-wide plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderContext {
    /// The family.
    pub family: IpFamily,
    /// The local-traffic detector.
    pub local: LocalTraffic,
}

impl RenderContext {
    /// The context of a plan.
    pub fn of(plan: &Plan) -> Self {
        Self {
            family: plan.family,
            local: plan.local.clone(),
        }
    }
}

/// Renders a whole plan.
pub fn render(plan: &Plan) -> Ruleset {
    let ctx = RenderContext::of(plan);
    let mut ruleset = render_base(plan);
    let mut by_service: BTreeMap<&ServiceName, Vec<&ServicePlan>> = BTreeMap::new();
    for sp in plan.services.values() {
        by_service.entry(&sp.name.service).or_default().push(sp);
    }
    for (name, ports) in by_service {
        ruleset.set_service(name.clone(), Some(render_service(&ports, &ctx)));
    }
    ruleset
}

pub(crate) fn chain(name: &str, rules: &[&str]) -> Chain {
    Chain {
        name: name.to_owned(),
        rules: rules.iter().map(|r| (*r).to_owned()).collect(),
    }
}

pub(crate) fn base(
    kind: &'static str,
    hook: &'static str,
    priority: i32,
    rules: &[&str],
) -> BaseChain {
    BaseChain {
        kind,
        hook,
        priority,
        chain: chain(&format!("{kind}-{hook}"), rules),
    }
}

/// The match of packets to a NodePort address of this node (never loopback: that would
/// need `route_localnet`, CVE-2020-8558).
pub(crate) fn node_port_match(plan: &Plan) -> String {
    let ip = crate::family::nft_family(plan.family);
    let loopback = match plan.family {
        IpFamily::V4 => "127.0.0.0/8",
        IpFamily::V6 => "::1",
    };
    match &plan.node_ports {
        NodePortScope::AllLocal => format!("fib daddr type local {ip} daddr != {loopback}"),
        NodePortScope::LocalWithin(_) if plan.node_ports.covers_loopback() => {
            format!("{ip} daddr @nodeport-ips {ip} daddr != {loopback} fib daddr type local")
        }
        NodePortScope::LocalWithin(_) => format!("{ip} daddr @nodeport-ips fib daddr type local"),
    }
}

/// `cluster-ips-check`: new connections to a ClusterIP on a port no Service uses are rejected;
/// then, as upstream's nftables mode, those to any other address inside a service CIDR are
/// dropped instead of being routed off the node (the rule is left out while no ServiceCIDR is
/// known, as upstream's is). A change of service CIDRs changes this node-level chain: the
/// next sync is full.
fn cluster_ips_check(plan: &Plan) -> Chain {
    let ip = crate::family::nft_family(plan.family);
    let mut rules = vec![format!("{ip} daddr @cluster-ips reject")];
    if !plan.service_cidrs.is_empty() {
        let cidrs: Vec<String> = plan.service_cidrs.iter().map(ToString::to_string).collect();
        rules.push(format!("{ip} daddr {{ {} }} drop", cidrs.join(", ")));
    }
    Chain {
        name: "cluster-ips-check".to_owned(),
        rules,
    }
}

/// Renders everything that does not depend on individual services.
pub fn render_base(plan: &Plan) -> Ruleset {
    let ip = crate::family::nft_family(plan.family);
    let addr = match plan.family {
        IpFamily::V4 => "ipv4_addr",
        IpFamily::V6 => "ipv6_addr",
    };
    let mark = format!("0x{:08x}", plan.masquerade_mark);
    let ct_new = "ct state new";
    // Filter chains run before DNAT (dstnat - 10) so they see the service address; on output,
    // the endpoints and cluster-ips checks run after it (dstnat + 10), as upstream's
    // `filter-output` (filter priority, after `nat-output`) does: a locally generated packet
    // to a valid service port, or short-circuited by a Local policy without local endpoints,
    // has already been translated and passes.
    let base_chains = vec![
        // The load-balancer firewall must see the load-balancer IP, so it runs before DNAT in
        // prerouting (traffic from outside and from pods) and output (the node itself).
        base(
            "filter",
            "prerouting",
            -110,
            &[&format!("{ct_new} jump firewall-check")],
        ),
        base(
            "filter",
            "input",
            -110,
            &[
                &format!("{ct_new} jump nodeport-endpoints-check"),
                &format!("{ct_new} jump service-endpoints-check"),
            ],
        ),
        base(
            "filter",
            "forward",
            -110,
            &[
                &format!("{ct_new} jump service-endpoints-check"),
                &format!("{ct_new} jump cluster-ips-check"),
            ],
        ),
        base(
            "filter",
            "output",
            -110,
            &[&format!("{ct_new} jump firewall-check")],
        ),
        BaseChain {
            kind: "filter",
            hook: "output",
            priority: -90,
            chain: chain(
                "filter-output-post-dnat",
                &[
                    &format!("{ct_new} jump service-endpoints-check"),
                    &format!("{ct_new} jump cluster-ips-check"),
                    &format!("{ct_new} ct status dnat jump affinity-record"),
                ],
            ),
        },
        // Session affinity is recorded after DNAT (dstnat + 10), where the packet carries the
        // endpoint the connection was translated to and conntrack still has the frontend.
        BaseChain {
            kind: "filter",
            hook: "prerouting",
            priority: -90,
            chain: chain(
                "filter-prerouting-post-dnat",
                &[&format!("{ct_new} ct status dnat jump affinity-record")],
            ),
        },
        base("nat", "prerouting", -100, &["jump services"]),
        base("nat", "output", -100, &["jump services"]),
        base("nat", "postrouting", 100, &["jump masquerading"]),
    ];
    let node_port_match = node_port_match(plan);
    let chains = vec![
        affinity::record_chain(ip),
        cluster_ips_check(plan),
        // loadBalancerSourceRanges, element-driven: `firewall-ips` holds the load-balancer
        // frontends that have source ranges, `firewall-allow` their allowed sources, so a
        // change of ranges is elements only (no per-service rule or chain).
        chain(
            "firewall-allow-check",
            &[
                &format!(
                    "{ip} daddr . meta l4proto . th dport . {ip} saddr @firewall-allow return"
                ),
                "drop",
            ],
        ),
        chain(
            "firewall-check",
            &[&format!(
                "{ip} daddr . meta l4proto . th dport @firewall-ips jump firewall-allow-check"
            )],
        ),
        chain(
            "mark-for-masquerade",
            &[&format!("meta mark set meta mark | {mark}")],
        ),
        chain(
            "masquerading",
            &[
                &format!(
                    "ct status dnat {ip} saddr . {ip} daddr @hairpin jump mark-for-masquerade"
                ),
                &format!("meta mark & {mark} == 0 return"),
                &format!("meta mark set meta mark ^ {mark}"),
                "masquerade fully-random",
            ],
        ),
        chain(
            "nodeport-endpoints-check",
            &[&format!(
                "{node_port_match} meta l4proto . th dport vmap @no-endpoint-nodeports"
            )],
        ),
        chain("reject-chain", &["reject"]),
        chain(
            "service-endpoints-check",
            &[&format!(
                "{ip} daddr . meta l4proto . th dport vmap @no-endpoint-services"
            )],
        ),
        chain(
            "services",
            &[
                &format!("{ip} daddr . meta l4proto . th dport vmap @service-ips"),
                &format!("{node_port_match} meta l4proto . th dport vmap @service-nodeports"),
            ],
        ),
    ];
    let svc_key = format!("{addr} . inet_proto . inet_service");
    let np_key = "inet_proto . inet_service";
    let set = |name, decl: String, interval, comment| SetDef {
        interval,
        ..SetDef::set(name, decl, comment)
    };
    let map = SetDef::map;
    let slots = |by: &str| format!("typeof {by} . numgen random mod 1 : {ip} daddr . th dport");
    let by_ip = format!("{ip} daddr . meta l4proto . th dport");
    let by_np = "meta l4proto . th dport";
    let ep = format!("{addr} . inet_service");
    let pins = |name, decl: String, comment| SetDef {
        dynamic: true,
        ..map(name, decl, comment)
    };
    let sets = vec![
        pins(
            "affinity",
            format!("type {svc_key} . {addr} : {ep}"),
            "service IP . protocol . port . client : endpoint the client is pinned to (sessionAffinity ClientIP)",
        ),
        map(
            "affinity-nodeports",
            format!("type {np_key} . {ep} : verdict"),
            "protocol . node port . endpoint : goto the chain recording a pin to it, for node ports with session affinity",
        ),
        map(
            "affinity-service-ips",
            format!("type {svc_key} . {ep} : verdict"),
            "service IP . protocol . port . endpoint : goto the chain recording a pin to it, for service IPs with session affinity",
        ),
        map(
            "cluster-endpoints",
            slots(&by_ip),
            "service IP . protocol . port . slot : endpoint, cluster-wide endpoints",
        ),
        set(
            "cluster-ips",
            format!("type {addr}"),
            false,
            "Active ClusterIPs",
        ),
        set(
            "firewall-allow",
            format!("type {svc_key} . {addr}"),
            true,
            "load-balancer IP . protocol . port . source: allowed by loadBalancerSourceRanges",
        ),
        set(
            "firewall-ips",
            format!("type {svc_key}"),
            false,
            "load-balancer IP . protocol . port subject to loadBalancerSourceRanges",
        ),
        set(
            "hairpin",
            format!("type {addr} . {addr}"),
            false,
            "endpoint . endpoint: a pod reaching itself through a service is masqueraded",
        ),
        map(
            "local-endpoints",
            slots(&by_ip),
            "service IP . protocol . port . slot : endpoint, node-local endpoints",
        ),
        map(
            "no-endpoint-nodeports",
            format!("type {np_key} : verdict"),
            "drop or reject NodePort traffic of services without usable endpoints",
        ),
        map(
            "no-endpoint-services",
            format!("type {svc_key} : verdict"),
            "drop or reject service IP traffic of services without usable endpoints",
        ),
        map(
            "nodeport-cluster-endpoints",
            slots(by_np),
            "protocol . node port . slot : endpoint, cluster-wide endpoints",
        ),
        pins(
            "nodeport-affinity",
            format!("type {np_key} . {addr} : {ep}"),
            "protocol . node port . client : endpoint the client is pinned to (sessionAffinity ClientIP)",
        ),
        set(
            "nodeport-ips",
            format!("type {addr}"),
            true,
            "addresses that accept NodePort traffic",
        ),
        map(
            "nodeport-local-endpoints",
            slots(by_np),
            "protocol . node port . slot : endpoint, node-local endpoints",
        ),
        map(
            "service-ips",
            format!("type {svc_key} : verdict"),
            "ClusterIP, external IP and load-balancer IP traffic",
        ),
        map(
            "service-nodeports",
            format!("type {np_key} : verdict"),
            "NodePort traffic",
        ),
    ];
    let elements = match &plan.node_ports {
        NodePortScope::AllLocal => Vec::new(),
        NodePortScope::LocalWithin(nets) => nets
            .iter()
            .map(|n| Element::new("nodeport-ips", Key::Net(*n), None))
            .collect(),
    };
    Ruleset {
        family: plan.family,
        base_chains,
        chains,
        sets,
        elements,
        services: BTreeMap::new(),
        shared: Default::default(),
        dispatch: BTreeMap::new(),
    }
}

/// Renders all ports of one service.
pub fn render_service(ports: &[&ServicePlan], ctx: &RenderContext) -> ServiceRules {
    let mut out = ServiceRules::default();
    for sp in ports {
        render_port(sp, ctx, &mut out);
    }
    out.chains.sort_by(|a, b| a.name.cmp(&b.name));
    out.chains.dedup_by(|a, b| a.name == b.name);
    out.elements.sort();
    out.elements.dedup();
    out.slots.sort();
    out.slots.dedup();
    out.hairpin = hairpin(ports, &out.slots);
    // Held for as long as the service is installed: no growth slack.
    out.elements.shrink_to_fit();
    out.slots.shrink_to_fit();
    out.chains.shrink_to_fit();
    out
}

/// The addresses in the endpoint maps that may be a sender here (the ports' hairpin sources),
/// sorted, each once.
fn hairpin(ports: &[&ServicePlan], slots: &[Slots]) -> Vec<IpAddr> {
    let may_send = |ip: &IpAddr| {
        ports
            .iter()
            .any(|sp| sp.hairpin_sources.binary_search(ip).is_ok())
    };
    let mut ips: Vec<IpAddr> = slots
        .iter()
        .flat_map(Slots::addresses)
        .filter(may_send)
        .collect();
    ips.sort_unstable();
    ips.dedup();
    ips.shrink_to_fit();
    ips
}
