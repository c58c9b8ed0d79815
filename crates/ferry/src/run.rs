//! The agent: the source (manifests or the Kubernetes API), the bounded-frequency sync loop, the
//! health, metrics and health-check NodePort servers, signals.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use anyhow::Context as _;
use tokio::sync::{mpsc, watch};
use tokio::time::{sleep_until, Instant};

use ferry_dataplane::iptables::{detect_backend, Backend, IptablesDataplane};
use ferry_dataplane::{NftDataplane, SyncKind};
use ferry_model::{IpFamily, NodeContext};
use ferry_source::kube::{Connection, KubeSource};
use ferry_source::manifest::ManifestSource;
use ferry_source::SourceEvent;

use crate::config::{Config, IptablesBackend, ProxyMode};
use crate::families::FamilySyncers;
use crate::health::ProxyHealth;
use crate::healthcheck::ServiceHealthServers;
use crate::metrics::Metrics;
use crate::serve::keep_serving;
use crate::sync::{Dataplane, Syncer};

/// After a failed sync, retry this soon (upstream's retry interval is 1 s).
const RETRY_INTERVAL: Duration = Duration::from_secs(1);

fn context(config: &Config, family: IpFamily) -> NodeContext {
    NodeContext {
        node_name: config.node_name.clone(),
        family,
    }
}

/// The iptables backend to program: forced by the flag, or detected.
fn iptables_backend(config: &Config) -> Backend {
    match config.iptables_backend {
        IptablesBackend::Nft => Backend::Nft,
        IptablesBackend::Legacy => Backend::Legacy,
        IptablesBackend::Auto => detect_backend(),
    }
}

/// The dataplane of the configured mode for one family (`ip`/`ip6` table, `iptables` /
/// `ip6tables`), with the iptables backend to use in iptables mode. `ferry rules` never looks
/// at the kernel (the rules are the same for both backends).
fn dataplane(config: &Config, family: IpFamily, backend: Backend) -> Box<dyn Dataplane> {
    match config.mode {
        ProxyMode::Nftables => Box::new(NftDataplane::new()),
        ProxyMode::Iptables => Box::new(IptablesDataplane::for_family(backend, family)),
    }
}

/// One syncer per family.
fn syncers(config: &Config, families: &[IpFamily], backend: Backend) -> FamilySyncers {
    FamilySyncers::new(
        families
            .iter()
            .map(|&f| {
                Syncer::new(
                    context(config, f),
                    config.compile_config(f),
                    dataplane(config, f, backend),
                )
            })
            .collect(),
    )
}

/// Removes what the other mode left (a node switched from one mode to the other), as upstream
/// kube-proxy does at start-up; a failure is only worth a warning.
fn cleanup_other_mode(mode: ProxyMode) {
    let result = match mode {
        ProxyMode::Nftables => ferry_dataplane::iptables::cleanup(),
        ProxyMode::Iptables => ferry_dataplane::cleanup(),
    };
    if let Err(e) = result {
        tracing::warn!("removing the other proxy mode's rules failed: {e}");
    }
}

