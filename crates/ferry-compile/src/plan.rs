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

use crate::config::{CompileConfig, LocalDetector};

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
    /// External IPs.
    pub external_ips: Vec<IpAddr>,
    /// The cluster-wide endpoint set, sorted.
    pub cluster_endpoints: Vec<SocketAddr>,
    /// The node-local endpoint set, sorted.
    pub local_endpoints: Vec<SocketAddr>,
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
    /// Sources that are this cluster's pods (the local-traffic detector); empty when none.
    pub pod_cidrs: Vec<IpNet>,
    /// Where NodePorts answer.
    pub node_ports: NodePortScope,
    /// Every service port, sorted.
    pub services: BTreeMap<ServicePortName, ServicePlan>,
}

/// The per-node settings every service plan needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlanContext {
    /// How ClusterIP traffic is masqueraded.
    pub cluster_ip_masquerade: ClusterIpMasquerade,
}

impl Plan {
    /// Plans the whole node.
    pub fn build(view: &NodeView, cfg: &CompileConfig) -> Plan {
        let pod_cidrs = pod_cidrs(view, cfg);
        let ctx = plan_context(cfg, &pod_cidrs);
        Plan {
            family: cfg.family,
            masquerade_mark: cfg.masquerade_mark(),
            node_ports: node_port_scope(view, cfg),
            pod_cidrs,
            services: view
                .services
                .values()
                .map(|sp| (sp.name.clone(), ServicePlan::build(sp, &ctx)))
                .collect(),
        }
    }

    /// The context [`ServicePlan::build`] needs, as used by this plan.
    pub fn context(&self, cfg: &CompileConfig) -> PlanContext {
        plan_context(cfg, &self.pod_cidrs)
    }
}

fn plan_context(cfg: &CompileConfig, pod_cidrs: &[IpNet]) -> PlanContext {
    let cluster_ip_masquerade = if cfg.masquerade_all {
        ClusterIpMasquerade::Always
    } else if !pod_cidrs.is_empty() {
        ClusterIpMasquerade::NotFromPods
    } else {
        ClusterIpMasquerade::Never
    };
    PlanContext {
        cluster_ip_masquerade,
    }
}

fn of_family(nets: impl IntoIterator<Item = IpNet>, family: IpFamily) -> Vec<IpNet> {
    let mut v: Vec<IpNet> = nets
        .into_iter()
        .filter(|n| IpFamily::of(&n.addr()) == family)
        .collect();
    v.sort();
    v.dedup();
    v
}

fn pod_cidrs(view: &NodeView, cfg: &CompileConfig) -> Vec<IpNet> {
    match &cfg.local_detector {
        LocalDetector::None => Vec::new(),
        LocalDetector::ClusterCidr(cidrs) => of_family(cidrs.iter().copied(), cfg.family),
        LocalDetector::NodeCidr => of_family(
            view.node.iter().flat_map(|n| n.pod_cidrs.iter().copied()),
            cfg.family,
        ),
    }
}

fn node_port_scope(view: &NodeView, cfg: &CompileConfig) -> NodePortScope {
    let npa = &cfg.node_port_addresses;
    let primary = npa.primary || npa.is_default();
    let mut nets = of_family(npa.cidrs.iter().copied(), cfg.family);
    if primary {
        let ips = view.node.iter().flat_map(|n| n.primary_ips());
        nets.extend(of_family(ips.map(IpNet::from), cfg.family));
        nets.sort();
        nets.dedup();
    }
    if nets.is_empty() && npa.is_default() {
        // The default asks for primary IPs, but this node's Node object (or its InternalIP)
        // is unknown: fall back to every local address, as upstream iptables mode does.
        NodePortScope::AllLocal
    } else {
        NodePortScope::LocalWithin(nets)
    }
}

impl ServicePlan {
    /// Decides one service port.
    pub fn build(sp: &ServicePortView, ctx: &PlanContext) -> ServicePlan {
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
            external_ips: sp.external_ips.clone(),
            internal: dispatch(sp.internal_policy),
            cluster_ip_masquerade: ctx.cluster_ip_masquerade,
            external,
            cluster_endpoints,
            local_endpoints,
            affinity: match sp.session_affinity {
                SessionAffinity::None => None,
                SessionAffinity::ClientIp { timeout_seconds } => Some(timeout_seconds),
            },
        }
    }
}

#[cfg(test)]
mod tests;
