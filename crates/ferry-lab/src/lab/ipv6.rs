//! IPv6 for a built lab (dual-stack): ULA addresses on the LAN, a pod prefix per node with
//! routes between the nodes, and IPv6 addresses for pods, all inside the lab's namespaces.
//!
//! Plan ([`Lab::enable_ipv6`]): LAN `fd00:10:1::/64`, every host's IPv6 address ends with the
//! decimal digits of its IPv4 address's last octet read as hex (10.1.1.9 → `fd00:10:1::9`,
//! 10.1.1.100 → `fd00:10:1::100`), dead-end gateway `fd00:10:1::1` (a permanent neighbour
//! entry, as for IPv4), node *i* (in spec order) owns pod prefix `fd00:10:244:<i+1>::/64`.
//! A pod gets `<ip>/128` on `eth0` and a default route via `fe80::1`, the link-local address
//! of its node-side veth (calico does the same with its own link-local address).
//!
//! Duplicate address detection would leave new addresses "tentative" (unusable) for a second
//! or more: every address is added with `nodad`, and `accept_dad` is 0 in every namespace
//! IPv6 is enabled in (LAB-NOTES: new namespaces do not inherit the host's sysctls).

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr};

use ipnet::Ipv6Net;

use super::{Lab, LabError};
use crate::netns::{self, IpBatch};
use crate::spec::GATEWAY_MAC;

/// The lab's IPv6 LAN prefix.
pub const LAN6: &str = "fd00:10:1::/64";
/// The dead-end IPv6 gateway on the LAN.
pub const GATEWAY6: Ipv6Addr = Ipv6Addr::new(0xfd00, 0x10, 0x1, 0, 0, 0, 0, 1);
/// The link-local address of every node-side pod veth: pods' IPv6 default gateway.
pub const POD_GATEWAY6: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 1);

/// IPv6 state of a lab (empty until [`Lab::enable_ipv6`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Ipv6State {
    enabled: bool,
    /// Node and client addresses, by host name.
    hosts: BTreeMap<String, Ipv6Addr>,
    /// Pod prefixes, by node name.
    pod_prefixes: BTreeMap<String, Ipv6Net>,
    /// Pod addresses, by pod name.
    pods: BTreeMap<String, Ipv6Addr>,
}

/// `fd00:10:1::<digits of the last octet>`: 10.1.1.17 → `fd00:10:1::17`.
pub fn lan_address(v4: Ipv4Addr) -> Ipv6Addr {
    let digits = v4.octets()[3].to_string();
    let last = u16::from_str_radix(&digits, 16).unwrap_or(0);
    Ipv6Addr::new(0xfd00, 0x10, 0x1, 0, 0, 0, 0, last)
}

fn pod_prefix(i: usize) -> Ipv6Net {
    let n = u16::try_from(i + 1).unwrap_or(u16::MAX);
    Ipv6Net::new(Ipv6Addr::new(0xfd00, 0x10, 0x244, n, 0, 0, 0, 0), 64).unwrap_or_default()
}

const NO_DAD: [(&str, &str); 3] = [
    ("net.ipv6.conf.all.accept_dad", "0"),
    ("net.ipv6.conf.default.accept_dad", "0"),
    ("net.ipv6.conf.eth0.accept_dad", "0"),
];

