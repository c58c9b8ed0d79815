//! The `ferry` binary: parse flags, set up logging, exit 64 on bad configuration, run.
//!
//! Layout: [`cli`] (flags), [`config`] (KubeProxyConfiguration), [`sync`] (the cluster state
//! and one family sync per IP family: compile + apply), [`round`] (one sync round and what
//! follows it), [`run`] (the agent: sources, the bounded-frequency loop, signals), [`rules`]
//! (`ferry rules`), [`explain`] (`ferry explain`), [`health`] (`/healthz`, `/livez`),
//! [`healthcheck`] (service health-check NodePorts), [`metrics`] (`/metrics`), [`serve`] (their
//! HTTP servers), [`check`] (`ferry check`).
//!
//! Nothing here matches on the proxy mode: the mode table (`ferry_dataplane::modes`) gives the
//! renderer (`rules`, `explain`), the appliers (`run`), the cleanup and the failure metric.

use std::io::IsTerminal as _;
use std::process::ExitCode;

use clap::Parser;
use ferry_source::kube::{ConnectError, Connection};

mod check;
mod cli;
mod config;
mod explain;
mod health;
mod healthcheck;
mod lab_cmd;
mod metrics;
mod round;
mod rules;
mod run;
mod serve;
mod sync;

use cli::{resolve, Cli, Command, LogFormat, RunArgs, EXIT_USAGE};

fn init_logging(args: &RunArgs) {
    let level = match args.verbosity {
        0..=3 => "info",
        4 | 5 => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    match args.log_format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().init(),
    }
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if e.use_stderr() => {
            let _ = e.print();
            return ExitCode::from(EXIT_USAGE);
        }
        Err(e) => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
    };
    match cli.command {
        Command::Rules(args) if args.manifests.is_none() => {
            eprintln!("ferry: --manifests: required by `ferry rules`");
            ExitCode::from(EXIT_USAGE)
        }
        Command::Run(args) => {
            init_logging(&args);
            let Some((config, manifests)) = resolve(&args, |w| tracing::warn!("{w}")) else {
                return ExitCode::from(EXIT_USAGE);
            };
            let source = match manifests {
                Some(path) => run::Source::Manifests(path),
                None => run::Source::Kube(Connection {
                    kubeconfig: config.kubeconfig.clone(),
                    master: config.master.clone(),
                }),
            };
            match run::run(config, source) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) if e.downcast_ref::<ConnectError>().is_some() => {
                    eprintln!("ferry: {e:#}");
                    ExitCode::from(EXIT_USAGE)
                }
                Err(e) => {
                    tracing::error!("{e:#}");
                    ExitCode::FAILURE
                }
            }
        }
        Command::Rules(args) => {
            let Some((config, Some(manifests))) = resolve(&args, |w| eprintln!("warning: {w}"))
            else {
                return ExitCode::from(EXIT_USAGE);
            };
            print!("{}", rules::render(&config, &rules::load(&manifests)));
            ExitCode::SUCCESS
        }
        Command::Check(args) => {
            let report = check::check(&args);
            for line in &report.lines {
                println!("{line}");
            }
            if report.errors == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Command::Explain(args) => explain::run(args),
        Command::Lab(cmd) => lab_cmd::run(cmd),
        Command::Cleanup => {
            // Every mode: whatever this node ran last, nothing of Ferry's is left.
            let mut code = ExitCode::SUCCESS;
            for mode in &ferry_dataplane::modes::MODES {
                if let Err(e) = (mode.cleanup)() {
                    eprintln!("ferry cleanup: {} mode: {e}", mode.mode);
                    code = ExitCode::FAILURE;
                }
            }
            code
        }
        Command::LabPod { name, listen } => {
            match ferry_lab::serve_echo_tcp_and_udp(&name, listen) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("ferry lab-pod: {e}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}
