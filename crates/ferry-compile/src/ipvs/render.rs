//! Plan → IPVS state, service port by service port, as upstream's IPVS proxier builds it in
//! `syncProxyRules`: one virtual server per frontend address, the plan's endpoint set as real
//! servers, and the ipset entries and kube-ipvs0 addresses that go with them.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};

use ipnet::IpNet;

use ferry_model::{IpFamily, Protocol, ServiceName, TrafficPolicy};

use super::model::{
    FrontendKind, RealServer, Scheduler, VirtualAddress, VirtualServer, VirtualService,
};
use super::ruleset::{Ruleset, ServiceIpvs};
use super::sets::{self, SetEntry, SetKind};
use crate::config::CompileConfig;
use crate::plan::{Dispatch, NodePortScope, Plan, ServicePlan};

/// What rendering a service needs besides its plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RenderContext {
    /// The family.
    pub family: IpFamily,
    /// `ipvs.scheduler`.
    pub scheduler: Scheduler,
    /// The addresses NodePorts get a virtual server on (see [`node_port_addresses`]).
    pub node_port_addresses: Vec<IpAddr>,
    /// Addresses of the node's own interfaces (kube-ipvs0 left out): an external or
    /// load-balancer IP among them is not added to kube-ipvs0 (upstream: "must not add the
    /// address to the dummy device if it exists on another interface").
    pub local_addresses: BTreeSet<IpAddr>,
}

impl RenderContext {
    /// The context of `plan` on a node whose interfaces (kube-ipvs0 aside) hold
    /// `local_addresses` (every family; the dataplane reads them from the kernel, tests give
    /// them), with `cfg`'s scheduler.
    pub fn new(plan: &Plan, cfg: &CompileConfig, local_addresses: &[IpAddr]) -> Self {
        let local: BTreeSet<IpAddr> = local_addresses
            .iter()
            .copied()
            .filter(|ip| IpFamily::of(ip) == plan.family)
            .collect();
        Self {
            family: plan.family,
            scheduler: cfg.ipvs_scheduler,
            node_port_addresses: node_port_addresses(plan, cfg, &local),
            local_addresses: local,
        }
    }
}

/// Where NodePorts get virtual servers: upstream's IPVS mode opens them on every address of
/// the node (kube-ipvs0's aside) unless `nodePortAddresses` narrows them; loopback and IPv6
/// link-local addresses never (Ferry never opens NodePorts on localhost, and upstream leaves
/// both out of the node's address set).
pub fn node_port_addresses(
    plan: &Plan,
    cfg: &CompileConfig,
    local: &BTreeSet<IpAddr>,
) -> Vec<IpAddr> {
    let usable = local.iter().copied().filter(|ip| !unusable(ip));
    if cfg.node_port_addresses.is_default() {
        return usable.collect();
    }
    match &plan.node_ports {
        NodePortScope::AllLocal => usable.collect(),
        NodePortScope::LocalWithin(nets) => {
            let mut ips: Vec<IpAddr> = usable
                .filter(|ip| nets.iter().any(|n| n.contains(ip)))
                .collect();
            // `primary`: the node's primary IPs are NodePort addresses even when the kernel's
            // address list handed in does not show them (ferry rules without root).
            for ip in &plan.node_ips {
                if nets.iter().any(|n| n.contains(ip)) && !ips.contains(ip) && !unusable(ip) {
                    ips.push(*ip);
                }
            }
            ips.sort();
            ips
        }
    }
}

fn unusable(ip: &IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => v6.is_loopback() || v6.is_unicast_link_local(),
    }
}

/// Renders a whole plan.
pub fn render(plan: &Plan, cfg: &CompileConfig, ctx: &RenderContext) -> Ruleset {
    let mut ruleset = Ruleset::base(plan, cfg);
    let mut by_service: BTreeMap<&ServiceName, Vec<&ServicePlan>> = BTreeMap::new();
    for sp in plan.services.values() {
        by_service.entry(&sp.name.service).or_default().push(sp);
    }
    for (name, ports) in by_service {
        ruleset.set_service(name.clone(), Some(render_service(&ports, ctx)));
    }
    ruleset
}

/// Renders all ports of one service.
pub fn render_service(ports: &[&ServicePlan], ctx: &RenderContext) -> ServiceIpvs {
    let mut out = ServiceIpvs::default();
    for sp in ports {
        Port {
            sp,
            ctx,
            out: &mut out,
        }
        .render();
    }
    out
}

struct Port<'a> {
    sp: &'a ServicePlan,
    ctx: &'a RenderContext,
    out: &'a mut ServiceIpvs,
}

