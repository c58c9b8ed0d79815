//! The flags of `ferry run` (shared by `rules`, `check` and `explain`) and the configuration they
//! resolve to.

use std::path::PathBuf;

use clap::Args;

use super::argv::parse_go_bool;
use super::{kube_proxy, LogFormat};
use crate::config::Config;

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
    /// ([`argv::normalize`](super::argv::normalize) took them out).
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
