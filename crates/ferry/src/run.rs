//! The agent: start-up (the mode's checks, kube-proxy's leftovers), the source (manifests or
//! the Kubernetes API), the health, metrics (and `/status`) and health-check NodePort servers,
//! then the sync loop ([`agent::Agent`]). Everything that depends on the proxy mode comes from
//! its line in the mode table ([`ferry_dataplane::modes`]).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use anyhow::Context as _;
use tokio::sync::{mpsc, watch};

use ferry_dataplane::mode::{ModeEntry, NodeMode};
use ferry_dataplane::modes::entry;
use ferry_model::{IpFamily, NodeContext};
use ferry_source::kube::{Connection, KubeSource};
use ferry_source::manifest::{ManifestSource, WatchError};
use ferry_source::probe::ProbeBook;
use ferry_source::SourceEvent;

use crate::config::Config;
use crate::health::ProxyHealth;
use crate::metrics::Metrics;
use crate::serve::keep_serving;
use crate::status::client::Request;
use crate::sync::{FamilySync, Syncer};

mod agent;
mod presence;
#[cfg(test)]
mod tests;

pub(crate) fn context(config: &Config, family: IpFamily) -> NodeContext {
    NodeContext {
        node_name: config.node_name.clone(),
        family,
    }
}

/// The families this node programs: IPv4, and IPv6 when the kernel and the mode's tool
/// support it (upstream's `platformCheckSupported`; one info line either way).
fn supported_families(mode: &dyn NodeMode) -> Vec<IpFamily> {
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
                .with_udp_conntrack_cleanup(mode.udp_conntrack_cleanup())
            })
            .collect(),
    )
}

/// Where the cluster's objects come from.
pub enum Source {
    /// Manifests on disk (`--manifests`), watched.
    Manifests(PathBuf),
    /// The Kubernetes API server (`--kubeconfig`, `--master`, or in-cluster).
    Kube(Connection),
}

impl Source {
    /// `manifests PATH` or `Kubernetes API`, for the start-up line and `ferry status`.
    pub fn describe(&self) -> String {
        match self {
            Source::Manifests(path) => format!("manifests {}", path.display()),
            Source::Kube(c) => match &c.master {
                Some(url) => format!("Kubernetes API {url}"),
                None => "Kubernetes API".to_owned(),
            },
        }
    }
}

/// A source at start-up: manifests are being read, the API source starts after the mode's
/// checks.
enum Started {
    Reading(mpsc::Receiver<SourceEvent>),
    Later(Connection),
}

/// `ferry run`: runs until SIGTERM or SIGINT. The rules stay in the kernel on exit, so traffic
/// keeps flowing while Ferry restarts; `ferry cleanup` removes them. An API server
/// configuration that cannot work is a [`ferry_source::kube::ConnectError`] (the caller exits
/// 64); an API server that does not answer is waited for, with back-off (the health and metrics
/// servers answer meanwhile). A mode that cannot run here (a missing tool or capability) is an
/// error naming what is missing.
pub fn run(config: Config, source: Source) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    let result = runtime.block_on(agent(config, source));
    if result.is_err() {
        // A mode that cannot run here stops Ferry while the source may still be reading on
        // the blocking pool: do not wait for it.
        runtime.shutdown_background();
    }
    result
}

/// Starts the health and metrics servers (`/status` asks through `status`); returns their
/// tasks. With `bindAddressHardFail`, a server that cannot listen is an error naming it (as
/// kube-proxy exits); without, it is logged and tried again every 5 s.
async fn start_servers(
    config: &Config,
    health: &ProxyHealth,
    metrics: &Metrics,
    status: mpsc::Sender<Request>,
    stopped: &watch::Receiver<bool>,
) -> anyhow::Result<Vec<tokio::task::JoinHandle<()>>> {
    let mut wanted = Vec::new();
    if let Some(addr) = config.healthz_bind_address {
        let router = crate::health::router(health.clone(), metrics.clone());
        wanted.push(("healthz", addr, router));
    }
    if let Some(addr) = config.metrics_bind_address {
        let router = crate::metrics::router(metrics.clone(), config.mode)
            .merge(crate::status::client::router(status));
        wanted.push(("metrics", addr, router));
    }
    let mut servers = Vec::new();
    for (name, addr, router) in wanted {
        let task = if config.kube_proxy.bind_address_hard_fail {
            let server = crate::serve::Server::start(name, addr, router)
                .await
                .with_context(|| {
                    format!(
                        "the {name} server cannot listen on {addr}, and \
                         --bind-address-hard-fail (bindAddressHardFail) makes that fatal"
                    )
                })?;
            tokio::spawn(crate::serve::serve_until(name, server, stopped.clone()))
        } else {
            tokio::spawn(keep_serving(name, addr, router, stopped.clone()))
        };
        servers.push(task);
    }
    Ok(servers)
}

/// The readiness probes' results, shared by the Pod stage (which writes them), `/status` and
/// `/metrics`.
pub type SharedBook = Arc<Mutex<ProbeBook>>;

