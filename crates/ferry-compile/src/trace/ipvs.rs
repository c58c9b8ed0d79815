//! The explanation as IPVS mode programs it: the ipset entries the packet matches, the
//! virtual server it reaches (with its scheduler and persistence), the real servers, and the
//! chains that mark it for masquerade — read from the IPVS ruleset the dataplane applies, so
//! the names are the ones `ipvsadm -Ln`, `ipset list` and `iptables -t nat -L` show.
//!
//! IPVS mode differs from the other modes where upstream's IPVS proxier does: no short-circuit
//! of the Local policy for pods and the node itself (their virtual server has only the local
//! endpoints), and a virtual server without real servers is answered by the kernel itself
//! (see [`EMPTY_VIRTUAL_SERVER`]).

use std::net::IpAddr;

use ferry_model::{NodeView, Protocol, TrafficPolicy};

use super::steps::{candidates, cluster_ip_masquerade};
use super::{step, Frontend, Origin, Step, StepKind, Target, Trace, Verdict};
use crate::iptables::{KUBE_MARK_MASQ, KUBE_POSTROUTING, KUBE_SERVICES};
use crate::ipvs::chains::{
    KUBE_IPVS_FILTER, KUBE_LOAD_BALANCER, KUBE_NODE_PORT, KUBE_SOURCE_RANGES_FIREWALL,
};
use crate::ipvs::sets::{self, SetEntry, SetKind};
use crate::ipvs::{
    real_server_line, service_line, FrontendKind, RealServerLine, Ruleset, VirtualAddress,
};
use crate::plan::{Dispatch, EndpointSet, Plan, ServicePlan};

/// What the kernel does with a new connection to a virtual server without real servers:
/// `ip_vs_leave()` answers ICMP port unreachable (the client sees "connection refused") and
/// drops the packet — measured in the IPVS guest for TCP (`ipvs_kernel.rs`).
pub const EMPTY_VIRTUAL_SERVER: Verdict = Verdict::Rejected;

impl Trace {
    /// The explanation as IPVS mode programs it (`ruleset`: the node's IPVS state of the
    /// packet's family, rendered from `plan`).
    pub fn for_ipvs(mut self, view: &NodeView, plan: &Plan, ruleset: &Ruleset) -> Trace {
        self.objects_label = "ipvs";
        self.iptables_variant = None;
        self.firewall_without_endpoints = false;
        let p = self.packet;
        let va = VirtualAddress {
            protocol: p.protocol,
            ip: p.dst,
            port: p.port,
        };
        let services = ruleset.virtual_services();
        let Some(vs) = services.get(&va) else {
            return self.no_virtual_server(ruleset);
        };
        let name = vs.service.clone();
        let Some(sp) = plan.services.get(&name) else {
            return self.no_virtual_server(ruleset);
        };
        // The virtual server decides the service and frontend (a NodePort answers on every
        // node address in IPVS mode, wherever the other modes' defaults put it).
        let same_service = self.service.as_ref() == Some(&name);
        self.service = Some(name.clone());
        self.frontend = Some(frontend_of(vs.kind));
        let firewall: Vec<Step> = self
            .steps
            .drain(..)
            .filter(|_| same_service)
            .filter(|s| {
                matches!(
                    s.kind,
                    StepKind::FirewallAllowed | StepKind::FirewallDropped
                )
            })
            .map(|s| ipvs_firewall_step(s, &va, ruleset))
            .collect();
        let dropped = firewall.iter().any(|s| s.kind == StepKind::FirewallDropped);
        self.steps = firewall;
        if dropped {
            self.verdict = Verdict::Dropped;
            return self;
        }
        let set = self.endpoint_set(sp);
        self.candidates = candidates(view.services.get(&name), Some(set));
        let mut dispatch = self.dispatch_step(sp, &va, ruleset, &vs.server);
        dispatch
            .why
            .push_str(&super::frontend::also_claimed(view, &self.packet));
        self.steps.push(dispatch);
        let masquerade = self.ipvs_masquerade(sp, plan);
        if let Some(why) = &masquerade {
            self.steps
                .push(masquerade_step(why, self.frontend, ruleset));
        }
        let reals: Vec<RealServerLine> = vs.real_servers.values().map(RealServerLine::of).collect();
        if reals.is_empty() {
            self.empty_virtual_server(sp, set);
            return self;
        }
        if vs.server.persistent() {
            self.steps.push(step(
                StepKind::Affinity(set, vs.server.timeout),
                format!(
                    "persistence: if {} has a connection template for this virtual server (made within the last {} s), it goes to the same real server again",
                    p.src, vs.server.timeout
                ),
                format!(
                    "sessionAffinity ClientIP (timeoutSeconds {}) is IPVS persistence: one template per client address, kept until the timeout passes after its last connection",
                    vs.server.timeout
                ),
                vec![format!("ipvsadm: {}", service_line(&va, &vs.server))],
            ));
        }
        // `KUBE-LOOP-BACK` holds the node's own endpoints only (upstream's `IsLocal`).
        let hairpin = sp.node_endpoints.iter().any(|e| e.ip() == p.src);
        let targets: Vec<Target> = reals
            .iter()
            .map(|r| Target::new(r.address, p.src, masquerade.as_deref(), hairpin))
            .collect();
        self.steps.push(step(
            StepKind::Forward(set),
            format!(
                "IPVS forwards to one of {} real servers, chosen by the {} scheduler (masquerading: the destination is rewritten)",
                reals.len(),
                vs.server.scheduler
            ),
            format!(
                "{}; the choice is made once per connection (IPVS's connection table keeps it)",
                set_words(set)
            ),
            reals.iter().map(|r| format!("ipvsadm: {}", real_server_line(r).trim())).collect(),
        ));
        if let Some(me) = targets
            .iter()
            .map(|t| t.addr)
            .find(|a| hairpin && a.ip() == p.src)
        {
            let entry = SetEntry::IpPortIp(me.ip(), p.protocol, me.port(), me.ip());
            self.steps.push(step(
                StepKind::Hairpin,
                "if the chosen real server is the sender itself (hairpin), the packet is masqueraded",
                "a pod reaching itself through its Service must see the node as the peer",
                vec![
                    set_object(ruleset, sets::LOOP_BACK, &entry),
                    format!("nat {KUBE_POSTROUTING} (MASQUERADE match-set {} dst,dst,src)", sets::LOOP_BACK.name_in(ruleset.family)),
                ],
            ));
        }
        self.verdict = Verdict::Forwarded { targets };
        self
    }

