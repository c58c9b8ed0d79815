//! Wiring the lab: namespaces, the LAN bridge, veths, addresses, routes and sysctls.
//!
//! Every veth is created with both ends directly in their namespaces
//! (`link add A netns X type veth peer name B netns Y`), so no interface ever appears in the
//! root namespace and parallel labs cannot collide on names. Commands are grouped into one
//! `ip -batch` per namespace, run concurrently.

use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU32, Ordering};

use ipnet::Ipv4Net;

use super::{ClientInfo, Lab, LabError, NodeInfo};
use crate::netns::{self, IpBatch};
use crate::pod::{host_veth_name, PodInfo};
use crate::spec::{ClientSpec, GATEWAY_MAC};

/// Sysctls of every node namespace.
const NODE_SYSCTLS: &[(&str, &str)] = &[
    ("net.ipv4.ip_forward", "1"),
    ("net.ipv4.conf.all.rp_filter", "0"),
    ("net.ipv4.conf.default.rp_filter", "0"),
];

/// A new unique prefix: `fy<pid>x<counter>`.
pub(super) fn auto_prefix() -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "fy{}x{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// The pid in a namespace name made with [`auto_prefix`] (`fy<pid>x<n>-…`).
pub(super) fn auto_prefix_pid(ns: &str) -> Option<u32> {
    let (prefix, _) = ns.split_once('-')?;
    let (pid, n) = prefix.strip_prefix("fy")?.split_once('x')?;
    n.parse::<u32>().ok()?;
    pid.parse().ok()
}

/// Whether a process with this pid exists.
pub(super) fn pid_alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
}

/// A host to attach to the LAN.
struct LanHost {
    ns: String,
    port: String,
    ip: Ipv4Addr,
    routes: Vec<(Ipv4Net, Ipv4Addr)>,
    is_node: bool,
}

impl Lab {
    /// Creates the LAN and attaches the spec's nodes and clients.
    pub(super) fn setup(&mut self) -> Result<(), LabError> {
        let lan = self.lan_ns.clone();
        self.namespaces.push(lan.clone());
        let mut b = IpBatch::new(None);
        b.line(format!("netns add {lan}"));
        b.line(format!("link add br0 netns {lan} type bridge"));
        b.run()?;

        let spec = self.spec.clone();
        let mut hosts = Vec::new();
        for (i, n) in spec.nodes.iter().enumerate() {
            let routes = spec
                .nodes
                .iter()
                .filter(|o| o.name != n.name)
                .map(|o| (o.pod_cidr, o.ip))
                .collect();
            let ns = format!("{}-n{i}", self.prefix);
            hosts.push(LanHost {
                ns: ns.clone(),
                port: format!("vn{i}"),
                ip: n.ip,
                routes,
                is_node: true,
            });
            self.nodes.push(NodeInfo {
                name: n.name.clone(),
                ip: n.ip,
                pod_cidr: n.pod_cidr,
                netns: ns,
            });
        }
        self.attach_lan_hosts(hosts)?;
        self.attach_clients(&spec.clients)
    }

    /// Attaches clients to the LAN and records them.
    pub(super) fn attach_clients(&mut self, clients: &[ClientSpec]) -> Result<(), LabError> {
        let mut hosts = Vec::new();
        let mut infos = Vec::new();
        for c in clients {
            let i = self.clients.len() + infos.len();
            let ns = format!("{}-c{i}", self.prefix);
            let routes = if c.pod_routes {
                self.nodes.iter().map(|n| (n.pod_cidr, n.ip)).collect()
            } else {
                Vec::new()
            };
            hosts.push(LanHost {
                ns: ns.clone(),
                port: format!("vc{i}"),
                ip: c.ip,
                routes,
                is_node: false,
            });
            infos.push(ClientInfo {
                name: c.name.clone(),
                ip: c.ip,
                netns: ns,
            });
        }
        self.attach_lan_hosts(hosts)?;
        self.clients.extend(infos);
        Ok(())
    }

    fn attach_lan_hosts(&mut self, hosts: Vec<LanHost>) -> Result<(), LabError> {
        if hosts.is_empty() {
            return Ok(());
        }
        let lan = self.lan_ns.clone();
        // Record first: a failure below must still delete them.
        self.namespaces.extend(hosts.iter().map(|h| h.ns.clone()));
        let mut root = IpBatch::new(None);
        for h in &hosts {
            root.line(format!("netns add {}", h.ns));
        }
        for h in &hosts {
            root.line(format!(
                "link add {} netns {lan} type veth peer name eth0 netns {}",
                h.port, h.ns
            ));
        }
        root.run()?;

        for h in hosts.iter().filter(|h| h.is_node) {
            netns::sysctl(&h.ns, NODE_SYSCTLS)?;
        }

        let prefix_len = self.spec.lan.prefix_len();
        let gw = self.spec.gateway;
        let mut batches = Vec::new();
        let mut lan_b = IpBatch::new(Some(&lan));
        lan_b.line("link set lo up").line("link set br0 up");
        for h in &hosts {
            lan_b.line(format!("link set {} master br0", h.port));
            lan_b.line(format!("link set {} up", h.port));
        }
        batches.push(lan_b);
        for h in &hosts {
            let mut b = IpBatch::new(Some(&h.ns));
            b.line("link set lo up");
            b.line(format!("addr add {}/{prefix_len} dev eth0", h.ip));
            b.line("link set eth0 up");
            b.line(format!(
                "neigh replace {gw} lladdr {GATEWAY_MAC} dev eth0 nud permanent"
            ));
            for (cidr, via) in &h.routes {
                b.line(format!("route add {cidr} via {via} dev eth0"));
            }
            b.line(format!("route add default via {gw} dev eth0"));
            batches.push(b);
        }
        netns::run_batches(&batches)?;
        Ok(())
    }

