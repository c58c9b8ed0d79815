//! The conntrack settings kube-proxy applies when it starts (`conntrack.*` of its
//! configuration, `--conntrack-*`): files under `/proc/sys/net/netfilter` of this network
//! namespace and, for the table's hash size, `/sys/module/nf_conntrack/parameters/hashsize`
//! (one setting of the whole machine, which only the initial network namespace may change).
//!
//! Upstream's rules (pkg/proxy/conntrack/sysctls.go at v1.37): `nf_conntrack_max` is only ever
//! raised, and when it is at least the wanted value the hash size is raised to a quarter of
//! it if smaller; every other value is written when the kernel holds another one. Upstream
//! exits when a write fails; Ferry reports each failure (the caller logs a warning naming the
//! file, the value and the setting that asked for it) and applies the rest: a read-only
//! `/proc/sys`, or a network namespace whose `nf_conntrack_max` is read-only, must not keep a
//! node's Services down.

use std::io;
use std::path::{Path, PathBuf};

/// What to apply; `None` (or `false`) leaves the kernel's value.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConntrackSettings {
    /// `nf_conntrack_max`, raised to at least this.
    pub max: Option<u64>,
    /// `nf_conntrack_tcp_timeout_established`, seconds.
    pub tcp_established_timeout: Option<u64>,
    /// `nf_conntrack_tcp_timeout_close_wait`, seconds.
    pub tcp_close_wait_timeout: Option<u64>,
    /// `nf_conntrack_tcp_be_liberal` set to 1.
    pub tcp_be_liberal: bool,
    /// `nf_conntrack_udp_timeout`, seconds.
    pub udp_timeout: Option<u64>,
    /// `nf_conntrack_udp_timeout_stream`, seconds.
    pub udp_stream_timeout: Option<u64>,
}

/// What happened to one setting.
#[derive(Debug)]
pub struct Applied {
    /// The file: `nf_conntrack_max`, …, or `hashsize` (of the nf_conntrack module).
    pub name: &'static str,
    /// The configuration field that asked for it (`conntrack.maxPerCore`, …).
    pub field: &'static str,
    /// The value wanted.
    pub value: u64,
    /// What was done, or why it could not be.
    pub result: Result<Change, io::Error>,
}

/// A setting's outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Written: the kernel held `from`.
    Set {
        /// The value before.
        from: u64,
    },
    /// The kernel already held the value.
    Unchanged,
    /// Only raised, and the kernel already holds this much or more.
    AlreadyHigher {
        /// The kernel's value, kept.
        current: u64,
    },
}

const NETFILTER: &str = "/proc/sys/net/netfilter";
const HASHSIZE: &str = "/sys/module/nf_conntrack/parameters/hashsize";

/// Applies `settings` in this network namespace, in upstream's order; one [`Applied`] per
/// setting asked for.
pub fn apply(settings: &ConntrackSettings) -> Vec<Applied> {
    let mut out = Vec::new();
    if let Some(max) = settings.max {
        let raised = raise(&netfilter("nf_conntrack_max"), max);
        let max_holds = raised.is_ok();
        out.push(applied(
            "nf_conntrack_max",
            "conntrack.maxPerCore",
            max,
            raised,
        ));
        if max_holds {
            let quarter = max / 4;
            out.push(applied(
                "hashsize",
                "conntrack.maxPerCore",
                quarter,
                raise(Path::new(HASHSIZE), quarter),
            ));
        }
    }
    let exact = [
        (
            "nf_conntrack_tcp_timeout_established",
            "conntrack.tcpEstablishedTimeout",
            settings.tcp_established_timeout,
        ),
        (
            "nf_conntrack_tcp_timeout_close_wait",
            "conntrack.tcpCloseWaitTimeout",
            settings.tcp_close_wait_timeout,
        ),
        (
            "nf_conntrack_tcp_be_liberal",
            "conntrack.tcpBeLiberal",
            settings.tcp_be_liberal.then_some(1),
        ),
        (
            "nf_conntrack_udp_timeout",
            "conntrack.udpTimeout",
            settings.udp_timeout,
        ),
        (
            "nf_conntrack_udp_timeout_stream",
            "conntrack.udpStreamTimeout",
            settings.udp_stream_timeout,
        ),
    ];
    for (name, field, value) in exact {
        if let Some(value) = value {
            out.push(applied(name, field, value, set(&netfilter(name), value)));
        }
    }
    out
}

/// Whether `nf_conntrack_tcp_be_liberal` is on in this network namespace (after [`apply`]):
/// then, as upstream, iptables mode does not drop packets conntrack marks invalid. Unreadable
/// (no conntrack module yet) counts as off, the kernel's default.
pub fn tcp_be_liberal() -> bool {
    read(&netfilter("nf_conntrack_tcp_be_liberal")).is_ok_and(|v| v != 0)
}

/// The machine's online CPUs (`/sys/devices/system/cpu/online`), which size
/// `nf_conntrack_max`, a limit of the whole machine: not this process's CPU set, which a
/// static CPU policy may narrow. Falls back to the CPUs this process may use.
pub fn online_cpus() -> usize {
    std::fs::read_to_string("/sys/devices/system/cpu/online")
        .ok()
        .and_then(|s| count_cpu_list(s.trim()))
        .filter(|n| *n > 0)
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// Counts a kernel CPU list (`0-3,8,10-11`); `None` when it does not parse.
pub fn count_cpu_list(list: &str) -> Option<usize> {
    list.split(',').try_fold(0, |n, part| {
        let part = part.trim();
        let count = match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().ok()?, b.parse().ok()?);
                b.checked_sub(a)? + 1
            }
            None => part.parse::<usize>().map(|_| 1).ok()?,
        };
        Some(n + count)
    })
}

fn netfilter(name: &str) -> PathBuf {
    Path::new(NETFILTER).join(name)
}

fn applied(
    name: &'static str,
    field: &'static str,
    value: u64,
    result: Result<Change, io::Error>,
) -> Applied {
    Applied {
        name,
        field,
        value,
        result,
    }
}

fn read(path: &Path) -> io::Result<u64> {
    let text = std::fs::read_to_string(path)?;
    text.trim()
        .parse()
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{text:?}: {e}")))
}

/// Writes `value` unless the file already holds it or more.
fn raise(path: &Path, value: u64) -> io::Result<Change> {
    let current = read(path)?;
    if current >= value {
        return Ok(Change::AlreadyHigher { current });
    }
    std::fs::write(path, value.to_string())?;
    Ok(Change::Set { from: current })
}

/// Writes `value` unless the file already holds it.
fn set(path: &Path, value: u64) -> io::Result<Change> {
    let current = read(path)?;
    if current == value {
        return Ok(Change::Unchanged);
    }
    std::fs::write(path, value.to_string())?;
    Ok(Change::Set { from: current })
}

#[cfg(test)]
mod tests;
