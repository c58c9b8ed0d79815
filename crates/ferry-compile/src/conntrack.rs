//! Which UDP conntrack flows are stale after a sync: a pure decision, taken from the UDP
//! service ports before and after the sync; the dataplane dumps the table and deletes the flows
//! the resulting filters match.
//!
//! UDP has no connection end, so a conntrack entry lives as long as packets keep coming (120 s
//! after the last one for an assured flow). Two kinds of entries would keep a client stuck
//! (upstream kube-proxy, pkg/proxy/conntrack/cleanup.go):
//!
//! * an entry DNATed to an endpoint that is gone: every packet still goes to the dead address;
//! * an entry created while a service had no endpoint (or before its rules existed): not
//!   DNATed at all, so the packets keep missing the endpoints that appeared since.
//!
//! Both are "a flow to a service frontend whose reply source is not a serving endpoint".
//! Upstream checks every UDP frontend after every sync; Ferry does that on full syncs (start-up,
//! periodic resync) and, on incremental syncs, only for frontends whose serving endpoints lost
//! a member, went from none to some, or that disappeared, which is where stale flows can come
//! from between two full syncs. Unlike upstream, a frontend left without endpoints is cleaned
//! too: its flows to the removed endpoints are deleted, so the client's next packet is rejected
//! at once instead of vanishing until the entry times out.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::{IpAddr, SocketAddr};

use ferry_model::{Protocol, ServicePortName, ServicePortView};

/// Where a client can address a UDP service port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Frontend {
    /// ClusterIP, external IP or load-balancer IP, with the service port.
    Address(SocketAddr),
    /// The node port, on any of the node's addresses (matched by port, like upstream).
    NodePort(u16),
}

impl Frontend {
    /// True when a flow whose original destination is `dst` addresses this frontend.
    pub fn matches(&self, dst: SocketAddr) -> bool {
        match *self {
            Frontend::Address(addr) => addr == dst,
            Frontend::NodePort(port) => port == dst.port(),
        }
    }
}

impl std::fmt::Display for Frontend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Frontend::Address(addr) => write!(f, "{addr}/udp"),
            Frontend::NodePort(port) => write!(f, "*:{port}/udp (node port)"),
        }
    }
}

/// One UDP service port: its frontends and its serving endpoints (address and port).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UdpServicePort {
    /// ClusterIP:port, external IPs, load-balancer IPs, node port.
    pub frontends: Vec<Frontend>,
    /// The endpoints that are serving (ready, or serving while terminating), address and
    /// port: a reply from an endpoint's address but another port (its `targetPort` changed) is
    /// no live flow (upstream since 1.34). Like upstream, traffic policies, topology and the
    /// terminating fallback are not taken into account: a change of policy must not break
    /// flows that still reach a live endpoint.
    pub serving: BTreeSet<SocketAddr>,
}

/// Every UDP service port of a node (one IP family).
pub type UdpServicePorts = BTreeMap<ServicePortName, UdpServicePort>;

impl UdpServicePort {
    /// The UDP view of a service port; `None` for TCP and SCTP ports.
    pub fn of(view: &ServicePortView) -> Option<Self> {
        if view.name.protocol != Protocol::Udp {
            return None;
        }
        let address = |ip: &IpAddr| Frontend::Address(SocketAddr::new(*ip, view.port));
        let mut frontends: Vec<Frontend> = std::iter::once(&view.cluster_ip)
            .chain(&view.external_ips)
            .chain(&view.load_balancer_ips)
            .map(address)
            .chain(view.node_port.map(Frontend::NodePort))
            .collect();
        frontends.sort();
        frontends.dedup();
        let serving = view
            .endpoints
            .iter()
            .filter(|e| e.conditions.ready || e.conditions.serving)
            .map(|e| e.addr)
            .collect();
        Some(Self { frontends, serving })
    }
}

/// The UDP service ports among `views`.
pub fn udp_service_ports<'a>(
    views: impl IntoIterator<Item = &'a ServicePortView>,
) -> UdpServicePorts {
    views
        .into_iter()
        .filter_map(|v| Some((v.name.clone(), UdpServicePort::of(v)?)))
        .collect()
}

