//! One proxy's run on the shared cluster, timed from the client namespace: start → every
//! probed ClusterIP answered; one spare endpoint made ready at a time → a new connection lands
//! on it; sustained churn (one endpoint replaced per write, `rate` per second) with the
//! proxy's CPU seconds over it; new-connection set-up to the first and last ClusterIP; the
//! kube-proxy metrics; `VmHWM` at the end.

use std::collections::{BTreeSet, HashMap};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ferry_kube_lab::kube_proxy::KubeProxySetup;
use futures::StreamExt as _;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Patch, PatchParams};
use kube::runtime::watcher;
use kube::Api;
use tokio::task::JoinSet;
use tokio::time::{interval, sleep, Instant, MissedTickBehavior};

use super::api::DirectApi;
use super::proxy::{histogram, scrape, Hist, Proxy, Which};
use crate::e2e::cluster::{Cluster, PORT};
use crate::e2e::net::Net;
use crate::e2e::probe;
use crate::e2e::scenario::probed;

/// The two histograms both proxies are asked for.
pub const SYNC: &str = "kubeproxy_sync_proxy_rules_duration_seconds";
/// See [`SYNC`].
pub const PROGRAMMING: &str = "kubeproxy_network_programming_duration_seconds";

/// What to run.
pub struct RunSetup<'a> {
    /// The `ferry` binary.
    pub ferry: &'a Path,
    /// kube-proxy and its configuration (the mode and minimum sync period).
    pub kp: &'a KubeProxySetup,
    /// Timed changes.
    pub changes: usize,
    /// Pause after each timed change landed (longer than the minimum sync period: each
    /// change then finds a proxy that synced long enough ago to sync at once).
    pub gap: Duration,
    /// Churn: writes per second, and for how long.
    pub churn_rate: usize,
    /// See `churn_rate`.
    pub churn: Duration,
    /// Connection set-up times per target.
    pub connects: usize,
    /// Longest wait for the first answers, and for each change.
    pub timeout: Duration,
    /// Where the proxy's output goes.
    pub log: &'a Path,
}

/// What one proxy's run measured.
#[derive(Debug, Clone, Default)]
pub struct Side {
    /// Process start → every probed ClusterIP answered (s).
    pub start_s: Option<f64>,
    /// Probed ClusterIPs never answered.
    pub unanswered: usize,
    /// CPU seconds of the proxy (children included) from its start until every probed
    /// ClusterIP answered, or until the timeout.
    pub start_cpu_s: Option<f64>,
    /// The proxy had not answered every probe within the timeout: the rest was not measured
    /// (each change would wait for the same first sync).
    pub gave_up: bool,
    /// Spare made ready → a new connection lands on it (ms).
    pub change_ms: Vec<f64>,
    /// Timed changes never seen within the timeout.
    pub changes_lost: usize,
    /// Of each timed change: the write → its event seen by a watch of the slices beside the
    /// proxy (ms): the API's part, which both proxies wait for alike.
    pub api_ms: Vec<f64>,
    /// Churn: CPU seconds of the proxy (children included) and the wall time they cover.
    pub churn_cpu_s: Option<f64>,
    /// See `churn_cpu_s`.
    pub churn_wall_s: f64,
    /// Churn: writes made, and how long writing them took (s).
    pub churn_writes: usize,
    /// See `churn_writes`.
    pub churn_write_s: f64,
    /// Churn: followed changes → landed (ms), and those never seen within 10 s.
    pub churn_ms: Vec<f64>,
    /// See `churn_ms`.
    pub churn_lost: usize,
    /// Churn: the last changed Services checked at the end, and those not yet programmed.
    pub checked: usize,
    /// See `checked`.
    pub unprogrammed: usize,
    /// `VmHWM` at the end (MiB).
    pub hwm_mib: Option<f64>,
    /// Connection set-up to the first and to the last ClusterIP (µs).
    pub connect_first_us: Vec<f64>,
    /// See `connect_first_us`.
    pub connect_last_us: Vec<f64>,
    /// Metrics: mean ms and count of syncs at start (everything before the first change),
    /// during the changes and churn, and of network programming during them. `None`: not
    /// exported.
    pub sync_start: Option<(f64, f64)>,
    /// See `sync_start`.
    pub sync_changes: Option<(f64, f64)>,
    /// See `sync_start`.
    pub programming: Option<(f64, f64)>,
}

