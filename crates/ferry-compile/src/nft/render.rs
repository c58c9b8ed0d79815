//! Plan → [`Ruleset`].

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};

use ipnet::IpNet;

use ferry_model::{IpFamily, ServiceName, TrafficPolicy};

use super::model::{BaseChain, Chain, Element, Ruleset, ServiceRules, SetDef};
use super::names::{chain_base, EXTERNAL_PREFIX, LOCAL_PREFIX, SERVICE_PREFIX};
use crate::plan::{ClusterIpMasquerade, Dispatch, EndpointSet, NodePortScope, Plan, ServicePlan};

/// What rendering one service needs from the node-wide plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderContext {
    /// The family.
    pub family: IpFamily,
    /// Pod CIDRs of the local-traffic detector (empty: none).
    pub pod_cidrs: Vec<IpNet>,
}

impl RenderContext {
    /// The context of a plan.
    pub fn of(plan: &Plan) -> Self {
        Self {
            family: plan.family,
            pod_cidrs: plan.pod_cidrs.clone(),
        }
    }

    fn ip(&self) -> &'static str {
        match self.family {
            IpFamily::V4 => "ip",
            IpFamily::V6 => "ip6",
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

fn chain(name: &str, rules: &[&str]) -> Chain {
    Chain {
        name: name.to_owned(),
        rules: rules.iter().map(|r| (*r).to_owned()).collect(),
    }
}

fn base(kind: &'static str, hook: &'static str, priority: i32, rules: &[&str]) -> BaseChain {
    BaseChain {
        kind,
        hook,
        priority,
        chain: chain(&format!("{kind}-{hook}"), rules),
    }
}

/// Renders everything that does not depend on individual services.
pub fn render_base(plan: &Plan) -> Ruleset {
    let (ip, addr, loopback) = match plan.family {
        IpFamily::V4 => ("ip", "ipv4_addr", "127.0.0.0/8"),
        IpFamily::V6 => ("ip6", "ipv6_addr", "::1"),
    };
    let mark = format!("0x{:08x}", plan.masquerade_mark);
    let ct_new = "ct state new";
    // Filter chains run before DNAT (dstnat - 10) so they see the service address; the
    // cluster-ips check on output runs after it (dstnat + 10), so that a locally generated
    // packet to a valid service port has already been translated.
    let base_chains = vec![
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
            &[&format!("{ct_new} jump service-endpoints-check")],
        ),
        BaseChain {
            kind: "filter",
            hook: "output",
            priority: -90,
            chain: chain(
                "filter-output-post-dnat",
                &[&format!("{ct_new} jump cluster-ips-check")],
            ),
        },
        base("nat", "prerouting", -100, &["jump services"]),
        base("nat", "output", -100, &["jump services"]),
        base("nat", "postrouting", 100, &["jump masquerading"]),
    ];
    let node_port_match = match &plan.node_ports {
        NodePortScope::AllLocal => format!("fib daddr type local {ip} daddr != {loopback}"),
        NodePortScope::LocalWithin(_) => format!("{ip} daddr @nodeport-ips fib daddr type local"),
    };
    let chains = vec![
        chain(
            "cluster-ips-check",
            &[&format!("{ip} daddr @cluster-ips reject")],
        ),
        chain(
            "mark-for-masquerade",
            &[&format!("meta mark set meta mark | {mark}")],
        ),
        chain(
            "masquerading",
            &[
                &format!("{ip} saddr . {ip} daddr @hairpin jump mark-for-masquerade"),
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
    let np_key = "inet_proto . inet_service".to_owned();
    let set = |name, key: &str, value, interval, comment| SetDef {
        name,
        key: key.to_owned(),
        value,
        interval,
        comment,
    };
    let sets = vec![
        set("cluster-ips", addr, None, false, "Active ClusterIPs"),
        set(
            "hairpin",
            &format!("{addr} . {addr}"),
            None,
            false,
            "endpoint . endpoint: a pod reaching itself through a service is masqueraded",
        ),
        set(
            "nodeport-ips",
            addr,
            None,
            true,
            "addresses that accept NodePort traffic",
        ),
        set(
            "no-endpoint-nodeports",
            &np_key,
            Some("verdict"),
            false,
            "drop or reject NodePort traffic of services without usable endpoints",
        ),
        set(
            "no-endpoint-services",
            &svc_key,
            Some("verdict"),
            false,
            "drop or reject service IP traffic of services without usable endpoints",
        ),
        set(
            "service-ips",
            &svc_key,
            Some("verdict"),
            false,
            "ClusterIP and external IP traffic",
        ),
        set(
            "service-nodeports",
            &np_key,
            Some("verdict"),
            false,
            "NodePort traffic",
        ),
    ];
    let elements = match &plan.node_ports {
        NodePortScope::AllLocal => Vec::new(),
        NodePortScope::LocalWithin(nets) => nets
            .iter()
            .map(|n| Element {
                set: "nodeport-ips",
                key: n.to_string(),
                value: None,
            })
            .collect(),
    };
    Ruleset {
        family: plan.family,
        base_chains,
        chains,
        sets,
        elements,
        services: BTreeMap::new(),
        shared: BTreeMap::new(),
    }
}

struct Names {
    service: String,
    local: String,
    external: String,
}

impl Names {
    fn of(sp: &ServicePlan) -> Self {
        let base = chain_base(&sp.name);
        Self {
            service: format!("{SERVICE_PREFIX}{base}"),
            local: format!("{LOCAL_PREFIX}{base}"),
            external: format!("{EXTERNAL_PREFIX}{base}"),
        }
    }

    fn set(&self, set: EndpointSet) -> &str {
        match set {
            EndpointSet::Cluster => &self.service,
            EndpointSet::Local => &self.local,
        }
    }
}

/// Renders all ports of one service.
pub fn render_service(ports: &[&ServicePlan], ctx: &RenderContext) -> ServiceRules {
    let mut out = ServiceRules::default();
    for sp in ports {
        render_port(sp, ctx, &mut out);
    }
    out.chains.sort_by(|a, b| a.name.cmp(&b.name));
    out.elements.sort();
    out.elements.dedup();
    out
}

fn verdict_value(d: Dispatch, forward_to: &str) -> String {
    match d {
        Dispatch::Forward(_) => format!("goto {forward_to}"),
        Dispatch::Drop => "drop".to_owned(),
        Dispatch::Reject => "goto reject-chain".to_owned(),
    }
}

fn render_port(sp: &ServicePlan, ctx: &RenderContext, out: &mut ServiceRules) {
    let names = Names::of(sp);
    let proto = sp.name.protocol.as_str();
    let mut el = |set: &'static str, key: String, value: Option<String>| {
        out.elements.push(Element { set, key, value });
    };
    el("cluster-ips", sp.cluster_ip.to_string(), None);
    for e in sp.cluster_endpoints.iter().chain(&sp.local_endpoints) {
        el("hairpin", format!("{} . {}", e.ip(), e.ip()), None);
    }

    // ClusterIP traffic.
    let vip_key = |addr: &IpAddr| format!("{addr} . {proto} . {}", sp.port);
    let map = if matches!(sp.internal, Dispatch::Forward(_)) {
        "service-ips"
    } else {
        "no-endpoint-services"
    };
    let internal_chain = match sp.internal {
        Dispatch::Forward(set) => names.set(set).to_owned(),
        _ => String::new(),
    };
    el(
        map,
        vip_key(&sp.cluster_ip),
        Some(verdict_value(sp.internal, &internal_chain)),
    );

    // External traffic: node port and external IPs.
    if let Some(ext) = &sp.external {
        let reaches_chain = ext.dispatch != Dispatch::Reject;
        if let Some(np) = sp.node_port {
            if reaches_chain {
                el(
                    "service-nodeports",
                    format!("{proto} . {np}"),
                    Some(format!("goto {}", names.external)),
                );
            }
            if !matches!(ext.dispatch, Dispatch::Forward(_)) {
                el(
                    "no-endpoint-nodeports",
                    format!("{proto} . {np}"),
                    Some(verdict_value(ext.dispatch, "")),
                );
            }
        }
        for addr in &sp.external_ips {
            if reaches_chain {
                el(
                    "service-ips",
                    vip_key(addr),
                    Some(format!("goto {}", names.external)),
                );
            }
            if !matches!(ext.dispatch, Dispatch::Forward(_)) {
                el(
                    "no-endpoint-services",
                    vip_key(addr),
                    Some(verdict_value(ext.dispatch, "")),
                );
            }
        }
        if reaches_chain {
            out.chains
                .push(external_chain(ext.policy, ext.dispatch, &names, ctx));
        }
    }

    for set in sp.used_sets() {
        let mut rules = Vec::new();
        if sp.internal == Dispatch::Forward(set) {
            if let Some(rule) = cluster_ip_masquerade(sp, ctx) {
                rules.push(rule);
            }
        }
        rules.extend(dnat_cascade(proto, sp.endpoints(set)));
        out.chains.push(Chain {
            name: names.set(set).to_owned(),
            rules,
        });
    }
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

fn cluster_ip_masquerade(sp: &ServicePlan, ctx: &RenderContext) -> Option<String> {
    let ip = ctx.ip();
    let proto = sp.name.protocol.as_str();
    let dest = format!("{ip} daddr {} {proto} dport {}", sp.cluster_ip, sp.port);
    match sp.cluster_ip_masquerade {
        ClusterIpMasquerade::Never => None,
        ClusterIpMasquerade::Always => Some(format!("{dest} jump mark-for-masquerade")),
        ClusterIpMasquerade::NotFromPods => Some(format!(
            "{dest} {} jump mark-for-masquerade",
            cidr_match(ip, "saddr", true, &ctx.pod_cidrs)
        )),
    }
}

fn external_chain(
    policy: TrafficPolicy,
    dispatch: Dispatch,
    names: &Names,
    ctx: &RenderContext,
) -> Chain {
    let mut rules = Vec::new();
    match policy {
        TrafficPolicy::Cluster => {
            // May cross nodes: masquerade so the reply comes back through this node.
            rules.push("jump mark-for-masquerade".to_owned());
            rules.push(format!("goto {}", names.service));
        }
        TrafficPolicy::Local => {
            // Pod and node traffic to an external destination is not subject to the policy
            // (it behaves as if it went out to a load balancer and came back in).
            if !ctx.pod_cidrs.is_empty() {
                rules.push(format!(
                    "{} goto {}",
                    cidr_match(ctx.ip(), "saddr", false, &ctx.pod_cidrs),
                    names.service
                ));
            }
            // The node's own traffic has a node address as source, which the endpoint could
            // not answer directly: masquerade it.
            rules.push("fib saddr type local jump mark-for-masquerade".to_owned());
            rules.push(format!("fib saddr type local goto {}", names.service));
            if let Dispatch::Forward(set) = dispatch {
                rules.push(format!("goto {}", names.set(set)));
            }
        }
    }
    Chain {
        name: names.external.clone(),
        rules,
    }
}

/// Random choice with equal probability: rule `i` of `n` matches with probability 1/(n−i) (a
/// fresh random number each rule), the last one always, like iptables' `statistic` cascade.
fn dnat_cascade(proto: &str, endpoints: &[SocketAddr]) -> Vec<String> {
    let n = endpoints.len();
    endpoints
        .iter()
        .enumerate()
        .map(|(i, ep)| {
            let mut rule = String::new();
            if i + 1 < n {
                let _ = write!(rule, "numgen random mod {} 0 ", n - i);
            }
            let _ = write!(rule, "meta l4proto {proto} dnat to {ep}");
            rule
        })
        .collect()
}
