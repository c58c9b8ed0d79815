//! The backend-neutral plan: what each service port's traffic must do on this node.
//!
//! This is where Kubernetes' rules are decided, once, for every backend: which endpoint set
//! ClusterIP and external traffic go to, when traffic is masqueraded, and when it is dropped or
//! rejected. The decisions follow upstream kube-proxy's nftables proxier (`syncProxyRules`),
//! written as small functions instead of one long one.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

use ipnet::IpNet;

use ferry_model::{
    IpFamily, NodeView, ServicePortName, ServicePortView, SessionAffinity, TrafficPolicy,
};

use crate::config::{CompileConfig, NfacctCounters};
use crate::family::of_family;
use crate::local::LocalTraffic;

/// Which endpoint set traffic is balanced over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EndpointSet {
    /// Ready endpoints anywhere in the cluster (or the terminating fallback).
    Cluster,
    /// Ready endpoints on this node (or the local terminating fallback).
    Local,
}

/// What happens to a new connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Dispatch {
    /// DNAT to one endpoint of the set, chosen at random with equal probability.
    Forward(EndpointSet),
    /// Silently dropped: the policy is Local and this node has no endpoint, though others do.
    Drop,
    /// Rejected (ICMP port unreachable → "connection refused"): no usable endpoint anywhere.
    Reject,
}

/// When traffic to the ClusterIP is masqueraded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ClusterIpMasquerade {
    /// Never (no local-traffic detector configured, no `masqueradeAll`).
    Never,
    /// When the source is not a pod of this cluster (per the local detector), because the reply
    /// might otherwise bypass this node.
    NotFromPods,
    /// Always (`masqueradeAll`).
    Always,
}

/// External traffic (NodePort, external IPs, load-balancer IPs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct External {
    /// `externalTrafficPolicy`.
    pub policy: TrafficPolicy,
    /// Where external traffic from outside the cluster goes. With the Cluster policy it is
    /// masqueraded first. With the Local policy, traffic from this node or its pods is
    /// short-circuited to the cluster set (node traffic masqueraded), like upstream.
    pub dispatch: Dispatch,
}

/// `loadBalancerSourceRanges`: only these sources may reach the load-balancer IPs; traffic
/// from any other source to a load-balancer IP is dropped before DNAT. NodePorts and external
/// IPs are not subject to it (upstream: "for better or for worse").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Firewall {
    /// The allowed sources: the source ranges, aggregated (no range inside another, so they
    /// can be elements of one interval set), plus each load-balancer IP itself when a range
    /// contains this node's IP — a VIP-style load balancer whose VIP is a local address
    /// loops the node's own requests back with the VIP as source (upstream `allowFromNode`).
    pub allowed: Vec<IpNet>,
}

impl Firewall {
    /// Whether `src` may reach the load-balancer IPs.
    pub fn allows(&self, src: &IpAddr) -> bool {
        self.allowed.iter().any(|n| n.contains(src))
    }
}

/// One service port, decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServicePlan {
    /// `namespace/name:port` + protocol.
    pub name: ServicePortName,
    /// ClusterIP.
    pub cluster_ip: IpAddr,
    /// Service port.
    pub port: u16,
    /// Node port, if any.
    pub node_port: Option<u16>,
    /// `healthCheckNodePort` (Local external policy): the node answers kube-proxy's health
    /// check there; IPVS mode lists it in `KUBE-HEALTH-CHECK-NODE-PORT`.
    pub health_check_node_port: Option<u16>,
    /// External IPs.
    pub external_ips: Vec<IpAddr>,
    /// Load-balancer IPs (`status.loadBalancer.ingress[].ip`, `ipMode: Proxy` entries left
    /// out): external traffic, like external IPs.
    pub load_balancer_ips: Vec<IpAddr>,
    /// The load-balancer firewall (`loadBalancerSourceRanges`), when the service has both
    /// load-balancer IPs and source ranges.
    pub firewall: Option<Firewall>,
    /// The cluster-wide endpoint set, sorted.
    pub cluster_endpoints: Vec<SocketAddr>,
    /// The node-local endpoint set, sorted.
    pub local_endpoints: Vec<SocketAddr>,
    /// Every endpoint on this node, whatever its conditions and the policies (upstream's
    /// `IsLocal`): where a pod may reach itself through the service (IPVS mode's
    /// `KUBE-LOOP-BACK`).
    pub node_endpoints: Vec<SocketAddr>,
    /// The endpoint addresses a connection DNATed on this node may come from (hairpin):
    /// those on this node and those whose node is not known, sorted. A pod on another node
    /// reaches the service through its own node's rules, so only these are ever both the
    /// sender and the endpoint here (nftables mode masquerades these alone; upstream's IPVS
    /// mode likewise lists only the node's endpoints in `KUBE-LOOP-BACK`).
    pub hairpin_sources: Vec<IpAddr>,
    /// Traffic to the ClusterIP.
    pub internal: Dispatch,
    /// When ClusterIP traffic is masqueraded.
    pub cluster_ip_masquerade: ClusterIpMasquerade,
    /// External traffic, when the service is externally accessible.
    pub external: Option<External>,
    /// `sessionAffinity: ClientIP`: seconds a client stays pinned to the endpoint it reached
    /// after its last new connection (`timeoutSeconds`); `None` without affinity. Applies to
    /// every frontend of the port, through whichever endpoint set its traffic uses.
    pub affinity: Option<u32>,
}

