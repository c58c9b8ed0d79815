//! The `ferry` binary: parse flags, set up logging, exit 64 on bad configuration, run.
//!
//! Layout: [`cli`] (flags, kube-proxy's included), [`config`] (KubeProxyConfiguration), [`sync`]
//! (the cluster state and one family sync per IP family: compile + apply), [`round`] (one sync
//! round and what follows it), [`run`] (the agent: sources, the bounded-frequency loop,
//! signals), [`rules`] (`ferry rules`), [`explain`] (`ferry explain`), [`health`] (`/healthz`,
//! `/livez`), [`healthcheck`] (service health-check NodePorts), [`metrics`] (`/metrics`,
//! `/configz`), [`serve`] (their HTTP servers), [`check`] (`ferry check`), [`startup`]
//! (kube-proxy's start-up steps: the mode's checks, kube-proxy's leftovers), [`status`]
//! (`/status` and `ferry status`), [`cleanup`] (`ferry cleanup`).
//!
//! Nothing here matches on the proxy mode: the mode table (`ferry_dataplane::modes`) gives the
//! renderer (`rules`, `explain`), the appliers (`run`), the cleanup and the failure metric.

use std::io::IsTerminal as _;
use std::process::ExitCode;

use clap::Parser;
use ferry_source::kube::{ConnectError, Connection};
use tracing_subscriber::fmt::writer::{BoxMakeWriter, MakeWriter, MakeWriterExt as _};

mod api_read;
mod backoff;
mod check;
mod cleanup;
mod cli;
mod config;
mod configz;
mod explain;
mod health;
mod healthcheck;
#[cfg(feature = "lab")]
mod lab_cmd;
mod metrics;
#[cfg(test)]
mod reference;
mod round;
mod rules;
mod run;
mod serve;
mod startup;
mod status;
mod suggest;
mod sync;
mod version;

#[cfg(test)]
mod log_tests;

use cli::{resolve_with_warnings, Cli, Command, RunArgs, EXIT_USAGE};

fn init_logging(config: &config::Config) {
    let level = match config.verbosity {
        0..=3 => "info",
        4 | 5 => "debug",
        _ => "trace",
    };
    // kube-rs's HTTP layer logs every failed request as an ERROR of its own; Ferry's warning
    // about the same failure (connecting, a watch retrying) names what failed and what happens
    // next, so the default filter leaves kube-rs's line out (`RUST_LOG` brings it back).
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| {
        tracing_subscriber::EnvFilter::new(format!("{level},kube_client::client::builder=off"))
    });
    let split = config.log_split_stream();
    let ansi = std::io::stderr().is_terminal() && (!split || std::io::stdout().is_terminal());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(log_writer(split, std::io::stdout, std::io::stderr))
        .with_ansi(ansi);
    if config.log_json {
        builder.json().init();
    } else {
        builder.init();
    }
}

/// Where log lines go: every line to `errors` (stderr), or with split streams (kube-proxy's
/// `splitStream`) errors there and the rest to `info` (stdout).
fn log_writer<I, E>(split: bool, info: I, errors: E) -> BoxMakeWriter
where
    I: for<'w> MakeWriter<'w> + Send + Sync + 'static,
    E: for<'w> MakeWriter<'w> + Send + Sync + 'static,
{
    if split {
        BoxMakeWriter::new(
            errors
                .with_max_level(tracing::Level::ERROR)
                .or_else(info.with_min_level(tracing::Level::WARN)),
        )
    } else {
        BoxMakeWriter::new(errors)
    }
}

fn main() -> ExitCode {
    let normalized = cli::argv::normalize(std::env::args_os());
    let mut cli = match Cli::try_parse_from(&normalized.args) {
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
    if let Some(args) = cli.command.run_args_mut() {
        args.ignored_flags = normalized.ignored;
    }
    match cli.command {
        Command::Run(args) => run_command(&args),
        Command::Rules(args) => rules::main(&args),
        Command::Check(args) => check::main(&args),
        Command::Explain(args) => explain::run(args),
        #[cfg(feature = "lab")]
        Command::Lab(cmd) => lab_cmd::run(cmd),
        #[cfg(feature = "lab")]
        Command::LabKubelet(options) => ferry_kube_lab::kubelet::main(options),
        Command::Cleanup(args) => cleanup::main(&args),
        Command::Status(args) => status::client::main(&args),
        Command::Version => {
            println!("{}", version::line());
            ExitCode::SUCCESS
        }
        #[cfg(feature = "lab")]
        Command::LabPod {
            name,
            listen,
            fail_dir,
        } => match ferry_lab::serve_echo_tcp_and_udp_failing(&name, listen, fail_dir.as_deref()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("ferry lab-pod: {e}");
                ExitCode::FAILURE
            }
        },
    }
}

/// `ferry run` (or kube-proxy's command line): the actions kube-proxy's flags ask for
/// (`--cleanup`, `--write-config-to`, `--init-only`), else the proxy.
fn run_command(args: &RunArgs) -> ExitCode {
    if args.kube_proxy.cleanup == Some(true) {
        // kube-proxy's own flag: its rules are what the caller asks to remove.
        return cleanup::main(&cleanup::CleanupArgs {
            dry_run: false,
            also_kube_proxy: true,
        });
    }
    let Some((config, warnings, manifests)) = resolve_with_warnings(args) else {
        return ExitCode::from(EXIT_USAGE);
    };
    if let Some(path) = args.kube_proxy.write_config_to() {
        return match configz::write_config_to(&config, &path) {
            Ok(()) => {
                eprintln!("ferry: wrote the configuration to {}", path.display());
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("ferry: --write-config-to: {}: {e}", path.display());
                ExitCode::FAILURE
            }
        };
    }
    init_logging(&config);
    warnings.iter().for_each(|w| tracing::warn!("{w}"));
    if args.kube_proxy.init_only == Some(true) {
        tracing::info!("--init-only: nothing to initialise, exiting");
        return ExitCode::SUCCESS;
    }
    startup::apply_oom_score_adj(config.kube_proxy.oom_score_adj);
    configz::publish(&config);
    // Where a kubeconfig path came from, for an error about it: the flag, or the file's
    // clientConnection.kubeconfig (a path the user may never have typed).
    let kubeconfig_from = match (&args.kubeconfig, &args.config) {
        (None, Some(file)) => Some(format!(
            "clientConnection.kubeconfig of --config {}",
            file.display()
        )),
        _ => None,
    };
    let source = match manifests {
        Some(path) => run::Source::Manifests(path),
        None => run::Source::Kube(Connection {
            kubeconfig: config.kubeconfig.clone(),
            master: config.master.clone(),
            rate: config.api_rate(),
        }),
    };
    match run::run(config, source) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) if e.downcast_ref::<ConnectError>().is_some() => {
            match (e.downcast_ref::<ConnectError>(), kubeconfig_from) {
                (Some(ConnectError::Kubeconfig { path, reason }), Some(from)) => eprintln!(
                    "ferry: {from}: {}: {reason} (this path is the configuration file's, not a \
                     flag: mount the kubeconfig there, or clear the field to use the pod's \
                     service account)",
                    path.display()
                ),
                _ => eprintln!("ferry: {e:#}"),
            }
            ExitCode::from(EXIT_USAGE)
        }
        Err(e) => {
            tracing::error!("{e:#}");
            ExitCode::FAILURE
        }
    }
}
