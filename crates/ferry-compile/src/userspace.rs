//! The userspace proxy mode's rules: a [`Plan`](crate::Plan) and the node's [`ProxyPorts`]
//! rendered into Ferry's own nftables table, which sends service traffic to the proxy
//! listeners instead of DNATing it to endpoints.
//!
//! Upstream's userspace proxier (removed in Kubernetes 1.26) had four iptables chains for this;
//! Ferry keeps their split in nftables chains named after them:
//! - `portals-container` (upstream `KUBE-PORTALS-CONTAINER`, nat prerouting): traffic from
//!   outside the node or from its pods to a ClusterIP, external IP or load-balancer IP is
//!   `redirect`ed to the proxy port (the kernel rewrites the destination to the address of the
//!   interface it came in on);
//! - `portals-host` (`KUBE-PORTALS-HOST`, nat output): the node's own traffic is DNATed to the
//!   node's address and the proxy port (a `redirect` would send it to 127.0.0.1, which the
//!   proxy would answer from another address than the one the client used);
//! - `nodeports-container` / `nodeports-host` (`KUBE-NODEPORT-CONTAINER` / `-HOST`): the same
//!   for NodePorts, on the addresses `nodePortAddresses` selects, never on loopback.
//!
//! One map lookup per new connection, whatever the number of services: `portals` maps
//! `address . protocol . port` to the proxy port, `nodeports` `protocol . port`. What the
//! kernel modes drop or reject (no endpoints, `Local` policy without a local endpoint,
//! `loadBalancerSourceRanges`) is dropped or rejected here by the same fixed chains as in
//! nftables mode, before the proxy sees it; SCTP, which the proxy cannot carry, is rejected.
//! A `Local` external frontend without a local endpoint is redirected only for the node and
//! its pods (`*-local-sources` maps), who reach endpoints cluster-wide as in the kernel modes.
//! Connections that did not come through these rules are dropped at the proxy ports
//! (`proxy-ports-check`), so a proxy port is no back door around the firewall.

mod base;
mod ports;
mod render;
mod text;

use std::collections::BTreeMap;

use ferry_model::{IpFamily, Protocol, ServicePortName};

use crate::nft::{BaseChain, Chain, Key, SetDef, Verdict};

pub use base::render_base;
pub use ports::{PortRange, PortRangeError, ProxyPorts, RangeExhausted};
pub use render::{render, render_port, RenderContext};
pub use text::{delta, port_table, script_full};

/// The value of a map element.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Value {
    /// A proxy port (`redirect to :…` / `dnat to NODE:…` maps).
    Port(u16),
    /// A verdict (the no-endpoint verdict maps).
    Verdict(Verdict),
}

/// One element of a set or map of the userspace table.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Element {
    /// The set or map.
    pub set: &'static str,
    /// Key.
    pub key: Key,
    /// Value, for map elements.
    pub value: Option<Value>,
    /// The service port it belongs to, shown by `nft list`.
    pub comment: Option<String>,
}

/// Where the node's own service traffic is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostTarget {
    /// DNAT to this node address and the proxy port (upstream's choice).
    Dnat(std::net::IpAddr),
    /// `redirect` (to the loopback address): the node's address of this family is unknown.
    Redirect,
}

/// How a service port is served by the proxy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Proxied {
    /// Its traffic is redirected to this proxy port.
    Port(u16),
    /// Not proxied: SCTP (the proxy carries TCP and UDP only), rejected.
    Sctp,
    /// Not proxied: no proxy port was left in the range ([`RangeExhausted`]), rejected.
    NoPort,
}

/// Everything one service port contributes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortRules {
    /// How it is served.
    pub proxied: Proxied,
    /// Its frontends, as the proxy-port table shows them (`10.96.0.10:53`, `*:32223`).
    pub frontends: Vec<String>,
    /// Its elements, sorted.
    pub elements: Vec<Element>,
}

/// The userspace mode's table for one family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ruleset {
    /// `ip` or `ip6`.
    pub family: IpFamily,
    /// Hooked chains, in a fixed order.
    pub base_chains: Vec<BaseChain>,
    /// Fixed regular chains.
    pub chains: Vec<Chain>,
    /// Sets and maps.
    pub sets: Vec<SetDef>,
    /// Node-level elements (NodePort addresses).
    pub elements: Vec<Element>,
    /// Per service port.
    pub ports: BTreeMap<ServicePortName, PortRules>,
}

impl Ruleset {
    /// True when everything but the service ports is equal (element changes suffice).
    pub fn same_base(&self, other: &Ruleset) -> bool {
        self.family == other.family
            && self.base_chains == other.base_chains
            && self.chains == other.chains
            && self.sets == other.sets
            && self.elements == other.elements
    }

    /// Every element, each once, grouped by set and sorted (several ports of one service
    /// share its ClusterIP in `cluster-ips`).
    pub fn all_elements(&self) -> BTreeMap<&'static str, Vec<&Element>> {
        let mut by_set: BTreeMap<&'static str, BTreeMap<&Key, &Element>> = BTreeMap::new();
        let ports = self.ports.values().flat_map(|p| p.elements.iter());
        for e in self.elements.iter().chain(ports) {
            // Two services claiming one frontend (conflicting manifests): the first wins, so
            // the kernel never sees a key twice.
            by_set.entry(e.set).or_default().entry(&e.key).or_insert(e);
        }
        by_set
            .into_iter()
            .map(|(set, els)| (set, els.into_values().collect()))
            .collect()
    }
}

/// The protocols the proxy carries.
pub fn proxied_protocol(p: Protocol) -> bool {
    matches!(p, Protocol::Tcp | Protocol::Udp)
}

#[cfg(test)]
mod tests;