/// `ferry rules`: load the manifests once and render this node's ruleset.
pub fn rules(config: &Config, manifests: &Path) -> String {
    let scan = ferry_source::manifest::load(manifests);
    for e in &scan.errors {
        eprintln!("warning: {e}");
    }
    let mut syncers = syncers(config, &[IpFamily::V4, IpFamily::V6], Backend::Nft);
    syncers.handle(SourceEvent::Resync(scan.objects));
    syncers.desired(config.mode)
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

async fn agent(config: Config, source: Source) -> anyhow::Result<()> {
    let metrics = Metrics::new();
    metrics.set_iptables_mode(config.mode == ProxyMode::Iptables);
    // Upstream's health timeout: a change may wait two sync periods before the proxy counts
    // as unhealthy.
    let health = ProxyHealth::new(2 * config.sync_period);
    let (stop_servers, servers_stopped) = watch::channel(false);
    let mut servers = Vec::new();
    if let Some(addr) = config.healthz_bind_address {
        let router = crate::health::router(health.clone(), metrics.clone());
        servers.push(tokio::spawn(keep_serving(
            "healthz",
            addr,
            router,
            servers_stopped.clone(),
        )));
    }
    if let Some(addr) = config.metrics_bind_address {
        let router = crate::metrics::router(metrics.clone());
        servers.push(tokio::spawn(keep_serving(
            "metrics",
            addr,
            router,
            servers_stopped.clone(),
        )));
    }
    let mut health_checks = ServiceHealthServers::new(health.clone());

    let (tx, mut rx) = mpsc::channel::<SourceEvent>(64);
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
                config.mode.as_str()
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
                config.mode.as_str()
            );
            let client = ferry_source::kube::connect(&connection).await?;
            let source = KubeSource::new(client, config.node_name.clone());
            tokio::spawn(source.run(tx, count));
        }
    }

    let backend = match config.mode {
        ProxyMode::Nftables => Backend::Nft,
        ProxyMode::Iptables => {
            let backend = iptables_backend(&config);
            tracing::info!(backend = backend.as_str(), "iptables backend");
            backend
        }
    };
    let families = crate::families::supported(&config, backend);
    let mut syncer = syncers(&config, &families, backend);
    cleanup_other_mode(config.mode);
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
        let mut round = Round::default();
        for family_syncer in syncer.iter_mut() {
            let family = family_syncer.family();
            let trigger_times = family_syncer.pending_changes().trigger_times.clone();
            let began = Instant::now();
            let result = family_syncer.sync(full);
            let took = began.elapsed();
            metrics.sync_ran_for(family, result.as_ref().ok().map(|r| r.kind), took);
            match result {
                Ok(report) => {
                    metrics.sync_succeeded_for(family, SystemTime::now(), &trigger_times);
                    metrics.no_local_endpoints_for(
                        family,
                        family_syncer.status().no_local_endpoints(),
                    );
                    // Stale UDP flows go once the new rules are in; before the "synced rules"
                    // line, so whoever waits for that line sees the cleanup done too.
                    let stale = family_syncer.take_stale_flows();
                    if !crate::sync::conntrack::clean(family, &stale, &metrics) {
                        family_syncer.conntrack_failed();
                    }
                    round.add(&report);
                }
                Err(e) => {
                    round.failed = true;
                    tracing::error!(
                        ip_family = crate::families::name(family),
                        "sync failed, keeping the last good rules and retrying: {e}"
                    );
                }
            }
        }
        let elapsed = started.elapsed();
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
        tracing::info!(
            kind = ?if round.full { SyncKind::Full } else { SyncKind::Partial },
            services_changed = services,
            duration_ms = elapsed.as_secs_f64() * 1e3,
            chains_written = round.chains_written,
            elements_changed = round.elements_changed,
            script_bytes = round.script_bytes,
            families = round.families,
            "synced rules"
        );
    }
    tracing::info!("ferry stopping; rules stay in place (run `ferry cleanup` to remove them)");
    let _ = stop_servers.send(true);
    health_checks.close_all().await;
    for server in servers {
        let _ = server.await;
    }
    Ok(())
}

/// What one sync round (every family) did, for its log line.
#[derive(Default)]
struct Round {
    failed: bool,
    /// Any family's sync was full.
    full: bool,
    chains_written: usize,
    elements_changed: usize,
    script_bytes: usize,
    /// Number of families synced.
    families: usize,
}

impl Round {
    fn add(&mut self, r: &ferry_dataplane::SyncReport) {
        self.full |= r.kind == SyncKind::Full;
        self.chains_written += r.chains_written;
        self.elements_changed += r.elements_changed;
        self.script_bytes += r.script_bytes;
        self.families += 1;
    }
}

/// A change is waiting for a sync: start the health clock, export the pending changes, and
/// follow this node's eligibility (its Node may be what changed).
fn queued<D: Dataplane>(syncers: &FamilySyncers<D>, health: &ProxyHealth, metrics: &Metrics) {
    let syncer = syncers.primary();
    health.queued_update();
    health.sync_node(syncer.this_node());
    let now = SystemTime::now();
    for family in syncers.families() {
        metrics.sync_queued_for(family, now);
    }
    metrics.changes(syncer.pending_changes());
}
