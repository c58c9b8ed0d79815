//! The agent: the source (manifests or the Kubernetes API), the bounded-frequency sync loop, the
//! health, metrics and health-check NodePort servers, signals. Everything that depends on the
//! proxy mode comes from its line in the mode table ([`ferry_dataplane::modes`]).

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use anyhow::Context as _;
use tokio::sync::{mpsc, watch};
use tokio::time::{sleep_until, Instant};

use ferry_dataplane::mode::NodeMode;
use ferry_dataplane::modes::{entry, MODES};
use ferry_dataplane::Applier;
use ferry_model::{IpFamily, NodeContext};
use ferry_source::kube::{Connection, KubeSource};
use ferry_source::manifest::ManifestSource;
use ferry_source::SourceEvent;

use crate::config::Config;
use crate::health::ProxyHealth;
use crate::healthcheck::ServiceHealthServers;
use crate::metrics::Metrics;
use crate::serve::keep_serving;
use crate::sync::{FamilySync, Syncer};

/// After a failed sync, retry this soon (upstream's retry interval is 1 s).
const RETRY_INTERVAL: Duration = Duration::from_secs(1);

fn context(config: &Config, family: IpFamily) -> NodeContext {
    NodeContext {
        node_name: config.node_name.clone(),
        family,
    }
}

/// The families this node programs: IPv4, and IPv6 when the kernel and the mode's tool
/// support it (upstream's `platformCheckSupported`; one info line either way).
fn supported_families(mode: &dyn NodeMode) -> Vec<IpFamily> {
    // IPv4 is always programmed; when the mode cannot work here (no IPVS in the kernel, no
    // tool), say why once, clearly, before the syncs fail and are retried.
    if let Err(why) = mode.supports(IpFamily::V4) {
        tracing::error!("{} cannot program IPv4 rules here: {why}", mode.describe());
    }
    match mode.supports(IpFamily::V6) {
        Ok(()) => {
            tracing::info!("running in dual-stack mode (IPv4 and IPv6)");
            vec![IpFamily::V4, IpFamily::V6]
        }
        Err(why) => {
            tracing::info!("running in single-stack mode (IPv4): IPv6 is skipped: {why}");
            vec![IpFamily::V4]
        }
    }
}

/// One family sync per family, each over a fresh applier of the mode.
fn syncer(config: &Config, mode: &dyn NodeMode, families: &[IpFamily]) -> Syncer {
    Syncer::new(
        families
            .iter()
            .map(|&f| {
                FamilySync::new(
                    context(config, f),
                    config.compile_config(f),
                    mode.applier(f),
                )
            })
            .collect(),
    )
}

/// Removes what the other modes left (a node switched from one mode to another), as upstream
/// kube-proxy does at start-up; a failure is only worth a warning.
fn cleanup_other_modes(config: &Config) {
    for other in MODES.iter().filter(|e| e.mode != config.mode) {
        if let Err(e) = (other.cleanup)() {
            tracing::warn!("removing {} mode's rules failed: {e}", other.mode);
        }
    }
}

/// Where the cluster's objects come from.
pub enum Source {
    /// Manifests on disk (`--manifests`), watched.
    Manifests(PathBuf),
    /// The Kubernetes API server (`--kubeconfig`, `--master`, or in-cluster).
    Kube(Connection),
}

/// `ferry run`: runs until SIGTERM or SIGINT. The rules stay in the kernel on exit, so traffic
/// keeps flowing while Ferry restarts; `ferry cleanup` removes them. An API server that cannot
/// be used at start is a [`ferry_source::kube::ConnectError`] (the caller exits 64).
pub fn run(config: Config, source: Source) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    runtime.block_on(agent(config, source))
}

/// Starts the health and metrics servers; returns their tasks.
fn start_servers(
    config: &Config,
    health: &ProxyHealth,
    metrics: &Metrics,
    stopped: &watch::Receiver<bool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    let mut servers = Vec::new();
    if let Some(addr) = config.healthz_bind_address {
        let router = crate::health::router(health.clone(), metrics.clone());
        servers.push(tokio::spawn(keep_serving(
            "healthz",
            addr,
            router,
            stopped.clone(),
        )));
    }
    if let Some(addr) = config.metrics_bind_address {
        let router = crate::metrics::router(metrics.clone(), config.mode);
        servers.push(tokio::spawn(keep_serving(
            "metrics",
            addr,
            router,
            stopped.clone(),
        )));
    }
    servers
}

