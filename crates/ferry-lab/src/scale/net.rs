//! The lab's namespaces: [`Netns`], one named namespace deleted (with what runs in it) when
//! dropped, and [`Net`], node, client and pods wired like a node between a client and its pods
//! (see [`super`]).
//!
//! The pods namespace holds the whole pod range as one local route (`ip route add local
//! 10.64.0.0/12 dev lo`), so one listening socket answers on every endpoint address, 100 000
//! endpoints without 100 000 namespaces, and tells which address it was reached on. The node
//! forwards; its service range is unreachable, so a ClusterIP without rules fails at once
//! (ICMP unreachable) rather than timing out.

use std::ffi::OsStr;
use std::future::Future;
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;
use std::process::Command;

use anyhow::Context as _;

use super::cluster::{POD_RANGE, SERVICE_RANGE};
use crate::netns::{self, sysctl, IpBatch};

/// The node's address on the client's side, where the lab's users have always found it.
pub use super::cluster::NODE_IP;

/// The client's address.
pub const CLIENT_IP: &str = "10.200.0.2";

/// One named namespace, deleted (with what runs in it) when dropped.
#[derive(Debug)]
pub struct Netns {
    name: String,
}

impl Netns {
    /// Creates namespace `name` (`ip netns add`); fails if it already exists.
    pub fn create(name: &str) -> anyhow::Result<Netns> {
        anyhow::ensure!(
            !netns::path(name).exists(),
            "network namespace {name} already exists"
        );
        netns::add(&[name.to_owned()]).with_context(|| format!("creating {name}"))?;
        Ok(Netns {
            name: name.to_owned(),
        })
    }

    /// The namespace's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `ip netns exec <ns> <program> <args…>` (not started).
    pub fn command<I, S>(&self, program: impl AsRef<OsStr>, args: I) -> Command
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        netns::exec_command(&self.name, program, args)
    }

    /// Inode of the namespace (what `/proc/<pid>/ns/net` of a process inside it shows).
    pub fn inode(&self) -> anyhow::Result<u64> {
        let path = netns::path(&self.name);
        Ok(std::fs::metadata(&path)
            .with_context(|| format!("stat {}", path.display()))?
            .ino())
    }

    /// Runs `program args…` inside the namespace; its stdout, or an error with its stderr.
    pub fn exec<I, S>(&self, program: &str, args: I) -> anyhow::Result<String>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let out = netns::run(&mut self.command(program, args))?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Like [`Netns::exec`], whatever the exit status: (success, stdout, stderr).
    pub fn exec_status<I, S>(
        &self,
        program: &str,
        args: I,
    ) -> anyhow::Result<(bool, String, String)>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let out = netns::run_unchecked(&mut self.command(program, args))?;
        Ok((
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ))
    }

    /// Runs `fut` on a thread inside the namespace, in a tokio runtime of its own.
    pub fn block_on<T: Send>(
        &self,
        fut: impl Future<Output = anyhow::Result<T>> + Send,
    ) -> anyhow::Result<T> {
        netns::run_in(&self.name, move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?
                .block_on(fut)
        })?
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        if let Err(e) = netns::destroy(std::slice::from_ref(&self.name)) {
            eprintln!(
                "warning: could not delete network namespace {}: {e}",
                self.name
            );
        }
    }
}

/// Deletes `<prefix><pid>-*` namespaces of processes that no longer run (killed before they
/// could clean up), with what still runs in them; returns their names.
pub fn reap_stale(prefix: &str) -> anyhow::Result<Vec<String>> {
    let stale: Vec<String> = netns::list()?
        .into_iter()
        .filter(|n| {
            n.strip_prefix(prefix)
                .and_then(|r| r.split('-').next())
                .and_then(|pid| pid.parse::<u32>().ok())
                .is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists())
        })
        .collect();
    if !stale.is_empty() {
        netns::destroy(&stale)?;
    }
    Ok(stale)
}

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
    /// Creates and wires `<prefix><pid>-<tag>-{node,client,pods}`.
    pub fn create(prefix: &str, tag: &str) -> anyhow::Result<Net> {
        let name = |role: &str| format!("{prefix}{}-{tag}-{role}", std::process::id());
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
        .line(format!("addr add {NODE_IP}/24 dev eth-c"))
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
            .line(format!("route add default via {NODE_IP}"));
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
        let client = self.client.inode()?;
        anyhow::ensure!(here == client, "not inside {}", self.client.name());
        Ok(())
    }
}
