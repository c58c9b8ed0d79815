//! The command line, with kube-proxy's flag names.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

use crate::config::{
    check_masquerade_bit, hostname, parse_bind_address, parse_cidrs, parse_duration,
    parse_iptables_backend, parse_node_port_addresses, Config, ConfigError, DetectLocalMode,
    FileConfig, IpvsArgs, ProxyMode,
};

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
    Check(RunArgs),
    /// Explain where the first packet of a new connection goes on a node, and why.
    Explain(ExplainArgs),
    /// Remove everything Ferry created in the kernel (this network namespace).
    Cleanup,
    /// A small cluster in network namespaces on this machine (root).
    #[command(subcommand)]
    Lab(crate::lab_cmd::LabCommand),
    /// (lab) Serve the seed's url-analysis echo app, as a lab pod (TCP and UDP).
    #[command(hide = true)]
    LabPod {
        /// Pod name shown as `ServerName`.
        #[arg(long)]
        name: String,
        /// Address to listen on.
        #[arg(long)]
        listen: std::net::SocketAddr,
    },
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

/// Flags shared by `run` and `rules` (kube-proxy's names).
#[derive(Debug, Clone, Args)]
pub struct RunArgs {
    /// Kubernetes manifests (file or directory, watched) to take Services, EndpointSlices,
    /// Endpoints and Nodes from.
    #[arg(long, value_name = "PATH")]
    pub manifests: Option<PathBuf>,
    /// A KubeProxyConfiguration file.
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
    /// Proxy mode: nftables (default), iptables or ipvs.
    #[arg(long, value_name = "MODE")]
    pub proxy_mode: Option<String>,
    /// iptables and IPVS modes: which iptables to program, nft, legacy or auto (the one that already
    /// holds Kubernetes' rules).
    #[arg(long, value_name = "BACKEND")]
    pub iptables_backend: Option<String>,
    /// Pod CIDRs of the cluster (comma-separated), for the local-traffic detector.
    #[arg(long, value_name = "CIDRS")]
    pub cluster_cidr: Option<String>,
    /// How to detect local (pod) traffic: ClusterCIDR or NodeCIDR.
    #[arg(long, value_name = "MODE")]
    pub detect_local_mode: Option<String>,
    /// Masquerade all traffic to ClusterIPs.
    #[arg(long)]
    pub masquerade_all: bool,
    /// Where NodePorts answer: comma-separated CIDRs, or `primary`.
    #[arg(long, value_name = "LIST")]
    pub nodeport_addresses: Option<String>,
    /// The bit of the packet mark used for masquerading.
    #[arg(long, value_name = "BIT")]
    pub masquerade_bit: Option<i64>,
    /// Periodic full resync interval (Go duration).
    #[arg(long, value_name = "DURATION")]
    pub sync_period: Option<String>,
    /// Minimum interval between syncs (changes are coalesced).
    #[arg(long, value_name = "DURATION")]
    pub min_sync_period: Option<String>,
    /// The proxy health server's IP:PORT (`/healthz`, `/livez`); empty or port 0 disables it.
    #[arg(long, value_name = "IP:PORT")]
    pub healthz_bind_address: Option<String>,
    /// The metrics server's IP:PORT (`/metrics`); empty or port 0 disables it.
    #[arg(long, value_name = "IP:PORT")]
    pub metrics_bind_address: Option<String>,
    /// Log verbosity, like kube-proxy's -v (0–2 info, 4 debug, 6+ trace).
    #[arg(short = 'v', long = "v", default_value_t = 2)]
    pub verbosity: u8,
    /// Log format.
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    pub log_format: LogFormat,
    /// IPVS mode's flags.
    #[command(flatten)]
    pub ipvs: IpvsArgs,
}

