//! From kube-proxy's whole configuration (defaults filled in) to Ferry's [`Config`]: the fields
//! Ferry acts on, checked, each bad value naming where it came from; and one warning per field
//! that asks for something Ferry does not do.

use std::time::Duration;

use super::kube_proxy::defaults::{HEALTHZ_PORT, METRICS_PORT};
use super::kube_proxy::KubeProxyConfiguration;
use ferry_compile::userspace::PortRange;
use ferry_compile::NfacctCounters;
use ferry_model::IpFamily;

use super::{
    check_masquerade_bit, hostname, loopback_node_port_addresses, parse_bind_address, parse_cidrs,
    parse_node_port_addresses, Config, ConfigError, DetectLocalMode, IpvsConfig,
    LocalhostNodePorts, ProxyMode,
};

impl Config {
    /// Ferry's configuration from kube-proxy's. `origin` names the file the values came from
    /// (empty: flags and defaults; flags are checked before they get here).
    pub fn derive(kp: KubeProxyConfiguration, origin: &str) -> Result<Config, ConfigError> {
        let at = |field: &str| {
            if origin.is_empty() {
                field.to_owned()
            } else {
                format!("{origin}: {field}")
            }
        };
        let mode = ProxyMode::parse(&kp.mode).map_err(|m| ConfigError::new(at("mode"), m))?;
        super::release::check_mode(mode, &kp, &at("mode"))?;
        super::settings::check(&kp, &at)?;
        let (bit, masquerade_all, sync, min_sync, section) = match mode {
            ProxyMode::Iptables => (
                kp.iptables.masquerade_bit,
                kp.iptables.masquerade_all,
                kp.iptables.sync_period,
                kp.iptables.min_sync_period,
                "iptables",
            ),
            // Upstream's IPVS proxier takes the masquerade settings from `iptables` and its
            // periods from `ipvs`.
            ProxyMode::Ipvs => (
                kp.iptables.masquerade_bit,
                kp.iptables.masquerade_all,
                kp.ipvs.sync_period,
                kp.ipvs.min_sync_period,
                "ipvs",
            ),
            // The userspace mode's redirect rules are Ferry's nftables table: it reads the
            // nftables section.
            ProxyMode::Nftables | ProxyMode::Userspace => (
                kp.nftables.masquerade_bit,
                kp.nftables.masquerade_all,
                kp.nftables.sync_period,
                kp.nftables.min_sync_period,
                "nftables",
            ),
        };
        let bit_section = if mode == ProxyMode::Ipvs {
            "iptables"
        } else {
            section
        };
        let masquerade_bit = check_masquerade_bit(
            &at(&format!("{bit_section}.masqueradeBit")),
            i64::from(bit.unwrap_or(14)),
        )?;
        let node_name = match kp.hostname_override.trim() {
            "" => hostname(),
            name => name.to_lowercase(),
        };
        if node_name.is_empty() {
            return Err(ConfigError::new(
                "--hostname-override",
                "no node name: the hostname is empty",
            ));
        }
        check_periods(&at(section), sync.0, min_sync.0)?;
        let node_port_addresses = parse_node_port_addresses(
            &at("nodePortAddresses"),
            kp.node_port_addresses.iter().flatten().map(String::as_str),
        )?;
        let logging_format = kp.logging.format.as_str();
        if !matches!(logging_format, "text" | "json") {
            return Err(ConfigError::new(
                at("logging.format"),
                format!("unknown log format {logging_format:?} (want text or json)"),
            ));
        }
        // kube-proxy checks the `ipvs` section only in IPVS mode.
        let ipvs = if mode == ProxyMode::Ipvs {
            IpvsConfig::derive(&kp.ipvs, at)?
        } else {
            IpvsConfig::default()
        };
        // The userspace mode's proxy ports stay clear of the ports the kernel gives the node's
        // outgoing connections (read here, once, in the agent's network namespace).
        let ephemeral_ports = (mode == ProxyMode::Userspace)
            .then(|| ferry_dataplane::userspace::ephemeral::ephemeral_ports().ok())
            .flatten();
        let proxy_port_range = if PortRange::is_default(&kp.port_range) {
            ephemeral_ports.map_or(PortRange::DEFAULT, PortRange::clear_of)
        } else {
            PortRange::parse(&kp.port_range)
                .map_err(|e| ConfigError::new(at("portRange"), e.reason))?
        };
        Ok(Config {
            ipvs,
            node_name,
            mode,
            mode_reason: String::new(),
            iptables_backend: None,
            cluster_cidrs: parse_cidrs(&at("clusterCIDR"), &kp.cluster_cidr)?,
            detect_local_mode: detect_local_mode(&kp, mode, &at)?,
            node_port_addresses,
            masquerade_all,
            masquerade_bit,
            sync_period: sync.0,
            min_sync_period: min_sync.0,
            healthz_bind_address: parse_bind_address(
                &at("healthzBindAddress"),
                &kp.healthz_bind_address,
                HEALTHZ_PORT,
            )?,
            metrics_bind_address: parse_bind_address(
                &at("metricsBindAddress"),
                &kp.metrics_bind_address,
                METRICS_PORT,
            )?,
            kubeconfig: Some(kp.client_connection.kubeconfig.trim())
                .filter(|k| !k.is_empty())
                .map(Into::into),
            master: None,
            verbosity: kp.logging.verbosity,
            log_json: logging_format == "json",
            localhost_node_ports: LocalhostNodePorts {
                iptables: kp.iptables.localhost_node_ports,
                nftables: super::release::nftables_localhost_node_ports(&kp),
            },
            proxy_port_range,
            ephemeral_ports,
            conntrack_tcp_be_liberal: false,
            nfacct: NfacctCounters::ALL,
            conntrack_applied: Vec::new(),
            udp_idle_timeout: kp.udp_idle_timeout.or(super::UDP_IDLE_TIMEOUT).0,
            kube_proxy: kp,
        })
    }

