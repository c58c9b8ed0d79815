//! Node, client and pods namespaces, wired (see [`super`]); deleted when dropped, with every
//! process still inside them.

use std::future::Future;

use anyhow::Context as _;
use ferry_lab::netns::{self, sysctl, IpBatch};

use super::cluster::{POD_RANGE, SERVICE_RANGE};

/// Prefix of every namespace the drills create: `fdrill-<pid>-<tag>-<role>`.
pub const PREFIX: &str = "fdrill-";
/// The client's address.
pub const CLIENT_IP: &str = "10.200.0.2";
/// The node's address on the client's side (its Node's InternalIP: NodePorts answer here).
pub const NODE_IP: &str = "10.200.0.1";

/// One named namespace, deleted (with what runs in it) when dropped.
#[derive(Debug)]
pub struct Ns {
    name: String,
}

impl Ns {
    fn create(name: String) -> anyhow::Result<Ns> {
        netns::add(std::slice::from_ref(&name)).with_context(|| format!("creating {name}"))?;
        Ok(Ns { name })
    }

    /// The namespace's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs `program args…` inside the namespace; its stdout, or an error with its stderr.
    pub fn exec<I, S>(&self, program: &str, args: I) -> anyhow::Result<String>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        let out = netns::run(&mut netns::exec_command(&self.name, program, args))?;
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Like [`Ns::exec`], whatever the exit status: (success, stdout, stderr).
    pub fn exec_status<I, S>(
        &self,
        program: &str,
        args: I,
    ) -> anyhow::Result<(bool, String, String)>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        let out = netns::run_unchecked(&mut netns::exec_command(&self.name, program, args))?;
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

impl Drop for Ns {
    fn drop(&mut self) {
        if let Err(e) = netns::destroy(std::slice::from_ref(&self.name)) {
            eprintln!(
                "warning: could not delete network namespace {}: {e}",
                self.name
            );
        }
    }
}

/// Node, client and pods namespaces, wired.
#[derive(Debug)]
pub struct Net {
    /// Where Ferry runs.
    pub node: Ns,
    /// Where connections start.
    pub client: Ns,
    /// Where every endpoint answers.
    pub pods: Ns,
}

impl Net {
    /// Creates and wires `fdrill-<pid>-<tag>-{node,client,pods}`.
    pub fn create(tag: &str) -> anyhow::Result<Net> {
        reap_stale()?;
        let name = |role: &str| format!("{PREFIX}{}-{tag}-{role}", std::process::id());
        let net = Net {
            node: Ns::create(name("node"))?,
            client: Ns::create(name("client"))?,
            pods: Ns::create(name("pods"))?,
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
            .line("route add default via 10.200.0.1");
        c.run()?;
        let mut p = IpBatch::new(Some(pods));
        p.line("addr add 10.201.0.2/24 dev eth0")
            .line("link set lo up")
            .line("link set eth0 up")
            .line("route add default via 10.201.0.1")
            .line(format!("route add local {POD_RANGE} dev lo"));
        p.run()?;
        // Finished connections leave conntrack quickly, so many probes never fill the node's
        // table; "unreachable" answers are not rate-limited, so a probe of a ClusterIP without
        // rules fails at once, every time.
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
}

/// Deletes `fdrill-<pid>-*` namespaces of drill processes that no longer run.
fn reap_stale() -> anyhow::Result<()> {
    let stale: Vec<String> = netns::list()?
        .into_iter()
        .filter(|n| {
            n.strip_prefix(PREFIX)
                .and_then(|r| r.split('-').next())
                .and_then(|pid| pid.parse::<u32>().ok())
                .is_some_and(|pid| !std::path::Path::new(&format!("/proc/{pid}")).exists())
        })
        .collect();
    if !stale.is_empty() {
        netns::destroy(&stale)?;
    }
    Ok(())
}
