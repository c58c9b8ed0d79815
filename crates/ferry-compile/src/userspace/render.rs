//! Plan + proxy ports → the userspace table ([`Ruleset`]).

use std::collections::BTreeMap;
use std::net::IpAddr;

use ipnet::IpNet;

use ferry_model::IpFamily;

use super::{
    proxied_protocol, Element, HostTarget, PortRules, Proxied, ProxyPorts, Ruleset, Value,
};
use crate::nft::{self, BaseChain, Chain, Key, SetDef, Verdict};
use crate::plan::{Dispatch, Plan, ServicePlan};

/// What rendering one service port needs from the node-wide plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderContext {
    /// The family.
    pub family: IpFamily,
}

impl RenderContext {
    /// The context of a plan.
    pub fn of(plan: &Plan) -> Self {
        Self {
            family: plan.family,
        }
    }
}

/// Renders a whole plan with the node's proxy ports (a service port without one is rejected).
pub fn render(plan: &Plan, ports: &ProxyPorts) -> Ruleset {
    let ctx = RenderContext::of(plan);
    let mut ruleset = render_base(plan);
    for sp in plan.services.values() {
        let rules = render_port(sp, ports.get(&sp.name), &ctx);
        ruleset.ports.insert(sp.name.clone(), rules);
    }
    ruleset
}

/// Where the node's own traffic goes: the node's first primary address of the family.
fn host_target(plan: &Plan) -> HostTarget {
    plan.node_ips
        .first()
        .map_or(HostTarget::Redirect, |ip| HostTarget::Dnat(*ip))
}

/// `redirect to :KEY map @MAP` or `dnat ip to NODE:KEY map @MAP`.
fn to_proxy(host: Option<HostTarget>, key: &str, map: &str) -> String {
    let target = match host {
        None | Some(HostTarget::Redirect) => "redirect to :".to_owned(),
        Some(HostTarget::Dnat(IpAddr::V4(a))) => format!("dnat ip to {a}:"),
        Some(HostTarget::Dnat(IpAddr::V6(a))) => format!("dnat ip6 to [{a}]:"),
    };
    format!("meta l4proto {{ tcp, udp }} {target}{key} map @{map}")
}

fn saddr_within(family: IpFamily, nets: &[IpNet]) -> String {
    let ip = match family {
        IpFamily::V4 => "ip",
        IpFamily::V6 => "ip6",
    };
    let list: Vec<String> = nets.iter().map(ToString::to_string).collect();
    format!("{ip} saddr {{ {} }} ", list.join(", "))
}

/// The nat chains: `portals-*` for service IPs, `nodeports-*` for NodePorts; `*-container`
/// for traffic from outside and from pods (prerouting), `*-host` for the node's own (output).
fn nat_chains(plan: &Plan) -> Vec<Chain> {
    let family = plan.family;
    let ip = match family {
        IpFamily::V4 => "ip",
        IpFamily::V6 => "ip6",
    };
    let by_ip = format!("{ip} daddr . meta l4proto . th dport");
    let by_np = "meta l4proto . th dport";
    let np = format!("{} ", nft::node_port_match(plan));
    let pods = (!plan.pod_cidrs.is_empty()).then(|| saddr_within(family, &plan.pod_cidrs));
    let host = Some(host_target(plan));
    let chain = |name: &str, pre: &str, host, key: &str, map: &str| {
        let mut rules = vec![format!("{pre}{}", to_proxy(host, key, map))];
        let local_sources = format!("{map}-local-sources");
        // Pods reach a Local external frontend without local endpoint cluster-wide; the node
        // itself always does (its chain redirects without a source match).
        match (host, &pods) {
            (None, Some(pods)) => rules.push(format!(
                "{pre}{pods}{}",
                to_proxy(host, key, &local_sources)
            )),
            (None, None) => {}
            (Some(_), _) => rules.push(format!("{pre}{}", to_proxy(host, key, &local_sources))),
        }
        Chain {
            name: name.to_owned(),
            rules,
        }
    };
    vec![
        chain("nodeports-container", &np, None, by_np, "nodeports"),
        chain("nodeports-host", &np, host, by_np, "nodeports"),
        chain("portals-container", "", None, &by_ip, "portals"),
        chain("portals-host", "", host, &by_ip, "portals"),
        Chain {
            name: "proxy-ports-check".to_owned(),
            rules: vec!["meta l4proto . th dport @proxy-ports ct status ! dnat drop".to_owned()],
        },
    ]
}

fn base(kind: &'static str, hook: &'static str, priority: i32, rules: &[&str]) -> BaseChain {
    BaseChain {
        kind,
        hook,
        priority,
        chain: Chain {
            name: format!("{kind}-{hook}"),
            rules: rules.iter().map(|r| (*r).to_owned()).collect(),
        },
    }
}

