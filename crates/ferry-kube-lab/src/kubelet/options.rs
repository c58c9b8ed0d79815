//! The stand-in's command line and its `main`, shared by `ferry-lab-kubelet` and `ferry
//! lab-kubelet`.

use std::net::Ipv4Addr;
use std::path::PathBuf;

use ipnet::Ipv4Net;

/// What the stand-in is told about its node (its command line: `ferry-lab-kubelet`, `ferry
/// lab-kubelet`).
#[derive(Debug, Clone, clap::Args)]
pub struct Options {
    /// A kubeconfig reaching the API server from the node's namespace.
    #[arg(long)]
    pub kubeconfig: PathBuf,
    /// The node's name.
    #[arg(long)]
    pub node: String,
    /// The node's address on the LAN.
    #[arg(long)]
    pub node_ip: Ipv4Addr,
    /// The node's pod CIDR.
    #[arg(long)]
    pub pod_cidr: Ipv4Net,
    /// The node's network namespace (Pods are wired to it).
    #[arg(long)]
    pub node_netns: String,
    /// Prefix of the Pods' namespace names (`<lab prefix>-k<n>`: removed with the lab).
    #[arg(long)]
    pub pod_netns_prefix: String,
    /// The node's `topology.kubernetes.io/zone`, if any.
    #[arg(long)]
    pub zone: Option<String>,
    /// The Pods' server: program and arguments, to which `--name <pod> --listen <ip:port>` is
    /// added.
    #[arg(last = true, required = true)]
    pub echo: Vec<String>,
}

/// Runs the stand-in until it fails or is killed, logging to standard error: the `main` of
/// both entry points.
pub fn main(opts: Options) -> std::process::ExitCode {
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .try_init();
    let result = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(anyhow::Error::from)
        .and_then(|runtime| runtime.block_on(super::run(opts)));
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ferry lab kubelet stand-in: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
