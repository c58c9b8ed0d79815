//! The command line, with kube-proxy's flag names: every flag of kube-proxy is accepted (those
//! Ferry does not act on are named in one warning), as kube-proxy's flag library reads them
//! (`--flag value`, `--flag=value`, `--bool=false`, `--flag_name`; see [`argv`]).

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

pub mod argv;
pub mod kube_proxy;
mod resolve;

use argv::parse_go_bool;

use crate::config::Config;

/// EX_USAGE: bad flags or configuration.
pub const EXIT_USAGE: u8 = 64;

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
    #[command(subcommand)]
    Lab(crate::lab_cmd::LabCommand),
    /// (lab) Play the kubelet for one node of `ferry lab up --control-plane`: register its Node,
    /// run its Pods' namespaces, servers and readiness probes, write their status.
    #[command(hide = true)]
    LabKubelet(ferry_kube_lab::kubelet::Options),
    /// (lab) Serve the seed's url-analysis echo app, as a lab pod (TCP and UDP).
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

/// Flags shared by `run`, `rules`, `check` and `explain`: Ferry's, then kube-proxy's (same names,
/// same meaning).
#[derive(Debug, Clone, Default, Args)]
pub struct RunArgs {
    /// Kubernetes manifests (file or directory, watched) to take Services, EndpointSlices,
    /// Endpoints and Nodes from.
    #[arg(long, value_name = "PATH")]
    pub manifests: Option<PathBuf>,
    /// iptables mode: which iptables to program, nft, legacy or auto (the one that already
    /// holds Kubernetes' rules).
    #[arg(long, value_name = "BACKEND")]
    pub iptables_backend: Option<String>,
    /// Periodic full resync interval (Go duration) of the running mode.
    #[arg(long, value_name = "DURATION")]
    pub sync_period: Option<String>,
    /// Minimum interval between syncs (changes are coalesced) of the running mode.
    #[arg(long, value_name = "DURATION")]
    pub min_sync_period: Option<String>,
    /// The bit of the packet mark used for masquerading, in every mode.
    #[arg(long, value_name = "BIT", allow_negative_numbers = true)]
    pub masquerade_bit: Option<i64>,
    /// Log format (kube-proxy: --logging-format).
    #[arg(long, value_enum)]
    pub log_format: Option<LogFormat>,
    /// A KubeProxyConfiguration file, or a ConfigMap manifest holding one in `config.conf`.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// A kubeconfig for the Kubernetes API (default: the in-cluster service account).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The Kubernetes API server's URL (overrides the kubeconfig's server).
    #[arg(long, value_name = "URL")]
    pub master: Option<String>,
    /// This node's name (default: the hostname).
    #[arg(long, value_name = "NAME")]
    pub hostname_override: Option<String>,
    /// Proxy mode: nftables (default), iptables, ipvs or userspace.
    #[arg(long, value_name = "MODE")]
    pub proxy_mode: Option<String>,
    /// Pod CIDRs of the cluster (comma-separated), for the local-traffic detector.
    #[arg(long, value_name = "CIDRS")]
    pub cluster_cidr: Option<String>,
    /// How to detect local (pod) traffic: ClusterCIDR or NodeCIDR.
    #[arg(long, value_name = "MODE")]
    pub detect_local_mode: Option<String>,
    /// Masquerade all traffic to ClusterIPs (`--masquerade-all` or `--masquerade-all=true|false`).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_go_bool)]
    pub masquerade_all: Option<bool>,
    /// Where NodePorts answer: CIDRs and the keywords primary, all, localhost (comma-separated).
    #[arg(long, value_name = "LIST")]
    pub nodeport_addresses: Option<String>,
    /// The proxy health server's IP[:PORT] (`/healthz`, `/livez`); empty or port 0 disables it.
    #[arg(long, value_name = "IP:PORT")]
    pub healthz_bind_address: Option<String>,
    /// The metrics server's IP[:PORT] (`/metrics`, `/configz`); empty or port 0 disables it.
    #[arg(long, value_name = "IP:PORT")]
    pub metrics_bind_address: Option<String>,
    /// Log verbosity, like kube-proxy's -v / --v (0–3 info, 4 debug, 6+ trace).
    #[arg(short = 'v', long = "v", value_name = "N")]
    pub verbosity: Option<u32>,
    /// kube-proxy's other flags.
    #[command(flatten)]
    pub kube_proxy: kube_proxy::KubeProxyFlags,
    /// Flags kube-proxy once had (or has on Windows, or for klog) that were on the command line
    /// ([`argv::normalize`] took them out).
    #[arg(skip)]
    pub ignored_flags: Vec<String>,
}

/// The effective configuration, its warnings and the manifest path, if any; `None` after
/// printing the one message about a bad flag or value (the caller exits 64).
pub fn resolve_with_warnings(args: &RunArgs) -> Option<(Config, Vec<String>, Option<PathBuf>)> {
    if args.manifests.is_some() && (args.master.is_some() || args.kubeconfig.is_some()) {
        eprintln!(
            "ferry: --manifests: cannot be combined with --master or --kubeconfig (one source)"
        );
        return None;
    }
    // A typo on a restart must not program an empty table: a PATH missing at start is fatal
    // (one that disappears later keeps the last good rules: see `run`).
    if let Some(path) = &args.manifests {
        if let Err(e) = std::fs::metadata(path) {
            eprintln!("ferry: --manifests: {}: {e}", path.display());
            return None;
        }
    }
    match args.resolve() {
        Ok((config, warnings)) => Some((config, warnings, args.manifests.clone())),
        Err(e) => {
            eprintln!("ferry: {e}");
            None
        }
    }
}

/// [`resolve_with_warnings`], handing each warning to `warn`.
pub fn resolve(args: &RunArgs, warn: impl Fn(&str)) -> Option<(Config, Option<PathBuf>)> {
    let (config, warnings, manifests) = resolve_with_warnings(args)?;
    warnings.iter().for_each(|w| warn(w));
    Some((config, manifests))
}

#[cfg(test)]
mod tests;
