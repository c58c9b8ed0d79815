//! Plan + proxy ports → the userspace table ([`Ruleset`]).

use std::net::IpAddr;

use ferry_model::IpFamily;

use super::base::render_base;
use super::{proxied_protocol, Element, PortRules, Proxied, ProxyPorts, Ruleset, Value};
use crate::nft::{Key, Verdict};
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
