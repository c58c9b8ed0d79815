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
use ferry_compile::userspace::PortRange;
use ferry_compile::{CompileConfig, NfacctCounters, NodePortAddresses};
use ferry_dataplane::iptables::IptablesBackend;
use ferry_dataplane::mode::ModeOptions;
use ferry_dataplane::modes::entry;
use ferry_model::IpFamily;

pub mod conntrack;
pub mod derive;
mod duration;
pub mod file;
pub mod gates;
mod ipvs;
pub mod kube_proxy;
pub mod release;
mod settings;

pub use duration::{format_duration, parse_duration, GoDuration};
pub use file::FileConfig;
pub use ipvs::IpvsConfig;
pub use kube_proxy::KubeProxyConfiguration;

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

/// `detectLocalMode`, with the `detectLocal` field it reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DetectLocalMode {
    /// Pods are `clusterCIDR` (the default).
    ClusterCidr,
    /// Pods are this node's `spec.podCIDRs`.
    NodeCidr,
    /// Pod traffic comes in on this bridge (`detectLocal.bridgeInterface`).
    BridgeInterface(String),
    /// Pod traffic comes in on interfaces named with this prefix
    /// (`detectLocal.interfaceNamePrefix`).
    InterfaceNamePrefix(String),
}

/// kube-proxy's spellings of `detectLocalMode`.
pub const DETECT_LOCAL_MODES: &str =
    "ClusterCIDR, NodeCIDR, BridgeInterface or InterfaceNamePrefix";

impl DetectLocalMode {
    /// Checks kube-proxy's spelling of the mode alone (a flag, before the interface is known).
    pub fn check(s: &str) -> Result<(), String> {
        match s {
            "" | "ClusterCIDR" | "NodeCIDR" | "BridgeInterface" | "InterfaceNamePrefix" => Ok(()),
            other => Err(format!(
                "unknown detectLocalMode {other:?} (want {DETECT_LOCAL_MODES})"
            )),
        }
    }

    /// The mode `s` with the interface its `detectLocal` field names: `Err((field, why))`.
    pub fn parse(
        s: &str,
        detect_local: &kube_proxy::DetectLocal,
    ) -> Result<Self, (&'static str, String)> {
        let interface = |field: &'static str,
                         name: &str|
         -> Result<String, (&'static str, String)> {
            match name.trim() {
                "" => Err((field, format!("must not be empty with detectLocalMode {s}"))),
                n if n.len() > 15 || n.contains(['/', ' ', '\0']) => Err((
                    field,
                    format!("{n:?} is not an interface name (at most 15 bytes, no '/' or space)"),
                )),
                n => Ok(n.to_owned()),
            }
        };
        match s {
            "" | "ClusterCIDR" => Ok(DetectLocalMode::ClusterCidr),
            "NodeCIDR" => Ok(DetectLocalMode::NodeCidr),
            "BridgeInterface" => Ok(DetectLocalMode::BridgeInterface(interface(
                "detectLocal.bridgeInterface",
                &detect_local.bridge_interface,
            )?)),
            "InterfaceNamePrefix" => Ok(DetectLocalMode::InterfaceNamePrefix(interface(
                "detectLocal.interfaceNamePrefix",
                &detect_local.interface_name_prefix,
            )?)),
            other => Err((
                "detectLocalMode",
                format!("unknown detectLocalMode {other:?} (want {DETECT_LOCAL_MODES})"),
            )),
        }
    }
}

