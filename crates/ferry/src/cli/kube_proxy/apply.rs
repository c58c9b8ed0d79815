//! Writing kube-proxy's flags into the configuration.

use super::KubeProxyFlags;
use crate::cli::argv::parse_go_bool;
use crate::config::kube_proxy::KubeProxyConfiguration;
use crate::config::{parse_duration, ConfigError, GoDuration};

fn duration(flag: &str, s: &str) -> Result<GoDuration, ConfigError> {
    parse_duration(s)
        .map(GoDuration)
        .map_err(|m| ConfigError::new(flag, m))
}

fn list(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(str::to_owned)
        .collect()
}

impl KubeProxyFlags {
    /// Writes every given flag into `c` (the mode is already final). Bad values name the flag.
    pub fn apply(&self, c: &mut KubeProxyConfiguration, ipvs: bool) -> Result<(), ConfigError> {
        if let Some(gates) = &self.feature_gates {
            let mut given = std::collections::BTreeMap::new();
            for item in list(gates) {
                let (name, value) = item.split_once('=').ok_or_else(|| {
                    ConfigError::new(
                        "--feature-gates",
                        format!("{item:?} is not Name=true|false"),
                    )
                })?;
                let value = parse_go_bool(value.trim())
                    .map_err(|m| ConfigError::new("--feature-gates", format!("{name}: {m}")))?;
                given.insert(name.trim().to_owned(), value);
            }
            crate::config::gates::check(&given, "--feature-gates")?;
            c.feature_gates.extend(given);
        }
        // Upstream: the iptables flags set the periods of every mode but IPVS, the IPVS flags
        // those of IPVS mode only.
        let (sync, min_sync) = if ipvs {
            (&self.ipvs_sync_period, &self.ipvs_min_sync_period)
        } else {
            (&self.iptables_sync_period, &self.iptables_min_sync_period)
        };
        let (sync_flag, min_flag) = if ipvs {
            ("--ipvs-sync-period", "--ipvs-min-sync-period")
        } else {
            ("--iptables-sync-period", "--iptables-min-sync-period")
        };
        if let Some(d) = sync {
            let d = duration(sync_flag, d)?;
            (
                c.iptables.sync_period,
                c.nftables.sync_period,
                c.ipvs.sync_period,
            ) = (d, d, d);
        }
        if let Some(d) = min_sync {
            let d = duration(min_flag, d)?;
            c.iptables.min_sync_period = d;
            c.nftables.min_sync_period = d;
            c.ipvs.min_sync_period = d;
        }
        if let Some(bit) = self.iptables_masquerade_bit {
            c.iptables.masquerade_bit =
                Some(crate::config::check_masquerade_bit("--iptables-masquerade-bit", bit)?.into());
        }
        self.apply_userspace(c)?;
        self.apply_ipvs(c)?;
        self.apply_conntrack(c)?;
        self.apply_rest(c)
    }

    /// The userspace proxy's flags (upstream's userspace mode's `--proxy-port-range`,
    /// `--udp-timeout`; the localhost NodePort switches).
    fn apply_userspace(&self, c: &mut KubeProxyConfiguration) -> Result<(), ConfigError> {
        if let Some(v) = self.iptables_localhost_nodeports {
            c.iptables.localhost_node_ports = Some(v);
        }
        if let Some(v) = self.nftables_localhost_nodeports {
            c.nftables.localhost_node_ports = Some(v);
        }
        if let Some(r) = &self.proxy_port_range {
            ferry_compile::userspace::PortRange::parse(r)
                .map_err(|e| ConfigError::new("--proxy-port-range", e.reason))?;
            c.port_range.clone_from(r);
        }
        if let Some(d) = &self.udp_timeout {
            c.udp_idle_timeout = duration("--udp-timeout", d)?;
        }
        Ok(())
    }

    fn apply_ipvs(&self, c: &mut KubeProxyConfiguration) -> Result<(), ConfigError> {
        if let Some(s) = &self.ipvs_scheduler {
            c.ipvs.scheduler = s.clone();
        }
        if let Some(s) = &self.ipvs_exclude_cidrs {
            let cidrs = list(s);
            crate::config::parse_cidrs("--ipvs-exclude-cidrs", s)?;
            c.ipvs.exclude_cidrs = Some(cidrs);
        }
        if let Some(v) = self.ipvs_strict_arp {
            c.ipvs.strict_arp = v;
        }
        for (flag, value, slot) in [
            (
                "--ipvs-tcp-timeout",
                &self.ipvs_tcp_timeout,
                &mut c.ipvs.tcp_timeout,
            ),
            (
                "--ipvs-tcpfin-timeout",
                &self.ipvs_tcpfin_timeout,
                &mut c.ipvs.tcp_fin_timeout,
            ),
            (
                "--ipvs-udp-timeout",
                &self.ipvs_udp_timeout,
                &mut c.ipvs.udp_timeout,
            ),
        ] {
            if let Some(d) = value {
                *slot = duration(flag, d)?;
            }
        }
        Ok(())
    }

