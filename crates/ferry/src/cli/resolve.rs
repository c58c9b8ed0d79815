//! The effective configuration, as kube-proxy builds it: the `--config` file, then upstream's
//! defaults for every unset field, then the flags (which, unlike kube-proxy's, also override a
//! file: each such flag is named in a warning), then Ferry's [`Config`].

use crate::config::kube_proxy::defaults::{self, HEALTHZ_PORT, METRICS_PORT};
use crate::config::{
    check_masquerade_bit, parse_bind_address, parse_cidrs, parse_duration, parse_iptables_backend,
    parse_node_port_addresses, Config, ConfigError, DetectLocalMode, FileConfig, GoDuration,
    KubeProxyConfiguration, ProxyMode,
};

use super::{LogFormat, RunArgs};

impl RunArgs {
    /// Builds the effective configuration. Also returns the warnings: unknown or unused fields
    /// of the file, flags Ferry does not act on, and doubtful settings.
    pub fn resolve(&self) -> Result<(Config, Vec<String>), ConfigError> {
        let mut warnings = Vec::new();
        let (mut kp, origin) = match &self.config {
            Some(path) => {
                let file = FileConfig::load(path)?;
                warnings.extend(file.warnings);
                (file.config, file.name)
            }
            None => (KubeProxyConfiguration::empty(), String::new()),
        };
        // kube-proxy runs iptables mode when a file's `mode` is empty (kubeadm's ConfigMap
        // says `mode: ""`): a drop-in replacement reading that file must too. Without a file
        // Ferry's own default (nftables) stays.
        let mode_reason = if self.proxy_mode.is_some() {
            "--proxy-mode".to_owned()
        } else if origin.is_empty() {
            "Ferry's default without --config; kube-proxy's default is iptables mode: \
             --proxy-mode iptables runs that"
                .to_owned()
        } else if kp.mode.is_empty() {
            kp.mode = ProxyMode::Iptables.as_str().to_owned();
            warnings.push(crate::config::release::defaulted_mode_warning(&origin));
            format!("mode \"\" in {origin}: kube-proxy's default, as kube-proxy runs it")
        } else {
            format!("mode in {origin}")
        };
        kp.follow_iptables_section_for_empty_mode();
        defaults::apply(&mut kp);
        if !origin.is_empty() {
            warnings.extend(crate::config::derive::not_used(&kp, &origin));
        }
        self.apply_flags(&mut kp)?;
        let mut config = Config::derive(kp, &origin)?;
        config.mode_reason = mode_reason;
        config.master = self.master.clone().filter(|m| !m.is_empty());
        if let Some(b) = &self.iptables_backend {
            config.iptables_backend =
                parse_iptables_backend(b).map_err(|m| ConfigError::new("--iptables-backend", m))?;
        }
        warnings.extend(crate::config::release::mode_warning(config.mode));
        warnings.extend(self.flag_warnings(&config));
        warnings.extend(config.warnings());
        Ok((config, warnings))
    }

    fn apply_flags(&self, kp: &mut KubeProxyConfiguration) -> Result<(), ConfigError> {
        if let Some(name) = &self.hostname_override {
            if name.trim().is_empty() {
                return Err(ConfigError::new("--hostname-override", "must not be empty"));
            }
            kp.hostname_override = name.trim().to_lowercase();
        }
        if let Some(mode) = &self.proxy_mode {
            ProxyMode::parse(mode).map_err(|m| ConfigError::new("--proxy-mode", m))?;
            kp.mode.clone_from(mode);
        }
        if let Some(path) = &self.kubeconfig {
            kp.client_connection.kubeconfig = path.display().to_string();
        }
        if let Some(cidrs) = &self.cluster_cidr {
            parse_cidrs("--cluster-cidr", cidrs)?;
            kp.cluster_cidr.clone_from(cidrs);
        }
        if let Some(mode) = &self.detect_local_mode {
            DetectLocalMode::check(mode).map_err(|m| ConfigError::new("--detect-local-mode", m))?;
            kp.detect_local_mode.clone_from(mode);
        }
        if let Some(all) = self.masquerade_all {
            kp.iptables.masquerade_all = all;
            kp.nftables.masquerade_all = all;
        }
        if let Some(list) = &self.nodeport_addresses {
            parse_node_port_addresses("--nodeport-addresses", list.split(','))?;
            kp.node_port_addresses = Some(list.split(',').map(|s| s.trim().to_owned()).collect());
        }
        self.apply_servers(kp)?;
        if let Some(v) = self.verbosity {
            kp.logging.verbosity = v;
        }
        if let Some(f) = self.log_format {
            kp.logging.format = match f {
                LogFormat::Text => "text",
                LogFormat::Json => "json",
            }
            .to_owned();
        }
        if let Some(bit) = self.masquerade_bit {
            let bit = i32::from(check_masquerade_bit("--masquerade-bit", bit)?);
            kp.iptables.masquerade_bit = Some(bit);
            kp.nftables.masquerade_bit = Some(bit);
        }
        for (flag, value, min) in [
            ("--sync-period", &self.sync_period, false),
            ("--min-sync-period", &self.min_sync_period, true),
        ] {
            if let Some(d) = value {
                let d = GoDuration(parse_duration(d).map_err(|m| ConfigError::new(flag, m))?);
                for (sync, min_sync) in [
                    (
                        &mut kp.iptables.sync_period,
                        &mut kp.iptables.min_sync_period,
                    ),
                    (
                        &mut kp.nftables.sync_period,
                        &mut kp.nftables.min_sync_period,
                    ),
                    (&mut kp.ipvs.sync_period, &mut kp.ipvs.min_sync_period),
                ] {
                    *(if min { min_sync } else { sync }) = d;
                }
            }
        }
        self.kube_proxy.apply(kp, kp.mode == "ipvs")
    }

