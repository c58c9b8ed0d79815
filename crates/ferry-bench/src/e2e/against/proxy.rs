//! The two proxies, one at a time on the node namespace: `ferry run` and upstream kube-proxy,
//! both given the same `KubeProxyConfiguration` file and `--hostname-override`, as kubeadm's
//! DaemonSet runs kube-proxy (Ferry reads kube-proxy's file). What is read from them: CPU
//! seconds and `VmHWM` from `/proc`, the kube-proxy metrics from `/metrics` on the node's
//! loopback.

use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::Path;
use std::time::Duration;

use anyhow::Context as _;
use ferry_kube_lab::kube_proxy::{self, KubeProxySetup};
use ferry_lab::LabProcess;

use crate::e2e::cluster::NODE;

/// Which proxy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Which {
    /// `ferry run`.
    Ferry,
    /// Upstream kube-proxy.
    KubeProxy,
}

impl Which {
    /// Both, in the order they run.
    pub const BOTH: [Which; 2] = [Which::Ferry, Which::KubeProxy];

    /// `ferry` or `kube-proxy`.
    pub fn name(self) -> &'static str {
        match self {
            Which::Ferry => "ferry",
            Which::KubeProxy => "kube-proxy",
        }
    }
}

/// A running proxy; stopped (SIGTERM) when dropped.
pub struct Proxy {
    process: LabProcess,
}

impl Proxy {
    /// Starts `which` in `ns` with kube-proxy's configuration `kp`, its output into `log`.
    pub fn start(
        which: Which,
        ferry: &Path,
        kp: &KubeProxySetup,
        ns: &str,
        log: &Path,
    ) -> anyhow::Result<Proxy> {
        let process = match which {
            Which::KubeProxy => kp.start_in(ns, NODE, log)?,
            Which::Ferry => {
                let mut args = vec!["run".to_owned()];
                args.extend(kp.args(NODE));
                LabProcess::spawn("ferry", ns, ferry, args, log)
                    .with_context(|| format!("starting {}", ferry.display()))?
            }
        };
        Ok(Proxy { process })
    }

    /// The process id (`ip netns exec` execs the proxy itself).
    pub fn pid(&self) -> anyhow::Result<u32> {
        self.process.pid().context("the proxy is not running")
    }

    /// True while the process runs.
    pub fn is_running(&mut self) -> bool {
        self.process.is_running()
    }

    /// CPU seconds so far: user and system time of the process and of the children it waited
    /// for (`nft`, `iptables-restore`: kube-proxy runs them as programs).
    pub fn cpu_secs(&self) -> anyhow::Result<f64> {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.pid()?))?;
        let ticks = cpu_ticks(&stat).context("unreadable /proc stat")?;
        Ok(ticks as f64 / clock_ticks())
    }

    /// `VmHWM` (peak RSS) in MiB.
    pub fn hwm_mib(&self) -> anyhow::Result<f64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()?))?;
        status_kib(&status, "VmHWM:")
            .map(|k| k / 1024.0)
            .context("no VmHWM")
    }

    /// SIGTERM, then SIGKILL after the lab's grace period.
    pub fn stop(mut self) -> anyhow::Result<()> {
        self.process.stop()?;
        Ok(())
    }
}

/// Removes both proxies' rules from `ns` (`ferry cleanup`, then `kube-proxy --cleanup`) and
/// empties its conntrack table: the next proxy starts as on a fresh node.
pub fn cleanup(ns: &str, ferry: &Path, kp: &KubeProxySetup) -> anyhow::Result<()> {
    let out = ferry_lab::netns::run_unchecked(&mut ferry_lab::netns::exec_command(
        ns,
        ferry,
        ["cleanup"],
    ))?;
    anyhow::ensure!(
        out.status.success(),
        "ferry cleanup: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    kp.cleanup_in(ns)?;
    kube_proxy::flush_conntrack_in(ns)
}

/// `GET /metrics` from the proxy's metrics server on `ns`'s loopback.
pub fn scrape(ns: &str) -> anyhow::Result<String> {
    ferry_lab::netns::run_in(ns, || -> anyhow::Result<String> {
        let mut s = TcpStream::connect(kube_proxy::METRICS)?;
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        s.write_all(b"GET /metrics HTTP/1.0\r\nHost: localhost\r\nAccept: text/plain\r\n\r\n")?;
        let mut text = String::new();
        s.read_to_string(&mut text)?;
        Ok(text)
    })?
}

/// A histogram's sum and count.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Hist {
    /// Seconds.
    pub sum: f64,
    /// Observations.
    pub count: f64,
}

