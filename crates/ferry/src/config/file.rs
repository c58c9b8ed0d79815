//! The `kubeproxy.config.k8s.io/v1alpha1` `KubeProxyConfiguration` file.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use ipnet::IpNet;
use serde_json::{Map, Value};

use ferry_compile::NodePortAddresses;

use super::{
    check_masquerade_bit, parse_bind_address, parse_cidrs, parse_duration,
    parse_node_port_addresses, ConfigError, DetectLocalMode, IpvsFileConfig, ProxyMode,
};

/// Prefix of the warning for a field KubeProxyConfiguration does not have.
pub const UNKNOWN_FIELD: &str = "unknown field";

/// What the file sets (`None`: not set).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FileConfig {
    /// `hostnameOverride`.
    pub hostname_override: Option<String>,
    /// `mode`.
    pub mode: Option<ProxyMode>,
    /// `clusterCIDR` (or `detectLocal.clusterCIDRs`).
    pub cluster_cidrs: Option<Vec<IpNet>>,
    /// `detectLocalMode`.
    pub detect_local_mode: Option<DetectLocalMode>,
    /// `nodePortAddresses`.
    pub node_port_addresses: Option<NodePortAddresses>,
    /// `masqueradeAll`.
    pub masquerade_all: Option<bool>,
    /// `nftables.masqueradeBit` / `iptables.masqueradeBit`.
    pub masquerade_bit: Option<u8>,
    /// `syncPeriod` / `nftables.syncPeriod`.
    pub sync_period: Option<Duration>,
    /// `minSyncPeriod` / `nftables.minSyncPeriod`.
    pub min_sync_period: Option<Duration>,
    /// `healthzBindAddress` (`Some(None)`: set empty, the server is off).
    pub healthz_bind_address: Option<Option<SocketAddr>>,
    /// `metricsBindAddress` (`Some(None)`: set empty, the server is off).
    pub metrics_bind_address: Option<Option<SocketAddr>>,
    /// `clientConnection.kubeconfig`.
    pub kubeconfig: Option<PathBuf>,
    /// `ipvs.*`.
    pub ipvs: IpvsFileConfig,
    /// Fields that are unknown, or known to kube-proxy but not used by Ferry: reported, not
    /// silently dropped.
    pub warnings: Vec<String>,
}

/// KubeProxyConfiguration fields Ferry reads.
const USED: &[&str] = &[
    "apiVersion",
    "kind",
    "hostnameOverride",
    "mode",
    "clusterCIDR",
    "detectLocalMode",
    "detectLocal",
    "nodePortAddresses",
    "masqueradeAll",
    "nftables",
    "iptables",
    "syncPeriod",
    "minSyncPeriod",
    "healthzBindAddress",
    "metricsBindAddress",
    "clientConnection",
    "ipvs",
];

/// KubeProxyConfiguration fields Ferry accepts but does not use (yet).
const NOT_USED: &[&str] = &[
    "bindAddress",
    "bindAddressHardFail",
    "configSyncPeriod",
    "conntrack",
    "enableProfiling",
    "featureGates",
    "logging",
    "oomScoreAdj",
    "portRange",
    "showHiddenMetricsForVersion",
    "winkernel",
];

struct Reader<'a> {
    file: &'a str,
}

impl Reader<'_> {
    fn err(&self, field: &str, message: impl Into<String>) -> ConfigError {
        ConfigError::new(format!("{}: {field}", self.file), message)
    }

    fn string<'v>(
        &self,
        obj: &'v Map<String, Value>,
        field: &str,
        path: &str,
    ) -> Result<Option<&'v str>, ConfigError> {
        match obj.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(self.err(path, format!("must be a string, got {other}"))),
        }
    }

    fn duration(
        &self,
        obj: &Map<String, Value>,
        field: &str,
        path: &str,
    ) -> Result<Option<Duration>, ConfigError> {
        self.string(obj, field, path)?
            .map(|s| parse_duration(s).map_err(|m| self.err(path, m)))
            .transpose()
    }

    fn bit(&self, obj: &Map<String, Value>, path: &str) -> Result<Option<u8>, ConfigError> {
        match obj.get("masqueradeBit") {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => {
                let v = n
                    .as_i64()
                    .ok_or_else(|| self.err(path, format!("must be an integer, got {n}")))?;
                check_masquerade_bit(&format!("{}: {path}", self.file), v).map(Some)
            }
            Some(other) => Err(self.err(path, format!("must be an integer, got {other}"))),
        }
    }
}

