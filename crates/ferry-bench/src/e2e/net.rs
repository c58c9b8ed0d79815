//! The end-to-end lab: three network namespaces wired like a node between a client and its
//! pods.
//!
//! ```text
//!  client 10.200.0.2 ──veth── 10.200.0.1 node 10.201.0.1 ──veth── 10.201.0.2 pods
//!   default via node          ferry runs here                 local 10.64.0.0/12 (AnyIP)
//!                             10.64.0.0/12 via pods
//!                             unreachable 10.96.0.0/12
//! ```
//!
//! The pods namespace holds the whole pod range as one local route (`ip route add local
//! 10.64.0.0/12 dev lo`), so one listening socket answers on every endpoint address, 100 000
//! endpoints without 100 000 namespaces, and tells which address it was reached on. The node
//! forwards; its service range is unreachable, so a ClusterIP without rules fails at once
//! (ICMP unreachable) rather than timing out. Nothing is added to the starting namespace: the
//! veths are created inside the node namespace. Dropping [`Net`] deletes the namespaces.

use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

use anyhow::Context as _;
use ferry_lab::netns::{sysctl, IpBatch};

use super::cluster::{POD_RANGE, SERVICE_RANGE};
use crate::netns::{Netns, PREFIX};

/// The client's address.
pub const CLIENT_IP: &str = "10.200.0.2";

/// Node, client and pods namespaces, wired.
#[derive(Debug)]
pub struct Net {
    /// Where Ferry runs.
    pub node: Netns,
    /// Where connections start.
    pub client: Netns,
    /// Where every endpoint answers.
    pub pods: Netns,
}

impl Net {
    /// Creates and wires `ferry-bench-<pid>-<tag>-{node,client,pods}`.
    pub fn create(tag: &str) -> anyhow::Result<Net> {
        let name = |role: &str| format!("{PREFIX}{}-{tag}-{role}", std::process::id());
        let net = Net {
            node: Netns::create(&name("node"))?,
            client: Netns::create(&name("client"))?,
            pods: Netns::create(&name("pods"))?,
        };
        net.wire()
            .with_context(|| format!("wiring the {tag} namespaces"))?;
        Ok(net)
    }

    fn wire(&self) -> anyhow::Result<()> {
        let (node, client, pods) = (self.node.name(), self.client.name(), self.pods.name());
        let mut n = IpBatch::new(Some(node));
        n.line(format!(
            "link add eth-c type veth peer name eth0 netns {client}"
        ))
        .line(format!(
            "link add eth-p type veth peer name eth0 netns {pods}"
        ))
        .line("addr add 10.200.0.1/24 dev eth-c")
        .line("addr add 10.201.0.1/24 dev eth-p")
        .line("link set lo up")
        .line("link set eth-c up")
        .line("link set eth-p up")
        .line(format!("route add {POD_RANGE} via 10.201.0.2"))
        .line(format!("route add unreachable {SERVICE_RANGE}"));
        n.run()?;
        let mut c = IpBatch::new(Some(client));
        c.line(format!("addr add {CLIENT_IP}/24 dev eth0"))
            .line("link set lo up")
            .line("link set eth0 up")
            .line("route add default via 10.200.0.1");
        c.run()?;
        let mut p = IpBatch::new(Some(pods));
        p.line("addr add 10.201.0.2/24 dev eth0")
            .line("link set lo up")
            .line("link set eth0 up")
            .line("route add default via 10.201.0.1")
            .line(format!("route add local {POD_RANGE} dev lo"));
        p.run()?;
        // Finished connections leave conntrack quickly, so the many probes of a long run never
        // fill the node's table; "unreachable" answers are not rate-limited, so a probe of a
        // ClusterIP without rules yet fails at once, every time.
        sysctl(
            node,
            &[
                ("net.ipv4.ip_forward", "1"),
                ("net.ipv4.icmp_ratelimit", "0"),
                ("net.netfilter.nf_conntrack_tcp_timeout_time_wait", "1"),
            ],
        )?;
        sysctl(client, &[("net.ipv4.ip_local_port_range", "10000 65000")])?;
        Ok(())
    }

    /// Fails unless the calling thread is inside the client namespace: probes must never leave
    /// the lab.
    pub fn ensure_in_client(&self) -> anyhow::Result<()> {
        let here = std::fs::metadata("/proc/thread-self/ns/net")?.ino();
        let client = std::fs::metadata(Path::new("/run/netns").join(self.client.name()))?.ino();
        anyhow::ensure!(here == client, "not inside {}", self.client.name());
        Ok(())
    }
}