    /// The endpoint set the virtual server's real servers come from: IPVS mode has no
    /// short-circuit, so external frontends always use the external policy's set.
    fn endpoint_set(&self, sp: &ServicePlan) -> EndpointSet {
        let dispatch = match (self.frontend, &sp.external) {
            (Some(Frontend::ClusterIp) | None, _) | (_, None) => sp.internal,
            (_, Some(ext)) => ext.dispatch,
        };
        match dispatch {
            Dispatch::Forward(set) => set,
            Dispatch::Drop => EndpointSet::Local,
            Dispatch::Reject => EndpointSet::Cluster,
        }
    }

    fn dispatch_step(
        &self,
        sp: &ServicePlan,
        va: &VirtualAddress,
        ruleset: &Ruleset,
        server: &crate::ipvs::VirtualServer,
    ) -> Step {
        let p = self.packet;
        let local_policy = sp
            .external
            .as_ref()
            .is_some_and(|e| e.policy == TrafficPolicy::Local);
        let mut objects = Vec::new();
        let entry = SetEntry::IpPort(p.dst, p.protocol, p.port);
        match self.frontend {
            Some(Frontend::NodePort) => {
                let (set, local) = node_port_sets(p.protocol);
                let entry = match p.protocol {
                    Protocol::Sctp => entry,
                    _ => SetEntry::Port(p.port),
                };
                objects.push(set_object(ruleset, set, &entry));
                if local_policy {
                    objects.push(set_object(ruleset, local, &entry));
                }
            }
            Some(Frontend::ExternalIp) => {
                let set = if local_policy {
                    sets::EXTERNAL_IP_LOCAL
                } else {
                    sets::EXTERNAL_IP
                };
                objects.push(set_object(ruleset, set, &entry));
            }
            Some(Frontend::LoadBalancerIp) => {
                objects.push(set_object(ruleset, sets::LOAD_BALANCER, &entry));
                if local_policy {
                    objects.push(set_object(ruleset, sets::LOAD_BALANCER_LOCAL, &entry));
                }
            }
            Some(Frontend::ClusterIp) | None => {
                objects.push(set_object(ruleset, sets::CLUSTER_IP, &entry));
            }
        }
        if ruleset.bind_addresses().contains(&p.dst) {
            objects.push(format!(
                "ip addr: {}/{} on kube-ipvs0 (local, so IPVS sees it)",
                p.dst,
                host_len(&p.dst)
            ));
        }
        objects.push(format!("ipvsadm: {}", service_line(va, server)));
        let what = match self.frontend {
            Some(Frontend::NodePort) => format!(
                "matches the virtual server of NodePort {}/{} on {}",
                p.port, p.protocol, p.dst
            ),
            Some(Frontend::ExternalIp) => {
                format!("matches the virtual server of external IP {}", p.dst)
            }
            Some(Frontend::LoadBalancerIp) => {
                format!("matches the virtual server of load-balancer IP {}", p.dst)
            }
            _ => format!("matches the virtual server of the ClusterIP {}", p.dst),
        };
        let service = self
            .service
            .as_ref()
            .map(|s| format!(" ({})", s))
            .unwrap_or_default();
        step(
            StepKind::Dispatch,
            format!("{what}{service}"),
            "IPVS hooks local input (and the node's own output): each frontend address and port of a service is one virtual server; the ipsets let the iptables rules recognise service traffic",
            objects,
        )
    }

