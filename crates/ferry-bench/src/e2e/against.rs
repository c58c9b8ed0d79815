//! `ferry-bench-e2e --against kube-proxy`: Ferry and upstream kube-proxy side by side, in one
//! run, on the same cluster and the same node namespace.
//!
//! Per size, one cluster is written once into a real control plane ([`api`]: etcd and
//! kube-apiserver in the node namespace; Services without selectors, the benchmark's own
//! EndpointSlices). Then, per mode and minimum sync period, each proxy in turn runs on the
//! node namespace with the same `KubeProxyConfiguration` file ([`ferry_kube_lab::kube_proxy`]:
//! kubeadm's, `conntrack.maxPerCore: 0`), `--cleanup` and `conntrack -F` before and after each
//! ([`proxy`]); what is measured is in [`measure`], the tables in [`table`].

use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;
use ferry_kube_lab::kube_proxy::{KubeProxySetup, MinSync};

use self::measure::{RunSetup, Side};
use self::proxy::Which;
use super::cluster::{Cluster, Layout, POD_RANGE};
use super::echo::Endpoints;
use super::net::Net;

pub mod api;
pub mod measure;
pub mod objects;
pub mod proxy;
pub mod table;

/// What to run.
#[derive(Debug, Clone)]
pub struct Against {
    /// The `ferry` binary.
    pub ferry: PathBuf,
    /// Services per cluster, one cluster each.
    pub sizes: Vec<usize>,
    /// Endpoints per Service.
    pub endpoints: usize,
    /// `nftables`, `iptables`.
    pub modes: Vec<String>,
    /// Minimum sync periods.
    pub min_sync: Vec<MinSync>,
    /// kube-proxy runs before Ferry on each setting (default: Ferry first).
    pub kube_proxy_first: bool,
    /// Timed changes per proxy.
    pub changes: usize,
    /// Churn: writes per second, seconds.
    pub churn_rate: usize,
    /// See `churn_rate`.
    pub churn_secs: u64,
    /// Connection set-up times per target.
    pub connects: usize,
    /// Longest wait for the first answers and for each change.
    pub timeout: Duration,
    /// Where the proxies' logs go (default: a temporary directory).
    pub logs: Option<PathBuf>,
}

/// One comparison: a size, a mode, a minimum sync period, both proxies.
#[derive(Debug, Clone)]
pub struct Compared {
    /// N.
    pub services: usize,
    /// The proxy mode.
    pub mode: String,
    /// The minimum sync period.
    pub min_sync: MinSync,
    /// Ferry's run, or why it failed.
    pub ferry: Result<Side, String>,
    /// kube-proxy's run, or why it failed.
    pub kube_proxy: Result<Side, String>,
}

impl Compared {
    /// Its table, titled.
    pub fn render(&self, o: &Against) -> String {
        let period = match self.min_sync {
            MinSync::Default => "kubeadm's default (0s in the file: 1 s)",
            MinSync::Zero => "zero (1ns in the file)",
        };
        let first = if o.kube_proxy_first {
            "kube-proxy"
        } else {
            "Ferry"
        };
        let title = format!(
            "### {} Services × {} endpoints, {} mode, minSyncPeriod {period}, {first} first",
            self.services, o.endpoints, self.mode
        );
        let churn = format!("{}/s × {} s", o.churn_rate, o.churn_secs);
        table::render(&title, &churn, &self.ferry, &self.kube_proxy)
    }
}

/// Parses `--sizes`: Service counts, each at least 1.
pub fn parse_sizes(values: &[String]) -> anyhow::Result<Vec<usize>> {
    values
        .iter()
        .map(|v| {
            let n: usize = v
                .replace('_', "")
                .parse()
                .with_context(|| format!("size {v:?}: not a number"))?;
            anyhow::ensure!(n > 0, "size 0");
            Ok(n)
        })
        .collect()
}

/// Parses `--modes`: `nftables` and `iptables` (the modes both proxies share here).
pub fn parse_modes(values: &[String]) -> anyhow::Result<Vec<String>> {
    values
        .iter()
        .map(|v| match v.as_str() {
            "nftables" | "iptables" => Ok(v.clone()),
            other => anyhow::bail!("mode {other:?}: nftables or iptables"),
        })
        .collect()
}

/// Parses `--min-sync`: `default`, `zero` or `both`.
pub fn parse_min_sync(value: &str) -> anyhow::Result<Vec<MinSync>> {
    Ok(match value {
        "default" => vec![MinSync::Default],
        "zero" => vec![MinSync::Zero],
        "both" => vec![MinSync::Default, MinSync::Zero],
        other => anyhow::bail!("min-sync {other:?}: default, zero or both"),
    })
}