/// Runs `which` on `net`'s node; must be called on a thread inside the client namespace, in
/// a tokio runtime. Resets the cluster's changed slices first; removes the proxy's rules after.
pub async fn run(
    net: &Net,
    api: &mut DirectApi,
    cluster: &mut Cluster,
    which: Which,
    s: &RunSetup<'_>,
) -> anyhow::Result<Side> {
    net.ensure_in_client()?;
    api.reset(cluster).await?;
    let node = net.node.name();
    super::proxy::cleanup(node, s.ferry, s.kp)?;
    let slices = api.slices(api.client().await?);
    // Opens the changer's connection (TLS included) outside the timed requests.
    slices
        .list(&kube::api::ListParams::default().limit(1))
        .await?;
    let mut out = Side::default();
    let start = Instant::now();
    let mut proxy = Proxy::start(which, s.ferry, s.kp, node, s.log)?;
    let targets = probed(cluster);
    let exited = async {
        while proxy.is_running() {
            sleep(Duration::from_millis(100)).await;
        }
    };
    let answered = tokio::select! {
        a = probe::first_answers(&targets, start, start + s.timeout) => Some(a),
        () = exited => None,
    };
    let Some((answers, _wrong)) = answered else {
        anyhow::bail!("{} exited (see {})", which.name(), s.log.display());
    };
    out.unanswered = answers.iter().filter(|a| a.is_none()).count();
    out.start_s = (out.unanswered == 0)
        .then(|| answers.iter().flatten().max().map(Duration::as_secs_f64))
        .flatten();
    anyhow::ensure!(proxy.is_running(), "{} exited", which.name());
    out.start_cpu_s = proxy.cpu_secs().ok();
    if out.unanswered > 0 {
        out.gave_up = true;
        out.hwm_mib = proxy.hwm_mib().ok();
        proxy.stop()?;
        super::proxy::cleanup(node, s.ferry, s.kp)?;
        return Ok(out);
    }
    let seen = watch_spares(slices.clone());
    // The start-up syncs (every IP family, the first periodic one) are over.
    sleep(Duration::from_secs(3)).await;
    let before = metrics(node);

    let mut flipped = Vec::new();
    for k in 0..s.changes.min(api.changes()) {
        let (service, address, t) = api.flip(&slices, cluster, k).await?;
        flipped.push((address, t));
        let target = SocketAddrV4::new(cluster.cluster_ip(service), PORT);
        match probe::until_lands(target, address, 4, t + s.timeout).await {
            Some(at) => out.change_ms.push((at - t).as_secs_f64() * 1e3),
            None => out.changes_lost += 1,
        }
        sleep(s.gap).await;
    }
    {
        let seen = lock(&seen);
        out.api_ms = flipped
            .iter()
            .filter_map(|(a, t)| {
                Some((seen.get(a)?.checked_duration_since(*t)?).as_secs_f64() * 1e3)
            })
            .collect();
    }

    churn(api, &slices, cluster, &proxy, s, &mut out).await?;
    let after = metrics(node);
    out.sync_start = before.0.and_then(|h| h.mean_since(Hist::default()));
    out.sync_changes = before.0.zip(after.0).and_then(|(b, a)| a.mean_since(b));
    out.programming = after
        .1
        .and_then(|a| a.mean_since(before.1.unwrap_or_default()));

    let first = SocketAddrV4::new(cluster.cluster_ip(0), PORT);
    let last = SocketAddrV4::new(cluster.cluster_ip(cluster.services - 1), PORT);
    let times = probe::connect_times(&[first, last], s.connects).await;
    let us = |v: &[Duration]| v.iter().map(|d| d.as_secs_f64() * 1e6).collect();
    out.connect_first_us = us(&times[0]);
    out.connect_last_us = us(&times[1]);
    out.hwm_mib = proxy.hwm_mib().ok();
    proxy.stop()?;
    super::proxy::cleanup(node, s.ferry, s.kp)?;
    Ok(out)
}

type Seen = Arc<Mutex<HashMap<Ipv4Addr, Instant>>>;

