//! The agent: the manifest source, the bounded-frequency sync loop, signals.

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use tokio::sync::mpsc;
use tokio::time::{sleep_until, Instant};

use ferry_dataplane::iptables::{detect_backend, Backend, IptablesDataplane};
use ferry_dataplane::{NftDataplane, SyncKind};
use ferry_model::{IpFamily, NodeContext};
use ferry_source::manifest::ManifestSource;
use ferry_source::SourceEvent;

use crate::config::{Config, IptablesBackend, ProxyMode};
use crate::sync::{Dataplane, Syncer};

/// After a failed sync, retry this soon (upstream's retry interval is 1 s).
const RETRY_INTERVAL: Duration = Duration::from_secs(1);

fn context(config: &Config) -> NodeContext {
    NodeContext {
        node_name: config.node_name.clone(),
        family: IpFamily::V4,
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

/// The dataplane of the configured mode. `ferry rules` never looks at the kernel, so the
/// iptables backend is only detected when `detect` is set (the rules are the same for both).
fn dataplane(config: &Config, detect: bool) -> Box<dyn Dataplane> {
    match config.mode {
        ProxyMode::Nftables => Box::new(NftDataplane::new()),
        ProxyMode::Iptables => {
            let backend = if detect {
                iptables_backend(config)
            } else {
                Backend::Nft
            };
            if detect {
                tracing::info!(backend = backend.as_str(), "iptables backend");
            }
            Box::new(IptablesDataplane::new(backend))
        }
    }
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
    let mut syncer = Syncer::new(
        context(config),
        config.compile_config(IpFamily::V4),
        dataplane(config, false),
    );
    syncer.handle(SourceEvent::Resync(scan.objects));
    syncer.desired()
}

/// `ferry run`: runs until SIGTERM or SIGINT. The rules stay in the kernel on exit, so traffic
/// keeps flowing while Ferry restarts; `ferry cleanup` removes them.
pub fn run(config: Config, manifests: PathBuf) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    runtime.block_on(agent(config, manifests))
}

async fn agent(config: Config, manifests: PathBuf) -> anyhow::Result<()> {
    tracing::info!(
        node = %config.node_name,
        manifests = %manifests.display(),
        sync_period = ?config.sync_period,
        min_sync_period = ?config.min_sync_period,
        "ferry starting ({} mode)",
        config.mode.as_str()
    );
    let (tx, mut rx) = mpsc::channel::<SourceEvent>(64);
    let source = ManifestSource::new(manifests);
    // The source logs each invalid object itself (file, object, field); nothing to add here
    // until the metrics server counts them.
    tokio::spawn(async move {
        if let Err(e) = source.run(tx, |_| {}).await {
            tracing::error!("manifest source stopped: {e}");
        }
    });

    let dataplane = dataplane(&config, true);
    cleanup_other_mode(config.mode);
    let mut syncer = Syncer::new(
        context(&config),
        config.compile_config(IpFamily::V4),
        dataplane,
    );
    let mut sigterm = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("installing the SIGTERM handler")?;

    // No sync before the source has delivered its first complete view: a half-programmed node
    // would reject traffic to services it has not read yet.
    let first = tokio::select! {
        ev = rx.recv() => ev,
        _ = sigterm.recv() => return Ok(()),
        _ = tokio::signal::ctrl_c() => return Ok(()),
    };
    let Some(first) = first else {
        anyhow::bail!("the manifest source stopped before its first scan");
    };
    syncer.handle(first);

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
                    }
                    continue;
                }
                None => anyhow::bail!("the manifest source stopped"),
            },
            _ = sleep_until(due) => {}
            _ = sigterm.recv() => break,
            _ = tokio::signal::ctrl_c() => break,
        }
        let full = Instant::now() >= next_full;
        let services = syncer.pending_services();
        let started = Instant::now();
        last_sync = Some(started);
        match syncer.sync(full) {
            Ok(report) => {
                pending = false;
                retry_at = None;
                if report.kind == SyncKind::Full {
                    next_full = started + config.sync_period;
                }
                tracing::info!(
                    kind = ?report.kind,
                    services_changed = services,
                    duration_ms = started.elapsed().as_secs_f64() * 1e3,
                    chains_written = report.chains_written,
                    elements_changed = report.elements_changed,
                    script_bytes = report.script_bytes,
                    "synced rules"
                );
            }
            Err(e) => {
                retry_at = Some(Instant::now() + RETRY_INTERVAL);
                tracing::error!("sync failed, keeping the last good rules and retrying: {e}");
            }
        }
    }
    tracing::info!("ferry stopping; rules stay in place (run `ferry cleanup` to remove them)");
    Ok(())
}
