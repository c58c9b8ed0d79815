//! `ferry-lab-kubelet`: the control-plane lab's kubelet stand-in for one node
//! (`ferry_kube_lab::kubelet`), started by the lab in the node's network namespace. The `ferry`
//! binary runs the same as `ferry lab-kubelet`.

use std::process::ExitCode;

use clap::Parser;

/// Plays kubelet's part for one lab node: registers the Node, runs its Pods' network
/// namespaces, servers and readiness probes, and writes their status.
#[derive(Debug, Parser)]
struct Cli {
    #[command(flatten)]
    options: ferry_kube_lab::kubelet::Options,
}

fn main() -> ExitCode {
    ferry_kube_lab::kubelet::main(Cli::parse().options)
}