    fn apply_conntrack(&self, c: &mut KubeProxyConfiguration) -> Result<(), ConfigError> {
        let ct = &mut c.conntrack;
        if let Some(n) = self.conntrack_max_per_core {
            ct.max_per_core = Some(n);
        }
        if let Some(n) = self.conntrack_min {
            ct.min = Some(n);
        }
        if let Some(d) = &self.conntrack_tcp_timeout_established {
            ct.tcp_established_timeout = Some(duration("--conntrack-tcp-timeout-established", d)?);
        }
        if let Some(d) = &self.conntrack_tcp_timeout_close_wait {
            ct.tcp_close_wait_timeout = Some(duration("--conntrack-tcp-timeout-close-wait", d)?);
        }
        if let Some(v) = self.conntrack_tcp_be_liberal {
            ct.tcp_be_liberal = v;
        }
        if let Some(d) = &self.conntrack_udp_timeout {
            ct.udp_timeout = duration("--conntrack-udp-timeout", d)?;
        }
        if let Some(d) = &self.conntrack_udp_timeout_stream {
            ct.udp_stream_timeout = duration("--conntrack-udp-timeout-stream", d)?;
        }
        Ok(())
    }

    fn apply_rest(&self, c: &mut KubeProxyConfiguration) -> Result<(), ConfigError> {
        if let Some(n) = self.oom_score_adj {
            if !(-1000..=1000).contains(&n) {
                return Err(ConfigError::new(
                    "--oom-score-adj",
                    format!("must be between -1000 and 1000, got {n}"),
                ));
            }
            c.oom_score_adj = Some(n);
        }
        if let Some(f) = &self.logging_format {
            c.logging.format = f.clone();
        }
        if let Some(a) = &self.bind_address {
            a.parse::<std::net::IpAddr>().map_err(|_| {
                ConfigError::new("--bind-address", format!("{a:?} is not an IP address"))
            })?;
            c.bind_address = a.clone();
        }
        let cc = &mut c.client_connection;
        if let Some(v) = &self.kube_api_content_type {
            cc.content_type = v.clone();
        }
        if let Some(v) = self.kube_api_burst {
            cc.burst = v;
        }
        if let Some(v) = self.kube_api_qps {
            cc.qps = v;
        }
        if let Some(v) = self.bind_address_hard_fail {
            c.bind_address_hard_fail = v;
        }
        if let Some(v) = self.profiling {
            c.enable_profiling = v;
        }
        if let Some(v) = &self.show_hidden_metrics_for_version {
            c.show_hidden_metrics_for_version = v.clone();
        }
        if let Some(d) = &self.config_sync_period {
            c.config_sync_period = duration("--config-sync-period", d)?;
        }
        if let Some(v) = &self.pod_bridge_interface {
            c.detect_local.bridge_interface = v.clone();
        }
        if let Some(v) = &self.pod_interface_name_prefix {
            c.detect_local.interface_name_prefix = v.clone();
        }
        self.apply_logging(c)
    }

    fn apply_logging(&self, c: &mut KubeProxyConfiguration) -> Result<(), ConfigError> {
        let l = &mut c.logging;
        if let Some(d) = &self.log_flush_frequency {
            l.flush_frequency = duration("--log-flush-frequency", d)?;
        }
        if let Some(v) = &self.vmodule {
            l.vmodule = list(v)
                .into_iter()
                .map(|item| {
                    let (pattern, n) = item.split_once('=').unwrap_or((&item, ""));
                    let verbosity = n.parse().map_err(|_| {
                        ConfigError::new("--vmodule", format!("{item:?} is not pattern=N"))
                    })?;
                    Ok(crate::config::kube_proxy::VModuleItem {
                        file_pattern: pattern.to_owned(),
                        verbosity,
                    })
                })
                .collect::<Result<_, ConfigError>>()?;
        }
        if let Some(v) = self.log_json_split_stream {
            l.options.json.split_stream = v;
        }
        if let Some(v) = self.log_text_split_stream {
            l.options.text.split_stream = v;
        }
        if let Some(v) = &self.log_json_info_buffer_size {
            l.options.json.info_buffer_size = serde_json::Value::String(v.clone());
        }
        if let Some(v) = &self.log_text_info_buffer_size {
            l.options.text.info_buffer_size = serde_json::Value::String(v.clone());
        }
        Ok(())
    }
}