impl Lab {
    /// Gives the LAN, every node and every client an IPv6 address, the nodes IPv6 forwarding
    /// and routes to each other's pod prefixes, and clients with pod routes IPv6 routes too
    /// (see the module doc for the addresses). Clients added later get no IPv6. Idempotent.
    pub fn enable_ipv6(&mut self) -> Result<(), LabError> {
        if self.ipv6.enabled {
            return Ok(());
        }
        let mut lan = IpBatch::new(Some(&self.lan_ns));
        // Without an MLD querier, snooping can stop the solicited-node multicast NDP needs.
        lan.line("link set br0 type bridge mcast_snooping 0");
        lan.run()?;
        let nodes: Vec<(String, Ipv6Addr, Ipv6Net, String)> = self
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                (
                    n.name.clone(),
                    lan_address(n.ip),
                    pod_prefix(i),
                    n.netns.clone(),
                )
            })
            .collect();
        let mut batches = Vec::new();
        for (name, ip, _, ns) in &nodes {
            let mut sysctls = NO_DAD.to_vec();
            sysctls.push(("net.ipv6.conf.all.forwarding", "1"));
            netns::sysctl(ns, &sysctls)?;
            let routes = nodes
                .iter()
                .filter(|(other, ..)| other != name)
                .map(|(_, via, prefix, _)| (*prefix, *via));
            batches.push(host_batch(ns, *ip, routes));
        }
        let mut clients = Vec::new();
        for c in &self.clients {
            netns::sysctl(&c.netns, &NO_DAD)?;
            let ip = lan_address(c.ip);
            // Clients built with pod routes have an IPv4 route per node; give them IPv6 ones.
            let has_pod_routes = self
                .spec
                .clients
                .iter()
                .any(|s| s.name == c.name && s.pod_routes);
            let routes: Vec<(Ipv6Net, Ipv6Addr)> = if has_pod_routes {
                nodes.iter().map(|(_, via, p, _)| (*p, *via)).collect()
            } else {
                Vec::new()
            };
            batches.push(host_batch(&c.netns, ip, routes.into_iter()));
            clients.push((c.name.clone(), ip));
        }
        netns::run_batches(&batches)?;
        for (name, ip, prefix, _) in nodes {
            self.ipv6.hosts.insert(name.clone(), ip);
            self.ipv6.pod_prefixes.insert(name, prefix);
        }
        self.ipv6.hosts.extend(clients);
        self.ipv6.enabled = true;
        Ok(())
    }

    /// The IPv6 address of a node or client, once [`enable_ipv6`](Self::enable_ipv6) ran.
    pub fn ipv6_of(&self, host: &str) -> Option<Ipv6Addr> {
        self.ipv6
            .hosts
            .get(host)
            .or_else(|| self.ipv6.pods.get(host))
            .copied()
    }

    /// A node's IPv6 pod prefix, once IPv6 is enabled.
    pub fn pod_prefix_v6(&self, node: &str) -> Option<Ipv6Net> {
        self.ipv6.pod_prefixes.get(node).copied()
    }

    /// Gives an existing pod a second address, `ip` (inside its node's IPv6 pod prefix):
    /// `ip/128` on the pod's `eth0`, a default route via the node-side veth's `fe80::1`, and
    /// the node's route to `ip`. The pod's servers keep running; a server listening on `[::]`
    /// answers on both addresses.
    pub fn add_pod_ipv6(&mut self, pod: &str, ip: Ipv6Addr) -> Result<(), LabError> {
        let info = self.pod(pod)?.clone();
        let node_ns = self.node(&info.node)?.netns.clone();
        let bad = |problem: String| LabError::BadPodIp {
            pod: pod.to_string(),
            ip: info.ip,
            problem,
        };
        let prefix = self
            .pod_prefix_v6(&info.node)
            .ok_or_else(|| bad("has no IPv6 peer: enable_ipv6 was not called".into()))?;
        if !prefix.contains(&ip) {
            return Err(bad(format!(
                "cannot take {ip}: outside node {}'s IPv6 pod prefix {prefix}",
                info.node
            )));
        }
        netns::sysctl(&info.netns, &NO_DAD)?;
        let veth_dad = format!("net.ipv6.conf.{}.accept_dad", info.host_veth);
        netns::sysctl(&node_ns, &[(&veth_dad, "0")])?;
        let mut p = IpBatch::new(Some(&info.netns));
        p.line(format!("addr add {ip}/128 dev eth0 nodad"))
            .line(format!("route add ::/0 via {POD_GATEWAY6} dev eth0"));
        let mut n = IpBatch::new(Some(&node_ns));
        // Every pod veth of the node carries the same link-local gateway address.
        n.line(format!(
            "addr replace {POD_GATEWAY6}/64 dev {} nodad",
            info.host_veth
        ))
        .line(format!("route add {ip}/128 dev {}", info.host_veth));
        netns::run_batches(&[n, p])?;
        self.ipv6.pods.insert(pod.to_string(), ip);
        Ok(())
    }

    /// Like [`Lab::start_pod_server`], listening on `[::]:port`: one socket that answers on the
    /// pod's IPv4 and IPv6 addresses (replacing a server already on `port`).
    pub fn start_dual_stack_pod_server(
        &mut self,
        pod: &str,
        port: u16,
        program: &crate::pod::PodProgram,
    ) -> Result<(), LabError> {
        let info = self.pod(pod)?.clone();
        let listen = std::net::SocketAddr::from((Ipv6Addr::UNSPECIFIED, port));
        let log = self.dir().join(format!("{pod}-{port}-dual.log"));
        self.servers.retain(|s| !(s.pod == pod && s.port == port));
        let process = crate::process::LabProcess::spawn(
            &format!("{pod}:{port}"),
            &info.netns,
            program.program(),
            program.args_for(pod, listen),
            &log,
        )?;
        self.servers.push(super::PodServer {
            pod: pod.to_string(),
            port,
            process,
            wait_tcp: program.waits_for_tcp(),
        });
        if program.waits_for_tcp() {
            self.wait_listening(pod, port, crate::scaled(std::time::Duration::from_secs(10)))?;
        }
        Ok(())
    }
}

/// `fe80::<last 16 bits of ip>`: a host's own link-local address, usable at once.
fn link_local(ip: Ipv6Addr) -> Ipv6Addr {
    Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, ip.segments()[7])
}

/// One host's IPv6 on `eth0`: address, the dead-end gateway, routes, default route.
///
/// Also a `nodad` link-local address: `eth0`'s own one was made before `accept_dad` was 0
/// and stays tentative for a second or two, and a node forwarding a pod's packet (whose
/// source is not on `eth0`) sends its neighbour solicitation only from a link-local address
/// that is not tentative; until then the first forwarded packets (a pod's first SYN to
/// another node's pod) are lost.
fn host_batch(
    ns: &str,
    ip: Ipv6Addr,
    routes: impl Iterator<Item = (Ipv6Net, Ipv6Addr)>,
) -> IpBatch {
    let mut b = IpBatch::new(Some(ns));
    b.line(format!("addr add {ip}/64 dev eth0 nodad"));
    b.line(format!("addr add {}/64 dev eth0 nodad", link_local(ip)));
    b.line(format!(
        "neigh replace {GATEWAY6} lladdr {GATEWAY_MAC} dev eth0 nud permanent"
    ));
    for (prefix, via) in routes {
        b.line(format!("route add {prefix} via {via} dev eth0"));
    }
    b.line(format!("route add ::/0 via {GATEWAY6} dev eth0"));
    b
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lan_addresses_keep_the_ipv4_digits() {
        assert_eq!(
            lan_address(Ipv4Addr::new(10, 1, 1, 9)).to_string(),
            "fd00:10:1::9"
        );
        assert_eq!(
            lan_address(Ipv4Addr::new(10, 1, 1, 100)).to_string(),
            "fd00:10:1::100"
        );
        assert_eq!(pod_prefix(2).to_string(), "fd00:10:244:3::/64");
        assert!(LAN6.parse::<Ipv6Net>().expect("net").contains(&GATEWAY6));
        let ip = lan_address(Ipv4Addr::new(10, 1, 1, 12));
        assert_eq!(link_local(ip).to_string(), "fe80::12");
    }
}