impl ServicePlan {
    /// The endpoints of a set.
    pub fn endpoints(&self, set: EndpointSet) -> &[SocketAddr] {
        match set {
            EndpointSet::Cluster => &self.cluster_endpoints,
            EndpointSet::Local => &self.local_endpoints,
        }
    }

    /// Which sets any traffic can be forwarded to (the short-circuit of the Local policy uses
    /// the cluster set).
    pub fn used_sets(&self) -> Vec<EndpointSet> {
        let mut sets = Vec::new();
        let mut add = |d: Dispatch| {
            if let Dispatch::Forward(set) = d {
                if !sets.contains(&set) {
                    sets.push(set);
                }
            }
        };
        add(self.internal);
        if let Some(ext) = &self.external {
            add(ext.dispatch);
            if ext.policy == TrafficPolicy::Local && ext.dispatch != Dispatch::Reject {
                add(Dispatch::Forward(EndpointSet::Cluster));
            }
        }
        sets.sort();
        sets
    }
}

/// Where NodePorts answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodePortScope {
    /// Any local address of the node except loopback.
    AllLocal,
    /// Local addresses inside these prefixes (a primary IP is a /32 or /128).
    LocalWithin(Vec<IpNet>),
}

/// Everything this node must do, for one family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    /// The family.
    pub family: IpFamily,
    /// The masquerade mark.
    pub masquerade_mark: u32,
    /// This node's primary IPs of the family (from its Node object; empty when unknown).
    pub node_ips: Vec<IpAddr>,
    /// Which packets come from this cluster's pods (the local-traffic detector).
    pub local: LocalTraffic,
    /// Where NodePorts answer.
    pub node_ports: NodePortScope,
    /// NodePorts also answer on this family's loopback address (`127.0.0.1:NODEPORT`,
    /// `[::1]:NODEPORT`), served by Ferry's userspace proxy: the kernel rules never translate
    /// loopback destinations (that would need `route_localnet`, CVE-2020-8558).
    pub localhost_node_ports: bool,
    /// Drop forwarded packets conntrack marks invalid (iptables mode; not when the kernel's
    /// `nf_conntrack_tcp_be_liberal` is on).
    pub drop_ct_invalid: bool,
    /// The nfacct counters iptables mode's rules count into: only those that exist, and only
    /// where the rule is written (no invalid-packet counter without the drop, no localhost
    /// NodePort counter without localhost NodePorts).
    pub nfacct: NfacctCounters,
    /// The service CIDRs of the family (ServiceCIDR objects), aggregated: new connections to an
    /// address inside one that is no ClusterIP are dropped (nftables mode, as upstream's
    /// `cluster-ips-check`), rather than routed off the node. Empty when no ServiceCIDR is known.
    pub service_cidrs: Vec<IpNet>,
    /// Every service port, sorted.
    pub services: BTreeMap<ServicePortName, ServicePlan>,
}

/// The per-node settings every service plan needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanContext {
    /// How ClusterIP traffic is masqueraded.
    pub cluster_ip_masquerade: ClusterIpMasquerade,
    /// This node's primary IPs of the family (upstream `nodeIP`), for the firewall's
    /// `allowFromNode`.
    pub node_ips: Vec<IpAddr>,
    /// Services' external IPs are programmed (the `AllowServiceExternalIPs` gate).
    pub external_ips: bool,
}

