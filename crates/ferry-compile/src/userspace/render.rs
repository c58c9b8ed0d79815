//! Plan + proxy ports → the userspace table ([`Rules`]).

use std::collections::BTreeMap;
use std::net::IpAddr;

use ferry_model::{ServiceName, ServicePortName};

use super::base::render_base;
use super::{proxied_protocol, PortInfo, Proxied, ProxyPorts, Rules};
use crate::nft::{Element, Key, ServiceRules, Value, Verdict};
use crate::plan::{Dispatch, Plan, ServicePlan};

/// Renders a whole plan with the node's proxy ports (a service port without one is rejected).
pub fn render(plan: &Plan, proxy_ports: &ProxyPorts) -> Rules {
    let mut ruleset = render_base(plan);
    let mut ports = BTreeMap::new();
    let mut by_service: BTreeMap<&ServiceName, Vec<&ServicePlan>> = BTreeMap::new();
    for sp in plan.services.values() {
        by_service.entry(&sp.name.service).or_default().push(sp);
    }
    for (name, sps) in by_service {
        let (rules, infos) = render_service(&sps, proxy_ports);
        ruleset.set_service(name.clone(), Some(rules));
        ports.extend(infos);
    }
    Rules { ruleset, ports }
}

/// Renders all ports of one service (an incremental sync replaces them together).
pub fn render_service(
    sps: &[&ServicePlan],
    proxy_ports: &ProxyPorts,
) -> (ServiceRules, Vec<(ServicePortName, PortInfo)>) {
    let mut rules = ServiceRules::default();
    let mut infos = Vec::new();
    for sp in sps {
        let (els, info) = render_port(sp, proxy_ports.get(&sp.name));
        rules.elements.extend(els);
        infos.push((sp.name.clone(), info));
    }
    rules.elements.sort();
    rules.elements.dedup();
    (rules, infos)
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
pub fn render_port(sp: &ServicePlan, proxy_port: Option<u16>) -> (Vec<Element>, PortInfo) {
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
    let info = PortInfo {
        proxied,
        frontends: frontends(sp),
    };
    (out.els, info)
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