impl Hist {
    /// The observations between `earlier` and `self`: their mean (ms) and how many.
    pub fn mean_since(self, earlier: Hist) -> Option<(f64, f64)> {
        let n = self.count - earlier.count;
        (n > 0.0).then(|| ((self.sum - earlier.sum) / n * 1e3, n))
    }
}

/// Histogram `name`'s sum and count in a Prometheus text exposition, its IPv4 series only
/// (both proxies label by `ip_family`; a dual-stack proxier's IPv6 syncs are left out), or
/// `None` if the proxy does not export it.
pub fn histogram(text: &str, name: &str) -> Option<Hist> {
    let mut h = Hist::default();
    let mut seen = false;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let (metric, labels) = series.split_once('{').unwrap_or((series, ""));
        if !labels.is_empty() && !labels.contains("ip_family=\"IPv4\"") {
            continue;
        }
        let Ok(v) = value.trim().parse::<f64>() else {
            continue;
        };
        if metric == format!("{name}_sum") {
            h.sum += v;
            seen = true;
        } else if metric == format!("{name}_count") {
            h.count += v;
            seen = true;
        }
    }
    seen.then_some(h)
}

/// utime + stime + cutime + cstime (clock ticks) from a `/proc/<pid>/stat` line.
pub fn cpu_ticks(stat: &str) -> Option<u64> {
    // After the command name (in parentheses, may hold spaces): field 3 onwards.
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // Fields 14..=17 of proc(5) are indexes 11..=14 here.
    (11..=14).map(|i| f.get(i)?.parse::<u64>().ok()).sum()
}

/// A `/proc/<pid>/status` figure in KiB.
fn status_kib(status: &str, key: &str) -> Option<f64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// Clock ticks per second (`getconf CLK_TCK`; 100 on Linux when it cannot be asked).
fn clock_ticks() -> f64 {
    std::process::Command::new("getconf")
        .arg("CLK_TCK")
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(100.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_ticks_add_the_process_and_its_waited_for_children() {
        let stat = "4242 (kube proxy) S 1 4242 4242 0 -1 4194560 900 0 0 0 \
                    150 50 7 3 20 0 12 0 100 800000 2000 18446744073709551615";
        assert_eq!(cpu_ticks(stat), Some(210));
        assert_eq!(cpu_ticks("4242 (x) S 1"), None);
    }

    #[test]
    fn histograms_are_read_for_ipv4_only() {
        let text = "# HELP x\n\
            kubeproxy_sync_proxy_rules_duration_seconds_bucket{ip_family=\"IPv4\",le=\"0.001\"} 1\n\
            kubeproxy_sync_proxy_rules_duration_seconds_sum{ip_family=\"IPv4\"} 0.75\n\
            kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family=\"IPv4\"} 4\n\
            kubeproxy_sync_proxy_rules_duration_seconds_sum{ip_family=\"IPv6\"} 9\n\
            kubeproxy_sync_proxy_rules_duration_seconds_count{ip_family=\"IPv6\"} 9\n\
            other_sum 3\n";
        let h = histogram(text, "kubeproxy_sync_proxy_rules_duration_seconds");
        assert_eq!(
            h,
            Some(Hist {
                sum: 0.75,
                count: 4.0
            })
        );
        assert_eq!(
            histogram(text, "kubeproxy_network_programming_duration_seconds"),
            None
        );
        let earlier = Hist {
            sum: 0.25,
            count: 2.0,
        };
        assert_eq!(h.and_then(|h| h.mean_since(earlier)), Some((250.0, 2.0)));
        assert_eq!(earlier.mean_since(earlier), None);
    }
}