/// Starts the source; its events arrive on the returned channel.
async fn start_source(
    config: &Config,
    source: Source,
    metrics: &Metrics,
) -> anyhow::Result<mpsc::Receiver<SourceEvent>> {
    let (tx, rx) = mpsc::channel::<SourceEvent>(64);
    // Each source logs each invalid object itself (object, field); count them here.
    let counted = metrics.clone();
    let count = move |e: &ferry_source::InvalidObject| counted.invalid_object(&e.object.kind);
    match source {
        Source::Manifests(manifests) => {
            tracing::info!(
                node = %config.node_name,
                manifests = %manifests.display(),
                sync_period = ?config.sync_period,
                min_sync_period = ?config.min_sync_period,
                "ferry starting ({} mode)",
                config.mode
            );
            let source = ManifestSource::new(manifests);
            tokio::spawn(async move {
                if let Err(e) = source.run(tx, count).await {
                    tracing::error!("manifest source stopped: {e}");
                }
            });
        }
        Source::Kube(connection) => {
            tracing::info!(
                node = %config.node_name,
                sync_period = ?config.sync_period,
                min_sync_period = ?config.min_sync_period,
                "ferry starting ({} mode, Kubernetes API)",
                config.mode
            );
            let client = ferry_source::kube::connect(&connection).await?;
            let source = KubeSource::new(client, config.node_name.clone());
            tokio::spawn(source.run(tx, count));
        }
    }
    Ok(rx)
}

async fn agent(config: Config, source: Source) -> anyhow::Result<()> {
    let mode_entry = entry(config.mode);
    let metrics = Metrics::new(mode_entry.sync_failures);
    // Upstream's health timeout: a change may wait two sync periods before the proxy counts
    // as unhealthy.
    let health = ProxyHealth::new(2 * config.sync_period);
    let (stop_servers, servers_stopped) = watch::channel(false);
    let servers = start_servers(&config, &health, &metrics, &servers_stopped);
    let mut health_checks = ServiceHealthServers::new(health.clone());
    let mut rx = start_source(&config, source, &metrics).await?;

    let mode = (mode_entry.open)(&config.mode_options());
    tracing::info!("{}", mode.describe());
    let families = supported_families(mode.as_ref());
    let mut syncer = syncer(&config, mode.as_ref(), &families);
    cleanup_other_modes(&config);
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("installing the SIGTERM handler")?;

    // No sync before the source has delivered its first complete view: a half-programmed node
    // would reject traffic to services it has not read yet. Both sources send a Resync first:
    // the manifests after the first scan, the API once every watch has listed once.
    let first = tokio::select! {
        ev = rx.recv() => ev,
        _ = sigterm.recv() => return Ok(()),
        _ = tokio::signal::ctrl_c() => return Ok(()),
    };
    let Some(first) = first else {
        anyhow::bail!("the source stopped before its first complete view");
    };
    syncer.handle(first);
    queued(&syncer, &health, &metrics);

    let mut last_sync: Option<Instant> = None;
    let mut next_full = Instant::now();
    let mut pending = true;
    let mut retry_at: Option<Instant> = None;
    loop {
        let now = Instant::now();
        let mut due = next_full;
        if pending {
            let earliest = last_sync.map_or(now, |t| t + config.min_sync_period);
            due = due.min(earliest.max(now));
        }
        if let Some(r) = retry_at {
            due = due.min(r);
        }
        tokio::select! {
            ev = rx.recv() => match ev {
                Some(ev) => {
                    if syncer.handle(ev) {
                        pending = true;
                        queued(&syncer, &health, &metrics);
                    }
                    continue;
                }
                None => anyhow::bail!("the source stopped"),
            },
            _ = sleep_until(due) => {}
            _ = sigterm.recv() => break,
            _ = tokio::signal::ctrl_c() => break,
        }
        let full = Instant::now() >= next_full;
        let services = syncer.pending_services();
        let started = Instant::now();
        last_sync = Some(started);
        let round = crate::round::run(&mut syncer, full, &metrics);
        if round.failed {
            retry_at = Some(Instant::now() + RETRY_INTERVAL);
            continue;
        }
        pending = false;
        retry_at = None;
        if round.full {
            next_full = started + config.sync_period;
        }
        health.updated();
        metrics.changes(syncer.primary().pending_changes());
        health_checks.sync(&syncer.health_checks()).await;
        metrics.health_check_servers(health_checks.open().len());
        round.log(services);
    }
    tracing::info!("ferry stopping; rules stay in place (run `ferry cleanup` to remove them)");
    let _ = stop_servers.send(true);
    health_checks.close_all().await;
    for server in servers {
        let _ = server.await;
    }
    Ok(())
}

/// A change is waiting for a sync: start the health clock, export the pending changes, and
/// follow this node's eligibility (its Node may be what changed).
fn queued<A: Applier>(syncer: &Syncer<A>, health: &ProxyHealth, metrics: &Metrics) {
    health.queued_update();
    health.sync_node(syncer.this_node());
    let now = SystemTime::now();
    for family in syncer.families() {
        metrics.sync_queued_for(family, now);
    }
    metrics.changes(syncer.primary().pending_changes());
}