fn lock(seen: &Seen) -> std::sync::MutexGuard<'_, HashMap<Ipv4Addr, Instant>> {
    seen.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Watches the slices (in the caller's runtime, until it ends), noting when each endpoint
/// address under [`super::api::SPARES`] is first seen ready.
fn watch_spares(slices: Api<EndpointSlice>) -> Seen {
    let seen: Seen = Arc::default();
    let noted = Arc::clone(&seen);
    tokio::spawn(async move {
        let mut events = std::pin::pin!(watcher(slices, watcher::Config::default()));
        while let Some(event) = events.next().await {
            let now = Instant::now();
            let Ok(watcher::Event::Apply(slice)) = event else {
                continue;
            };
            for e in &slice.endpoints {
                if e.conditions.as_ref().and_then(|c| c.ready) != Some(true) {
                    continue;
                }
                for a in e
                    .addresses
                    .iter()
                    .filter_map(|a| a.parse::<Ipv4Addr>().ok())
                {
                    if super::api::SPARES.contains(&a) {
                        lock(&noted).entry(a).or_insert(now);
                    }
                }
            }
        }
    });
    seen
}

/// The two histograms, `None` each where the proxy does not export it (or did not answer).
fn metrics(ns: &str) -> (Option<Hist>, Option<Hist>) {
    match scrape(ns) {
        Ok(text) => (histogram(&text, SYNC), histogram(&text, PROGRAMMING)),
        Err(_) => (None, None),
    }
}

/// The churn: `rate` writes per second, each replacing one endpoint of a different Service;
/// one in 20 followed from the client; then the last changed Services checked.
async fn churn(
    api: &mut DirectApi,
    slices: &Api<EndpointSlice>,
    cluster: &mut Cluster,
    proxy: &Proxy,
    s: &RunSetup<'_>,
    out: &mut Side,
) -> anyhow::Result<()> {
    let total = s.churn_rate * s.churn.as_secs() as usize;
    // Clear of the timed changes' Services.
    let offset = cluster.services / 3;
    let cpu0 = proxy.cpu_secs()?;
    let began = Instant::now();
    let mut ticks = interval(Duration::from_secs(1) / s.churn_rate.max(1) as u32);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Burst);
    let mut writes = JoinSet::new();
    let mut followed = JoinSet::new();
    let mut changed = Vec::new();
    for c in 0..total {
        ticks.tick().await;
        let service = cluster.changed_service(offset + c);
        let change = cluster.change(service);
        changed.push(service);
        let (name, patch) = api.patch_of(cluster, service, true);
        let slices = slices.clone();
        let t = Instant::now();
        writes.spawn(async move {
            slices
                .patch(&name, &PatchParams::default(), &Patch::Merge(&patch))
                .await
                .map(|_| ())
        });
        if c % 20 == 0 {
            let target = SocketAddrV4::new(cluster.cluster_ip(service), PORT);
            let every = Duration::from_millis(10);
            let deadline = t + Duration::from_secs(10);
            followed.spawn(async move {
                probe::until_lands_paced(target, change.address, 4, every, deadline)
                    .await
                    .map(|at| (at - t).as_secs_f64() * 1e3)
            });
        }
        while let Some(done) = writes.try_join_next() {
            done??;
        }
    }
    while let Some(done) = writes.join_next().await {
        done??;
    }
    out.churn_writes = total;
    out.churn_write_s = began.elapsed().as_secs_f64();
    let settled = Instant::now() + Duration::from_secs(3);
    while let Some(done) = followed.join_next().await {
        match done {
            Ok(Some(ms)) => out.churn_ms.push(ms),
            _ => out.churn_lost += 1,
        }
    }
    if let Some(wait) = settled.checked_duration_since(Instant::now()) {
        sleep(wait).await;
    }
    out.churn_cpu_s = Some(proxy.cpu_secs()? - cpu0);
    out.churn_wall_s = began.elapsed().as_secs_f64();
    // The last 100 distinct Services changed: each must answer from its newest endpoint.
    let mut seen = BTreeSet::new();
    let last: Vec<usize> = changed
        .iter()
        .rev()
        .filter(|i| seen.insert(**i))
        .take(100)
        .copied()
        .collect();
    let mut checks = JoinSet::new();
    for i in &last {
        let target = SocketAddrV4::new(cluster.cluster_ip(*i), PORT);
        let newest = cluster.newest_endpoint(*i);
        checks.spawn(async move { probe::reaches(target, newest, 200).await });
    }
    out.checked = last.len();
    while let Some(done) = checks.join_next().await {
        if !matches!(done, Ok(true)) {
            out.unprogrammed += 1;
        }
    }
    Ok(())
}
