//! `NodeView`: what one node's proxy must do with each service port.
//!
//! Built purely from the [`ClusterState`] and a [`NodeContext`]. Endpoint categorisation follows
//! upstream kube-proxy's `CategorizeEndpoints` (pkg/proxy/topology.go): ready endpoints first, and
//! serving-and-terminating endpoints only as a fallback when there are no ready ones
//! (KEP-1669, GA in 1.28), separately for the cluster-wide and the node-local set; topology
//! hints narrow the cluster-wide set only (`view/topology.rs`).

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use ipnet::IpNet;

use crate::{
    ClusterState, EndpointConditions, EndpointTarget, IpFamily, Node, Service, ServiceName,
    ServicePortName, ServiceType, SessionAffinity, TrafficDistribution, TrafficPolicy,
};

mod categorize;
mod topology;
mod unserved;

use categorize::{categorize, serving_terminating};
pub use topology::{HintsIgnored, Topology};
use unserved::served;
pub use unserved::Unserved;

/// Who is asking: the node this view is for, and the IP family being programmed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeContext {
    /// This node's name (`--hostname-override` or the hostname); matches endpoints' `nodeName`.
    pub node_name: String,
    /// The family programmed by this view.
    pub family: IpFamily,
}

/// Why an endpoint is not in a set. Shown by `ferry explain`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Exclusion {
    /// Not ready, and not a usable serving-and-terminating fallback.
    NotReady,
    /// Serving but terminating, and ready endpoints exist, so the fallback is not used.
    Terminating,
    /// On another node (only for the local set).
    OtherNode,
    /// Ready, but topology hints send this node's traffic elsewhere (only for the cluster set;
    /// see [`ServicePortView::topology`]).
    Topology,
    /// The service's policies never use this set.
    SetUnused,
}

/// One candidate endpoint of a service port, with the categorisation outcome.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct EndpointView {
    /// Endpoint address and port (the resolved target port).
    pub addr: SocketAddr,
    /// `nodeName` (shared with the state's endpoint, as are the other names).
    pub node_name: Option<Arc<str>>,
    /// `zone`.
    pub zone: Option<Arc<str>>,
    /// `hints.forZones[].name` (empty: no zone hint).
    pub zone_hints: Vec<Arc<str>>,
    /// `hints.forNodes[].name` (empty: no node hint).
    pub node_hints: Vec<Arc<str>>,
    /// Conditions, defaulted.
    pub conditions: EndpointConditions,
    /// `hostname` and `targetRef` (shared with the state's endpoint).
    pub target: Option<Arc<EndpointTarget>>,
    /// On this node.
    pub is_local: bool,
    /// In the cluster-wide set, or why not.
    pub cluster: Result<(), Exclusion>,
    /// In the node-local set, or why not.
    pub local: Result<(), Exclusion>,
}

/// One service port as this node must program it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServicePortView {
    /// `namespace/name:port` + protocol.
    pub name: ServicePortName,
    /// `spec.type`.
    pub service_type: ServiceType,
    /// The ClusterIP of this view's family.
    pub cluster_ip: IpAddr,
    /// The service port.
    pub port: u16,
    /// The node port, if any.
    pub node_port: Option<u16>,
    /// External IPs of this family.
    pub external_ips: Vec<IpAddr>,
    /// Load-balancer IPs of this family.
    pub load_balancer_ips: Vec<IpAddr>,
    /// External and load-balancer IPs of this family the Service claims but another Service
    /// serves (with this port's protocol and port).
    pub unserved: Vec<Unserved>,
    /// `loadBalancerSourceRanges` of this family.
    pub load_balancer_source_ranges: Vec<IpNet>,
    /// `externalTrafficPolicy`.
    pub external_policy: TrafficPolicy,
    /// `internalTrafficPolicy`.
    pub internal_policy: TrafficPolicy,
    /// `sessionAffinity`.
    pub session_affinity: SessionAffinity,
    /// `healthCheckNodePort`.
    pub health_check_node_port: Option<u16>,
    /// `trafficDistribution` (informational: the hints decide, see [`Topology`]).
    pub traffic_distribution: Option<TrafficDistribution>,
    /// How topology hints shaped the cluster-wide set on this node.
    pub topology: Topology,
    /// Every endpoint for this port, sorted by address, with its categorisation.
    pub endpoints: Vec<EndpointView>,
}