/// Delete the UDP flows whose original destination is `frontend` and whose reply source is not
/// one of `keep` (`conntrack -D -p udp --orig-dst IP --orig-port-dst PORT` with every reply
/// source but those).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct StaleFlowFilter {
    /// The frontend the flows were addressed to.
    pub frontend: Frontend,
    /// The serving endpoints (address and port): flows DNATed to them are live.
    pub keep: BTreeSet<SocketAddr>,
}

impl StaleFlowFilter {
    /// True when a UDP flow (original destination `orig_dst`, reply source `reply_src`) is
    /// stale under this filter.
    pub fn matches(&self, orig_dst: SocketAddr, reply_src: SocketAddr) -> bool {
        self.frontend.matches(orig_dst) && !self.keep.contains(&reply_src)
    }
}

/// The filters indexed by destination, to check every entry of a large conntrack table in
/// constant time per entry. Same answers as asking each filter.
#[derive(Debug, Default)]
pub struct StaleFlowIndex<'a> {
    by_address: HashMap<SocketAddr, Vec<&'a BTreeSet<SocketAddr>>>,
    by_node_port: HashMap<u16, Vec<&'a BTreeSet<SocketAddr>>>,
}

impl<'a> StaleFlowIndex<'a> {
    /// Indexes `filters`.
    pub fn new(filters: &'a [StaleFlowFilter]) -> Self {
        let mut index = Self::default();
        for f in filters {
            match f.frontend {
                Frontend::Address(addr) => index.by_address.entry(addr).or_default().push(&f.keep),
                Frontend::NodePort(port) => {
                    index.by_node_port.entry(port).or_default().push(&f.keep)
                }
            }
        }
        index
    }

    /// True when some filter finds the UDP flow (`orig_dst`, `reply_src`) stale.
    pub fn is_stale(&self, orig_dst: SocketAddr, reply_src: SocketAddr) -> bool {
        let stale = |keeps: Option<&Vec<&BTreeSet<SocketAddr>>>| {
            keeps.is_some_and(|ks| ks.iter().any(|keep| !keep.contains(&reply_src)))
        };
        stale(self.by_address.get(&orig_dst)) || stale(self.by_node_port.get(&orig_dst.port()))
    }
}

/// Every frontend with the union of the serving endpoints behind it (two service ports
/// claiming one frontend is a misconfiguration; neither's flows are then deleted for the other).
fn by_frontend(ports: &UdpServicePorts) -> BTreeMap<Frontend, BTreeSet<SocketAddr>> {
    let mut map: BTreeMap<Frontend, BTreeSet<SocketAddr>> = BTreeMap::new();
    for port in ports.values() {
        for f in &port.frontends {
            map.entry(*f)
                .or_default()
                .extend(port.serving.iter().copied());
        }
    }
    map
}

/// The filters that find the stale UDP flows after a sync from `previous` to `current`.
///
/// A frontend is checked when it disappeared (all its flows are stale), when one of its
/// serving endpoints went away (flows to it are stale), or when it had no serving endpoint
/// and now has one (flows that were never DNATed are stale). With `reconcile` (full syncs),
/// every current frontend is checked, whatever changed: this also repairs what happened while
/// Ferry was not running. A node port without a serving endpoint (gone, or left with none) is
/// not checked: its flows are matched by port alone, so every UDP flow to that port number
/// would go, other hosts' included (upstream skips it too, since 1.37). Sorted by frontend.
pub fn stale_flows(
    previous: &UdpServicePorts,
    current: &UdpServicePorts,
    reconcile: bool,
) -> Vec<StaleFlowFilter> {
    let before = by_frontend(previous);
    let after = by_frontend(current);
    let gone = before
        .keys()
        .filter(|f| !after.contains_key(f))
        .map(|f| StaleFlowFilter {
            frontend: *f,
            keep: BTreeSet::new(),
        });
    let changed = after.iter().filter_map(|(f, now)| {
        let check = match before.get(f) {
            _ if reconcile => true,
            // A new frontend: flows to it predate its rules unless it has no endpoint yet.
            None => !now.is_empty(),
            Some(then) => !then.is_subset(now) || (then.is_empty() && !now.is_empty()),
        };
        check.then(|| StaleFlowFilter {
            frontend: *f,
            keep: now.clone(),
        })
    });
    let mut filters: Vec<_> = gone
        .chain(changed)
        .filter(|f| !(matches!(f.frontend, Frontend::NodePort(_)) && f.keep.is_empty()))
        .collect();
    filters.sort();
    filters
}

#[cfg(test)]
mod tests;
