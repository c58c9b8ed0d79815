//! Sustained churn: endpoint changes at a steady rate for a while, with the default
//! `minSyncPeriod` (1 s): is every change programmed, how late, and does memory stay flat?
//!
//! Every change replaces one endpoint of a different Service (a manifest file staged and
//! renamed into place). One change in `sample` is followed from the client: bursts of four
//! connections every 10 ms until one lands on the new endpoint (so the figure is late by up to
//! ~10 ms plus the bursts that miss). At the end, every changed Service is asked until its
//! newest endpoint answers. `VmRSS` of `ferry run` is read every second.

use std::net::SocketAddrV4;
use std::path::Path;
use std::time::Duration;

use anyhow::Context as _;
use tokio::task::JoinSet;
use tokio::time::{interval, sleep, Instant, MissedTickBehavior};

use super::cluster::{Cluster, PORT};
use super::ferry::Ferry;
use super::net::Net;
use super::probe;
use super::scenario::{probed, Feed};

/// What to run.
pub struct ChurnSetup<'a> {
    /// The `ferry` binary.
    pub ferry: &'a Path,
    /// Changes per second.
    pub rate: usize,
    /// For how long.
    pub duration: Duration,
    /// Follow one change in this many.
    pub sample: usize,
    /// Where Ferry's log goes.
    pub log: &'a Path,
    /// Extra `ferry run` flags.
    pub flags: &'a [String],
}

/// What the churn measured.
#[derive(Debug, Default, Clone)]
pub struct Churned {
    /// Changes written.
    pub changes: usize,
    /// How long writing them took (s).
    pub write_secs: f64,
    /// Change → landed, for the followed changes (ms).
    pub latency_ms: Vec<f64>,
    /// Followed changes never seen (within 10 s).
    pub lost: usize,
    /// Changed Services whose newest endpoint never answered at the end.
    pub unprogrammed: usize,
    /// `VmRSS` every second (MiB), from the start of the churn.
    pub rss_mib: Vec<f64>,
    /// `VmHWM` at the end.
    pub hwm_mib: f64,
}

/// Runs the churn against the manifests in `dir` (staging in `stage`), in `net`, on a thread
/// inside the client namespace.
pub async fn run(
    net: &Net,
    cluster: &mut Cluster,
    dir: &Path,
    stage: &Path,
    setup: &ChurnSetup<'_>,
) -> anyhow::Result<Churned> {
    net.ensure_in_client()?;
    let feed = Feed::Manifests { dir, stage };
    let mut flags = super::scenario::base_flags(&feed);
    flags.extend(setup.flags.iter().cloned());
    let start = Instant::now();
    let ferry = Ferry::start(setup.ferry, net.node.name(), &flags, setup.log)?;
    let (answers, _) =
        probe::first_answers(&probed(cluster), start, start + Duration::from_secs(600)).await;
    anyhow::ensure!(answers.iter().all(Option::is_some), "ferry never answered");
    sleep(Duration::from_secs(2)).await;

    let mut out = Churned::default();
    let total = setup.rate * setup.duration.as_secs() as usize;
    let mut followed = JoinSet::new();
    let mut ticks = interval(Duration::from_secs(1) / setup.rate as u32);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Burst);
    let began = Instant::now();
    let mut next_rss = began;
    for k in 0..total {
        ticks.tick().await;
        if Instant::now() >= next_rss {
            out.rss_mib.push(ferry.memory_mib("VmRSS:")?);
            next_rss += Duration::from_secs(1);
        }
        let service = cluster.changed_service(k);
        let change = cluster.change(service);
        let name = cluster.file_name(service);
        std::fs::write(stage.join(&name), cluster.manifest(service))?;
        let t = Instant::now();
        std::fs::rename(stage.join(&name), dir.join(&name)).context("renaming into place")?;
        if k % setup.sample.max(1) == 0 {
            let target = SocketAddrV4::new(cluster.cluster_ip(service), PORT);
            let every = Duration::from_millis(10);
            followed.spawn(async move {
                let landed = probe::until_lands_paced(
                    target,
                    change.address,
                    4,
                    every,
                    t + Duration::from_secs(10),
                )
                .await;
                landed.map(|at| (at - t).as_secs_f64() * 1e3)
            });
        }
    }
    out.changes = total;
    out.write_secs = began.elapsed().as_secs_f64();
    while let Some(done) = followed.join_next().await {
        match done {
            Ok(Some(ms)) => out.latency_ms.push(ms),
            _ => out.lost += 1,
        }
    }
    out.rss_mib.push(ferry.memory_mib("VmRSS:")?);
    out.unprogrammed = verify(cluster, total.min(cluster.services)).await;
    out.hwm_mib = ferry.memory_mib("VmHWM:")?;
    ferry.stop()?;
    Ok(out)
}

/// Asks each of the first `changed` changed Services for its newest endpoint; returns how many
/// never answered from it.
async fn verify(cluster: &Cluster, changed: usize) -> usize {
    let mut missing = 0;
    let mut inflight = JoinSet::new();
    for k in 0..changed {
        let service = cluster.changed_service(k);
        let target = SocketAddrV4::new(cluster.cluster_ip(service), PORT);
        // The newest endpoint is the one the last change of this Service put in.
        let newest = cluster.newest_endpoint(service);
        inflight.spawn(async move { probe::reaches(target, newest, 200).await });
        if inflight.len() >= 32 {
            if let Some(Ok(false) | Err(_)) = inflight.join_next().await {
                missing += 1;
            }
        }
    }
    while let Some(done) = inflight.join_next().await {
        if !matches!(done, Ok(true)) {
            missing += 1;
        }
    }
    missing
}