/// Starts the manifest source; its events arrive on the returned channel. Standalone, Ferry is
/// the cluster's EndpointSlice controller and kubelet prober too: the Pod stage turns the
/// manifests' Pods into EndpointSlices, gated by their readiness probes (recorded in `book`),
/// between the source and the syncer.
fn start_manifests(
    manifests: PathBuf,
    metrics: &Metrics,
    book: SharedBook,
) -> mpsc::Receiver<SourceEvent> {
    let (tx, rx) = mpsc::channel::<SourceEvent>(64);
    let (stage_tx, stage_rx) = mpsc::channel::<SourceEvent>(64);
    let source = ManifestSource::new(manifests);
    let count = counter(metrics);
    tokio::spawn(async move {
        match source.run(stage_tx, count).await {
            // Ferry stopped during the first read (a mode that cannot run here).
            Err(WatchError::ScanPanicked(e)) if e.is_cancelled() => {}
            Err(e) => tracing::error!("manifest source stopped: {e}"),
            Ok(()) => {}
        }
    });
    let options = ferry_source::pods::StageOptions {
        check: Arc::new(ferry_source::probe::NetworkCheck::default()),
        max_concurrent: ferry_source::probe::DEFAULT_MAX_CONCURRENT,
        book,
    };
    tokio::spawn(ferry_source::pods::run(
        stage_rx,
        tx,
        options,
        counter(metrics),
    ));
    rx
}

/// Connects to the API server (waiting for it, with back-off) and starts the API source; its
/// events arrive on the returned channel.
async fn start_kube(
    config: &Config,
    connection: Connection,
    metrics: &Metrics,
) -> anyhow::Result<mpsc::Receiver<SourceEvent>> {
    let (tx, rx) = mpsc::channel::<SourceEvent>(64);
    let client =
        ferry_source::kube::connect_observed(&connection, Some(metrics.api_request_observer()))
            .await?;
    let source = KubeSource::new(client, config.node_name.clone());
    tokio::spawn(source.run(tx, counter(metrics)));
    Ok(rx)
}

/// Each source logs each invalid object itself (object, field); this counts them.
fn counter(metrics: &Metrics) -> impl Fn(&ferry_source::InvalidObject) + Send + 'static {
    let metrics = metrics.clone();
    move |e| metrics.invalid_object(&e.object.kind)
}

/// The mode, opened on this runtime (the proxy of the userspace mode and of localhost
/// NodePorts serves on it), once its checks pass.
fn open_mode(config: &Config, mode_entry: &ModeEntry) -> anyhow::Result<Arc<dyn NodeMode>> {
    let mut options = config.mode_options();
    options.runtime = Some(tokio::runtime::Handle::current());
    let mode: Arc<dyn NodeMode> = Arc::from((mode_entry.open)(&options));
    crate::startup::preflight(mode.as_ref()).map_err(anyhow::Error::msg)?;
    tracing::info!("{}", mode.describe());
    Ok(mode)
}

async fn agent(mut config: Config, source: Source) -> anyhow::Result<()> {
    let mode_entry = entry(config.mode);
    let described = source.describe();
    crate::startup::log_start(&config, &described);
    crate::startup::apply_conntrack(&mut config);
    let metrics = Metrics::new(mode_entry.sync_failures);
    // Manifests are read from the start: the first read is most of the start-up, and the
    // mode's checks below run beside it (its events wait in the channel for the syncer). The
    // API source starts once the mode is known to work here: it may wait for the API server.
    // Standalone, Ferry runs the Pods' readiness probes: their results are shown by `/status`
    // and counted on `/metrics`.
    let (started, probes, presence) = match source {
        Source::Manifests(path) => {
            let book = SharedBook::default();
            metrics.follow_probes(book.clone());
            let presence = presence::Presence::new(path.clone());
            let rx = start_manifests(path, &metrics, book.clone());
            (Started::Reading(rx), Some(book), Some(presence))
        }
        Source::Kube(connection) => (Started::Later(connection), None, None),
    };
    let mode = open_mode(&config, mode_entry)?;
    let families = supported_families(mode.as_ref());
    // Beside the source's first read, not before it (the cleanup after the first sync
    // waits for it).
    let leftovers = beside("leftovers", move || {
        crate::startup::log_leftovers(mode_entry)
    });
    metrics.serve_proxy_metrics(mode.proxy_metrics());
    // Before the first sync: the rules name the counters that exist.
    let counters = mode.packet_counters();
    config.nfacct = counters.rules;
    metrics.serve_counter_metrics(counters.metrics);
    // Upstream's health timeout: a change may wait two sync periods before the proxy counts
    // as unhealthy.
    let health = ProxyHealth::new(2 * config.sync_period);
    let (status_tx, status_rx) = mpsc::channel(4);
    let (stop_servers, servers_stopped) = watch::channel(false);
    let servers = start_servers(&config, &health, &metrics, status_tx, &servers_stopped).await?;
    let rx = match started {
        Started::Reading(rx) => rx,
        Started::Later(connection) => start_kube(&config, connection, &metrics).await?,
    };
    let syncer = syncer(&config, mode.as_ref(), &families);
    let mut agent = agent::Parts {
        config,
        mode_entry,
        mode,
        families,
        syncer,
        health,
        metrics,
        presence,
        source: described,
        probes,
        leftovers,
    }
    .start();
    let result = agent.run(rx, status_rx).await;
    tracing::info!("ferry stopping; rules stay in place (run `ferry cleanup` to remove them)");
    let _ = stop_servers.send(true);
    agent.stop().await;
    for server in servers {
        let _ = server.await;
    }
    result
}

/// Runs `work` on a thread of its own named `name`, or in line when no thread can be started
/// (then `None`).
pub(crate) fn beside(
    name: &str,
    work: impl Fn() + Send + Clone + 'static,
) -> Option<std::thread::JoinHandle<()>> {
    let spawned = std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(work.clone());
    match spawned {
        Ok(handle) => Some(handle),
        Err(e) => {
            tracing::debug!("running {name} in line: {e}");
            work();
            None
        }
    }
}
