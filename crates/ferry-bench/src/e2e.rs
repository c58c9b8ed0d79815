//! End to end, as users see it: the real `ferry run` binary in a network namespace, real
//! connections from a client namespace to endpoints in a third one.
//!
//! What is measured (each run in fresh namespaces, see [`net`]):
//! - nftables mode from manifests (one file per Service, `minSyncPeriod: 0s`) and from the fake
//!   API server (everything listed, then MODIFIED watch events): process start → the first,
//!   the last and 5 more ClusterIPs each answered by one of their endpoints; one endpoint
//!   replaced (a file staged elsewhere and renamed in, or a MODIFIED slice) → a new connection
//!   lands on the new endpoint (four connections kept in flight; p50/p99 over many changes);
//!   `VmHWM` of `ferry run`; connection set-up time to the first and last ClusterIP against the
//!   same connection straight to an endpoint with no rules at all (measured last, after
//!   `ferry cleanup`);
//! - iptables mode on both backends, the same figures, next to the floor measured in the same
//!   run: a plain `iptables-restore` of exactly what `ferry rules --proxy-mode iptables` prints
//!   ([`floor`]);
//! - sustained churn ([`churn`]).
//!
//! Nothing here asserts on timings: [`report::Table`] prints each figure with its goal.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;

use self::cluster::{Cluster, Layout};
use self::echo::Endpoints;
use self::net::Net;
use self::report::Table;
use self::scenario::{Feed, Setup};

pub mod against;
pub mod churn;
pub mod floor;
pub mod real_api;
pub mod report;
pub mod scenario;
mod tables;

pub use ferry_lab::scale::{cluster, echo, ferry, net, probe};

/// The parts of the benchmark.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Part {
    /// nftables mode, manifests.
    Manifests,
    /// nftables mode, the fake API server.
    Api,
    /// iptables mode, nft backend (with its floor).
    IptablesNft,
    /// iptables mode, legacy backend (with its floor).
    IptablesLegacy,
    /// Sustained churn.
    Churn,
    /// nftables mode, the real API server and EndpointSlice controller (not in [`Part::ALL`]:
    /// creating the cluster's Pods takes minutes).
    RealApi,
}

impl Part {
    /// Every part, in the order they run.
    pub const ALL: [Part; 5] = [
        Part::Manifests,
        Part::Api,
        Part::IptablesNft,
        Part::IptablesLegacy,
        Part::Churn,
    ];

