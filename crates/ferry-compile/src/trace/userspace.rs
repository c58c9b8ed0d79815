//! The explanation as the userspace mode serves it: the same decisions as nftables mode (the
//! fixed checks are the same chains), but a frontend is redirected to Ferry's proxy port
//! instead of DNATed, and the proxy chooses the endpoint and connects to it itself.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ferry_model::{NodeView, TrafficPolicy};

use super::proxied::{listener, proxy_step};
use super::{step, Frontend, Origin, Step, StepKind, Trace, Verdict};
use crate::nft::{Element, Key, Value};
use crate::plan::{Plan, ServicePlan};
use crate::userspace::{Proxied, Rules};

/// The traced frontend's objects in the userspace table.
struct Redirect<'a> {
    rules: &'a Rules,
    sp: Option<&'a ServicePlan>,
    key: Key,
    /// `portals` or `nodeports`.
    map: &'static str,
    /// `portals-container`, `nodeports-host`, …
    chain: String,
    /// The source is the node or one of its pods: the `-local-sources` maps apply to it.
    near: bool,
}

impl Redirect<'_> {
    fn elements(&self) -> impl Iterator<Item = &Element> {
        let service = self
            .sp
            .and_then(|sp| self.rules.ruleset.services.get(&sp.name.service));
        service
            .into_iter()
            .flat_map(|r| r.elements.iter())
            .filter(|e| e.key == self.key)
    }

    /// The redirect element of the frontend (`map portals element K : PORT`), from the map or
    /// its `-local-sources` twin; or what the frontend has instead.
    fn element(&self) -> String {
        let local = format!("{}-local-sources", self.map);
        let found = self
            .elements()
            .find(|e| e.set == self.map)
            .or_else(|| self.elements().find(|e| self.near && e.set == local))
            .or_else(|| self.elements().find(|e| e.set.starts_with("no-endpoint")));
        match found {
            Some(e) => match &e.value {
                Some(Value::Port(p)) => format!("map {} element {} : {p}", e.set, self.key),
                Some(v) => format!("map {} element {} : {v}", e.set, self.key),
                None => format!("set {} element {}", e.set, self.key),
            },
            None => format!("map {} (no element {})", self.map, self.key),
        }
    }
}

/// The proxy-port listener of the node's addresses (`0.0.0.0`, `[::]`).
fn any(ip: &IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => Ipv4Addr::UNSPECIFIED.into(),
        IpAddr::V6(_) => Ipv6Addr::UNSPECIFIED.into(),
    }
}

impl Trace {
    /// The explanation as the userspace mode serves it (`rules`: the node's table and proxy
    /// ports), each step naming the table's chains and maps or the proxy's listener.
    pub fn for_userspace(mut self, view: &NodeView, plan: &Plan, rules: &Rules) -> Trace {
        self.iptables_variant = None;
        self.objects_label = "userspace";
        if self.packet.dst.is_loopback() && self.frontend == Some(Frontend::NodePort) {
            // A localhost NodePort: the proxy's own steps already.
            return self;
        }
        let p = self.packet;
        let sp = self.service.as_ref().and_then(|n| plan.services.get(n));
        let node_port = self.frontend == Some(Frontend::NodePort)
            || self
                .steps
                .iter()
                .any(|s| matches!(s.kind, StepKind::NodePortNotHere(_)));
        let (map, key) = match node_port {
            true => ("nodeports", Key::NodePort(p.protocol, p.port)),
            false => ("portals", Key::Frontend(p.dst, p.protocol, p.port)),
        };
        let side = match self.origin {
            Origin::ThisNode => "host",
            _ => "container",
        };
        let r = Redirect {
            rules,
            sp,
            key,
            map,
            chain: format!("{map}-{side}"),
            near: self.origin != Origin::Outside,
        };
        let proxied = sp
            .and_then(|sp| rules.ports.get(&sp.name))
            .map(|i| i.proxied);
        if let (Some(sp), Verdict::Forwarded { .. }) = (sp, &self.verdict) {
            match proxied {
                Some(Proxied::Port(port)) => {
                    self.redirected(view, sp, &r, port);
                    return self;
                }
                other => self.not_proxied(other, &r),
            }
        }
        for s in &mut self.steps {
            s.objects = r.fixed_objects(s);
        }
        self
    }