    /// Who masquerades: upstream's IPVS chains mark ClusterIP traffic from outside the pod
    /// CIDR (or all, with masqueradeAll) and external traffic of Cluster-policy services.
    fn ipvs_masquerade(&self, sp: &ServicePlan, plan: &Plan) -> Option<String> {
        match (self.frontend, &sp.external) {
            (Some(Frontend::ClusterIp) | None, _) | (_, None) => {
                cluster_ip_masquerade(sp, plan, &self.packet, &self.origin)
            }
            (_, Some(ext)) if ext.policy == TrafficPolicy::Cluster => Some(
                "externalTrafficPolicy Cluster: the real server may be on another node".to_owned(),
            ),
            _ => None,
        }
    }

    fn empty_virtual_server(&mut self, sp: &ServicePlan, set: EndpointSet) {
        let why = match (set, self.frontend) {
            (EndpointSet::Local, Some(Frontend::ClusterIp)) => {
                "internalTrafficPolicy Local and no endpoint on this node: the virtual server has no real server".to_owned()
            }
            (EndpointSet::Local, _) if self.origin == Origin::Outside => "externalTrafficPolicy Local and no endpoint on this node: the virtual server has no real server".to_owned(),
            (EndpointSet::Local, _) => format!(
                "externalTrafficPolicy Local and no endpoint on this node: the virtual server has no real server (IPVS mode, as upstream's, has no short-circuit for {})",
                self.origin
            ),
            _ => format!("{} has no ready (or serving terminating) endpoint anywhere: the virtual server has no real server", sp.name),
        };
        self.verdict = EMPTY_VIRTUAL_SERVER;
        self.steps.push(step(
            if set == EndpointSet::Local { StepKind::Dropped } else { StepKind::Rejected },
            "no real server: the kernel answers ICMP port unreachable (connection refused)",
            format!("{why}; IPVS's ip_vs_leave() refuses new connections to an empty virtual server (upstream writes no REJECT rule in IPVS mode)"),
            vec!["ipvsadm: (no real server)".to_owned()],
        ));
    }

    /// No virtual server for the destination: an address on kube-ipvs0 refuses other ports
    /// (`KUBE-IPVS-FILTER`); anything else is not a service.
    fn no_virtual_server(mut self, ruleset: &Ruleset) -> Trace {
        let p = self.packet;
        self.candidates.clear();
        self.frontend = None;
        if self.verdict == Verdict::NotAService && self.names_a_node_port_not_here() {
            // A NodePort on a node address it does not answer on (loopback, outside
            // nodePortAddresses): the trace keeps naming it, with IPVS's objects.
            for s in &mut self.steps {
                if matches!(s.kind, StepKind::NodePortNotHere(_)) {
                    s.objects = vec!["ipvsadm: (no virtual server)".to_owned()];
                }
            }
            return self;
        }
        self.steps.clear();
        self.service = None;
        if ruleset.bind_addresses().contains(&p.dst) {
            self.verdict = Verdict::Rejected;
            self.steps.push(step(
                StepKind::UnknownPort,
                format!("{} is on kube-ipvs0, but no virtual server is {}/{}", p.dst, p.port, p.protocol),
                "new connections to a service address on a port no service uses are rejected (upstream's KUBE-IPVS-FILTER)",
                vec![
                    format!("filter {KUBE_IPVS_FILTER} (REJECT: match-set {} dst, conntrack NEW)", sets::IPVS_IPS.name_in(ruleset.family)),
                    set_object(ruleset, sets::IPVS_IPS, &SetEntry::Ip(p.dst)),
                ],
            ));
        } else {
            self.verdict = Verdict::NotAService;
            self.steps.push(step(
                StepKind::NotAService,
                "no virtual server matches this destination",
                "Ferry only balances service addresses; the packet is routed normally",
                vec!["ipvsadm: (no virtual server)".to_owned()],
            ));
        }
        self
    }
}

impl Trace {
    fn names_a_node_port_not_here(&self) -> bool {
        self.steps
            .iter()
            .any(|s| matches!(s.kind, StepKind::NodePortNotHere(_)))
    }
}

fn frontend_of(kind: FrontendKind) -> Frontend {
    match kind {
        FrontendKind::ClusterIp => Frontend::ClusterIp,
        FrontendKind::ExternalIp => Frontend::ExternalIp,
        FrontendKind::LoadBalancer => Frontend::LoadBalancerIp,
        FrontendKind::NodePort => Frontend::NodePort,
    }
}