/// The sets the proxy maps add to the ones shared with nftables mode.
fn proxy_sets(addr: &str) -> Vec<SetDef> {
    let map = |name, decl: String, comment| SetDef {
        name,
        map: true,
        decl,
        interval: false,
        dynamic: false,
        comment,
    };
    let svc = format!("type {addr} . inet_proto . inet_service : inet_service");
    let np = "type inet_proto . inet_service : inet_service".to_owned();
    vec![
        map("nodeports", np.clone(), "protocol . node port : proxy port"),
        map(
            "nodeports-local-sources",
            np,
            "protocol . node port : proxy port, for the node and its pods only (Local policy, no local endpoint)",
        ),
        map(
            "portals",
            svc.clone(),
            "service IP . protocol . port : proxy port (ClusterIPs, external and load-balancer IPs)",
        ),
        map(
            "portals-local-sources",
            svc,
            "service IP . protocol . port : proxy port, for the node and its pods only (Local policy, no local endpoint)",
        ),
        SetDef {
            map: false,
            ..map(
                "proxy-ports",
                "type inet_proto . inet_service".to_owned(),
                "the proxy listeners: reachable only through the redirects of this table",
            )
        },
    ]
}

/// Renders everything that does not depend on individual service ports.
pub fn render_base(plan: &Plan) -> Ruleset {
    // The checks before and after DNAT are nftables mode's: same chains, same sets.
    let shared = nft::render_base(plan);
    const SHARED_CHAINS: [&str; 6] = [
        "cluster-ips-check",
        "firewall-allow-check",
        "firewall-check",
        "nodeport-endpoints-check",
        "reject-chain",
        "service-endpoints-check",
    ];
    const SHARED_SETS: [&str; 6] = [
        "cluster-ips",
        "firewall-allow",
        "firewall-ips",
        "no-endpoint-nodeports",
        "no-endpoint-services",
        "nodeport-ips",
    ];
    let mut chains: Vec<Chain> = shared
        .chains
        .into_iter()
        .filter(|c| SHARED_CHAINS.contains(&c.name.as_str()))
        .chain(nat_chains(plan))
        .collect();
    chains.sort_by(|a, b| a.name.cmp(&b.name));
    let addr = match plan.family {
        IpFamily::V4 => "ipv4_addr",
        IpFamily::V6 => "ipv6_addr",
    };
    let mut sets: Vec<SetDef> = shared
        .sets
        .into_iter()
        .filter(|s| SHARED_SETS.contains(&s.name))
        .chain(proxy_sets(addr))
        .collect();
    sets.sort_by(|a, b| a.name.cmp(b.name));
    let elements = shared
        .elements
        .into_iter()
        .map(|e| Element {
            set: e.set,
            key: e.key,
            value: None,
            comment: e.comment,
        })
        .collect();
    Ruleset {
        family: plan.family,
        base_chains: base_chains(),
        chains,
        sets,
        elements,
        ports: BTreeMap::new(),
    }
}

fn base_chains() -> Vec<BaseChain> {
    let new = |chain: &str| format!("ct state new jump {chain}");
    vec![
        // Before DNAT: loadBalancerSourceRanges sees the load-balancer IP.
        base("filter", "prerouting", -110, &[&new("firewall-check")]),
        base(
            "filter",
            "input",
            -110,
            &[
                &new("nodeport-endpoints-check"),
                &new("service-endpoints-check"),
                &new("proxy-ports-check"),
            ],
        ),
        base(
            "filter",
            "forward",
            -110,
            &[&new("service-endpoints-check"), &new("cluster-ips-check")],
        ),
        base(
            "filter",
            "output",
            -110,
            &[&new("service-endpoints-check"), &new("firewall-check")],
        ),
        BaseChain {
            // After DNAT: a packet of the node's to a ClusterIP port nobody serves.
            priority: -90,
            chain: Chain {
                name: "filter-output-post-dnat".to_owned(),
                rules: vec![new("cluster-ips-check")],
            },
            ..base("filter", "output", -90, &[])
        },
        base(
            "nat",
            "prerouting",
            -100,
            &["jump portals-container", "jump nodeports-container"],
        ),
        base(
            "nat",
            "output",
            -100,
            &["jump portals-host", "jump nodeports-host"],
        ),
    ]
}

/// `namespace/name:port`, or `namespace/name` for an unnamed port (as nftables mode).
fn comment(sp: &ServicePlan) -> String {
    if sp.name.port.is_empty() {
        sp.name.service.to_string()
    } else {
        sp.name.to_string()
    }
}