    /// Warnings about the effective configuration as a whole (not about one source).
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.detect_local_mode == DetectLocalMode::ClusterCidr && self.cluster_cidrs.is_empty() {
            out.push(
                "clusterCIDR is empty: traffic from pods cannot be told apart, so ClusterIP \
                 traffic from outside the cluster is not masqueraded"
                    .to_owned(),
            );
        }
        // Loopback ranges the mode does not serve (its localhostNodePorts is false).
        let loopback: Vec<String> = loopback_node_port_addresses(&self.node_port_addresses)
            .iter()
            .filter(|n| !self.localhost_node_ports(IpFamily::of(&n.addr())))
            .map(ToString::to_string)
            .collect();
        if !loopback.is_empty() {
            let why = match self.mode {
                ProxyMode::Ipvs => "IPVS mode never serves them (as upstream's)",
                ProxyMode::Iptables => "iptables.localhostNodePorts is false",
                ProxyMode::Nftables | ProxyMode::Userspace => {
                    "nftables.localhostNodePorts (or the KubeProxyNFTablesLocalhostNodePorts \
                     feature gate) is false"
                }
            };
            out.push(format!(
                "nodePortAddresses: {} kept, but NodePorts are not served on loopback addresses: \
                 {why} (Ferry never sets route_localnet); the other addresses are served",
                loopback.join(", ")
            ));
        }
        if let Some(w) = self.proxy_ports_warning() {
            out.push(w);
        }
        // Upstream's IPVS mode has no localhostNodePorts; `iptables.localhostNodePorts`
        // defaults to true in every mode, so only Ferry's own field can say it was asked for.
        if self.mode == ProxyMode::Ipvs && self.localhost_node_ports.nftables == Some(true) {
            out.push(
                "nftables.localhostNodePorts: true, but IPVS mode never serves NodePorts on \
                 loopback addresses (as upstream's): not used"
                    .to_owned(),
            );
        }
        out
    }
}

impl Config {
    /// The userspace mode's proxy ports overlap the kernel's ephemeral ports: an outgoing
    /// connection can hold one when its listener opens (the service port then moves to
    /// another port), and every listener takes a port from the node's outgoing connections.
    fn proxy_ports_warning(&self) -> Option<String> {
        let ephemeral = self.ephemeral_ports?;
        let range = self.proxy_port_range;
        if self.mode != ProxyMode::Userspace || !range.overlaps(ephemeral) {
            return None;
        }
        let given = match PortRange::is_default(&self.kube_proxy.port_range) {
            true => "Ferry's default; the ephemeral ports leave no 10 000 ports outside them",
            false => "set",
        };
        Some(format!(
            "portRange: {range} ({given}) overlaps the kernel's ephemeral ports \
             (net.ipv4.ip_local_port_range {ephemeral}): the node's outgoing connections can \
             hold proxy ports; set portRange outside them, or reserve it with \
             net.ipv4.ip_local_reserved_ports"
        ))
    }
}

