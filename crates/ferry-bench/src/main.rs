//! `ferry-bench`: how long Ferry takes to compile and program clusters of N services × M
//! endpoints, and how much memory it needs.
//!
//! Needs root (it creates network namespaces). For each N the binary creates a namespace
//! `ferry-bench-<pid>-<run>`, re-executes itself inside it (`ip netns exec <ns> <this binary>
//! __measure …`, so the figures of one N never include another N's memory), reads the figures
//! the child prints, checks that Ferry's table landed in that namespace and that the starting
//! namespace's nftables did not change, and deletes the namespace (also on failure).
//!
//! ```text
//! cargo run -p ferry-bench --release --                       # N = 1000 and 10000, M = 10
//! cargo run -p ferry-bench --release -- -n 500,2000 -m 4
//! cargo run -p ferry-bench --release -- --quick               # N = 100, smoke test
//! ```

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use clap::{Parser, Subcommand};

use ferry_bench::cluster::{ClusterSpec, BENCH_NODE, NODES};
use ferry_bench::measure::{self, MeasureOptions};
use ferry_bench::netns::{self, Netns, NftSnapshot};
use ferry_bench::report::{self, Figures, Outcome};
use ferry_bench::stats::Figure;
use ferry_bench::{ipvs_baseline, sizes};
use ferry_compile::mode::ProxyMode;
use ferry_dataplane::iptables::IptablesBackend;
use ferry_dataplane::mode::ModeOptions;

/// Measures Ferry's compile time, full sync, incremental sync, resync and memory for
/// generated clusters, each N in a fresh network namespace and a fresh process. Needs root.
#[derive(Debug, Parser)]
#[command(name = "ferry-bench", version)]
struct Cli {
    /// Service counts (N) to measure, comma-separated.
    #[arg(short = 'n', long = "services", value_delimiter = ',', default_values_t = [1000usize, 10000])]
    services: Vec<usize>,
    /// Endpoints per service (M).
    #[arg(short = 'm', long = "endpoints", default_value_t = 10)]
    endpoints: usize,
    /// Proxy modes to measure, comma-separated: nftables, iptables-nft, iptables-legacy, ipvs
    /// (IPVS needs a kernel with IP_VS: run it in the IPVS guest, see the README).
    #[arg(long, value_delimiter = ',', default_values_t = ["nftables".to_owned(), "iptables-nft".to_owned(), "iptables-legacy".to_owned()])]
    modes: Vec<String>,
    /// Smoke test: measure N=100 only.
    #[arg(long, conflicts_with = "services")]
    quick: bool,
    /// Incremental syncs (one endpoint of one service changes) to time per N.
    #[arg(long, default_value_t = 20)]
    changes: usize,
    /// Compile runs per N (the median is reported).
    #[arg(long, default_value_t = 3)]
    compile_runs: usize,
    /// Write each N's start-up full-sync script and first delta to DIR/n<N>/{full,delta}.nft,
    /// to replay or profile them by hand.
    #[arg(long, value_name = "DIR")]
    dump_scripts: Option<PathBuf>,
    /// Stop the measurement of one N after this many seconds (and report what it measured).
    #[arg(long, default_value_t = 480)]
    timeout_secs: u64,
    #[command(subcommand)]
    command: Option<Internal>,
}

#[derive(Debug, Subcommand)]
enum Internal {
    /// Measures one N in the current process; only run by `ferry-bench` itself, inside the
    /// namespace it created.
    #[command(name = "__measure", hide = true)]
    Measure {
        /// N.
        #[arg(long)]
        services: usize,
        /// M.
        #[arg(long)]
        endpoints: usize,
        /// Incremental changes.
        #[arg(long)]
        changes: usize,
        /// Compile runs.
        #[arg(long)]
        compile_runs: usize,
        /// The namespace this process must be in.
        #[arg(long)]
        netns: String,
        /// Inode of the namespace the benchmark was started in (must not be this one).
        #[arg(long)]
        outside_netns: u64,
        /// See `--dump-scripts`.
        #[arg(long)]
        dump_dir: Option<PathBuf>,
        /// The proxy mode.
        #[arg(long)]
        mode: String,
    },
}

