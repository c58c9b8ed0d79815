//! Services and their ports, as the proxy needs them.

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

use ipnet::IpNet;

use crate::{PortRef, Selector, ServiceName};

/// Transport protocol of a service port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Protocol {
    /// TCP.
    Tcp,
    /// UDP.
    Udp,
    /// SCTP.
    Sctp,
}

impl Protocol {
    /// Lower-case name as nft and iptables spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
            Protocol::Sctp => "sctp",
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Protocol {
    type Err = String;
    /// Parses Kubernetes' spelling (`TCP`, `UDP`, `SCTP`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "TCP" => Ok(Protocol::Tcp),
            "UDP" => Ok(Protocol::Udp),
            "SCTP" => Ok(Protocol::Sctp),
            other => Err(format!(
                "unsupported protocol {other:?} (want TCP, UDP or SCTP)"
            )),
        }
    }
}

/// IP family. Ferry programs each family separately (`ip` and `ip6` tables), like upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum IpFamily {
    /// IPv4.
    V4,
    /// IPv6.
    V6,
}

impl IpFamily {
    /// The family of an address.
    pub fn of(ip: &IpAddr) -> Self {
        if ip.is_ipv4() {
            IpFamily::V4
        } else {
            IpFamily::V6
        }
    }

    /// Kubernetes' spelling (`IPv4`, `IPv6`): `addressType`, `ipFamilies`, metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            IpFamily::V4 => "IPv4",
            IpFamily::V6 => "IPv6",
        }
    }
}

/// `spec.type`. `ExternalName` and headless Services never reach the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ServiceType {
    /// `ClusterIP`.
    ClusterIp,
    /// `NodePort`.
    NodePort,
    /// `LoadBalancer`.
    LoadBalancer,
}

/// `externalTrafficPolicy` / `internalTrafficPolicy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum TrafficPolicy {
    /// Any ready endpoint in the cluster (the default).
    #[default]
    Cluster,
    /// Only endpoints on the receiving node.
    Local,
}

/// `sessionAffinity`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum SessionAffinity {
    /// No affinity (the default).
    #[default]
    None,
    /// `ClientIP`, with `timeoutSeconds`.
    ClientIp {
        /// Seconds a client stays pinned after its last packet.
        timeout_seconds: u32,
    },
}

/// `spec.trafficDistribution` (KEP-4444, KEP-3015).
///
/// Upstream kube-proxy (1.33 and later) does not act on this field itself: the EndpointSlice
/// controller turns it into `hints` on the endpoints, and the proxy follows the hints alone
/// (see [`crate::Topology`]). Ferry keeps it to explain what the hints are for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TrafficDistribution {
    /// `PreferClose`: the older name of `PreferSameZone`.
    PreferClose,
    /// `PreferSameZone`: endpoints in the client's zone (zone hints).
    PreferSameZone,
    /// `PreferSameNode`: endpoints on the client's node (node hints, zone hints as fallback).
    PreferSameNode,
}

impl TrafficDistribution {
    /// Kubernetes' spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            TrafficDistribution::PreferClose => "PreferClose",
            TrafficDistribution::PreferSameZone => "PreferSameZone",
            TrafficDistribution::PreferSameNode => "PreferSameNode",
        }
    }
}

/// One entry of `spec.ports`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ServicePort {
    /// `name`, empty when unnamed.
    pub name: String,
    /// `protocol`.
    pub protocol: Protocol,
    /// `port`: the port on the ClusterIP, external IPs and load-balancer IPs.
    pub port: u16,
    /// `nodePort`, for NodePort and LoadBalancer Services.
    pub node_port: Option<u16>,
    /// `targetPort` (the API server's default: `port`). Only the EndpointSlice controller of
    /// standalone mode reads it, to build endpoints from Pods; the proxy follows the slices.
    pub target_port: PortRef,
}

/// A Service, validated, as the proxy sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Service {
    /// `metadata.namespace/name`.
    pub name: ServiceName,
    /// `spec.type`.
    pub service_type: ServiceType,
    /// `spec.clusterIPs` (or `spec.clusterIP`): at most one per family.
    pub cluster_ips: Vec<IpAddr>,
    /// `spec.ports`.
    pub ports: Vec<ServicePort>,
    /// `spec.externalIPs`.
    pub external_ips: Vec<IpAddr>,
    /// `status.loadBalancer.ingress[].ip` (entries with `ipMode: Proxy` excluded).
    pub load_balancer_ips: Vec<IpAddr>,
    /// `spec.loadBalancerSourceRanges`.
    pub load_balancer_source_ranges: Vec<IpNet>,
    /// `spec.externalTrafficPolicy`.
    pub external_traffic_policy: TrafficPolicy,
    /// `spec.internalTrafficPolicy`.
    pub internal_traffic_policy: TrafficPolicy,
    /// `spec.sessionAffinity` with its timeout.
    pub session_affinity: SessionAffinity,
    /// `spec.healthCheckNodePort`.
    pub health_check_node_port: Option<u16>,
    /// `spec.trafficDistribution` (unknown values are left out, see [`TrafficDistribution`]).
    pub traffic_distribution: Option<TrafficDistribution>,
    /// `spec.selector`: the Pods whose endpoints the Service gets (standalone mode derives its
    /// EndpointSlices from them when the manifests hold Pods it selects).
    pub selector: Option<Selector>,
    /// `spec.publishNotReadyAddresses`: every selected Pod's endpoint is `ready`, whatever its
    /// readiness (read by the EndpointSlice controller, not by the proxy).
    pub publish_not_ready_addresses: bool,
}

impl Service {
    /// The ClusterIP of one family, if the Service has one.
    pub fn cluster_ip(&self, family: IpFamily) -> Option<IpAddr> {
        self.cluster_ips
            .iter()
            .copied()
            .find(|ip| IpFamily::of(ip) == family)
    }

    /// True when traffic can reach it from outside the cluster (NodePort, external IP or
    /// load-balancer IP), so `externalTrafficPolicy` matters. Upstream `ExternallyAccessible()`.
    pub fn externally_accessible(&self) -> bool {
        self.ports.iter().any(|p| p.node_port.is_some())
            || !self.external_ips.is_empty()
            || !self.load_balancer_ips.is_empty()
    }

    /// True when it gets a health-check server on `spec.healthCheckNodePort`: a LoadBalancer
    /// Service with the Local external policy, the only kind the API server allocates that
    /// port for. Upstream `NeedsHealthCheck()`.
    pub fn needs_health_check(&self) -> bool {
        self.service_type == ServiceType::LoadBalancer
            && self.external_traffic_policy == TrafficPolicy::Local
    }
}
