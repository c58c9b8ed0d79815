//! `ferry-lab-kubelet`: the control-plane lab's kubelet stand-in for one node
//! (`ferry_kube_lab::kubelet`). Started by the lab in the node's network namespace.

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use ipnet::Ipv4Net;

/// Plays kubelet's part for one lab node: registers the Node, runs its Pods' network
/// namespaces, servers and readiness probes, and writes their status.
#[derive(Debug, Parser)]
struct Args {
    /// A kubeconfig reaching the API server from the node.
    #[arg(long)]
    kubeconfig: PathBuf,
    /// The node's name.
    #[arg(long)]
    node: String,
    /// The node's address on the lab's LAN.
    #[arg(long)]
    node_ip: Ipv4Addr,
    /// The node's pod CIDR.
    #[arg(long)]
    pod_cidr: Ipv4Net,
    /// The node's network namespace.
    #[arg(long)]
    node_netns: String,
    /// Prefix of the Pods' network namespace names.
    #[arg(long)]
    pod_netns_prefix: String,
    /// The node's topology.kubernetes.io/zone label.
    #[arg(long)]
    zone: Option<String>,
    /// The Pods' server and its arguments (`--name` and `--listen` are added).
    #[arg(last = true, required = true)]
    echo: Vec<String>,
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .init();
    let args = Args::parse();
    let opts = ferry_kube_lab::kubelet::Options {
        kubeconfig: args.kubeconfig,
        node: args.node,
        node_ip: args.node_ip,
        pod_cidr: args.pod_cidr,
        node_netns: args.node_netns,
        pod_netns_prefix: args.pod_netns_prefix,
        zone: args.zone,
        echo: args.echo,
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("ferry-lab-kubelet: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(ferry_kube_lab::kubelet::run(opts)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ferry-lab-kubelet: {e:#}");
            ExitCode::FAILURE
        }
    }
}