impl Port<'_> {
    fn proto(&self) -> Protocol {
        self.sp.name.protocol
    }

    fn endpoints(&self, d: Dispatch) -> &[SocketAddr] {
        match d {
            Dispatch::Forward(set) => self.sp.endpoints(set),
            // Drop (Local policy, no local endpoint) and Reject (no endpoint at all): a virtual
            // server without real servers, as seed 004's k8s-node1 shows.
            Dispatch::Drop | Dispatch::Reject => &[],
        }
    }

    fn entry(&mut self, kind: SetKind, entry: SetEntry) {
        self.out.entries.push((kind, entry));
    }

    fn virtual_server(&mut self, kind: FrontendKind, ip: IpAddr, port: u16, d: Dispatch) {
        let addr = VirtualAddress {
            protocol: self.proto(),
            ip,
            port,
        };
        let real_servers = self
            .endpoints(d)
            .iter()
            .map(|ep| (*ep, RealServer::endpoint(*ep)))
            .collect();
        let server = VirtualServer::new(self.ctx.scheduler, self.sp.affinity, self.ctx.family);
        self.out
            .virtual_services
            .entry(addr)
            .or_insert(VirtualService {
                service: self.sp.name.clone(),
                kind,
                server,
                real_servers,
            });
    }

    fn render(mut self) {
        let sp = self.sp;
        let (proto, port) = (self.proto(), sp.port);
        // Hairpin: a pod reaching itself through the service is masqueraded (every endpoint
        // on this node, whichever set the policies use, as upstream).
        for ep in &sp.node_endpoints {
            self.entry(
                sets::LOOP_BACK,
                SetEntry::IpPortIp(ep.ip(), proto, ep.port(), ep.ip()),
            );
        }
        self.entry(
            sets::CLUSTER_IP,
            SetEntry::IpPort(sp.cluster_ip, proto, port),
        );
        self.virtual_server(FrontendKind::ClusterIp, sp.cluster_ip, port, sp.internal);
        self.out.bind.insert(sp.cluster_ip);
        let Some(ext) = sp.external.clone() else {
            self.health_check();
            return;
        };
        let local = ext.policy == TrafficPolicy::Local;
        for ip in &sp.external_ips {
            let set = if local {
                sets::EXTERNAL_IP_LOCAL
            } else {
                sets::EXTERNAL_IP
            };
            self.entry(set, SetEntry::IpPort(*ip, proto, port));
            self.virtual_server(FrontendKind::ExternalIp, *ip, port, ext.dispatch);
            self.bind_unless_local(*ip);
        }
        for ip in &sp.load_balancer_ips {
            self.load_balancer(*ip, local, ext.dispatch);
        }
        if let Some(node_port) = sp.node_port {
            self.node_port(node_port, local, ext.dispatch);
        }
        self.health_check();
    }

    fn bind_unless_local(&mut self, ip: IpAddr) {
        if !self.ctx.local_addresses.contains(&ip) {
            self.out.bind.insert(ip);
        }
    }

    fn load_balancer(&mut self, ip: IpAddr, local: bool, d: Dispatch) {
        let (proto, port) = (self.proto(), self.sp.port);
        let entry = SetEntry::IpPort(ip, proto, port);
        self.entry(sets::LOAD_BALANCER, entry.clone());
        if local {
            self.entry(sets::LOAD_BALANCER_LOCAL, entry.clone());
        }
        if let Some(fw) = self.sp.firewall.clone() {
            self.entry(sets::LOAD_BALANCER_FW, entry);
            let lb_hosts: Vec<IpNet> = self
                .sp
                .load_balancer_ips
                .iter()
                .map(|i| IpNet::from(*i))
                .collect();
            for net in fw.allowed.iter().filter(|n| !lb_hosts.contains(n)) {
                self.entry(
                    sets::LOAD_BALANCER_SOURCE_CIDR,
                    SetEntry::IpPortNet(ip, proto, port, *net),
                );
            }
            if fw.allows(&ip) {
                // upstream's allowFromNode: the load balancer loops the node's own requests
                // back with the load-balancer IP as source.
                self.entry(
                    sets::LOAD_BALANCER_SOURCE_IP,
                    SetEntry::IpPortIp(ip, proto, port, ip),
                );
            } else {
                self.out.no_node_access.push(VirtualAddress {
                    protocol: proto,
                    ip,
                    port,
                });
            }
        }
        self.virtual_server(FrontendKind::LoadBalancer, ip, port, d);
        self.bind_unless_local(ip);
    }

    fn node_port(&mut self, node_port: u16, local: bool, d: Dispatch) {
        let addrs = self.ctx.node_port_addresses.clone();
        if addrs.is_empty() {
            // upstream skips NodePorts (sets included) when the node has no address for them.
            return;
        }
        let proto = self.proto();
        let (set, local_set) = match proto {
            Protocol::Tcp => (sets::NODE_PORT_TCP, sets::NODE_PORT_LOCAL_TCP),
            Protocol::Udp => (sets::NODE_PORT_UDP, sets::NODE_PORT_LOCAL_UDP),
            Protocol::Sctp => (sets::NODE_PORT_SCTP, sets::NODE_PORT_LOCAL_SCTP),
        };
        let entries: Vec<SetEntry> = match proto {
            // bitmap:port has no address; SCTP uses hash:ip,port with every node address.
            Protocol::Tcp | Protocol::Udp => vec![SetEntry::Port(node_port)],
            Protocol::Sctp => addrs
                .iter()
                .map(|ip| SetEntry::IpPort(*ip, proto, node_port))
                .collect(),
        };
        for e in entries {
            if local {
                self.entry(local_set, e.clone());
            }
            self.entry(set, e);
        }
        for ip in addrs {
            self.virtual_server(FrontendKind::NodePort, ip, node_port, d);
        }
    }

    fn health_check(&mut self) {
        if let Some(hc) = self.sp.health_check_node_port {
            self.entry(sets::HEALTH_CHECK_NODE_PORT, SetEntry::Port(hc));
        }
    }
}