fn verdict(d: Dispatch) -> Value {
    Value::Verdict(match d {
        Dispatch::Drop => Verdict::Drop,
        _ => Verdict::Goto("reject-chain".to_owned()),
    })
}

/// One service port's elements, as they are added.
struct PortElements {
    comment: String,
    /// The proxy port value of the redirect maps; `None` when the port is not proxied.
    port: Option<Value>,
    /// Whether the node and its pods can be short-circuited to cluster-wide endpoints.
    has_cluster_endpoints: bool,
    els: Vec<Element>,
}

impl PortElements {
    fn add(&mut self, set: &'static str, key: Key, value: Option<Value>, comment: bool) {
        self.els.push(Element {
            set,
            key,
            value,
            comment: comment.then(|| self.comment.clone()),
        });
    }

    /// A frontend's elements: a redirect, or the no-endpoint verdict (and, for a Local
    /// external frontend without a local endpoint, the redirect of the node and its pods).
    fn frontend(&mut self, d: Dispatch, key: Key, node_port: bool) {
        let (redirect, local_sources, no_endpoint) = if node_port {
            (
                "nodeports",
                "nodeports-local-sources",
                "no-endpoint-nodeports",
            )
        } else {
            ("portals", "portals-local-sources", "no-endpoint-services")
        };
        match d {
            Dispatch::Forward(_) => self.add(redirect, key, self.port.clone(), true),
            Dispatch::Drop => {
                if self.port.is_some() && self.has_cluster_endpoints {
                    self.add(local_sources, key.clone(), self.port.clone(), true);
                }
                self.add(no_endpoint, key, Some(verdict(d)), true);
            }
            Dispatch::Reject => self.add(no_endpoint, key, Some(verdict(d)), true),
        }
    }
}

/// Renders one service port, redirected to `proxy_port` (`None`: rejected, see [`Proxied`]).
pub fn render_port(sp: &ServicePlan, proxy_port: Option<u16>, _ctx: &RenderContext) -> PortRules {
    let proto = sp.name.protocol;
    let proxied = match proxy_port {
        _ if !proxied_protocol(proto) => Proxied::Sctp,
        Some(p) => Proxied::Port(p),
        None => Proxied::NoPort,
    };
    let mut out = PortElements {
        comment: comment(sp),
        port: proxy_port
            .filter(|_| proxied != Proxied::Sctp)
            .map(Value::Port),
        has_cluster_endpoints: !sp.cluster_endpoints.is_empty(),
        els: Vec::new(),
    };
    // Not proxied: every frontend is rejected, whatever the plan says.
    let (internal, external) = match proxied {
        Proxied::Port(_) => (sp.internal, sp.external.as_ref().map(|e| e.dispatch)),
        _ => (
            Dispatch::Reject,
            sp.external.as_ref().map(|_| Dispatch::Reject),
        ),
    };
    out.add("cluster-ips", Key::Addr(sp.cluster_ip), None, false);
    out.frontend(
        internal,
        Key::Frontend(sp.cluster_ip, proto, sp.port),
        false,
    );
    if let Some(fw) = &sp.firewall {
        for lb in &sp.load_balancer_ips {
            out.add(
                "firewall-ips",
                Key::Frontend(*lb, proto, sp.port),
                None,
                true,
            );
            for src in &fw.allowed {
                let key = Key::FrontendSource(*lb, proto, sp.port, *src);
                out.add("firewall-allow", key, None, false);
            }
        }
    }
    if let Some(d) = external {
        if let Some(np) = sp.node_port {
            out.frontend(d, Key::NodePort(proto, np), true);
        }
        for addr in sp.external_ips.iter().chain(&sp.load_balancer_ips) {
            out.frontend(d, Key::Frontend(*addr, proto, sp.port), false);
        }
    }
    if let Proxied::Port(p) = proxied {
        out.add("proxy-ports", Key::NodePort(proto, p), None, true);
    }
    let mut elements = out.els;
    elements.sort();
    elements.dedup();
    PortRules {
        proxied,
        frontends: frontends(sp),
        elements,
    }
}

/// The frontends of a service port, as the proxy-port table prints them.
fn frontends(sp: &ServicePlan) -> Vec<String> {
    let at = |ip: &IpAddr| match ip {
        IpAddr::V4(a) => format!("{a}:{}", sp.port),
        IpAddr::V6(a) => format!("[{a}]:{}", sp.port),
    };
    let mut out = vec![at(&sp.cluster_ip)];
    if sp.external.is_some() {
        out.extend(sp.node_port.map(|np| format!("*:{np}")));
        out.extend(sp.external_ips.iter().map(at));
        out.extend(
            sp.load_balancer_ips
                .iter()
                .map(|ip| format!("{} (LB)", at(ip))),
        );
    }
    out
}