    /// Parses a part's name (`manifests`, `api`, `iptables-nft`, `iptables-legacy`, `churn`).
    pub fn parse(name: &str) -> anyhow::Result<Part> {
        Ok(match name {
            "manifests" => Part::Manifests,
            "api" => Part::Api,
            "iptables-nft" => Part::IptablesNft,
            "iptables-legacy" => Part::IptablesLegacy,
            "churn" => Part::Churn,
            "real-api" => Part::RealApi,
            other => anyhow::bail!("unknown part {other:?}"),
        })
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct Options {
    /// The `ferry` binary.
    pub ferry: PathBuf,
    /// This benchmark's binary (its `__peak` wrapper measures `ferry rules`).
    pub this: PathBuf,
    /// N.
    pub services: usize,
    /// M.
    pub endpoints: usize,
    /// One-endpoint changes to time in nftables mode.
    pub changes: usize,
    /// One-endpoint changes to time in iptables mode.
    pub iptables_changes: usize,
    /// Connection set-up times per target.
    pub connects: usize,
    /// Churn: changes per second, duration, one followed in `churn_sample`.
    pub churn_rate: usize,
    /// See `churn_rate`.
    pub churn_duration: Duration,
    /// See `churn_rate`.
    pub churn_sample: usize,
    /// Longest wait for first answers and for each change.
    pub timeout: Duration,
    /// What to run.
    pub parts: Vec<Part>,
    /// Where Ferry's logs go (default: a temporary directory, deleted at the end).
    pub logs: Option<PathBuf>,
    /// Extra `ferry run` flags for every run (e.g. `--sync-period=1h`).
    pub ferry_flags: Vec<String>,
}

/// Where the manifests live.
struct Dirs {
    _root: tempfile::TempDir,
    manifests: PathBuf,
    stage: PathBuf,
    logs: PathBuf,
}

/// Runs the parts; a part that fails gets a line saying why, and the others still run.
pub fn run(o: &Options, progress: impl Fn(&str) + Sync) -> anyhow::Result<Table> {
    let mut cluster = Cluster::new(o.services, o.endpoints, Layout::BENCH)?;
    for name in crate::netns::reap_stale()? {
        progress(&format!("deleted stale namespace {name}"));
    }
    let dirs = write_manifests(&cluster, o.logs.as_deref())?;
    progress(&format!(
        "{} Services × {} endpoints written to {}",
        o.services,
        o.endpoints,
        dirs.manifests.display()
    ));
    let mut table = Table::default();
    for part in &o.parts {
        progress(&format!("== {part:?}"));
        let result = match part {
            Part::Manifests => manifests(o, &mut cluster, &dirs, &mut table),
            Part::Api => api(o, &mut cluster, &dirs, &mut table),
            Part::IptablesNft => iptables(o, &mut cluster, &dirs, "nft", &mut table),
            Part::IptablesLegacy => iptables(o, &mut cluster, &dirs, "legacy", &mut table),
            Part::Churn => churn(o, &mut cluster, &dirs, &mut table),
            Part::RealApi => real_api(o, &mut cluster, &dirs, &mut table, &progress),
        };
        if let Err(e) = result {
            progress(&format!("{part:?} failed: {e:#}"));
            table.add(
                &format!("{part:?}"),
                "(run)",
                "-",
                format!("failed: {e:#}"),
                Some(false),
            );
        }
    }
    Ok(table)
}

fn write_manifests(cluster: &Cluster, logs: Option<&Path>) -> anyhow::Result<Dirs> {
    let root = tempfile::Builder::new()
        .prefix("ferry-bench-e2e-")
        .tempdir()
        .context("creating the work directory")?;
    ferry_lab::interrupt::remove_on_signal(root.path());
    let manifests = root.path().join("manifests");
    let stage = root.path().join("stage");
    let logs = logs.map_or_else(|| root.path().join("logs"), Path::to_path_buf);
    for d in [&manifests, &stage, &logs] {
        std::fs::create_dir_all(d)?;
    }
    cluster.write_all(&manifests)?;
    Ok(Dirs {
        _root: root,
        manifests,
        stage,
        logs,
    })
}

/// Runs `fut` on a thread inside the client namespace, in a tokio runtime of its own.
fn in_client<T: Send>(
    net: &Net,
    fut: impl Future<Output = anyhow::Result<T>> + Send,
) -> anyhow::Result<T> {
    ferry_lab::netns::run_in(net.client.name(), move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        rt.block_on(fut)
    })?
}

fn setup<'a>(o: &'a Options, dirs: &Dirs, name: &str, flags: &[&str], changes: usize) -> Setup<'a> {
    Setup {
        ferry: &o.ferry,
        flags: flags
            .iter()
            .map(|f| (*f).to_owned())
            .chain(o.ferry_flags.iter().cloned())
            .collect(),
        changes,
        connects: o.connects,
        timeout: o.timeout,
        log: dirs.logs.join(format!("{name}.log")),
        iptables_backend: None,
    }
}

fn manifests(
    o: &Options,
    cluster: &mut Cluster,
    dirs: &Dirs,
    table: &mut Table,
) -> anyhow::Result<()> {
    let net = Net::create(crate::netns::PREFIX, "files")?;
    let _endpoints = Endpoints::start(net.pods.name())?;
    let feed = Feed::Manifests {
        dir: &dirs.manifests,
        stage: &dirs.stage,
    };
    let setup = setup(
        o,
        dirs,
        "nft-manifests",
        &["--min-sync-period=0s"],
        o.changes,
    );
    let m = in_client(&net, scenario::run(&net, cluster, &feed, &setup))?;
    tables::nftables(table, "nftables, manifests", &m);
    tables::datapath(table, "nftables, manifests", &m);
    Ok(())
}