    /// Every step of a frontend redirected to `port`: the proxy's step replaces the DNAT and
    /// the masquerade (the endpoint always sees the node).
    fn redirected(&mut self, view: &NodeView, sp: &ServicePlan, r: &Redirect<'_>, port: u16) {
        let sview = view.services.get(&sp.name);
        let short_circuit = self.steps.iter().any(|s| s.kind == StepKind::ShortCircuit);
        let policy_why = match (self.frontend, sp.external.as_ref().map(|e| e.policy)) {
            _ if short_circuit => "short-circuit to the cluster-wide endpoints".to_owned(),
            (Some(Frontend::ClusterIp), _) | (_, None) => format!(
                "internalTrafficPolicy {:?}",
                sview.map(|v| v.internal_policy).unwrap_or_default()
            ),
            (_, Some(TrafficPolicy::Local)) => "externalTrafficPolicy Local: only this node's \
                 endpoints (which see the node as the source, not the client)"
                .to_owned(),
            (_, Some(policy)) => format!("externalTrafficPolicy {policy:?}"),
        };
        let listener = listener(any(&self.packet.dst), port, sp);
        for s in std::mem::take(&mut self.steps) {
            match s.kind {
                StepKind::Masquerade | StepKind::Hairpin | StepKind::Affinity(..) => {}
                StepKind::Forward(set) => {
                    proxy_step(sp, sview, set, &policy_why, listener.clone(), self);
                }
                StepKind::ShortCircuit => self.steps.push(Step {
                    what: format!(
                        "short-circuit: the source is {}, so the Local policy does not apply",
                        self.origin
                    ),
                    why: "the node's own traffic and its pods' reach a Local frontend's \
                          endpoints cluster-wide, as in the kernel modes"
                        .to_owned(),
                    objects: vec![r.element()],
                    ..s
                }),
                _ => {
                    let objects = r.fixed_objects(&s);
                    self.steps.push(Step { objects, ..s });
                }
            }
        }
    }

    /// A service port the proxy does not carry (SCTP) or has no port for: rejected.
    fn not_proxied(&mut self, proxied: Option<Proxied>, r: &Redirect<'_>) {
        let why = match proxied {
            Some(Proxied::Sctp) => "SCTP is not proxied in user space",
            _ => "the service port has no proxy port (the range is full, or the port cannot be bound)",
        };
        self.steps.retain(|s| s.kind == StepKind::Dispatch);
        self.steps.push(step(
            StepKind::Rejected,
            format!("rejected: {why}"),
            "the userspace mode rejects the frontends of a service port it cannot serve",
            vec![r.element(), "chain reject-chain".to_owned()],
        ));
        self.verdict = Verdict::Rejected;
    }
}

impl Redirect<'_> {
    /// The userspace table's objects of a step that is not the proxy's: the fixed checks are
    /// nftables mode's chains and sets, the dispatch is the redirect chains.
    fn fixed_objects(&self, s: &Step) -> Vec<String> {
        let hook = match self.chain.ends_with("-host") {
            true => "nat-output",
            false => "nat-prerouting",
        };
        match s.kind {
            StepKind::Dispatch => vec![
                format!("chain {hook}"),
                format!("chain {}", self.chain),
                self.element(),
            ],
            StepKind::NotAService => vec!["map portals".into(), "map nodeports".into()],
            StepKind::NodePortNotHere(_) => s
                .objects
                .iter()
                .map(|o| {
                    o.replace(
                        "chain services (its service-nodeports rule",
                        &format!("chain {} (its redirect rule", self.chain),
                    )
                })
                .collect(),
            // The nftables mode's dispatch chain does not exist here: the redirect map has no
            // element instead.
            _ => s
                .objects
                .iter()
                .map(
                    |o| match o.starts_with("chain ") && o.ends_with("(no rule matches)") {
                        true => format!(
                            "chain {} (no element {} in map {})",
                            self.chain, self.key, self.map
                        ),
                        false => o.clone(),
                    },
                )
                .collect(),
        }
    }
}
