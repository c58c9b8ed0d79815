//! Ferry's configuration: a kube-proxy `KubeProxyConfiguration` file plus kube-proxy's flags.
//!
//! Flags override the file; the file overrides the defaults. Every bad value is one clear
//! [`ConfigError`] naming the flag or field, and the process exits with 64 (EX_USAGE) before
//! touching anything.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use ipnet::IpNet;

use ferry_compile::config::LocalDetector;
pub use ferry_compile::mode::ProxyMode;
use ferry_compile::{CompileConfig, NodePortAddresses};
use ferry_dataplane::iptables::IptablesBackend;
use ferry_dataplane::mode::ModeOptions;
use ferry_model::IpFamily;

mod duration;
mod file;
mod ipvs;

pub use duration::parse_duration;
pub use file::FileConfig;
pub use ipvs::{IpvsArgs, IpvsConfig, IpvsFileConfig};

/// A configuration problem. Printed as `<where>: <what>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{place}: {message}")]
pub struct ConfigError {
    /// The flag (`--cluster-cidr`) or the file field (`config.yaml: nodePortAddresses[1]`).
    pub place: String,
    /// What is wrong.
    pub message: String,
}

impl ConfigError {
    /// Builds an error.
    pub fn new(place: impl Into<String>, message: impl Into<String>) -> Self {
        Self {
            place: place.into(),
            message: message.into(),
        }
    }
}

/// Parses `--iptables-backend`: `auto` (`None`: the backend that already holds Kubernetes'
/// rules, upstream's detection), `nft` or `legacy`.
pub fn parse_iptables_backend(s: &str) -> Result<Option<IptablesBackend>, String> {
    if s == "auto" {
        return Ok(None);
    }
    IptablesBackend::ALL
        .into_iter()
        .find(|b| b.as_str() == s)
        .map(Some)
        .ok_or_else(|| format!("unknown iptables backend {s:?} (want auto, nft or legacy)"))
}

/// `detectLocalMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DetectLocalMode {
    /// Pods are `clusterCIDR` (the default).
    ClusterCidr,
    /// Pods are this node's `spec.podCIDRs`.
    NodeCidr,
}

impl DetectLocalMode {
    /// Parses kube-proxy's spelling.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "" | "ClusterCIDR" => Ok(DetectLocalMode::ClusterCidr),
            "NodeCIDR" => Ok(DetectLocalMode::NodeCidr),
            "BridgeInterface" | "InterfaceNamePrefix" => Err(format!(
                "detectLocalMode {s:?} is not supported yet (want ClusterCIDR or NodeCIDR)"
            )),
            other => Err(format!(
                "unknown detectLocalMode {other:?} (want ClusterCIDR or NodeCIDR)"
            )),
        }
    }
}

/// Ferry's effective configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// This node's name.
    pub node_name: String,
    /// Proxy mode.
    pub mode: ProxyMode,
    /// iptables backend (iptables mode only); `None`: detected.
    pub iptables_backend: Option<IptablesBackend>,
    /// `clusterCIDR` (comma-separated in kube-proxy; a list here).
    pub cluster_cidrs: Vec<IpNet>,
    /// `detectLocalMode`.
    pub detect_local_mode: DetectLocalMode,
    /// `nodePortAddresses`.
    pub node_port_addresses: NodePortAddresses,
    /// `masqueradeAll`.
    pub masquerade_all: bool,
    /// `masqueradeBit`.
    pub masquerade_bit: u8,
    /// `syncPeriod`: the periodic full resync.
    pub sync_period: Duration,
    /// `minSyncPeriod`: changes are coalesced for at least this long.
    pub min_sync_period: Duration,
    /// `healthzBindAddress`: the proxy health server (`/healthz`, `/livez`); `None`: off.
    pub healthz_bind_address: Option<SocketAddr>,
    /// `metricsBindAddress`: the metrics server (`/metrics`); `None`: off.
    pub metrics_bind_address: Option<SocketAddr>,
    /// `clientConnection.kubeconfig` / `--kubeconfig`.
    pub kubeconfig: Option<PathBuf>,
    /// `--master`: the API server's URL.
    pub master: Option<String>,
    /// `ipvs.*` / `--ipvs-*` (IPVS mode).
    pub ipvs: IpvsConfig,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            node_name: String::new(),
            mode: ProxyMode::Nftables,
            iptables_backend: None,
            cluster_cidrs: Vec::new(),
            detect_local_mode: DetectLocalMode::ClusterCidr,
            node_port_addresses: NodePortAddresses::default(),
            masquerade_all: false,
            masquerade_bit: 14,
            sync_period: Duration::from_secs(30),
            min_sync_period: Duration::from_secs(1),
            healthz_bind_address: Some(SocketAddr::from(([0, 0, 0, 0], 10256))),
            metrics_bind_address: Some(SocketAddr::from(([127, 0, 0, 1], 10249))),
            kubeconfig: None,
            master: None,
            ipvs: IpvsConfig::default(),
        }
    }
}