impl ServicePortView {
    /// Reachable from outside the cluster: node port, external IPs or load-balancer IPs.
    pub fn externally_accessible(&self) -> bool {
        self.node_port.is_some()
            || !self.external_ips.is_empty()
            || !self.load_balancer_ips.is_empty()
    }

    /// Upstream `UsesClusterEndpoints`: some traffic may go to any node's endpoints. That is
    /// also the case for every externally accessible service, whatever its external policy,
    /// because pod and node traffic to its external destinations is short-circuited to the
    /// cluster-wide set.
    pub fn uses_cluster_endpoints(&self) -> bool {
        self.internal_policy == TrafficPolicy::Cluster || self.externally_accessible()
    }

    /// Upstream `UsesLocalEndpoints`: some traffic may only go to this node's endpoints.
    pub fn uses_local_endpoints(&self) -> bool {
        self.internal_policy == TrafficPolicy::Local
            || (self.externally_accessible() && self.external_policy == TrafficPolicy::Local)
    }

    /// The cluster-wide endpoint set, sorted.
    pub fn cluster_endpoints(&self) -> Vec<SocketAddr> {
        self.endpoints
            .iter()
            .filter(|e| e.cluster.is_ok())
            .map(|e| e.addr)
            .collect()
    }

    /// The node-local endpoint set, sorted.
    pub fn local_endpoints(&self) -> Vec<SocketAddr> {
        self.endpoints
            .iter()
            .filter(|e| e.local.is_ok())
            .map(|e| e.addr)
            .collect()
    }

    /// The endpoint addresses a connection DNATed on this node may come from (hairpin): those
    /// on this node and those whose node is not known, sorted, each once. A pod on another
    /// node reaches the service through its own node's rules.
    pub fn hairpin_sources(&self) -> Vec<IpAddr> {
        let mut ips: Vec<IpAddr> = self
            .endpoints
            .iter()
            .filter(|e| e.is_local || e.node_name.is_none())
            .map(|e| e.addr.ip())
            .collect();
        ips.sort_unstable();
        ips.dedup();
        ips
    }

    /// Upstream `hasAnyEndpoints`: a ready (or serving-and-terminating) endpoint exists
    /// anywhere in the cluster, whichever sets the policies use. When false, all traffic to the
    /// service is rejected; when true but a policy's set is empty, that traffic is dropped.
    pub fn has_endpoints(&self) -> bool {
        self.endpoints
            .iter()
            .any(|e| e.conditions.ready || serving_terminating(&e.conditions))
    }

    /// Endpoints for traffic to the ClusterIP, per `internalTrafficPolicy`.
    pub fn internal_endpoints(&self) -> Vec<SocketAddr> {
        match self.internal_policy {
            TrafficPolicy::Cluster => self.cluster_endpoints(),
            TrafficPolicy::Local => self.local_endpoints(),
        }
    }

    /// Endpoints for external traffic, per `externalTrafficPolicy`.
    pub fn external_endpoints(&self) -> Vec<SocketAddr> {
        match self.external_policy {
            TrafficPolicy::Cluster => self.cluster_endpoints(),
            TrafficPolicy::Local => self.local_endpoints(),
        }
    }
}

/// Everything one node must program, for one IP family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeView {
    /// The context it was built for.
    pub context: NodeContext,
    /// This node's Node object, when the sources delivered one.
    pub node: Option<Node>,
    /// Every service port, sorted.
    pub services: BTreeMap<ServicePortName, ServicePortView>,
    /// The service CIDRs of this family (ServiceCIDR objects' `spec.cidrs`), sorted, each with
    /// the names of the objects listing it.
    pub service_cidrs: BTreeMap<IpNet, Vec<String>>,
}

impl NodeView {
    /// Builds the whole view.
    pub fn build(state: &ClusterState, context: &NodeContext) -> Self {
        let services = state
            .services()
            .flat_map(|svc| build_service(state, context, svc))
            .map(|view| (view.name.clone(), view))
            .collect();
        Self {
            services,
            ..Self::node_level(state, context)
        }
    }

    /// The view without its services: this node's Node object and the service CIDRs, what
    /// node-level rules are built from.
    pub fn node_level(state: &ClusterState, context: &NodeContext) -> Self {
        Self {
            context: context.clone(),
            node: state.node(&context.node_name).cloned(),
            services: BTreeMap::new(),
            service_cidrs: crate::service_cidr::of_family(state.service_cidrs(), context.family),
        }
    }

