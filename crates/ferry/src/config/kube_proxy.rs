//! kube-proxy's whole `KubeProxyConfiguration` (`kubeproxy.config.k8s.io/v1alpha1`), every
//! field, as upstream spells it (staging/src/k8s.io/kube-proxy/config/v1alpha1/types.go).
//!
//! Ferry keeps the whole configuration, not only what it uses: `/configz` and
//! `--write-config-to` show it, `ferry check` knows every field, and settings for modes still
//! to come (IPVS) are parsed and kept. Zero values mean "unset" as upstream: [`defaults`]
//! fills them in as kube-proxy's defaulting does.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::duration::GoDuration;

pub mod defaults;

/// The API group and version Ferry reads and writes.
pub const API_VERSION: &str = "kubeproxy.config.k8s.io/v1alpha1";
/// The kind.
pub const KIND: &str = "KubeProxyConfiguration";

/// `KubeProxyConfiguration`, v1alpha1.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
#[allow(missing_docs)] // Upstream's field names; types.go documents each.
pub struct KubeProxyConfiguration {
    pub api_version: String,
    pub kind: String,
    pub feature_gates: BTreeMap<String, bool>,
    pub client_connection: ClientConnection,
    pub logging: Logging,
    pub hostname_override: String,
    pub bind_address: String,
    pub healthz_bind_address: String,
    pub metrics_bind_address: String,
    pub bind_address_hard_fail: bool,
    pub enable_profiling: bool,
    pub show_hidden_metrics_for_version: String,
    pub mode: String,
    pub iptables: Iptables,
    pub ipvs: Ipvs,
    pub nftables: Nftables,
    pub winkernel: Winkernel,
    pub detect_local_mode: String,
    pub detect_local: DetectLocal,
    #[serde(rename = "clusterCIDR")]
    pub cluster_cidr: String,
    pub node_port_addresses: Option<Vec<String>>,
    pub oom_score_adj: Option<i32>,
    pub conntrack: Conntrack,
    pub config_sync_period: GoDuration,
    pub port_range: String,
    /// Removed with the userspace mode (1.26) but still in older kubeadm ConfigMaps.
    #[serde(skip_serializing_if = "GoDuration::is_zero")]
    pub udp_idle_timeout: GoDuration,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub windows_run_as_service: bool,
}

/// `clientConnection` (component-base's ClientConnectionConfiguration).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
#[allow(missing_docs)]
pub struct ClientConnection {
    pub kubeconfig: String,
    pub accept_content_types: String,
    pub content_type: String,
    pub qps: f32,
    pub burst: i32,
}

/// `logging` (component-base's LoggingConfiguration).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
#[allow(missing_docs)]
pub struct Logging {
    pub format: String,
    /// A Go duration, or nanoseconds as a number (kubeadm writes `0`).
    #[serde(deserialize_with = "super::duration::duration_or_nanoseconds")]
    pub flush_frequency: GoDuration,
    pub verbosity: u32,
    pub vmodule: Vec<VModuleItem>,
    pub options: LoggingOptions,
}

/// One `logging.vmodule` entry.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
#[allow(missing_docs)]
pub struct VModuleItem {
    pub file_pattern: String,
    pub verbosity: u32,
}

/// `logging.options`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
#[allow(missing_docs)]
pub struct LoggingOptions {
    pub json: StreamOptions,
    pub text: StreamOptions,
}

/// `logging.options.json` / `.text`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
#[allow(missing_docs)]
pub struct StreamOptions {
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub split_stream: bool,
    /// A Kubernetes quantity (`"0"`, `512`, `"1Mi"`), kept as written.
    pub info_buffer_size: serde_json::Value,
}

/// `iptables`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
#[allow(missing_docs)]
pub struct Iptables {
    pub masquerade_bit: Option<i32>,
    pub masquerade_all: bool,
    pub localhost_node_ports: Option<bool>,
    #[serde(rename = "snatNodeInternalIP", skip_serializing_if = "Option::is_none")]
    pub snat_node_internal_ip: Option<bool>,
    pub sync_period: GoDuration,
    pub min_sync_period: GoDuration,
}

/// `ipvs`: kept for IPVS mode.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
#[allow(missing_docs)]
pub struct Ipvs {
    pub sync_period: GoDuration,
    pub min_sync_period: GoDuration,
    pub scheduler: String,
    #[serde(rename = "excludeCIDRs")]
    pub exclude_cidrs: Option<Vec<String>>,
    #[serde(rename = "strictARP")]
    pub strict_arp: bool,
    pub tcp_timeout: GoDuration,
    pub tcp_fin_timeout: GoDuration,
    pub udp_timeout: GoDuration,
}

/// `nftables`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
#[allow(missing_docs)]
pub struct Nftables {
    pub masquerade_bit: Option<i32>,
    pub masquerade_all: bool,
    /// Ferry's own field (upstream's nftables mode never answers localhost NodePorts): serve
    /// them through Ferry's userspace proxy, in nftables and userspace modes.
    pub localhost_node_ports: Option<bool>,
    pub sync_period: GoDuration,
    pub min_sync_period: GoDuration,
}

/// `winkernel` (Windows only; accepted, never used on Linux).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
#[allow(missing_docs)]
pub struct Winkernel {
    pub network_name: String,
    pub source_vip: String,
    #[serde(rename = "enableDSR")]
    pub enable_dsr: bool,
    pub root_hns_endpoint_name: String,
    pub forward_health_check_vip: bool,
}

/// `detectLocal`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
#[allow(missing_docs)]
pub struct DetectLocal {
    pub bridge_interface: String,
    pub interface_name_prefix: String,
}

/// `conntrack`.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
#[allow(missing_docs)]
pub struct Conntrack {
    pub max_per_core: Option<i32>,
    pub min: Option<i32>,
    pub tcp_established_timeout: Option<GoDuration>,
    pub tcp_close_wait_timeout: Option<GoDuration>,
    pub tcp_be_liberal: bool,
    pub udp_timeout: GoDuration,
    pub udp_stream_timeout: GoDuration,
}

impl KubeProxyConfiguration {
    /// An empty configuration with its `apiVersion` and `kind` (what a file without any field
    /// says).
    pub fn empty() -> Self {
        Self {
            api_version: API_VERSION.to_owned(),
            kind: KIND.to_owned(),
            ..Self::default()
        }
    }

    /// With `mode` empty kube-proxy runs iptables mode and reads the `iptables` section; Ferry
    /// runs nftables mode, reading the iptables section's periods and `masqueradeAll` where the
    /// nftables section leaves them unset, so a tuned kube-proxy file keeps its meaning.
    pub fn follow_iptables_section_for_empty_mode(&mut self) {
        if !self.mode.is_empty() {
            return;
        }
        let (ipt, nft) = (&self.iptables, &mut self.nftables);
        if nft.sync_period.is_zero() {
            nft.sync_period = ipt.sync_period;
        }
        if nft.min_sync_period.is_zero() {
            nft.min_sync_period = ipt.min_sync_period;
        }
        nft.masquerade_all |= ipt.masquerade_all;
    }

    /// Every field's name, nested (objects hold their fields' names): what a file may say.
    /// Serialising a value whose optional parts are all present shows every field.
    pub fn field_tree() -> serde_json::Value {
        let mut all = Self::empty();
        all.udp_idle_timeout = GoDuration::from_secs(1);
        all.windows_run_as_service = true;
        all.iptables.snat_node_internal_ip = Some(false);
        all.logging.options.json.split_stream = true;
        all.logging.options.text.split_stream = true;
        all.logging.vmodule.push(VModuleItem::default());
        serde_json::to_value(all).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests;