/// Ferry's effective configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// This node's name.
    pub node_name: String,
    /// Proxy mode.
    pub mode: ProxyMode,
    /// Where the mode came from (`--proxy-mode`, `mode: "" in kube-proxy.yaml: …`), for
    /// `ferry check`; empty when built without flags.
    pub mode_reason: String,
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
    /// `logging.verbosity` / `-v`.
    pub verbosity: u32,
    /// `logging.format` / `--logging-format` / `--log-format` is `json`.
    pub log_json: bool,
    /// `ipvs.*` / `--ipvs-*`, checked (IPVS mode; defaults in the other modes).
    pub ipvs: IpvsConfig,
    /// The whole effective KubeProxyConfiguration, defaults filled in (what `/configz` and
    /// `--write-config-to` show; IPVS mode's settings).
    pub kube_proxy: KubeProxyConfiguration,
    /// `iptables.localhostNodePorts` / `nftables.localhostNodePorts`.
    pub localhost_node_ports: LocalhostNodePorts,
    /// `portRange`: the userspace mode's proxy ports.
    pub proxy_port_range: PortRange,
    /// The kernel's ephemeral ports (`net.ipv4.ip_local_port_range`) as read at start in
    /// userspace mode: the default `portRange` stays clear of them.
    pub ephemeral_ports: Option<PortRange>,
    /// `udpIdleTimeout`: a proxied UDP association ends after this long without a datagram.
    pub udp_idle_timeout: Duration,
    /// `nf_conntrack_tcp_be_liberal` as the kernel holds it once start-up applied `conntrack.*`
    /// (`false` until then): iptables mode then drops no packet conntrack marks invalid, as
    /// upstream, which reads it the same way.
    pub conntrack_tcp_be_liberal: bool,
    /// The nfacct counters iptables mode's rules count into: both until start-up has tried to
    /// create them (what `ferry rules` shows, as on a kernel with nfacct), then those that exist.
    pub nfacct: NfacctCounters,
    /// What start-up did with each conntrack setting, one line each (`ferry status`).
    pub conntrack_applied: Vec<String>,
}

/// Whether NodePorts answer on `127.0.0.1` / `[::1]` (served by Ferry's userspace proxy, never
/// with `route_localnet`), as each mode's section of the configuration says (`None`: not
/// said).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LocalhostNodePorts {
    /// `iptables.localhostNodePorts` (upstream's field; default true).
    pub iptables: Option<bool>,
    /// `nftables.localhostNodePorts`: Ferry's own field (default false; upstream's nftables
    /// mode never answers localhost NodePorts). The userspace mode reads it too (its rules
    /// are nftables; default true).
    pub nftables: Option<bool>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            node_name: String::new(),
            mode: ProxyMode::Nftables,
            mode_reason: String::new(),
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
            verbosity: 2,
            log_json: false,
            ipvs: IpvsConfig::default(),
            kube_proxy: KubeProxyConfiguration::empty(),
            localhost_node_ports: LocalhostNodePorts::default(),
            proxy_port_range: PortRange::DEFAULT,
            ephemeral_ports: None,
            conntrack_tcp_be_liberal: false,
            nfacct: NfacctCounters::ALL,
            conntrack_applied: Vec::new(),
            udp_idle_timeout: UDP_IDLE_TIMEOUT,
        }
    }
}

impl Config {
    /// The run-time choices of the modes (the mode table opens the mode with them).
    pub fn mode_options(&self) -> ModeOptions {
        ModeOptions {
            iptables_backend: self.iptables_backend,
            ipvs: self.ipvs.options.clone(),
            runtime: None,
            udp_idle_timeout: self.udp_idle_timeout,
        }
    }

    /// Whether this mode serves NodePorts of `family` on its loopback address: the mode's
    /// section says so, or (unsaid) the mode's default or a `nodePortAddresses` CIDR covering
    /// loopback asks for it, and `nodePortAddresses` allow it (upstream's rule). IPVS mode
    /// never does: upstream's has no such setting and never answers NodePorts on loopback.
    pub fn localhost_node_ports(&self, family: IpFamily) -> bool {
        let said = match self.mode {
            ProxyMode::Ipvs => return false,
            ProxyMode::Iptables => self.localhost_node_ports.iptables,
            ProxyMode::Nftables | ProxyMode::Userspace => self.localhost_node_ports.nftables,
        };
        said.unwrap_or_else(|| {
            self.mode.localhost_node_ports_default()
                || self.node_port_addresses.lists_loopback(family)
        })
    }