    /// Builds the views of one service's ports (empty when the service is gone or has no
    /// ClusterIP of this family). Used for incremental syncs.
    pub fn build_service_ports(
        state: &ClusterState,
        context: &NodeContext,
        name: &ServiceName,
    ) -> Vec<ServicePortView> {
        state
            .service(name)
            .map(|svc| build_service(state, context, svc))
            .unwrap_or_default()
    }
}

pub(super) fn of_family(ips: &[IpAddr], family: IpFamily) -> Vec<IpAddr> {
    ips.iter()
        .copied()
        .filter(|ip| IpFamily::of(ip) == family)
        .collect()
}

fn build_service(state: &ClusterState, ctx: &NodeContext, svc: &Service) -> Vec<ServicePortView> {
    // A service without a ClusterIP of this family is not programmed for it (upstream skips
    // services whose IP family the proxier does not handle).
    let Some(cluster_ip) = svc.cluster_ip(ctx.family) else {
        return Vec::new();
    };
    svc.ports
        .iter()
        .map(|port| {
            let name = ServicePortName {
                service: svc.name.clone(),
                port: port.name.clone(),
                protocol: port.protocol,
            };
            let mut unserved = Vec::new();
            let mut view = ServicePortView {
                name,
                service_type: svc.service_type,
                cluster_ip,
                port: port.port,
                node_port: port.node_port,
                // Less those another Service serves (an API server does not prevent two
                // Services on one external IP and port).
                external_ips: served(
                    state,
                    svc,
                    port,
                    (&svc.external_ips, false),
                    ctx.family,
                    &mut unserved,
                ),
                load_balancer_ips: served(
                    state,
                    svc,
                    port,
                    (&svc.load_balancer_ips, true),
                    ctx.family,
                    &mut unserved,
                ),
                unserved,
                load_balancer_source_ranges: svc
                    .load_balancer_source_ranges
                    .iter()
                    .copied()
                    .filter(|n| IpFamily::of(&n.addr()) == ctx.family)
                    .collect(),
                external_policy: svc.external_traffic_policy,
                internal_policy: svc.internal_traffic_policy,
                session_affinity: svc.session_affinity,
                health_check_node_port: svc.health_check_node_port,
                traffic_distribution: svc.traffic_distribution,
                topology: Topology::Unused,
                endpoints: Vec::new(),
            };
            let zone = state.node(&ctx.node_name).and_then(Node::zone);
            let (topology, endpoints) = categorize(
                &view,
                collect_endpoints(state, ctx, &view.name),
                &ctx.node_name,
                zone,
            );
            view.topology = topology;
            view.endpoints = endpoints;
            view
        })
        .collect()
}

/// Candidate endpoints of one service port: slices of the view's family, the slice port with the
/// same name and protocol, the first address of each endpoint; deduplicated by address (the first
/// slice in name order wins, except that an endpoint not terminating replaces a terminating one:
/// a pod IP reused by a new pod while the old pod terminates, as upstream since 1.36), sorted by
/// address.
fn collect_endpoints(
    state: &ClusterState,
    ctx: &NodeContext,
    name: &ServicePortName,
) -> Vec<EndpointView> {
    let mut by_addr: BTreeMap<SocketAddr, EndpointView> = BTreeMap::new();
    for slice in state
        .slices_of(&name.service)
        .filter(|s| s.family == ctx.family)
    {
        let Some(port) = slice
            .ports
            .iter()
            .find(|p| p.name == name.port && p.protocol == name.protocol)
        else {
            continue;
        };
        for ep in &slice.endpoints {
            if IpFamily::of(&ep.address) != ctx.family {
                continue;
            }
            let addr = SocketAddr::new(ep.address, port.port);
            if by_addr
                .get(&addr)
                .is_some_and(|kept| !kept.conditions.terminating || ep.conditions.terminating)
            {
                continue;
            }
            let location = ep.location.as_deref();
            by_addr.insert(
                addr,
                EndpointView {
                    addr,
                    node_name: location.and_then(|l| l.node_name.clone()),
                    zone: location.and_then(|l| l.zone.clone()),
                    zone_hints: ep.zone_hints().map(<[_]>::to_vec).unwrap_or_default(),
                    node_hints: ep.node_hints().map(<[_]>::to_vec).unwrap_or_default(),
                    conditions: ep.conditions,
                    target: ep.target.clone(),
                    is_local: ep.node_name() == Some(ctx.node_name.as_str()),
                    cluster: Err(Exclusion::SetUnused),
                    local: Err(Exclusion::SetUnused),
                },
            );
        }
    }
    by_addr.into_values().collect()
}

#[cfg(test)]
mod tests;