/// The pause after a timed change: longer than the minimum sync period.
pub fn gap(min_sync: MinSync) -> Duration {
    match min_sync {
        MinSync::Default => Duration::from_millis(1200),
        MinSync::Zero => Duration::from_millis(200),
    }
}

/// Runs every comparison; `report` gets each as soon as it is done. A size whose cluster
/// cannot be made is an error; a proxy's failed run is kept as its side's error.
pub fn run(
    o: &Against,
    progress: &(dyn Fn(&str) + Sync),
    report: &mut dyn FnMut(&Compared),
) -> anyhow::Result<Vec<Compared>> {
    for name in crate::netns::reap_stale()? {
        progress(&format!("deleted stale namespace {name}"));
    }
    let root = tempfile::Builder::new()
        .prefix("ferry-bench-vs-")
        .tempdir()
        .context("creating the work directory")?;
    ferry_lab::interrupt::remove_on_signal(root.path());
    let logs = o.logs.clone().unwrap_or_else(|| root.path().join("logs"));
    std::fs::create_dir_all(&logs)?;
    let mut all = Vec::new();
    for &size in &o.sizes {
        progress(&format!("== {size} Services × {} endpoints", o.endpoints));
        let mut cluster = Cluster::new(size, o.endpoints, Layout::BENCH)?;
        let net = Net::create(crate::netns::PREFIX, &format!("vs{size}"))?;
        let _endpoints = Endpoints::start(net.pods.name())?;
        let mut api = api::DirectApi::start(&net, &cluster, o.changes, progress)?;
        let program = api
            .control_plane
            .assets()
            .kube_proxy
            .clone()
            .context("no kube-proxy binary (run lab/k8s/build)")?;
        for mode in &o.modes {
            for &min_sync in &o.min_sync {
                let kp = KubeProxySetup::write(
                    &api.control_plane,
                    &program,
                    &api.kubeconfig,
                    mode,
                    POD_RANGE,
                    min_sync,
                )?;
                let mut order = Which::BOTH;
                if o.kube_proxy_first {
                    order.reverse();
                }
                let (mut ferry, mut kube_proxy) = (Err("not run".into()), Err("not run".into()));
                for which in order {
                    let name = format!("{size}-{mode}-{}-{}", min_sync.name(), which.name());
                    progress(&format!("-- {name}"));
                    let log = logs.join(format!("{name}.log"));
                    let setup = RunSetup {
                        ferry: &o.ferry,
                        kp: &kp,
                        changes: o.changes,
                        gap: gap(min_sync),
                        churn_rate: o.churn_rate,
                        churn: Duration::from_secs(o.churn_secs),
                        connects: o.connects,
                        timeout: o.timeout,
                        log: &log,
                    };
                    let side = net.client.block_on(measure::run(
                        &net,
                        &mut api,
                        &mut cluster,
                        which,
                        &setup,
                    ));
                    if let Err(e) = &side {
                        progress(&format!("{name} failed: {e:#}"));
                        // Whatever it left behind goes before the next one starts.
                        let _ = proxy::cleanup(net.node.name(), &o.ferry, &kp);
                    }
                    let side = side.map_err(|e| format!("{e:#}"));
                    match which {
                        Which::Ferry => ferry = side,
                        Which::KubeProxy => kube_proxy = side,
                    }
                }
                let compared = Compared {
                    services: size,
                    mode: mode.clone(),
                    min_sync,
                    ferry,
                    kube_proxy,
                };
                report(&compared);
                all.push(compared);
            }
        }
        for name in ["etcd", "kube-apiserver"] {
            let from = api.control_plane.dir().join(format!("{name}.log"));
            let _ = std::fs::copy(&from, logs.join(format!("{size}-{name}.log")));
        }
    }
    Ok(all)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn sizes_modes_and_min_sync_parse() {
        assert_eq!(
            parse_sizes(&strings(&["1000", "10_000"])).expect("sizes"),
            [1000, 10_000]
        );
        assert!(parse_sizes(&strings(&["0"])).is_err());
        assert!(parse_sizes(&strings(&["ten"])).is_err());
        assert_eq!(
            parse_modes(&strings(&["nftables", "iptables"])).expect("modes"),
            ["nftables", "iptables"]
        );
        assert!(parse_modes(&strings(&["ipvs"])).is_err());
        assert_eq!(
            parse_min_sync("both").expect("both"),
            [MinSync::Default, MinSync::Zero]
        );
        assert_eq!(parse_min_sync("zero").expect("zero"), [MinSync::Zero]);
        assert!(parse_min_sync("0s").is_err());
    }

    #[test]
    fn each_timed_change_waits_out_the_minimum_sync_period() {
        assert!(gap(MinSync::Default) > Duration::from_secs(1));
        assert!(gap(MinSync::Zero) < Duration::from_secs(1));
    }
}
