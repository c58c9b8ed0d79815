//! `ferry-drills`: Ferry's reliability drills (issue 16), one by one or all, each printing one
//! row of figures. Needs root (network namespaces).
//!
//! ```text
//! cargo build -p ferry -p ferry-drills
//! target/debug/ferry-drills --quick                 # every drill, small N (CI)
//! cargo build --release -p ferry -p ferry-drills
//! target/release/ferry-drills kill --modes nftables # 100 kills at 10 000 × 10
//! ```

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context as _;
use clap::Parser;

use ferry_drills::drill::{self, Mode, Options};
use ferry_drills::report::{self, Row};

/// Ferry's reliability drills: each runs `ferry run` in throw-away network namespaces, does
/// something a node's life does to it, and prints one row. Needs root.
#[derive(Debug, Parser)]
#[command(name = "ferry-drills", version)]
struct Cli {
    /// Drills to run (default: all): kill, restart, outage, writers, bad-input, fuzz, limits,
    /// soak.
    drills: Vec<String>,
    /// CI's short mode: small N, few repetitions.
    #[arg(long)]
    quick: bool,
    /// The ferry binary (default: `ferry` next to this binary).
    #[arg(long, value_name = "PATH")]
    ferry: Option<PathBuf>,
    /// A different build of ferry for the upgrade drill (default: the same binary).
    #[arg(long, value_name = "PATH")]
    other_ferry: Option<PathBuf>,
    /// Modes, comma-separated (default: nftables,iptables-nft,iptables-legacy; also userspace).
    #[arg(long, value_delimiter = ',')]
    modes: Vec<String>,
    /// Services (N), instead of the drill's default.
    #[arg(short = 'n', long)]
    services: Option<usize>,
    /// Repetitions, instead of the drill's default.
    #[arg(long)]
    repetitions: Option<usize>,
    /// Seconds (outage, soak, fuzzing), instead of the drill's default.
    #[arg(long)]
    seconds: Option<u64>,
    /// Keep Ferry's logs in DIR (default: a temporary directory).
    #[arg(long, value_name = "DIR")]
    logs: Option<PathBuf>,
    /// Random seed (default: from the clock; printed).
    #[arg(long)]
    seed: Option<u64>,
}

fn main() -> ExitCode {
    match run(&Cli::parse()) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("ferry-drills: error: {e:#}");
            ExitCode::from(2)
        }
    }
}

/// Every drill's name, in the order they run.
const DRILLS: [&str; 8] = [
    "kill",
    "restart",
    "outage",
    "writers",
    "bad-input",
    "fuzz",
    "limits",
    "soak",
];

fn run(cli: &Cli) -> anyhow::Result<bool> {
    // Ctrl-C or SIGTERM: stop `ferry run` and the rest, delete this run's namespaces and
    // work directories, exit 130/143 (destructors do not run on a signal).
    ferry_lab::interrupt::clean_up_on_signal().context("installing the signal handler")?;
    let this = std::env::current_exe().context("finding this binary")?;
    let ferry = cli
        .ferry
        .clone()
        .unwrap_or_else(|| this.with_file_name("ferry"));
    anyhow::ensure!(
        ferry.exists(),
        "{} not found (build ferry, or pass --ferry)",
        ferry.display()
    );
    let logs_tmp = tempfile::Builder::new()
        .prefix("ferry-drills-logs-")
        .tempdir()?;
    ferry_lab::interrupt::remove_on_signal(logs_tmp.path());
    let logs = cli
        .logs
        .clone()
        .unwrap_or_else(|| logs_tmp.path().to_path_buf());
    std::fs::create_dir_all(&logs)?;
    let modes = if cli.modes.is_empty() {
        Mode::ALL.to_vec()
    } else {
        cli.modes
            .iter()
            .map(|m| Mode::parse(m))
            .collect::<anyhow::Result<_>>()?
    };
    let seed = cli.seed.unwrap_or_else(|| fastrand::u64(..));
    let o = Options {
        ferry: std::path::absolute(&ferry)?,
        other_ferry: cli
            .other_ferry
            .as_ref()
            .map(std::path::absolute)
            .transpose()?,
        quick: cli.quick,
        services: cli.services,
        repetitions: cli.repetitions,
        seconds: cli.seconds,
        modes,
        logs,
        seed,
    };
    let drills: Vec<&str> = if cli.drills.is_empty() {
        DRILLS.to_vec()
    } else {
        cli.drills.iter().map(String::as_str).collect()
    };
    eprintln!("ferry-drills: seed {seed}, logs in {}", o.logs.display());
    println!("{}", report::header());
    let mut ok = true;
    for name in drills {
        for row in run_one(&o, name)? {
            ok &= row.failures == 0;
            println!("{}", report::render(&row));
        }
    }
    Ok(ok)
}

/// Runs one drill in every mode it covers; a drill that cannot run is a row saying why.
fn run_one(o: &Options, name: &str) -> anyhow::Result<Vec<Row>> {
    let per_mode = |f: fn(&Options, Mode) -> anyhow::Result<Row>, drill: &str| {
        o.modes
            .iter()
            .map(|&m| f(o, m).unwrap_or_else(|e| failed(drill, m.name(), &e)))
            .collect()
    };
    Ok(match name {
        "kill" => per_mode(drill::kill::run, "1. kill -9 mid-sync"),
        "restart" => per_mode(drill::restart::run, "2. restart and upgrade under traffic"),
        // The outage is the source's business: the short mode drills it in one mode.
        "outage" if o.quick => o.modes[..1]
            .iter()
            .map(|&m| {
                drill::outage::run(o, m)
                    .unwrap_or_else(|e| failed("3. API outage and relist", m.name(), &e))
            })
            .collect(),
        "outage" => per_mode(drill::outage::run, "3. API outage and relist"),
        "bad-input" => o
            .table_modes()
            .into_iter()
            .flat_map(|m| {
                [
                    drill::bad_input::From::Manifests,
                    drill::bad_input::From::Api,
                ]
                .map(|from| {
                    drill::bad_input::run(o, from, m).unwrap_or_else(|e| {
                        failed("5. bad input at scale", &format!("{from:?}"), &e)
                    })
                })
            })
            .collect(),
        "writers" => per_mode(drill::writers::run, "4. other rule writers"),
        "fuzz" => drill::fuzz::run(o),
        "limits" => drill::limits::run(o),
        "soak" => per_mode(drill::soak::run, "7. soak"),
        other => anyhow::bail!("unknown drill {other:?} (drills: {})", DRILLS.join(", ")),
    })
}

/// The row of a drill that could not run.
fn failed(drill: &str, mode: &str, e: &anyhow::Error) -> Row {
    let mut row = Row::new(drill, mode);
    row.rep(Some(format!("the drill failed: {e:#}")));
    row
}
