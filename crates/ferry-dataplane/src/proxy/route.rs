//! Which endpoint a new connection goes to: its frontend and source give the endpoint set
//! (the plan's traffic policies), then round-robin over the set, with session affinity.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ipnet::IpNet;

use ferry_compile::{Dispatch, EndpointSet, ServicePlan};
use ferry_model::TrafficPolicy;

/// Which listener accepted the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Listener {
    /// The proxy port, reached through the redirect rules (or directly in tests).
    Proxy,
    /// `127.0.0.1:NODEPORT` / `[::1]:NODEPORT`: a localhost NodePort, always the node itself.
    Localhost,
}

/// Who a client is, as far as traffic policies care.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Sources {
    /// This node's addresses (all interfaces).
    pub(crate) node: Vec<IpAddr>,
    /// The cluster's pod CIDRs (the local-traffic detector); empty when none.
    pub(crate) pods: Vec<IpNet>,
}

impl Sources {
    /// The node itself or one of the cluster's pods: such clients reach a `Local` external
    /// frontend cluster-wide (upstream's short-circuit), as in the kernel modes.
    pub(crate) fn is_node_or_pod(&self, ip: &IpAddr) -> bool {
        ip.is_loopback() || self.node.contains(ip) || self.pods.iter().any(|n| n.contains(ip))
    }
}

/// Whether `dst` (the destination the client used) is one of the external frontends.
fn is_external(plan: &ServicePlan, dst: &SocketAddr) -> bool {
    if plan.external.is_none() {
        return false;
    }
    let ip = dst.ip();
    if dst.port() == plan.port
        && (plan.external_ips.contains(&ip) || plan.load_balancer_ips.contains(&ip))
    {
        return true;
    }
    plan.node_port == Some(dst.port()) && !(ip == plan.cluster_ip && dst.port() == plan.port)
}

/// The endpoint set a new connection uses, or `None` when it must be refused (the kernel
/// rules refuse these before the proxy; this covers the races with a sync).
pub(crate) fn endpoint_set(
    plan: &ServicePlan,
    listener: Listener,
    dst: &SocketAddr,
    node_or_pod: bool,
) -> Option<EndpointSet> {
    let (external, near) = match listener {
        Listener::Localhost => (true, true),
        Listener::Proxy => (is_external(plan, dst), node_or_pod),
    };
    let forward = |d: Dispatch| match d {
        Dispatch::Forward(set) => Some(set),
        Dispatch::Drop | Dispatch::Reject => None,
    };
    let Some(ext) = plan.external.as_ref().filter(|_| external) else {
        return forward(plan.internal);
    };
    match (ext.dispatch, ext.policy, near) {
        (Dispatch::Reject, _, _) => None,
        (_, TrafficPolicy::Local, true) => {
            (!plan.cluster_endpoints.is_empty()).then_some(EndpointSet::Cluster)
        }
        (d, _, _) => forward(d),
    }
}

#[derive(Debug, Clone, Copy)]
struct Pin {
    endpoint: SocketAddr,
    last_used: Instant,
}

/// Round-robin per endpoint set, and `sessionAffinity: ClientIP` pins (client IP → the
/// endpoint it reached), like upstream's userspace `LoadBalancerRR`.
#[derive(Debug, Default)]
pub(crate) struct Balancer {
    next: [AtomicUsize; 2],
    pins: Mutex<HashMap<IpAddr, Pin>>,
}

fn slot(set: EndpointSet) -> usize {
    match set {
        EndpointSet::Cluster => 0,
        EndpointSet::Local => 1,
    }
}

impl Balancer {
    /// The endpoint of `set` for a new connection from `client`. With affinity, a client
    /// pinned within the timeout to an endpoint of the set goes back to it (and the pin is
    /// refreshed); otherwise, or with `repick` (its endpoint just failed), the next endpoint
    /// in turn, which becomes its pin.
    pub(crate) fn pick(
        &self,
        plan: &ServicePlan,
        set: EndpointSet,
        client: IpAddr,
        repick: bool,
        now: Instant,
    ) -> Option<SocketAddr> {
        let eps = plan.endpoints(set);
        if eps.is_empty() {
            return None;
        }
        let Some(timeout) = plan.affinity.map(|s| Duration::from_secs(u64::from(s))) else {
            return Some(self.round_robin(eps, set));
        };
        let mut pins = self.pins.lock().unwrap_or_else(|e| e.into_inner());
        if !repick {
            if let Some(pin) = pins.get_mut(&client) {
                let fresh = now.saturating_duration_since(pin.last_used) < timeout;
                if fresh && eps.contains(&pin.endpoint) {
                    pin.last_used = now;
                    return Some(pin.endpoint);
                }
            }
        }
        let endpoint = self.round_robin(eps, set);
        pins.insert(
            client,
            Pin {
                endpoint,
                last_used: now,
            },
        );
        Some(endpoint)
    }

    fn round_robin(&self, eps: &[SocketAddr], set: EndpointSet) -> SocketAddr {
        let i = self.next[slot(set)].fetch_add(1, Ordering::Relaxed);
        eps[i % eps.len()]
    }

    /// After a sync: drops pins to endpoints that left the service (at once, as the kernel
    /// modes do) and pins past their timeout.
    pub(crate) fn forget_stale(&self, plan: &ServicePlan, now: Instant) {
        let mut pins = self.pins.lock().unwrap_or_else(|e| e.into_inner());
        let Some(timeout) = plan.affinity.map(|s| Duration::from_secs(u64::from(s))) else {
            pins.clear();
            return;
        };
        pins.retain(|_, pin| {
            let known = plan.cluster_endpoints.contains(&pin.endpoint)
                || plan.local_endpoints.contains(&pin.endpoint);
            known && now.saturating_duration_since(pin.last_used) < timeout
        });
    }

    /// Number of pins (tests).
    #[cfg(test)]
    pub(crate) fn pins(&self) -> usize {
        self.pins.lock().map(|p| p.len()).unwrap_or(0)
    }
}
