//! The command line, with kube-proxy's flag names: every flag of kube-proxy is accepted (those
//! Ferry does not act on are named in one warning), as kube-proxy's flag library reads them
//! (`--flag value`, `--flag=value`, `--bool=false`, `--flag_name`; see [`argv`]).

use clap::{Args, Parser, Subcommand, ValueEnum};

pub mod argv;
pub mod exit;
pub mod kube_proxy;
mod resolve;
mod run_args;

pub use exit::EXIT_USAGE;
pub use run_args::{resolve, resolve_with_warnings, RunArgs};

/// Ferry: a Kubernetes service proxy that can explain itself.
#[derive(Debug, Parser)]
#[command(name = "ferry", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the proxy: watch Services, EndpointSlices and Nodes, program the kernel.
    Run(RunArgs),
    /// Print the ruleset `ferry run` would apply on a node, without root and without touching
    /// the kernel.
    Rules(RunArgs),
    /// Validate the configuration (flags, `--config`) and `--manifests` without running:
    /// prints every problem; exit 0 when valid, 1 otherwise.
    Check(crate::check::CheckArgs),
    /// Explain where the first packet of a new connection goes on a node, and why.
    Explain(ExplainArgs),
    /// Remove everything Ferry created in the kernel (this network namespace), in every mode,
    /// and say what was removed; kube-proxy's rules are named and left unless
    /// `--also-kube-proxy` is given.
    Cleanup(crate::cleanup::CleanupArgs),
    /// Show what a running agent programs: every frontend and its backends, the policies, the
    /// last syncs, and whether the kernel holds it (from the agent's metrics server).
    Status(crate::status::client::StatusArgs),
    /// Print Ferry's version (and the Kubernetes version whose kube-proxy it replaces).
    Version,
    /// A small cluster in network namespaces on this machine (root).
    #[cfg(feature = "lab")]
    #[command(subcommand)]
    Lab(crate::lab_cmd::LabCommand),
    /// (lab) Play the kubelet for one node of `ferry lab up --control-plane`: register its Node,
    /// run its Pods' namespaces, servers and readiness probes, write their status.
    #[cfg(feature = "lab")]
    #[command(hide = true)]
    LabKubelet(ferry_kube_lab::kubelet::Options),
    /// (lab) Serve the seed's url-analysis echo app, as a lab pod (TCP and UDP).
    #[cfg(feature = "lab")]
    #[command(hide = true)]
    LabPod {
        /// Pod name shown as `ServerName`.
        #[arg(long)]
        name: String,
        /// Address to listen on.
        #[arg(long)]
        listen: std::net::SocketAddr,
        /// `/hello` answers 503 while the file `<DIR>/<name>` exists (a failing readiness
        /// probe, for the readiness lab).
        #[arg(long, value_name = "DIR")]
        fail_dir: Option<std::path::PathBuf>,
    },
}

impl Command {
    /// The flags of a subcommand that takes `ferry run`'s.
    pub fn run_args_mut(&mut self) -> Option<&mut RunArgs> {
        match self {
            Command::Run(a) | Command::Rules(a) => Some(a),
            Command::Check(c) => Some(&mut c.run),
            Command::Explain(e) => Some(&mut e.run),
            _ => None,
        }
    }
}

/// `ferry explain` flags.
#[derive(Debug, Clone, Args)]
pub struct ExplainArgs {
    /// The packet's source address (a client, a pod, or a node itself).
    #[arg(long, value_name = "SRC_IP")]
    pub from: std::net::IpAddr,
    /// The packet's destination: ADDRESS:PORT[/tcp|udp|sctp] (TCP by default).
    #[arg(long, value_name = "DST:PORT[/PROTO]")]
    pub to: String,
    /// The node whose rules the packet goes through (same as --hostname-override).
    #[arg(long, value_name = "NODE")]
    pub node: Option<String>,
    /// Another address of the node (repeatable): NodePorts may answer there, and packets from
    /// it are the node's own. Its Node object's addresses are always included; with --live the
    /// node's interfaces give its addresses instead.
    #[arg(long = "node-address", value_name = "IP")]
    pub node_addresses: Vec<std::net::IpAddr>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Output::Text)]
    pub output: Output,
    /// Also read the rules in the kernel (this network namespace) and say where they differ
    /// from what Ferry would program.
    #[arg(long)]
    pub live: bool,
    /// Everything `ferry run` takes (manifests, config, cluster CIDR …).
    #[command(flatten)]
    pub run: RunArgs,
}

/// `ferry explain --output`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Output {
    /// For people.
    Text,
    /// For tools.
    Json,
    /// A Mermaid flowchart.
    Mermaid,
}

/// Log output format.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

#[cfg(test)]
mod tests;
