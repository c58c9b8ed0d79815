//! kube-proxy's settings that Ferry reads where it uses them, from the kept
//! [`KubeProxyConfiguration`]: `bindAddress` as the node IP, `clientConnection.qps` / `burst`,
//! the split log streams, the `AllowServiceExternalIPs` gate; and upstream's checks of them
//! (a locked gate, a negative burst, an alpha logging option without its gate).

use std::net::IpAddr;

use ferry_source::kube::ApiRate;

use super::gates;
use super::kube_proxy::{KubeProxyConfiguration, StreamOptions};
use super::{Config, ConfigError};

impl Config {
    /// `bindAddress` / `--bind-address` when it is not `0.0.0.0` / `::`: this node's primary
    /// IP of its family, over the Node object's (upstream's `detectNodeIPs`).
    pub fn node_ip(&self) -> Option<IpAddr> {
        node_ip(&self.kube_proxy.bind_address)
    }

    /// `clientConnection.qps` / `burst` as client-go's token bucket (`None`: no limit).
    pub fn api_rate(&self) -> Option<ApiRate> {
        let cc = &self.kube_proxy.client_connection;
        ApiRate::new(cc.qps, cc.burst)
    }

    /// The `AllowServiceExternalIPs` gate: services' external IPs are programmed.
    pub fn external_ips(&self) -> bool {
        gates::enabled(&self.kube_proxy.feature_gates, gates::EXTERNAL_IPS)
    }

    /// `logging.options.<format>.splitStream`: errors to stderr, the rest to stdout.
    pub fn log_split_stream(&self) -> bool {
        let options = &self.kube_proxy.logging.options;
        if self.log_json {
            options.json.split_stream
        } else {
            options.text.split_stream
        }
    }
}

fn node_ip(bind_address: &str) -> Option<IpAddr> {
    bind_address
        .trim()
        .parse::<IpAddr>()
        .ok()
        .filter(|ip| !ip.is_unspecified())
}

/// Upstream's checks of these settings; `at` names a field where it came from.
pub fn check(kp: &KubeProxyConfiguration, at: &dyn Fn(&str) -> String) -> Result<(), ConfigError> {
    gates::check(&kp.feature_gates, &at("featureGates"))?;
    if kp.client_connection.burst < 0 {
        return Err(ConfigError::new(
            at("clientConnection.burst"),
            format!(
                "must be greater than or equal to 0, got {} (--kube-api-burst)",
                kp.client_connection.burst
            ),
        ));
    }
    let alpha = gates::enabled(&kp.feature_gates, gates::LOGGING_ALPHA);
    for (format, options) in [
        ("text", &kp.logging.options.text),
        ("json", &kp.logging.options.json),
    ] {
        let used = [
            (options.split_stream, "splitStream", "split-stream"),
            (buffers(options), "infoBufferSize", "info-buffer-size"),
        ];
        if let Some((_, field, flag)) = used.iter().find(|(set, ..)| *set && !alpha) {
            return Err(ConfigError::new(
                at(&format!("logging.options.{format}.{field}")),
                format!(
                    "needs the {} feature gate, as in kube-proxy: add \
                     --feature-gates={}=true (or featureGates), or drop --log-{format}-{flag}",
                    gates::LOGGING_ALPHA,
                    gates::LOGGING_ALPHA
                ),
            ));
        }
    }
    Ok(())
}

/// `infoBufferSize` is set to something other than zero.
fn buffers(options: &StreamOptions) -> bool {
    match &options.info_buffer_size {
        serde_json::Value::Null => false,
        serde_json::Value::Number(n) => n.as_f64() != Some(0.0),
        serde_json::Value::String(s) => !matches!(s.trim(), "" | "0"),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(field: &str) -> String {
        format!("kp.yaml: {field}")
    }

    #[test]
    fn the_bind_address_is_the_node_ip_unless_unspecified() {
        assert_eq!(node_ip("0.0.0.0"), None);
        assert_eq!(node_ip("::"), None);
        assert_eq!(node_ip(""), None);
        assert_eq!(node_ip("10.1.1.9"), Some("10.1.1.9".parse().expect("ip")));
        assert_eq!(node_ip(" fd00::9 "), Some("fd00::9".parse().expect("ip")));
    }

    #[test]
    fn split_streams_and_info_buffers_need_logging_alpha_options() {
        let mut kp = KubeProxyConfiguration::empty();
        assert_eq!(check(&kp, &at), Ok(()));
        kp.logging.options.text.split_stream = true;
        let err = check(&kp, &at).expect_err("no gate");
        assert_eq!(err.place, "kp.yaml: logging.options.text.splitStream");
        assert!(
            err.message.contains("LoggingAlphaOptions")
                && err.message.contains("--log-text-split-stream"),
            "{err:?}"
        );
        kp.feature_gates
            .insert(gates::LOGGING_ALPHA.to_owned(), true);
        assert_eq!(check(&kp, &at), Ok(()));

        let mut kp = KubeProxyConfiguration::empty();
        kp.logging.options.json.info_buffer_size = serde_json::json!("0");
        assert_eq!(check(&kp, &at), Ok(()));
        kp.logging.options.json.info_buffer_size = serde_json::json!("1Mi");
        let err = check(&kp, &at).expect_err("no gate");
        assert_eq!(err.place, "kp.yaml: logging.options.json.infoBufferSize");
    }

    #[test]
    fn a_negative_burst_is_refused_as_upstream() {
        let mut kp = KubeProxyConfiguration::empty();
        kp.client_connection.burst = -1;
        let err = check(&kp, &at).expect_err("negative");
        assert_eq!(err.place, "kp.yaml: clientConnection.burst");
    }

    #[test]
    fn a_locked_gate_in_the_file_is_refused_naming_the_field() {
        let mut kp = KubeProxyConfiguration::empty();
        kp.feature_gates
            .insert(gates::SERVICE_CIDRS.to_owned(), false);
        let err = check(&kp, &at).expect_err("locked");
        assert_eq!(err.place, "kp.yaml: featureGates");
        assert!(err.message.contains("MultiCIDRServiceAllocator"), "{err:?}");
    }

    #[test]
    fn the_api_rate_follows_qps_and_burst() {
        let mut config = Config::default();
        config.kube_proxy.client_connection.qps = 5.0;
        config.kube_proxy.client_connection.burst = 10;
        assert_eq!(config.api_rate(), ApiRate::new(5.0, 10));
        assert!(config.api_rate().is_some());
        config.kube_proxy.client_connection.qps = -1.0;
        assert_eq!(config.api_rate(), None);
    }
}