impl FileConfig {
    /// Parses the file's text. `file` names it in messages.
    pub fn parse(file: &str, text: &str) -> Result<FileConfig, ConfigError> {
        let r = Reader { file };
        let value: Value = serde_saphyr::from_str(text)
            .map_err(|e| ConfigError::new(file, format!("not valid YAML: {e}")))?;
        let Value::Object(obj) = value else {
            return Err(ConfigError::new(
                file,
                "must be a KubeProxyConfiguration object",
            ));
        };
        match r.string(&obj, "kind", "kind")? {
            Some("KubeProxyConfiguration") => {}
            other => {
                return Err(r.err(
                    "kind",
                    format!("must be KubeProxyConfiguration, got {other:?}"),
                ))
            }
        }
        match r.string(&obj, "apiVersion", "apiVersion")? {
            Some("kubeproxy.config.k8s.io/v1alpha1") | Some("kubeproxy.config.k8s.io/v1alpha2") => {
            }
            other => {
                return Err(r.err(
                    "apiVersion",
                    format!("must be kubeproxy.config.k8s.io/v1alpha1, got {other:?}"),
                ))
            }
        }
        let mut out = FileConfig::default();
        for key in obj.keys() {
            if NOT_USED.contains(&key.as_str()) {
                out.warnings
                    .push(format!("{file}: {key}: accepted but not used by Ferry"));
            } else if !USED.contains(&key.as_str()) {
                out.warnings.push(format!(
                    "{file}: {key}: {UNKNOWN_FIELD} of KubeProxyConfiguration, ignored"
                ));
            }
        }
        out.hostname_override = r
            .string(&obj, "hostnameOverride", "hostnameOverride")?
            .filter(|s| !s.is_empty())
            .map(str::to_owned);
        out.mode = r
            .string(&obj, "mode", "mode")?
            .map(|m| ProxyMode::parse(m).map_err(|e| r.err("mode", e)))
            .transpose()?;
        out.detect_local_mode = r
            .string(&obj, "detectLocalMode", "detectLocalMode")?
            .map(|m| DetectLocalMode::parse(m).map_err(|e| r.err("detectLocalMode", e)))
            .transpose()?;
        if let Some(cidrs) = r
            .string(&obj, "clusterCIDR", "clusterCIDR")?
            .filter(|s| !s.is_empty())
        {
            out.cluster_cidrs = Some(parse_cidrs(&format!("{file}: clusterCIDR"), cidrs)?);
        }
        if let Some(Value::Object(dl)) = obj.get("detectLocal") {
            if let Some(Value::Array(items)) = dl.get("clusterCIDRs") {
                let mut nets = Vec::new();
                for (i, item) in items.iter().enumerate() {
                    let place = format!("detectLocal.clusterCIDRs[{i}]");
                    let s = item
                        .as_str()
                        .ok_or_else(|| r.err(&place, "must be a string"))?;
                    nets.extend(parse_cidrs(&format!("{file}: {place}"), s)?);
                }
                if !nets.is_empty() {
                    out.cluster_cidrs = Some(nets);
                }
            }
        }
        match obj.get("nodePortAddresses") {
            None | Some(Value::Null) => {}
            Some(Value::Array(items)) => {
                let mut strs = Vec::new();
                for (i, item) in items.iter().enumerate() {
                    strs.push(item.as_str().ok_or_else(|| {
                        r.err(&format!("nodePortAddresses[{i}]"), "must be a string")
                    })?);
                }
                out.node_port_addresses = Some(parse_node_port_addresses(
                    &format!("{file}: nodePortAddresses"),
                    strs,
                )?);
            }
            Some(other) => {
                return Err(r.err("nodePortAddresses", format!("must be a list, got {other}")))
            }
        }
        out.masquerade_all = match obj.get("masqueradeAll") {
            None | Some(Value::Null) => None,
            Some(Value::Bool(b)) => Some(*b),
            Some(other) => {
                return Err(r.err(
                    "masqueradeAll",
                    format!("must be true or false, got {other}"),
                ))
            }
        };
        for (field, slot) in [
            ("healthzBindAddress", &mut out.healthz_bind_address),
            ("metricsBindAddress", &mut out.metrics_bind_address),
        ] {
            if let Some(s) = r.string(&obj, field, field)? {
                *slot = Some(parse_bind_address(&format!("{file}: {field}"), s)?);
            }
        }
        out.kubeconfig = client_connection(&r, &obj, &mut out.warnings)?;
        out.sync_period = r.duration(&obj, "syncPeriod", "syncPeriod")?;
        out.min_sync_period = r.duration(&obj, "minSyncPeriod", "minSyncPeriod")?;
        // Per-mode sections: the section of the chosen mode (nftables by default) wins over the
        // other for the bit, and over the top level for the periods (v1alpha1 keeps them per
        // mode; v1alpha2 moved them up).
        let own = match out.mode {
            Some(ProxyMode::Iptables) => "iptables",
            _ => "nftables",
        };
        let order = if own == "iptables" {
            ["nftables", "iptables"]
        } else {
            ["iptables", "nftables"]
        };
        for section in order {
            match obj.get(section) {
                None | Some(Value::Null) => {}
                Some(Value::Object(sec)) => {
                    if let Some(bit) = r.bit(sec, &format!("{section}.masqueradeBit"))? {
                        out.masquerade_bit = Some(bit);
                    }
                    if section == own {
                        let place = format!("{section}.syncPeriod");
                        if let Some(d) = r.duration(sec, "syncPeriod", &place)? {
                            out.sync_period = Some(d);
                        }
                        let place = format!("{section}.minSyncPeriod");
                        if let Some(d) = r.duration(sec, "minSyncPeriod", &place)? {
                            out.min_sync_period = Some(d);
                        }
                    }
                }
                Some(other) => {
                    return Err(r.err(section, format!("must be an object, got {other}")))
                }
            }
        }
        out.ipvs = IpvsFileConfig::parse(file, &obj)?;
        if out.mode == Some(ProxyMode::Ipvs) {
            // IPVS mode's periods are in its own section (v1alpha1), like the other modes'.
            out.sync_period = out.ipvs.sync_period.or(out.sync_period);
            out.min_sync_period = out.ipvs.min_sync_period.or(out.min_sync_period);
        }
        Ok(out)
    }
}

/// `clientConnection`: `kubeconfig` is used; kube-proxy's other fields (`qps`, `burst`,
/// `contentType`, `acceptContentTypes`) are accepted with a warning.
fn client_connection(
    r: &Reader<'_>,
    obj: &Map<String, Value>,
    warnings: &mut Vec<String>,
) -> Result<Option<PathBuf>, ConfigError> {
    let section = match obj.get("clientConnection") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::Object(section)) => section,
        Some(other) => {
            return Err(r.err(
                "clientConnection",
                format!("must be an object, got {other}"),
            ))
        }
    };
    for key in section.keys().filter(|k| *k != "kubeconfig") {
        warnings.push(format!(
            "{}: clientConnection.{key}: accepted but not used by Ferry",
            r.file
        ));
    }
    Ok(
        r.string(section, "kubeconfig", "clientConnection.kubeconfig")?
            .filter(|s| !s.is_empty())
            .map(PathBuf::from),
    )
}