    /// `--healthz-bind-address`, `--metrics-bind-address`, and the deprecated `--healthz-port`
    /// / `--metrics-port` (0 turns the server off, another port replaces the address's).
    fn apply_servers(&self, kp: &mut KubeProxyConfiguration) -> Result<(), ConfigError> {
        let servers = [
            (
                "--healthz-bind-address",
                &self.healthz_bind_address,
                self.kube_proxy.healthz_port,
                &mut kp.healthz_bind_address,
                HEALTHZ_PORT,
            ),
            (
                "--metrics-bind-address",
                &self.metrics_bind_address,
                self.kube_proxy.metrics_port,
                &mut kp.metrics_bind_address,
                METRICS_PORT,
            ),
        ];
        for (flag, addr, port, slot, default_port) in servers {
            if let Some(a) = addr {
                parse_bind_address(flag, a, default_port)?;
                *slot = defaults::with_port(a, "", default_port).trim().to_owned();
                if a.trim().is_empty() {
                    slot.clear();
                }
            }
            match port {
                Some(0) => slot.clear(),
                Some(p) => {
                    let host = parse_bind_address(flag, slot, default_port)?
                        .map_or_else(|| "0.0.0.0".to_owned(), |s| host_text(s.ip()));
                    *slot = format!("{host}:{p}");
                }
                None => {}
            }
        }
        Ok(())
    }

    /// The one warning naming the flags Ferry accepts but does not act on; the one naming the
    /// flags kube-proxy would ignore next to `--config` (Ferry applies them over the file).
    fn flag_warnings(&self, config: &Config) -> Vec<String> {
        let mut out = Vec::new();
        let mut unused: Vec<String> = self.ignored_flags.clone();
        unused.extend(self.kube_proxy.not_used().iter().map(|s| (*s).to_owned()));
        // IPVS mode takes its masquerade bit from the iptables section, as upstream's.
        if self.kube_proxy.iptables_masquerade_bit.is_some()
            && !matches!(config.mode, ProxyMode::Iptables | ProxyMode::Ipvs)
        {
            unused.push("--iptables-masquerade-bit (iptables and IPVS modes only)".to_owned());
        }
        if self.kube_proxy.iptables_localhost_nodeports.is_some() && config.mode == ProxyMode::Ipvs
        {
            unused.push(
                "--iptables-localhost-nodeports (IPVS mode never serves NodePorts on loopback)"
                    .to_owned(),
            );
        }
        if self.kube_proxy.init_only.is_some() {
            unused.push("--init-only (Ferry needs no privileged set-up step)".to_owned());
        }
        if !unused.is_empty() {
            out.push(format!(
                "accepted for kube-proxy compatibility, not used by Ferry: {}",
                unused.join(", ")
            ));
        }
        if self.config.is_some() {
            let overriding = self.flags_kube_proxy_ignores_with_config();
            if !overriding.is_empty() {
                out.push(format!(
                    "kube-proxy ignores these flags when --config is given; Ferry applies them \
                     over the file: {}",
                    overriding.join(", ")
                ));
            }
        }
        out
    }

    fn flags_kube_proxy_ignores_with_config(&self) -> Vec<&'static str> {
        let k = &self.kube_proxy;
        [
            (self.kubeconfig.is_some(), "--kubeconfig"),
            (self.proxy_mode.is_some(), "--proxy-mode"),
            (self.cluster_cidr.is_some(), "--cluster-cidr"),
            (self.detect_local_mode.is_some(), "--detect-local-mode"),
            (self.masquerade_all.is_some(), "--masquerade-all"),
            (self.nodeport_addresses.is_some(), "--nodeport-addresses"),
            (
                self.healthz_bind_address.is_some(),
                "--healthz-bind-address",
            ),
            (
                self.metrics_bind_address.is_some(),
                "--metrics-bind-address",
            ),
            (
                k.iptables_masquerade_bit.is_some(),
                "--iptables-masquerade-bit",
            ),
            (k.iptables_sync_period.is_some(), "--iptables-sync-period"),
            (
                k.iptables_min_sync_period.is_some(),
                "--iptables-min-sync-period",
            ),
            (k.ipvs_sync_period.is_some(), "--ipvs-sync-period"),
            (k.ipvs_min_sync_period.is_some(), "--ipvs-min-sync-period"),
            (k.oom_score_adj.is_some(), "--oom-score-adj"),
            (k.healthz_port.is_some(), "--healthz-port"),
            (k.metrics_port.is_some(), "--metrics-port"),
        ]
        .into_iter()
        .filter(|(given, _)| *given)
        .map(|(_, name)| name)
        .collect()
    }
}

fn host_text(ip: std::net::IpAddr) -> String {
    match ip {
        std::net::IpAddr::V4(v4) => v4.to_string(),
        std::net::IpAddr::V6(v6) => format!("[{v6}]"),
    }
}