impl Plan {
    /// Plans the whole node.
    pub fn build(view: &NodeView, cfg: &CompileConfig) -> Plan {
        let local = LocalTraffic::of(view, cfg);
        let node_ips = node_ips(view, cfg);
        let ctx = plan_context(cfg, &local, &node_ips);
        let localhost_node_ports =
            cfg.localhost_node_ports && cfg.node_port_addresses.allow_loopback(cfg.family);
        Plan {
            family: cfg.family,
            node_ips,
            masquerade_mark: cfg.masquerade_mark(),
            node_ports: node_port_scope(view, cfg),
            localhost_node_ports,
            local,
            drop_ct_invalid: !cfg.conntrack_tcp_be_liberal,
            nfacct: NfacctCounters {
                ct_state_invalid: cfg.nfacct.ct_state_invalid && !cfg.conntrack_tcp_be_liberal,
                localhost_node_ports: cfg.nfacct.localhost_node_ports && localhost_node_ports,
            },
            service_cidrs: IpNet::aggregate(&view.service_cidrs.keys().copied().collect()),
            services: view
                .services
                .values()
                .map(|sp| (sp.name.clone(), ServicePlan::build(sp, &ctx)))
                .collect(),
        }
    }

    /// The context [`ServicePlan::build`] needs, as used by this plan.
    pub fn context(&self, cfg: &CompileConfig) -> PlanContext {
        plan_context(cfg, &self.local, &self.node_ips)
    }
}

/// This node's primary IPs of the family (upstream's `nodeIP`).
fn node_ips(view: &NodeView, cfg: &CompileConfig) -> Vec<IpAddr> {
    primary_ips(view, cfg)
        .into_iter()
        .filter(|ip| IpFamily::of(ip) == cfg.family)
        .collect()
}

/// This node's primary IPs, every family (upstream's `detectNodeIPs`): the Node object's, with
/// `bindAddress` (when set) in place of those of its family.
fn primary_ips(view: &NodeView, cfg: &CompileConfig) -> Vec<IpAddr> {
    let from_node = view.node.iter().flat_map(|n| n.primary_ips());
    match cfg.node_ip {
        None => from_node.collect(),
        Some(ip) => from_node
            .filter(|n| IpFamily::of(n) != IpFamily::of(&ip))
            .chain(std::iter::once(ip))
            .collect(),
    }
}

fn plan_context(cfg: &CompileConfig, local: &LocalTraffic, node_ips: &[IpAddr]) -> PlanContext {
    let cluster_ip_masquerade = if cfg.masquerade_all {
        ClusterIpMasquerade::Always
    } else if local.is_implemented() {
        ClusterIpMasquerade::NotFromPods
    } else {
        ClusterIpMasquerade::Never
    };
    PlanContext {
        cluster_ip_masquerade,
        node_ips: node_ips.to_vec(),
        external_ips: cfg.external_ips,
    }
}

/// The firewall of a service port with load-balancer IPs and source ranges (upstream's
/// `usesFWChain`, nftables mode: whether or not the service has endpoints).
fn firewall(sp: &ServicePortView, ctx: &PlanContext) -> Option<Firewall> {
    if sp.load_balancer_ips.is_empty() || sp.load_balancer_source_ranges.is_empty() {
        return None;
    }
    let ranges = &sp.load_balancer_source_ranges;
    let allow_from_node = ranges
        .iter()
        .any(|r| ctx.node_ips.iter().any(|ip| r.contains(ip)));
    let mut allowed: Vec<IpNet> = ranges.iter().map(IpNet::trunc).collect();
    if allow_from_node {
        allowed.extend(sp.load_balancer_ips.iter().map(|ip| IpNet::from(*ip)));
    }
    Some(Firewall {
        allowed: IpNet::aggregate(&allowed),
    })
}