    /// Adds a route inside one host's namespace (never the root namespace), e.g. a
    /// load-balancer IP routed to a node from a client, as a router in front of the cluster
    /// would. Removed with the lab.
    pub fn add_route(
        &self,
        host: &super::Host,
        dst: Ipv4Net,
        via: Ipv4Addr,
    ) -> Result<(), LabError> {
        let ns = self.netns_of(host)?;
        let mut b = IpBatch::new(Some(ns));
        b.line(format!("route add {dst} via {via} dev eth0"));
        b.run()?;
        Ok(())
    }

    /// Adds a secondary address to a node's LAN interface (in the LAN's prefix, so the LAN's
    /// hosts reach it directly). The node keeps its primary address for everything it sends.
    /// Removed with the lab.
    pub fn add_node_address(&self, node: &str, ip: Ipv4Addr) -> Result<(), LabError> {
        let ns = self.node(node)?.netns.clone();
        let prefix_len = self.spec.lan.prefix_len();
        let mut b = IpBatch::new(Some(&ns));
        b.line(format!("addr add {ip}/{prefix_len} dev eth0"));
        b.run()?;
        Ok(())
    }

    /// Creates pod `name` on `node` with `ip`, calico-style. On failure the pod's namespace is
    /// removed again.
    pub(super) fn create_pod(
        &mut self,
        node: &NodeInfo,
        name: &str,
        ip: Ipv4Addr,
    ) -> Result<(), LabError> {
        let ns = format!("{}-p{}", self.prefix, self.next_pod);
        self.next_pod += 1;
        let mut veth = host_veth_name(name);
        if self
            .pods
            .iter()
            .any(|p| p.node == node.name && p.host_veth == veth)
        {
            // A hash collision: fall back to the pod's sequence number.
            veth = format!("cali{:011x}", self.next_pod);
        }
        self.namespaces.push(ns.clone());
        match wire_pod(&ns, &node.netns, &veth, ip) {
            Ok(()) => {
                self.pods.push(PodInfo {
                    name: name.to_string(),
                    node: node.name.clone(),
                    ip,
                    netns: ns,
                    host_veth: veth,
                });
                Ok(())
            }
            Err(e) => {
                if let Err(e2) = netns::destroy(std::slice::from_ref(&ns)) {
                    tracing::warn!(error = %e2, "removing half-built pod namespace");
                }
                self.namespaces.retain(|n| *n != ns);
                Err(e)
            }
        }
    }
}

/// Wires a pod namespace `ns` (created here) to its node `node_ns`, calico-style: `eth0` with
/// `ip/32` and a default route in the pod, `veth` with proxy ARP and a `/32` route on the node.
/// Used by [`Lab::add_pod`] and by the kubelet stand-in of `ferry-kube-lab`.
pub fn wire_pod(ns: &str, node_ns: &str, veth: &str, ip: Ipv4Addr) -> Result<(), LabError> {
    let mut root = IpBatch::new(None);
    root.line(format!("netns add {ns}"));
    root.line(format!(
        "link add eth0 netns {ns} type veth peer name {veth} netns {node_ns}"
    ));
    root.run()?;
    // Proxy ARP on the node side, answered at once: the default `proxy_delay` is a random
    // wait of up to 0.8 s for broadcast requests, and `neigh.default` exists only in the
    // initial namespace, so it is set per interface (as calico does).
    let proxy_arp = format!("net.ipv4.conf.{veth}.proxy_arp");
    let proxy_delay = format!("net.ipv4.neigh.{veth}.proxy_delay");
    netns::sysctl(node_ns, &[(&proxy_arp, "1"), (&proxy_delay, "0")])?;
    let mut pod = IpBatch::new(Some(ns));
    pod.line("link set lo up")
        .line(format!("addr add {ip}/32 dev eth0"))
        .line("link set eth0 up")
        .line("route add default dev eth0");
    let mut node = IpBatch::new(Some(node_ns));
    node.line(format!("link set {veth} up"))
        .line(format!("route add {ip}/32 dev {veth}"));
    netns::run_batches(&[pod, node])?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_prefix_roundtrip() {
        let p = auto_prefix();
        assert!(p.len() <= 20, "{p}");
        assert_eq!(
            auto_prefix_pid(&format!("{p}-lan")),
            Some(std::process::id())
        );
        assert_eq!(auto_prefix_pid("fyx-lan"), None);
        assert_eq!(auto_prefix_pid("fy12x3"), None);
        assert_eq!(auto_prefix_pid("other-lan"), None);
    }
}