    /// The compiler's settings for one family.
    pub fn compile_config(&self, family: IpFamily) -> CompileConfig {
        let local_detector = match &self.detect_local_mode {
            DetectLocalMode::ClusterCidr if self.cluster_cidrs.is_empty() => LocalDetector::None,
            DetectLocalMode::ClusterCidr => LocalDetector::ClusterCidr(self.cluster_cidrs.clone()),
            DetectLocalMode::NodeCidr => LocalDetector::NodeCidr,
            DetectLocalMode::BridgeInterface(name) => LocalDetector::BridgeInterface(name.clone()),
            DetectLocalMode::InterfaceNamePrefix(prefix) => {
                LocalDetector::InterfaceNamePrefix(prefix.clone())
            }
        };
        let mut node_port_addresses = self.node_port_addresses.clone();
        // Upstream's per-mode default (the mode's renderer says which).
        if node_port_addresses.is_default() {
            node_port_addresses = entry(self.mode).renderer.default_node_port_addresses();
        }
        CompileConfig {
            family,
            local_detector,
            masquerade_all: self.masquerade_all,
            masquerade_bit: self.masquerade_bit,
            node_port_addresses,
            ipvs_scheduler: self.ipvs.scheduler,
            localhost_node_ports: self.localhost_node_ports(family),
            proxy_port_range: self.proxy_port_range,
            conntrack_tcp_be_liberal: self.conntrack_tcp_be_liberal,
            node_ip: self.node_ip(),
            external_ips: self.external_ips(),
            nfacct: self.nfacct,
        }
    }
}

/// `udpIdleTimeout`'s default (upstream's userspace proxier: 250 ms).
pub const UDP_IDLE_TIMEOUT: Duration = Duration::from_millis(250);

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

/// Parses `nodePortAddresses` entries: CIDRs and upstream's keywords `primary` (the Node's
/// primary IPs), `all` (every local address) and `localhost` (127.0.0.0/8 and ::1/128), in any
/// combination. A loopback range asks for localhost NodePorts, which Ferry's userspace proxy
/// serves (the kernel rules never open NodePorts on loopback).
pub fn parse_node_port_addresses<'a>(
    place: &str,
    items: impl IntoIterator<Item = &'a str>,
) -> Result<NodePortAddresses, ConfigError> {
    let mut out = NodePortAddresses::default();
    for (i, item) in items.into_iter().enumerate() {
        match item.trim() {
            "" => {}
            "primary" => out.primary = true,
            "all" => out.all = true,
            "localhost" => out.cidrs.extend(loopback_nets()),
            item => out.cidrs.push(item.parse().map_err(|_| {
                ConfigError::new(
                    format!("{place}[{i}]"),
                    format!("{item:?} is neither a CIDR nor one of primary, all, localhost"),
                )
            })?),
        }
    }
    out.cidrs.sort();
    out.cidrs.dedup();
    Ok(out)
}

fn loopback_nets() -> [IpNet; 2] {
    [
        IpNet::V4(ipnet::Ipv4Net::new([127, 0, 0, 0].into(), 8).expect("valid prefix")),
        IpNet::V6(ipnet::Ipv6Net::new(std::net::Ipv6Addr::LOCALHOST, 128).expect("valid prefix")),
    ]
}

/// The configured NodePort CIDRs that are loopback ranges: served by Ferry's userspace proxy
/// where the mode's `localhostNodePorts` allows it (`route_localnet` is never set,
/// CVE-2020-8558).
pub fn loopback_node_port_addresses(npa: &NodePortAddresses) -> Vec<IpNet> {
    npa.cidrs
        .iter()
        .filter(|n| n.addr().is_loopback())
        .copied()
        .collect()
}

/// Parses `healthzBindAddress` / `metricsBindAddress` (and their flags): `IP:PORT`
/// (`[::]:10256` for IPv6), or an IP alone (`default_port` is added, as upstream's
/// `AppendPortIfNeeded`). Empty, or port 0, turns the server off.
pub fn parse_bind_address(
    place: &str,
    s: &str,
    default_port: u16,
) -> Result<Option<SocketAddr>, ConfigError> {
    let s = s.trim();
    if s.is_empty() {
        return Ok(None);
    }
    if let Ok(ip) = s
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse::<IpAddr>()
    {
        return Ok(Some(SocketAddr::new(ip, default_port)));
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
pub(crate) mod tests;