fn set_words(set: EndpointSet) -> &'static str {
    match set {
        EndpointSet::Cluster => "the real servers are the service's ready endpoints cluster-wide",
        EndpointSet::Local => "the real servers are this node's ready endpoints only",
    }
}

fn masquerade_step(why: &str, frontend: Option<Frontend>, ruleset: &Ruleset) -> Step {
    let f = ruleset.family;
    let chain = match frontend {
        Some(Frontend::NodePort) => {
            format!("nat {KUBE_SERVICES} → {KUBE_NODE_PORT} → {KUBE_MARK_MASQ}")
        }
        Some(Frontend::LoadBalancerIp) => format!(
            "nat {KUBE_SERVICES} (match-set {} dst,dst) → {KUBE_LOAD_BALANCER} → {KUBE_MARK_MASQ}",
            sets::LOAD_BALANCER.name_in(f)
        ),
        Some(Frontend::ExternalIp) => format!(
            "nat {KUBE_SERVICES} (match-set {} dst,dst) → {KUBE_MARK_MASQ}",
            sets::EXTERNAL_IP.name_in(f)
        ),
        _ => format!(
            "nat {KUBE_SERVICES} (match-set {} dst,dst) → {KUBE_MARK_MASQ}",
            sets::CLUSTER_IP.name_in(f)
        ),
    };
    step(
        StepKind::Masquerade,
        "marked for masquerade",
        format!("{why}, so replies come back through this node"),
        vec![
            chain,
            format!("nat {KUBE_POSTROUTING} (MASQUERADE --random-fully)"),
        ],
    )
}

/// The load-balancer firewall in IPVS mode: filter `KUBE-PROXY-FIREWALL` sends frontends in
/// `KUBE-LOAD-BALANCER-FW` to `KUBE-SOURCE-RANGES-FIREWALL`, which returns allowed sources and
/// drops the rest.
fn ipvs_firewall_step(mut s: Step, va: &VirtualAddress, ruleset: &Ruleset) -> Step {
    let f = ruleset.family;
    let fw = SetEntry::IpPort(va.ip, va.protocol, va.port);
    let mut objects = vec![set_object(ruleset, sets::LOAD_BALANCER_FW, &fw)];
    if s.kind == StepKind::FirewallAllowed {
        let allowed = s
            .what
            .rsplit_once('(')
            .and_then(|(_, r)| r.strip_suffix(')'))
            .and_then(|n| n.parse::<ipnet::IpNet>().ok());
        match allowed {
            Some(net) if net.addr() == va.ip && net.prefix_len() == net.max_prefix_len() => {
                let e = SetEntry::IpPortIp(va.ip, va.protocol, va.port, va.ip);
                objects.push(set_object(ruleset, sets::LOAD_BALANCER_SOURCE_IP, &e));
            }
            Some(net) => {
                let e = SetEntry::IpPortNet(va.ip, va.protocol, va.port, net);
                objects.push(set_object(ruleset, sets::LOAD_BALANCER_SOURCE_CIDR, &e));
            }
            None => {}
        }
        objects.push(format!("filter {KUBE_SOURCE_RANGES_FIREWALL} (RETURN)"));
    } else {
        objects.push(format!(
            "filter {KUBE_SOURCE_RANGES_FIREWALL} (DROP: no match-set {} / {} entry for the source)",
            sets::LOAD_BALANCER_SOURCE_CIDR.name_in(f),
            sets::LOAD_BALANCER_SOURCE_IP.name_in(f)
        ));
    }
    s.objects = objects;
    s
}

fn node_port_sets(protocol: Protocol) -> (SetKind, SetKind) {
    match protocol {
        Protocol::Tcp => (sets::NODE_PORT_TCP, sets::NODE_PORT_LOCAL_TCP),
        Protocol::Udp => (sets::NODE_PORT_UDP, sets::NODE_PORT_LOCAL_UDP),
        Protocol::Sctp => (sets::NODE_PORT_SCTP, sets::NODE_PORT_LOCAL_SCTP),
    }
}

/// `ipset KUBE-CLUSTER-IP: 10.96.0.10,tcp:53`, or says the entry is missing.
fn set_object(ruleset: &Ruleset, kind: SetKind, entry: &SetEntry) -> String {
    let name = kind.name_in(ruleset.family);
    if ruleset.sets().get(kind).any(|e| e == entry) {
        format!("ipset {name}: {entry}")
    } else {
        format!("ipset {name}: (no entry {entry})")
    }
}

fn host_len(ip: &IpAddr) -> u8 {
    if ip.is_ipv4() {
        32
    } else {
        128
    }
}