fn main() -> ExitCode {
    match dispatch(&Cli::parse()) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("ferry-bench: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the benchmark, or (internal) one measurement. Ok(false): some N failed.
fn dispatch(cli: &Cli) -> anyhow::Result<bool> {
    match &cli.command {
        None => parent(cli),
        Some(Internal::Measure {
            services,
            endpoints,
            changes,
            compile_runs,
            netns,
            outside_netns,
            dump_dir,
            mode: name,
        }) => {
            let (mode, mode_options) = self::mode(name)?;
            let opts = MeasureOptions {
                spec: ClusterSpec::new(*services, *endpoints)?,
                mode,
                mode_options,
                changes: *changes,
                compile_runs: *compile_runs,
                dump_dir: dump_dir.clone(),
            };
            child(&opts, netns, *outside_netns, name)?;
            Ok(true)
        }
    }
}

/// The proxy mode and its options of a `--modes` entry (iptables modes name their backend).
fn mode(name: &str) -> anyhow::Result<(ProxyMode, ModeOptions)> {
    let iptables = |backend| {
        let options = ModeOptions {
            iptables_backend: Some(backend),
            ..ModeOptions::default()
        };
        Ok((ProxyMode::Iptables, options))
    };
    match name {
        "nftables" => Ok((ProxyMode::Nftables, ModeOptions::default())),
        "iptables-nft" => iptables(IptablesBackend::Nft),
        "iptables-legacy" => iptables(IptablesBackend::Legacy),
        // IPVS mode's chains, on the nft backend.
        "ipvs" => Ok((
            ProxyMode::Ipvs,
            ModeOptions {
                iptables_backend: Some(IptablesBackend::Nft),
                ..ModeOptions::default()
            },
        )),
        other => anyhow::bail!(
            "unknown mode {other:?} (want nftables, iptables-nft, iptables-legacy, ipvs)"
        ),
    }
}

/// The measuring process: inside its namespace, one N, one mode.
fn child(opts: &MeasureOptions, ns: &str, outside: u64, name: &str) -> anyhow::Result<()> {
    netns::ensure_inside(ns, outside)?;
    netns::node_network()?;
    let services = opts.spec.services;
    let print = |figures: &[Figure]| println!("{}", report::result_line(figures));
    let mut progress = |msg: &str| eprintln!("  [{name} N={services}] {msg}");
    let state = measure::run(opts, print, &mut progress)?;
    // Static figures of what the mode renders (the staged compile holds the whole node's view,
    // plan and rules at once, so it runs after the memory figures), on the final state.
    print(&sizes::figures(opts, &state, &mut progress)?);
    if opts.mode == ProxyMode::Ipvs {
        print(&ipvs_baseline::figures(opts, &state, &mut progress)?);
    }
    Ok(())
}

fn nft_here(args: &[&str]) -> Command {
    let mut cmd = Command::new("nft");
    cmd.args(args);
    cmd
}

/// Returns Ok(false) when some N failed (the report is printed anyway).
fn parent(cli: &Cli) -> anyhow::Result<bool> {
    let counts = if cli.quick {
        vec![100]
    } else {
        cli.services.clone()
    };
    let exe = std::env::current_exe().context("finding this binary")?;
    let outside = netns::current_inode()?;
    for name in netns::reap_stale()? {
        eprintln!("deleted stale namespace {name} (its benchmark process is gone)");
    }
    let before = netns::nft_snapshot(nft_here).context("reading nftables (are you root?)")?;

    for name in &cli.modes {
        mode(name)?;
    }
    let mut outcomes = Vec::new();
    let mut run = 0;
    for &n in &counts {
        for mode in &cli.modes {
            eprintln!("== {mode} N={n} M={}", cli.endpoints);
            outcomes.push(measure_one(cli, &exe, outside, &before, run, n, mode));
            run += 1;
        }
    }

    let nft_version = netns::run(&mut nft_here(&["--version"])).unwrap_or_default();
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let header = format!(
        "ferry-bench: rules of node {BENCH_NODE} (1 of {NODES}), IPv4, {}, kernel {}\n\
         cluster: N services (1 TCP port each; every 5th NodePort, half of those \
         externalTrafficPolicy=Local), M endpoints each round-robin over {NODES} nodes\n\
         incremental: {} one-endpoint changes; compile: median of {} runs",
        nft_version.trim(),
        kernel.trim(),
        cli.changes,
        cli.compile_runs,
    );
    println!("{}", report::render(&outcomes, &header));
    Ok(outcomes.iter().all(|o| o.failure.is_none()))
}

/// Measures one N in a fresh namespace and process; never loses what was measured.
fn measure_one(
    cli: &Cli,
    exe: &Path,
    outside: u64,
    before: &NftSnapshot,
    run: usize,
    n: usize,
    mode: &str,
) -> Outcome {
    let mut outcome = Outcome {
        n,
        m: cli.endpoints,
        mode: mode.to_owned(),
        figures: Figures::new(),
        failure: None,
        verification: None,
    };
    if let Err(e) = measure_in_namespace(cli, exe, outside, before, run, &mut outcome) {
        outcome.failure = Some(format!("{e:#}"));
    }
    outcome
}

fn measure_in_namespace(
    cli: &Cli,
    exe: &Path,
    outside: u64,
    before: &NftSnapshot,
    run: usize,
    outcome: &mut Outcome,
) -> anyhow::Result<()> {
    let n = outcome.n;
    ClusterSpec::new(n, cli.endpoints)?;
    let ns = Netns::create(&format!("{}{}-{run}", netns::PREFIX, std::process::id()))?;
    eprintln!("   measuring in network namespace {}", ns.name());
    let args = [
        "__measure".to_owned(),
        format!("--services={n}"),
        format!("--endpoints={}", cli.endpoints),
        format!("--changes={}", cli.changes),
        format!("--compile-runs={}", cli.compile_runs),
        format!("--netns={}", ns.name()),
        format!("--outside-netns={outside}"),
        format!("--mode={}", outcome.mode),
    ];
    let mut args = args.to_vec();
    if let Some(dir) = &cli.dump_scripts {
        let dir = std::path::absolute(dir.join(format!("n{n}"))).context("--dump-scripts")?;
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        args.push(format!("--dump-dir={}", dir.display()));
    }
    let mut child = ns
        .command(exe, &args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .context("starting the measuring process")?;
    let stdout = child.stdout.take().context("no stdout pipe")?;
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            if tx.send(line).is_err() {
                break;
            }
        }
    });

    let deadline = Instant::now() + Duration::from_secs(cli.timeout_secs);
    let mut timed_out = false;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(Ok(line)) => {
                if !report::parse_result_line(&line, &mut outcome.figures) {
                    eprintln!("   (child) {line}");
                }
            }
            Ok(Err(e)) => {
                eprintln!("   reading the measuring process's output: {e}");
                break;
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {
                timed_out = true;
                eprintln!(
                    "   N={n}: still running after {} s, stopping it",
                    cli.timeout_secs
                );
                // Our own child, by pid (`ip netns exec` execs the benchmark itself).
                child.kill().context("stopping the measuring process")?;
                break;
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    let status = child.wait().context("waiting for the measuring process")?;

    // Where did the rules land? Checked whatever happened to the run.
    let inside = netns::nft_snapshot(|a| ns.command("nft", a))?;
    let after = netns::nft_snapshot(nft_here)?;
    let root_ok = after == *before;
    let root_state = match (root_ok, before.has_ferry) {
        (true, false) => "starting namespace's nftables unchanged (no ip ferry table there)",
        (true, true) => "starting namespace's ip ferry table unchanged (it existed before)",
        (false, _) => "STARTING NAMESPACE'S NFTABLES CHANGED",
    };
    // The chains Ferry holds in the namespace: its table (nftables), or its nat chains.
    let held = match mode(&outcome.mode)?.1.iptables_backend {
        None => inside.has_ferry.then_some(inside.chains.len()),
        Some(b) => {
            let save = netns::run(&mut ns.command(b.program("-save"), ["-t", "nat"]))?;
            let chains = save
                .lines()
                .filter_map(|l| l.strip_prefix(':'))
                .filter(|l| l.starts_with("KUBE-") && !l.starts_with("KUBE-PROXY-CANARY "))
                .count();
            (chains > 0).then_some(chains)
        }
    };
    outcome.verification = Some(format!(
        "netns {} held Ferry's rules: {} ({} chains); {root_state}",
        ns.name(),
        if held.is_some() { "yes" } else { "no" },
        held.unwrap_or(0),
    ));
    anyhow::ensure!(
        root_ok,
        "the starting namespace's nftables changed during the run"
    );
    if timed_out {
        anyhow::bail!(
            "stopped after {} s; figures above are partial",
            cli.timeout_secs
        );
    }
    anyhow::ensure!(
        status.success(),
        "the measuring process exited with {status}"
    );
    let Some(held) = held else {
        anyhow::bail!("no Ferry rules in {}", ns.name());
    };
    // What the dataplane believes it installed last (after the changes and the resync).
    let expected = outcome
        .figures
        .get("final_chains")
        .and_then(|c| c.parse::<usize>().ok());
    anyhow::ensure!(
        expected == Some(held),
        "{} has {held} chains, the installed ruleset {expected:?}",
        ns.name(),
    );
    Ok(())
}