impl Config {
    /// The run-time choices of the modes (the mode table opens the mode with them).
    pub fn mode_options(&self) -> ModeOptions {
        ModeOptions {
            iptables_backend: self.iptables_backend,
            ipvs: self.ipvs.options.clone(),
        }
    }

    /// The compiler's settings for one family.
    pub fn compile_config(&self, family: IpFamily) -> CompileConfig {
        let local_detector = match self.detect_local_mode {
            DetectLocalMode::ClusterCidr if self.cluster_cidrs.is_empty() => LocalDetector::None,
            DetectLocalMode::ClusterCidr => LocalDetector::ClusterCidr(self.cluster_cidrs.clone()),
            DetectLocalMode::NodeCidr => LocalDetector::NodeCidr,
        };
        CompileConfig {
            family,
            local_detector,
            masquerade_all: self.masquerade_all,
            masquerade_bit: self.masquerade_bit,
            node_port_addresses: self.node_port_addresses.clone(),
            ipvs_scheduler: self.ipvs.scheduler,
        }
    }
}

/// Parses a comma-separated CIDR list (`--cluster-cidr`, `clusterCIDR`). A bare IP is an error,
/// like upstream.
pub fn parse_cidrs(place: &str, s: &str) -> Result<Vec<IpNet>, ConfigError> {
    s.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| {
            p.parse::<IpNet>()
                .map_err(|_| ConfigError::new(place, format!("invalid CIDR {p:?}")))
        })
        .collect()
}

/// Parses `nodePortAddresses` entries: CIDRs or `primary`.
pub fn parse_node_port_addresses<'a>(
    place: &str,
    items: impl IntoIterator<Item = &'a str>,
) -> Result<NodePortAddresses, ConfigError> {
    let mut out = NodePortAddresses::default();
    for (i, item) in items.into_iter().enumerate() {
        let item = item.trim();
        if item == "primary" {
            out.primary = true;
            continue;
        }
        let net: IpNet = item.parse().map_err(|_| {
            ConfigError::new(
                format!("{place}[{i}]"),
                format!("{item:?} is neither a CIDR nor \"primary\""),
            )
        })?;
        if is_loopback(&net.addr()) {
            return Err(ConfigError::new(
                format!("{place}[{i}]"),
                format!("{item} is a loopback range; NodePorts are never opened on localhost"),
            ));
        }
        out.cidrs.push(net);
    }
    if out.primary && !out.cidrs.is_empty() {
        return Err(ConfigError::new(
            place,
            "\"primary\" cannot be combined with CIDRs",
        ));
    }
    Ok(out)
}

fn is_loopback(ip: &IpAddr) -> bool {
    ip.is_loopback()
}

/// Parses `healthzBindAddress` / `metricsBindAddress` (and their flags): `IP:PORT`
/// (`[::]:10256` for IPv6). Empty, or port 0, turns the server off, like upstream.
pub fn parse_bind_address(place: &str, s: &str) -> Result<Option<SocketAddr>, ConfigError> {
    let s = s.trim();
    if s.is_empty() {
        return Ok(None);
    }
    let addr: SocketAddr = s.parse().map_err(|_| {
        ConfigError::new(
            place,
            format!("{s:?} is not IP:PORT (e.g. 0.0.0.0:10256); empty disables the server"),
        )
    })?;
    Ok((addr.port() != 0).then_some(addr))
}

/// Checks a masquerade bit.
pub fn check_masquerade_bit(place: &str, bit: i64) -> Result<u8, ConfigError> {
    u8::try_from(bit)
        .ok()
        .filter(|b| *b <= 31)
        .ok_or_else(|| ConfigError::new(place, format!("must be between 0 and 31, got {bit}")))
}

/// The machine's hostname, lower-cased, as kube-proxy derives the node name.
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_lowercase())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests;