/// kube-proxy's validation: a sync period above zero, a minimum not above it.
/// `detectLocalMode` with its `detectLocal` interface, which the mode must be able to use.
fn detect_local_mode(
    kp: &KubeProxyConfiguration,
    mode: ProxyMode,
    at: &dyn Fn(&str) -> String,
) -> Result<DetectLocalMode, ConfigError> {
    let detect = DetectLocalMode::parse(&kp.detect_local_mode, &kp.detect_local)
        .map_err(|(field, why)| ConfigError::new(at(field), why))?;
    let by_interface = matches!(
        detect,
        DetectLocalMode::BridgeInterface(_) | DetectLocalMode::InterfaceNamePrefix(_)
    );
    if by_interface && !mode.detects_local_by_interface() {
        return Err(ConfigError::new(
            at("detectLocalMode"),
            format!(
                "{} mode tells pods by their address: use ClusterCIDR or NodeCIDR \
                 ({} works in the nftables, iptables and IPVS modes)",
                mode.as_str(),
                kp.detect_local_mode
            ),
        ));
    }
    Ok(detect)
}

fn check_periods(place: &str, sync: Duration, min_sync: Duration) -> Result<(), ConfigError> {
    if sync.is_zero() {
        return Err(ConfigError::new(
            format!("{place}.syncPeriod"),
            "must be greater than 0",
        ));
    }
    if min_sync > sync {
        return Err(ConfigError::new(
            format!("{place}.minSyncPeriod"),
            format!(
                "{} is longer than syncPeriod {}",
                super::format_duration(min_sync),
                super::format_duration(sync)
            ),
        ));
    }
    Ok(())
}

/// One warning per field of a configuration file (defaults filled in) that asks for something
/// Ferry does not do. Settings only IPVS mode uses are kept without a warning (as kube-proxy
/// ignores them in other modes).
pub fn not_used(kp: &KubeProxyConfiguration, file: &str) -> Vec<String> {
    let mut defaults = KubeProxyConfiguration::empty();
    defaults.mode.clone_from(&kp.mode);
    defaults.bind_address.clone_from(&kp.bind_address);
    super::kube_proxy::defaults::apply(&mut defaults);
    let mut fields: Vec<&str> = Vec::new();
    let unused_gates = super::gates::unused(&kp.feature_gates);
    let gates = format!("featureGates ({})", unused_gates.join(", "));
    if !unused_gates.is_empty() {
        fields.push(&gates);
    }
    let checks = [
        (kp.enable_profiling, "enableProfiling"),
        (
            !kp.show_hidden_metrics_for_version.is_empty(),
            "showHiddenMetricsForVersion",
        ),
        (
            kp.config_sync_period != defaults.config_sync_period,
            "configSyncPeriod",
        ),
        // The userspace mode's proxy ports; udpIdleTimeout is read in every mode that proxies
        // (localhost NodePorts are proxied too), so not in IPVS mode, which never does.
        (
            !kp.port_range.is_empty() && kp.mode != "userspace",
            "portRange",
        ),
        (
            kp.udp_idle_timeout != defaults.udp_idle_timeout && kp.mode == "ipvs",
            "udpIdleTimeout",
        ),
        (kp.windows_run_as_service, "windowsRunAsService"),
        (kp.winkernel != defaults.winkernel, "winkernel"),
        (
            kp.iptables.snat_node_internal_ip == Some(true),
            "iptables.snatNodeInternalIP",
        ),
        (!kp.logging.vmodule.is_empty(), "logging.vmodule"),
        (
            kp.client_connection.content_type != defaults.client_connection.content_type
                || !kp.client_connection.accept_content_types.is_empty(),
            "clientConnection (content types)",
        ),
    ];
    fields.extend(checks.iter().filter(|(set, _)| *set).map(|(_, f)| *f));
    fields
        .into_iter()
        .map(|f| format!("{file}: {f}: set, but not used by Ferry"))
        .collect()
}