fn api(o: &Options, cluster: &mut Cluster, dirs: &Dirs, table: &mut Table) -> anyhow::Result<()> {
    let net = Net::create(crate::netns::PREFIX, "api")?;
    let _endpoints = Endpoints::start(net.pods.name())?;
    let listener = ferry_lab::netns::run_in(net.node.name(), || {
        std::net::TcpListener::bind("127.0.0.1:0")
    })??;
    let server = ferry_testkit::FakeApiServer::start(listener)?;
    for node in cluster.node_objects() {
        server.apply(node);
    }
    for i in 0..cluster.services {
        server.apply(cluster.service_object(i));
        server.apply(cluster.slice_object(i));
    }
    let feed = Feed::Api(&server);
    let setup = setup(o, dirs, "nft-api", &["--min-sync-period=0s"], o.changes);
    let m = in_client(&net, scenario::run(&net, cluster, &feed, &setup))?;
    tables::nftables(table, "nftables, API", &m);
    Ok(())
}

fn real_api(
    o: &Options,
    cluster: &mut Cluster,
    dirs: &Dirs,
    table: &mut Table,
    progress: &(dyn Fn(&str) + Sync),
) -> anyhow::Result<()> {
    let net = Net::create(crate::netns::PREFIX, "real-api")?;
    let _endpoints = Endpoints::start(net.pods.name())?;
    let api = real_api::RealApi::start(&net, cluster, o.changes, progress)?;
    let feed = Feed::Real(&api);
    let setup = setup(
        o,
        dirs,
        "nft-real-api",
        &["--min-sync-period=0s"],
        o.changes,
    );
    let m = in_client(&net, scenario::run(&net, cluster, &feed, &setup));
    // The control plane's logs beside Ferry's (its folder goes with it).
    for name in ["etcd", "kube-apiserver", "kube-controller-manager"] {
        let from = api.control_plane.dir().join(format!("{name}.log"));
        let _ = std::fs::copy(&from, dirs.logs.join(format!("real-api-{name}.log")));
    }
    let m = m?;
    tables::nftables(table, "nftables, real API", &m);
    tables::controller(table, "nftables, real API", &api.controller_ms());
    Ok(())
}

fn iptables(
    o: &Options,
    cluster: &mut Cluster,
    dirs: &Dirs,
    backend: &str,
    table: &mut Table,
) -> anyhow::Result<()> {
    let feed = Feed::Manifests {
        dir: &dirs.manifests,
        stage: &dirs.stage,
    };
    let printed = floor::print_rules(&o.this, &o.ferry, &scenario::base_flags(&feed))?;
    let plain = floor::plain_restore(backend, &printed.text)?;
    tables::printed(table, &printed);
    let net = Net::create(crate::netns::PREFIX, &format!("ipt-{backend}"))?;
    let _endpoints = Endpoints::start(net.pods.name())?;
    let backend_flag = format!("--iptables-backend={backend}");
    let flags = [
        "--proxy-mode=iptables",
        &backend_flag,
        "--min-sync-period=0s",
    ];
    let name = format!("iptables-{backend}");
    let setup = Setup {
        iptables_backend: Some(backend),
        ..setup(o, dirs, &name, &flags, o.iptables_changes)
    };
    let m = in_client(&net, scenario::run(&net, cluster, &feed, &setup))?;
    tables::iptables(table, backend, &m, plain);
    Ok(())
}

fn churn(o: &Options, cluster: &mut Cluster, dirs: &Dirs, table: &mut Table) -> anyhow::Result<()> {
    let net = Net::create(crate::netns::PREFIX, "churn")?;
    let _endpoints = Endpoints::start(net.pods.name())?;
    let log = dirs.logs.join("churn.log");
    let setup = churn::ChurnSetup {
        ferry: &o.ferry,
        rate: o.churn_rate,
        duration: o.churn_duration,
        sample: o.churn_sample,
        log: &log,
        flags: &o.ferry_flags,
    };
    let (manifests, stage): (&Path, &Path) = (&dirs.manifests, &dirs.stage);
    let c = in_client(&net, churn::run(&net, cluster, manifests, stage, &setup))?;
    tables::churn(table, o, &c);
    Ok(())
}