fn node_port_scope(view: &NodeView, cfg: &CompileConfig) -> NodePortScope {
    let npa = &cfg.node_port_addresses;
    if npa.all {
        return NodePortScope::AllLocal;
    }
    let primary = npa.primary || npa.is_default();
    let mut nets = of_family(npa.cidrs.iter().copied(), cfg.family);
    if !npa.cidrs.is_empty() && nets.is_empty() && !npa.primary {
        // CIDRs given, none of this family: upstream's `NewNodePortAddresses` then matches
        // every address of the family (its zero CIDR), so a v4-only list leaves IPv6
        // NodePorts open on all (non-loopback) addresses, as kube-proxy does.
        return NodePortScope::AllLocal;
    }
    let node_ips = primary_ips(view, cfg);
    if primary {
        nets.extend(of_family(
            node_ips.iter().map(|ip| IpNet::from(*ip)),
            cfg.family,
        ));
        nets.sort();
        nets.dedup();
    }
    if nets.is_empty() && npa.is_default() && node_ips.is_empty() {
        // The default asks for primary IPs, but this node's Node object (or its InternalIP)
        // is unknown: fall back to every local address, as upstream iptables mode does. A
        // node whose primary IPs are all of the other family opens no NodePort in this one
        // (upstream's primary IP of a missing family is the loopback address, never a
        // NodePort address).
        NodePortScope::AllLocal
    } else {
        NodePortScope::LocalWithin(nets)
    }
}

impl NodePortScope {
    /// True when a configured prefix covers loopback addresses (e.g. `0.0.0.0/0`): the rules
    /// must then exclude 127.0.0.0/8 (`::1`) themselves, since NodePorts are never opened on
    /// localhost (that would need `route_localnet`, CVE-2020-8558).
    pub fn covers_loopback(&self) -> bool {
        match self {
            NodePortScope::AllLocal => true,
            NodePortScope::LocalWithin(nets) => nets.iter().any(|n| {
                let lo: IpNet = match n {
                    IpNet::V4(_) => IpNet::V4(
                        ipnet::Ipv4Net::new([127, 0, 0, 0].into(), 8).expect("valid prefix"),
                    ),
                    IpNet::V6(_) => IpNet::V6(ipnet::Ipv6Net::from(std::net::Ipv6Addr::LOCALHOST)),
                };
                n.contains(&lo) || lo.contains(n)
            }),
        }
    }
}

impl ServicePlan {
    /// Decides one service port.
    pub fn build(sp: &ServicePortView, ctx: &PlanContext) -> ServicePlan {
        // `AllowServiceExternalIPs` off: the service is planned as if it had none (upstream's
        // `ExternalIPs()` answers empty), so they open no frontend and make no port external.
        let stripped;
        let sp = if ctx.external_ips || sp.external_ips.is_empty() {
            sp
        } else {
            stripped = ServicePortView {
                external_ips: Vec::new(),
                ..sp.clone()
            };
            &stripped
        };
        let cluster_endpoints = sp.cluster_endpoints();
        let local_endpoints = sp.local_endpoints();
        let has_endpoints = sp.has_endpoints();
        let dispatch = |policy: TrafficPolicy| {
            let (set, eps) = match policy {
                TrafficPolicy::Cluster => (EndpointSet::Cluster, &cluster_endpoints),
                TrafficPolicy::Local => (EndpointSet::Local, &local_endpoints),
            };
            if !has_endpoints {
                Dispatch::Reject
            } else if eps.is_empty() {
                Dispatch::Drop
            } else {
                Dispatch::Forward(set)
            }
        };
        let external = sp.externally_accessible().then(|| External {
            policy: sp.external_policy,
            dispatch: dispatch(sp.external_policy),
        });
        ServicePlan {
            name: sp.name.clone(),
            cluster_ip: sp.cluster_ip,
            port: sp.port,
            node_port: sp.node_port,
            health_check_node_port: sp.health_check_node_port,
            external_ips: sp.external_ips.clone(),
            load_balancer_ips: sp.load_balancer_ips.clone(),
            firewall: firewall(sp, ctx),
            internal: dispatch(sp.internal_policy),
            cluster_ip_masquerade: ctx.cluster_ip_masquerade,
            external,
            cluster_endpoints,
            local_endpoints,
            node_endpoints: sp
                .endpoints
                .iter()
                .filter(|e| e.is_local)
                .map(|e| e.addr)
                .collect(),
            hairpin_sources: sp.hairpin_sources(),
            affinity: match sp.session_affinity {
                SessionAffinity::None => None,
                SessionAffinity::ClientIp { timeout_seconds } => Some(timeout_seconds),
            },
        }
    }
}

#[cfg(test)]
mod tests;
