//! The effective configuration, shown as kube-proxy shows it: `/configz` on the metrics server
//! (`{"kubeproxy.config.k8s.io": {…}}`, component-base's configz) and `--write-config-to`
//! (KubeProxyConfiguration YAML).
//!
//! Like upstream's configz registry, the configuration is published once, process-wide, at
//! start-up ([`publish`]); the metrics server reads it from there.

use std::path::Path;
use std::sync::OnceLock;

use serde_json::{json, Value};

use crate::config::kube_proxy::{API_VERSION, KIND};
use crate::config::Config;

/// The configz key, upstream's API group.
pub const GROUP: &str = "kubeproxy.config.k8s.io";

static PUBLISHED: OnceLock<String> = OnceLock::new();

/// The configuration as one KubeProxyConfiguration object (defaults filled in, Ferry's effective
/// node name and mode).
pub fn effective(config: &Config) -> Value {
    let mut kp = config.kube_proxy.clone();
    kp.api_version = API_VERSION.to_owned();
    kp.kind = KIND.to_owned();
    kp.hostname_override.clone_from(&config.node_name);
    kp.mode = config.mode.as_str().to_owned();
    serde_json::to_value(kp).unwrap_or(Value::Null)
}

/// `/configz`'s body for `config`.
pub fn body(config: &Config) -> String {
    json!({ GROUP: effective(config) }).to_string()
}

/// Makes `config` what `/configz` answers (the first call wins).
pub fn publish(config: &Config) {
    let _ = PUBLISHED.set(body(config));
}

/// `/configz`'s body, when published.
pub fn published_body() -> Option<&'static str> {
    PUBLISHED.get().map(String::as_str)
}

/// `--write-config-to FILE`: the effective configuration as YAML.
pub fn write_config_to(config: &Config, path: &Path) -> std::io::Result<()> {
    let yaml = serde_saphyr::to_string(&effective(config)).map_err(std::io::Error::other)?;
    std::fs::write(path, yaml)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configz_is_the_whole_configuration_under_the_api_group() {
        let mut config = Config {
            node_name: "k8s-node1".to_owned(),
            ..Config::default()
        };
        crate::config::kube_proxy::defaults::apply(&mut config.kube_proxy);
        let v: Value = serde_json::from_str(&body(&config)).expect("json");
        let kp = &v[GROUP];
        assert_eq!(kp["kind"], "KubeProxyConfiguration");
        assert_eq!(kp["hostnameOverride"], "k8s-node1");
        assert_eq!(kp["mode"], "nftables");
        assert_eq!(kp["healthzBindAddress"], "0.0.0.0:10256");
        assert_eq!(kp["conntrack"]["maxPerCore"], 32768);
        assert_eq!(kp["iptables"]["syncPeriod"], "30s");
    }

    #[test]
    fn write_config_to_writes_yaml_ferry_reads_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("out.yaml");
        let mut config = Config {
            node_name: "n1".to_owned(),
            ..Config::default()
        };
        crate::config::kube_proxy::defaults::apply(&mut config.kube_proxy);
        write_config_to(&config, &path).expect("write");
        let text = std::fs::read_to_string(&path).expect("read");
        let back = crate::config::FileConfig::parse("out.yaml", &text).expect("parses");
        assert!(back.warnings.is_empty(), "{:?}", back.warnings);
        assert_eq!(back.config.hostname_override, "n1");
    }
}