impl RunArgs {
    /// Builds the effective configuration: defaults, then the file, then flags. Also returns
    /// the file's warnings (unknown or unused fields).
    pub fn resolve(&self) -> Result<(Config, Vec<String>), ConfigError> {
        let mut cfg = Config::default();
        let mut warnings = Vec::new();
        if let Some(path) = &self.config {
            let shown = path.display().to_string();
            let text = std::fs::read_to_string(path)
                .map_err(|e| ConfigError::new("--config", format!("cannot read {shown}: {e}")))?;
            let file = FileConfig::parse(&shown, &text)?;
            warnings = file.warnings.clone();
            apply_file(&mut cfg, file);
        }
        if let Some(path) = &self.kubeconfig {
            cfg.kubeconfig = Some(path.clone());
        }
        if let Some(url) = self.master.as_ref().filter(|m| !m.is_empty()) {
            cfg.master = Some(url.clone());
        }
        if let Some(name) = &self.hostname_override {
            cfg.node_name = name.clone();
        }
        if let Some(mode) = &self.proxy_mode {
            cfg.mode = ProxyMode::parse(mode).map_err(|m| ConfigError::new("--proxy-mode", m))?;
        }
        if let Some(b) = &self.iptables_backend {
            cfg.iptables_backend =
                parse_iptables_backend(b).map_err(|m| ConfigError::new("--iptables-backend", m))?;
        }
        if let Some(cidrs) = &self.cluster_cidr {
            cfg.cluster_cidrs = parse_cidrs("--cluster-cidr", cidrs)?;
        }
        if let Some(mode) = &self.detect_local_mode {
            cfg.detect_local_mode = DetectLocalMode::parse(mode)
                .map_err(|m| ConfigError::new("--detect-local-mode", m))?;
        }
        if self.masquerade_all {
            cfg.masquerade_all = true;
        }
        if let Some(list) = &self.nodeport_addresses {
            cfg.node_port_addresses =
                parse_node_port_addresses("--nodeport-addresses", list.split(','))?;
        }
        if let Some(bit) = self.masquerade_bit {
            cfg.masquerade_bit = check_masquerade_bit("--masquerade-bit", bit)?;
        }
        if let Some(d) = &self.sync_period {
            cfg.sync_period =
                parse_duration(d).map_err(|m| ConfigError::new("--sync-period", m))?;
        }
        if let Some(d) = &self.min_sync_period {
            cfg.min_sync_period =
                parse_duration(d).map_err(|m| ConfigError::new("--min-sync-period", m))?;
        }
        if let Some(a) = &self.healthz_bind_address {
            cfg.healthz_bind_address = parse_bind_address("--healthz-bind-address", a)?;
        }
        if let Some(a) = &self.metrics_bind_address {
            cfg.metrics_bind_address = parse_bind_address("--metrics-bind-address", a)?;
        }
        self.ipvs.apply(&mut cfg.ipvs)?;
        if cfg.node_name.is_empty() {
            cfg.node_name = hostname();
        }
        if cfg.node_name.is_empty() {
            return Err(ConfigError::new(
                "--hostname-override",
                "no node name: the hostname is empty",
            ));
        }
        if cfg.sync_period.is_zero() {
            return Err(ConfigError::new("syncPeriod", "must be greater than 0"));
        }
        if cfg.min_sync_period > cfg.sync_period {
            return Err(ConfigError::new(
                "minSyncPeriod",
                format!(
                    "{:?} is longer than syncPeriod {:?}",
                    cfg.min_sync_period, cfg.sync_period
                ),
            ));
        }
        if cfg.detect_local_mode == DetectLocalMode::ClusterCidr && cfg.cluster_cidrs.is_empty() {
            warnings.push(
                "clusterCIDR is empty: traffic from pods cannot be told apart, so ClusterIP \
                 traffic from outside the cluster is not masqueraded"
                    .to_owned(),
            );
        }
        Ok((cfg, warnings))
    }
}

/// The effective configuration and the manifest path, if any; `None` after printing the one
/// message about a bad flag or value (the caller exits 64).
pub fn resolve(
    args: &RunArgs,
    warn: impl Fn(&str),
) -> Option<(Config, Option<std::path::PathBuf>)> {
    if args.manifests.is_some() && (args.master.is_some() || args.kubeconfig.is_some()) {
        eprintln!(
            "ferry: --manifests: cannot be combined with --master or --kubeconfig (one source)"
        );
        return None;
    }
    match args.resolve() {
        Ok((config, warnings)) => {
            warnings.iter().for_each(|w| warn(w));
            Some((config, args.manifests.clone()))
        }
        Err(e) => {
            eprintln!("ferry: {e}");
            None
        }
    }
}

fn apply_file(cfg: &mut Config, file: FileConfig) {
    if let Some(v) = file.kubeconfig {
        cfg.kubeconfig = Some(v);
    }
    if let Some(v) = file.hostname_override {
        cfg.node_name = v;
    }
    if let Some(v) = file.mode {
        cfg.mode = v;
    }
    if let Some(v) = file.cluster_cidrs {
        cfg.cluster_cidrs = v;
    }
    if let Some(v) = file.detect_local_mode {
        cfg.detect_local_mode = v;
    }
    if let Some(v) = file.node_port_addresses {
        cfg.node_port_addresses = v;
    }
    if let Some(v) = file.masquerade_all {
        cfg.masquerade_all = v;
    }
    if let Some(v) = file.masquerade_bit {
        cfg.masquerade_bit = v;
    }
    if let Some(v) = file.sync_period {
        cfg.sync_period = v;
    }
    if let Some(v) = file.min_sync_period {
        cfg.min_sync_period = v;
    }
    if let Some(v) = file.healthz_bind_address {
        cfg.healthz_bind_address = v;
    }
    if let Some(v) = file.metrics_bind_address {
        cfg.metrics_bind_address = v;
    }
    file.ipvs.apply(&mut cfg.ipvs);
}
