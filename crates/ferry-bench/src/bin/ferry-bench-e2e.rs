//! `ferry-bench-e2e`: Ferry end to end, as users see it — the real `ferry run` binary in a
//! network namespace, real connections from a client namespace (see `ferry_bench::e2e`).
//!
//! Needs root (it creates network namespaces) and a release build of `ferry`:
//!
//! ```text
//! cargo build --release -p ferry -p ferry-bench
//! target/release/ferry-bench-e2e                 # N = 10 000 × 10, every part (~10 minutes)
//! target/release/ferry-bench-e2e --quick         # N = 100, a smoke test (about a minute)
//! target/release/ferry-bench-e2e --only manifests,api -n 1000
//! target/release/ferry-bench-e2e --source real-api # the real API server (Pods created first)
//! target/release/ferry-bench-e2e --against kube-proxy --sizes 10000 --modes nftables
//! ```
//!
//! `--against kube-proxy` runs Ferry and upstream kube-proxy (built by `lab/k8s/build`) side
//! by side on one real control plane (see `ferry_bench::e2e::against`).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use clap::Parser;

use ferry_bench::e2e::{self, Options, Part};

/// Ferry end to end: `ferry run` in a network namespace, timed from a client's connections.
/// Needs root.
#[derive(Debug, Parser)]
#[command(name = "ferry-bench-e2e", version)]
struct Cli {
    /// The ferry binary (default: `ferry` next to this binary).
    #[arg(long, value_name = "PATH")]
    ferry: Option<PathBuf>,
    /// Services (N).
    #[arg(short = 'n', long = "services", default_value_t = 10_000)]
    services: usize,
    /// Endpoints per Service (M).
    #[arg(short = 'm', long = "endpoints", default_value_t = 10)]
    endpoints: usize,
    /// Smoke test: N = 100 and few repetitions; cheap enough for CI.
    #[arg(long, conflicts_with = "services")]
    quick: bool,
    /// One-endpoint changes to time in nftables mode (default 200; with --against, per proxy
    /// and setting, 30).
    #[arg(long)]
    changes: Option<usize>,
    /// One-endpoint changes to time in iptables mode.
    #[arg(long, default_value_t = 10)]
    iptables_changes: usize,
    /// Connection set-up times to take per target.
    #[arg(long, default_value_t = 1000)]
    connects: usize,
    /// Churn: endpoint changes per second.
    #[arg(long, default_value_t = 100)]
    churn_rate: usize,
    /// Churn: seconds (default 60; with --against, 20).
    #[arg(long)]
    churn_secs: Option<u64>,
    /// Churn: follow one change in this many from the client.
    #[arg(long, default_value_t = 20)]
    churn_sample: usize,
    /// Longest wait for the first answers, and for each change (seconds).
    #[arg(long, default_value_t = 600)]
    timeout_secs: u64,
    /// Parts to run, comma-separated: manifests, api, iptables-nft, iptables-legacy, churn,
    /// real-api (not run by default: the real control plane, built by lab/k8s/build).
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// nftables mode from these sources only, comma-separated: manifests, api (the fake API
    /// server), real-api (etcd, kube-apiserver and the EndpointSlice controller, the Pods'
    /// status written in the kubelet's place). The same as `--only`.
    #[arg(long, value_delimiter = ',', value_name = "SOURCE")]
    source: Vec<String>,
    /// Keep Ferry's logs in DIR.
    #[arg(long, value_name = "DIR")]
    logs: Option<PathBuf>,
    /// Ferry side by side with upstream kube-proxy (`kube-proxy`, the only value), each on
    /// the same node namespace in turn, one real control plane per size.
    #[arg(long, value_name = "PROXY")]
    against: Option<String>,
    /// With --against: Services per cluster (× --endpoints), comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "1000,10000,30000")]
    sizes: Vec<String>,
    /// With --against: proxy modes, comma-separated (nftables, iptables).
    #[arg(long, value_delimiter = ',', default_value = "nftables,iptables")]
    modes: Vec<String>,
    /// With --against: the minimum sync period, `default` (kubeadm's: 1 s), `zero`, or
    /// `both`.
    #[arg(long, default_value = "default")]
    min_sync: String,
    /// With --against: which proxy runs first on each setting, `ferry` or `kube-proxy`.
    #[arg(long, default_value = "ferry", value_parser = ["ferry", "kube-proxy"])]
    first: String,
    /// An extra flag for every `ferry run` (repeatable), e.g. `--ferry-flag=--sync-period=1h`.
    #[arg(long = "ferry-flag", value_name = "FLAG", allow_hyphen_values = true)]
    ferry_flags: Vec<String>,
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("__peak") {
        return match e2e::floor::peak_main(&args[2..]) {
            Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
            Err(e) => {
                eprintln!("ferry-bench-e2e __peak: {e:#}");
                ExitCode::FAILURE
            }
        };
    }
    match run(&Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ferry-bench-e2e: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: &Cli) -> anyhow::Result<()> {
    // Ctrl-C or SIGTERM: stop `ferry run` and the rest, delete this run's namespaces and
    // work directory, exit 130/143 (destructors do not run on a signal).
    ferry_lab::interrupt::clean_up_on_signal().context("installing the signal handler")?;
    let this = std::env::current_exe().context("finding this binary")?;
    let ferry = match &cli.ferry {
        Some(f) => f.clone(),
        None => this.with_file_name("ferry"),
    };
    anyhow::ensure!(
        ferry.exists(),
        "{} not found (build ferry, or pass --ferry)",
        ferry.display()
    );
    if let Some(proxy) = &cli.against {
        anyhow::ensure!(
            proxy == "kube-proxy",
            "--against {proxy:?}: only kube-proxy"
        );
        return against(cli, std::path::absolute(&ferry)?);
    }
    let parts = if cli.only.is_empty() && cli.source.is_empty() {
        Part::ALL.to_vec()
    } else {
        let sources = cli.source.iter().map(|s| match s.as_str() {
            "manifests" | "api" | "real-api" => Part::parse(s),
            other => anyhow::bail!("unknown source {other:?} (manifests, api, real-api)"),
        });
        cli.only
            .iter()
            .map(|p| Part::parse(p))
            .chain(sources)
            .collect::<anyhow::Result<_>>()?
    };
    let quick = cli.quick;
    let options = Options {
        ferry: std::path::absolute(&ferry)?,
        this,
        services: if quick { 100 } else { cli.services },
        endpoints: cli.endpoints,
        changes: if quick {
            20
        } else {
            cli.changes.unwrap_or(200)
        },
        iptables_changes: if quick { 3 } else { cli.iptables_changes },
        connects: if quick { 100 } else { cli.connects },
        churn_rate: if quick { 20 } else { cli.churn_rate },
        churn_duration: Duration::from_secs(if quick {
            3
        } else {
            cli.churn_secs.unwrap_or(60)
        }),
        churn_sample: if quick { 4 } else { cli.churn_sample },
        timeout: Duration::from_secs(if quick { 60 } else { cli.timeout_secs }),
        parts,
        logs: cli.logs.clone(),
        ferry_flags: cli.ferry_flags.clone(),
    };
    let table = e2e::run(&options, |line| eprintln!("{line}"))?;
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!(
        "ferry-bench-e2e: {} ClusterIP Services × {} endpoints, kernel {}, {} cores, load average \
         at the end {}, extra ferry flags {:?}\n",
        options.services,
        options.endpoints,
        kernel.trim(),
        std::thread::available_parallelism().map_or(1, usize::from),
        load.split_whitespace()
            .take(3)
            .collect::<Vec<_>>()
            .join(" "),
        options.ferry_flags,
    );
    println!("{}", table.render());
    Ok(())
}

/// `--against kube-proxy`: each comparison's table printed as soon as it is done.
fn against(cli: &Cli, ferry: PathBuf) -> anyhow::Result<()> {
    let o = e2e::against::Against {
        ferry,
        sizes: e2e::against::parse_sizes(&cli.sizes)?,
        endpoints: cli.endpoints,
        modes: e2e::against::parse_modes(&cli.modes)?,
        min_sync: e2e::against::parse_min_sync(&cli.min_sync)?,
        kube_proxy_first: cli.first == "kube-proxy",
        changes: cli.changes.unwrap_or(30),
        churn_rate: cli.churn_rate,
        churn_secs: cli.churn_secs.unwrap_or(20),
        connects: cli.connects,
        timeout: Duration::from_secs(cli.timeout_secs),
        logs: cli.logs.clone(),
    };
    let machine = || {
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
        let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
        format!(
            "kernel {}, {} cores, load average {}",
            kernel.trim(),
            std::thread::available_parallelism().map_or(1, usize::from),
            load.split_whitespace()
                .take(3)
                .collect::<Vec<_>>()
                .join(" ")
        )
    };
    println!("ferry-bench-e2e --against kube-proxy: {}\n", machine());
    e2e::against::run(&o, &|line| eprintln!("{line}"), &mut |c| {
        println!("{}\n(at its end: {})\n", c.render(&o), machine());
    })?;
    Ok(())
}
