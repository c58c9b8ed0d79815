//! Throw-away network namespaces for the kernel measurements.
//!
//! The benchmark never programs the namespace it runs in: every measurement runs in a child
//! process started with `ip netns exec <ns> …` inside a namespace created for that run and
//! deleted by [`Netns`]'s `Drop` (also when the run fails or panics). The child refuses to
//! start unless it really is inside that namespace ([`ensure_inside`]).

use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{bail, ensure, Context as _};

/// Prefix of every namespace the benchmark creates: `ferry-bench-<pid>-<run>`.
pub const PREFIX: &str = "ferry-bench-";

/// Where `ip netns` keeps named namespaces.
const NETNS_DIR: &str = "/run/netns";

/// Gives the current network namespace the bench node's network: loopback up, an `eth0` with
/// the node's InternalIP, and a route to the cluster's pods (a node has one; IPVS refuses IPv4
/// real servers it has no route to).
pub fn node_network() -> anyhow::Result<()> {
    let ip = crate::cluster::BENCH_NODE_IP;
    let pods = crate::cluster::CLUSTER_CIDR;
    for args in [
        vec!["link", "set", "lo", "up"],
        // A veth pair, not a dummy link: this host's kernel has no `dummy` link type.
        vec![
            "link",
            "add",
            "eth0",
            "type",
            "veth",
            "peer",
            "name",
            "eth0-peer",
        ],
        vec!["addr", "add", &format!("{ip}/16"), "dev", "eth0"],
        vec!["link", "set", "eth0-peer", "up"],
        vec!["link", "set", "eth0", "up"],
        vec!["route", "add", pods, "dev", "eth0"],
    ] {
        run(Command::new("ip").args(&args))?;
    }
    Ok(())
}

/// A named network namespace, deleted (with what runs in it) when dropped.
pub use ferry_lab::scale::Netns;

/// `/run/netns/<name>`.
pub fn path(name: &str) -> PathBuf {
    Path::new(NETNS_DIR).join(name)
}

/// Inode of a namespace file (`/proc/self/ns/net`, `/run/netns/<name>`).
pub fn inode(path: &Path) -> anyhow::Result<u64> {
    Ok(std::fs::metadata(path)
        .with_context(|| format!("stat {}", path.display()))?
        .ino())
}

/// Inode of this process's network namespace.
pub fn current_inode() -> anyhow::Result<u64> {
    inode(Path::new("/proc/self/ns/net"))
}

/// Fails unless this process is inside namespace `name` and not in the namespace with inode
/// `outside` (the one the benchmark was started in).
pub fn ensure_inside(name: &str, outside: u64) -> anyhow::Result<()> {
    ensure!(
        name.starts_with(PREFIX),
        "refusing to program namespace {name:?}"
    );
    let here = current_inode()?;
    let expected = inode(&path(name))?;
    ensure!(
        here != outside,
        "still in the starting network namespace: refusing to touch it"
    );
    ensure!(
        here == expected,
        "in network namespace inode {here}, expected {name} (inode {expected})"
    );
    Ok(())
}

/// Deletes `ferry-bench-<pid>-*` namespaces left by benchmark processes that no longer exist
/// (killed before they could clean up). Returns their names.
pub fn reap_stale() -> anyhow::Result<Vec<String>> {
    ferry_lab::scale::net::reap_stale(PREFIX)
}

/// Runs a command to completion; returns its stdout, or an error carrying its stderr.
pub fn run(cmd: &mut Command) -> anyhow::Result<String> {
    let shown = format!("{cmd:?}");
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .with_context(|| format!("could not run {shown}"))?;
    if !out.status.success() {
        bail!(
            "{shown} failed ({}): {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    String::from_utf8(out.stdout).with_context(|| format!("{shown} printed invalid UTF-8"))
}

/// What the nftables of the namespace a command runs in look like, cheaply: the table list
/// and, when Ferry's `ip ferry` table exists, its chain names.
pub fn nft_snapshot(mut nft: impl FnMut(&[&str]) -> Command) -> anyhow::Result<NftSnapshot> {
    let tables = run(&mut nft(&["list", "tables"]))?;
    let has_ferry = tables.lines().any(|l| l.trim() == "table ip ferry");
    let chains = if has_ferry {
        // nft 1.0.6 cannot list one table's chains: list the family's and keep ip ferry's.
        let listing = run(&mut nft(&["list", "chains", "ip"]))?;
        let mut in_ferry = false;
        let mut chains = Vec::new();
        for line in listing.lines() {
            let line = line.trim();
            if let Some(table) = line.strip_prefix("table ") {
                in_ferry = table.trim_end_matches(" {") == "ip ferry";
            } else if let Some(chain) = line.strip_prefix("chain ").filter(|_| in_ferry) {
                chains.push(chain.trim_end_matches(" {").to_owned());
            }
        }
        chains
    } else {
        Vec::new()
    };
    Ok(NftSnapshot {
        tables,
        has_ferry,
        chains,
    })
}

/// See [`nft_snapshot`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NftSnapshot {
    /// `nft list tables`.
    pub tables: String,
    /// Whether `table ip ferry` exists.
    pub has_ferry: bool,
    /// Chain names of `ip ferry` (empty without the table).
    pub chains: Vec<String>,
}
