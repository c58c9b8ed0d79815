//! The userspace proxy mode's rules: a [`Plan`](crate::Plan) and the node's [`ProxyPorts`]
//! rendered into Ferry's own nftables table, which sends service traffic to the proxy
//! listeners instead of DNATing it to endpoints.
//!
//! Upstream's userspace proxier (removed in Kubernetes 1.26) had four iptables chains for this;
//! Ferry keeps their split in nftables chains named after them:
//! - `portals-container` (upstream `KUBE-PORTALS-CONTAINER`, nat prerouting): traffic from
//!   outside the node or from its pods to a ClusterIP, external IP or load-balancer IP;
//! - `portals-host` (`KUBE-PORTALS-HOST`, nat output): the node's own traffic;
//! - `nodeports-container` / `nodeports-host` (`KUBE-NODEPORT-CONTAINER` / `-HOST`): the same
//!   for NodePorts, on the addresses `nodePortAddresses` selects, never on loopback (localhost
//!   NodePorts are listeners of their own, see `ferry_dataplane::userspace`).
//!
//! Every chain DNATs to the node's address and the proxy port. Upstream `redirect`ed the
//! container side (to the address of the interface the packet came in on, so that UDP replies
//! left from it); the kernel drops a packet it cannot redirect because that interface has no
//! address, as the host side of a calico pod's veth has none, and Ferry's proxy answers UDP
//! from the address each datagram arrived at anyway. A node without an address of the family
//! (no Node object) is `redirect`ed instead.
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
//!
//! The table is an [`nft::Ruleset`](crate::nft::Ruleset) like nftables mode's (no dispatch
//! chain, one element kind more: [`Value::Port`](crate::nft::Value::Port)), so its text,
//! transactions and netlink encoding are nftables mode's.

mod base;
mod node;
mod ports;
mod render;

use std::collections::BTreeMap;
use std::fmt::Write as _;

use ferry_model::{IpFamily, Protocol, ServiceName, ServicePortName};

use crate::nft::Ruleset;

pub use base::render_base;
pub use node::{NodeRules, ServicePorts};
pub use ports::{PortRange, PortRangeError, ProxyPorts, RangeExhausted};
pub use render::{render, render_port, render_service};

/// Where service traffic is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostTarget {
    /// DNAT to this node address and the proxy port.
    Dnat(std::net::IpAddr),
    /// `redirect` (to the incoming interface's address; loopback for the node's own traffic):
    /// the node's address of this family is unknown.
    Redirect,
}

/// How a service port is served by the proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proxied {
    /// Its traffic is redirected to this proxy port.
    Port(u16),
    /// Not proxied: SCTP (the proxy carries TCP and UDP only), rejected.
    Sctp,
    /// Not proxied: no proxy port was left in the range ([`RangeExhausted`]), or the proxy
    /// could not listen on it (retried at the next sync); rejected.
    NoPort,
}

/// A service port's line of the proxy-port table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortInfo {
    /// How it is served.
    pub proxied: Proxied,
    /// Its frontends (`10.96.0.10:53`, `*:32223` for a NodePort, `… (LB)`).
    pub frontends: Vec<String>,
}

/// The userspace mode's table for one family, and its proxy-port table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rules {
    /// Ferry's table (`ip ferry` / `ip6 ferry`).
    pub ruleset: Ruleset,
    /// Per service port: its proxy port and frontends.
    pub ports: BTreeMap<ServicePortName, PortInfo>,
}

/// The protocols the proxy carries.
pub fn proxied_protocol(p: Protocol) -> bool {
    matches!(p, Protocol::Tcp | Protocol::Udp)
}

/// The proxy-port table `ferry rules` prints after the table, as `#` comment lines (so the
/// whole output still loads with `nft -f`): which listener serves which service port, and
/// its frontends.
pub fn port_table(family: IpFamily, ports: &BTreeMap<ServicePortName, PortInfo>) -> String {
    let fam = crate::family::nft_family(family);
    let mut out = format!("# proxy ports ({fam}): listener <- service port <- frontends\n");
    for (name, info) in ports {
        let (listener, note) = match info.proxied {
            Proxied::Port(p) => (p.to_string(), ""),
            Proxied::Sctp => (
                "-".into(),
                "   (SCTP is not proxied in user space: rejected)",
            ),
            Proxied::NoPort => (
                "none".into(),
                "   (no proxy port: the range is full or the port cannot be bound; rejected)",
            ),
        };
        let _ = writeln!(
            out,
            "# {listener:>5}/{} <- {name} <- {}{note}",
            name.protocol,
            info.frontends.join(", ")
        );
    }
    out
}

/// The service port an element's comment names (`namespace/name:port`, or `namespace/name`
/// for an unnamed port, as the rules write it), with the protocol of its key: how the
/// assignments of a table left in the kernel are read back ([`ProxyPorts::restore`]).
pub fn service_port_of(comment: &str, protocol: Protocol) -> Option<ServicePortName> {
    let (service, port) = comment.split_once(':').unwrap_or((comment, ""));
    let (namespace, name) = service.split_once('/')?;
    if namespace.is_empty() || name.is_empty() {
        return None;
    }
    Some(ServicePortName {
        service: ServiceName::new(namespace, name),
        port: port.to_owned(),
        protocol,
    })
}

#[cfg(test)]
mod tests;
