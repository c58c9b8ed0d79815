//! kube-proxy's flags that have no Ferry counterpart of their own (cmd/kube-proxy/app/options.go
//! and component-base's logging flags), under their upstream names. Each writes its field of
//! the [`KubeProxyConfiguration`], so `/configz` shows it and IPVS mode will find its settings;
//! the ones Ferry does not act on are named in one warning.

use clap::Args;

use super::argv::parse_go_bool;

mod apply;

/// kube-proxy's other flags.
#[derive(Debug, Clone, Default, Args)]
#[command(next_help_heading = "kube-proxy flags")]
pub struct KubeProxyFlags {
    /// Remove Ferry's (and any kube-proxy-mode) rules and exit, like `ferry cleanup`.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_go_bool)]
    pub cleanup: Option<bool>,
    /// Write the effective configuration (KubeProxyConfiguration YAML) to this file and exit
    /// (empty: do not).
    #[arg(long, value_name = "FILE")]
    pub write_config_to: Option<String>,
    /// Do the start-up steps that need full privileges, then exit (Ferry has none: exits 0).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_go_bool)]
    pub init_only: Option<bool>,
    /// Feature gates, `Name=true,Other=false`: those kube-proxy 1.37 consults act as there or
    /// are refused against their lock (see the feature gates below); others are recorded.
    #[arg(long, value_name = "GATES")]
    pub feature_gates: Option<String>,
    /// Bit of the packet mark for masquerading, in iptables (and IPVS) mode.
    #[arg(long, value_name = "BIT", allow_negative_numbers = true)]
    pub iptables_masquerade_bit: Option<i64>,
    /// Sync period in iptables and nftables mode (kube-proxy's name for --sync-period).
    #[arg(long, value_name = "DURATION")]
    pub iptables_sync_period: Option<String>,
    /// Minimum sync interval in iptables and nftables mode.
    #[arg(long, value_name = "DURATION")]
    pub iptables_min_sync_period: Option<String>,
    /// iptables mode: answer NodePorts on 127.0.0.1 and [::1] (default true), through
    /// Ferry's userspace proxy (route_localnet is never set).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_go_bool)]
    pub iptables_localhost_nodeports: Option<bool>,
    /// nftables and userspace modes: answer NodePorts on 127.0.0.1 and [::1] (Ferry's own
    /// flag; default false in nftables mode, true in userspace mode).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_go_bool)]
    pub nftables_localhost_nodeports: Option<bool>,
    /// Userspace mode: the node ports its proxy listens on (BEGIN-END or BEGIN+OFFSET;
    /// empty: 10260-29999, or clear of net.ipv4.ip_local_port_range).
    #[arg(long, value_name = "RANGE")]
    pub proxy_port_range: Option<String>,
    /// Userspace proxy: how long a UDP association lasts without a datagram (default 250ms).
    #[arg(long, value_name = "DURATION")]
    pub udp_timeout: Option<String>,
    /// IPVS mode: sync period.
    #[arg(long, value_name = "DURATION")]
    pub ipvs_sync_period: Option<String>,
    /// IPVS mode: minimum sync interval.
    #[arg(long, value_name = "DURATION")]
    pub ipvs_min_sync_period: Option<String>,
    /// IPVS mode: scheduler (rr, lc, sh …).
    #[arg(long, value_name = "NAME")]
    pub ipvs_scheduler: Option<String>,
    /// IPVS mode: CIDRs whose virtual servers cleanup leaves alone (comma-separated).
    #[arg(long, value_name = "CIDRS")]
    pub ipvs_exclude_cidrs: Option<String>,
    /// IPVS mode: strict ARP (arp_ignore=1, arp_announce=2).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_go_bool)]
    pub ipvs_strict_arp: Option<bool>,
    /// IPVS mode: idle TCP timeout.
    #[arg(long, value_name = "DURATION")]
    pub ipvs_tcp_timeout: Option<String>,
    /// IPVS mode: TCP timeout after FIN.
    #[arg(long, value_name = "DURATION")]
    pub ipvs_tcpfin_timeout: Option<String>,
    /// IPVS mode: UDP timeout.
    #[arg(long, value_name = "DURATION")]
    pub ipvs_udp_timeout: Option<String>,
    /// The deprecated port of the health server (0 disables it).
    #[arg(long, value_name = "PORT")]
    pub healthz_port: Option<u16>,
    /// The deprecated port of the metrics server (0 disables it).
    #[arg(long, value_name = "PORT")]
    pub metrics_port: Option<u16>,
    /// The OOM score adjustment of the process (-1000 … 1000; kube-proxy's default -999).
    #[arg(long, value_name = "N", allow_negative_numbers = true)]
    pub oom_score_adj: Option<i32>,
    /// Log format: text or json (kube-proxy's name for --log-format).
    #[arg(long, value_name = "FORMAT")]
    pub logging_format: Option<String>,
    /// This node's primary IP of its family, over the Node object's (where NodePorts answer
    /// by default or with `primary`); 0.0.0.0 or :: (the default): the Node's.
    #[arg(long, value_name = "IP")]
    pub bind_address: Option<String>,
    /// Exit when the health or metrics server cannot listen on its port (default: log it and
    /// try again every 5 s).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_go_bool)]
    pub bind_address_hard_fail: Option<bool>,
    /// (recorded) Serve /debug/pprof. Ferry has no Go runtime to profile: on the node, `perf
    /// record -g -p $(pidof ferry)` profiles it instead.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_go_bool)]
    pub profiling: Option<bool>,
    /// (recorded) Show metrics hidden since this version. Ferry hides no metric: every one it
    /// has is always on /metrics.
    #[arg(long, value_name = "VERSION")]
    pub show_hidden_metrics_for_version: Option<String>,
    /// (recorded) API client content type. Ferry's client (kube-rs) speaks only JSON, having
    /// no protobuf codec for Kubernetes' types: leave it unset.
    #[arg(long, value_name = "TYPE")]
    pub kube_api_content_type: Option<String>,
    /// The API client's token bucket: requests that may go at once (default 10).
    #[arg(long, value_name = "N")]
    pub kube_api_burst: Option<i32>,
    /// The API client's token bucket: requests per second (default 5; 0 or less: no limit);
    /// a watch counts once, however long it stays open; a paged list, twice.
    #[arg(long, value_name = "QPS")]
    pub kube_api_qps: Option<f32>,
    /// (recorded) How often the API informers resync. Ferry's watches keep the state without
    /// a resync; the full sync every --sync-period re-applies the rules instead.
    #[arg(long, value_name = "DURATION")]
    pub config_sync_period: Option<String>,
    /// With `--detect-local-mode=BridgeInterface`: the bridge pod traffic comes in on.
    #[arg(long, value_name = "NAME")]
    pub pod_bridge_interface: Option<String>,
    /// With `--detect-local-mode=InterfaceNamePrefix`: the prefix of the pods' interfaces.
    #[arg(long, value_name = "PREFIX")]
    pub pod_interface_name_prefix: Option<String>,
    /// `nf_conntrack_max` per CPU of the machine, raised to at start (0 leaves it; default 32768).
    #[arg(long, value_name = "N")]
    pub conntrack_max_per_core: Option<i32>,
    /// The least `nf_conntrack_max` that `--conntrack-max-per-core` sets (default 131072).
    #[arg(long, value_name = "N")]
    pub conntrack_min: Option<i32>,
    /// `nf_conntrack_tcp_timeout_established`, set at start (0 leaves it; default 24h0m0s).
    #[arg(long, value_name = "DURATION")]
    pub conntrack_tcp_timeout_established: Option<String>,
    /// `nf_conntrack_tcp_timeout_close_wait`, set at start (0 leaves it; default 1h0m0s).
    #[arg(long, value_name = "DURATION")]
    pub conntrack_tcp_timeout_close_wait: Option<String>,
    /// Set `nf_conntrack_tcp_be_liberal` at start; iptables mode then drops no invalid packets.
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_go_bool)]
    pub conntrack_tcp_be_liberal: Option<bool>,
    /// `nf_conntrack_udp_timeout`, set at start (0, the default, leaves it).
    #[arg(long, value_name = "DURATION")]
    pub conntrack_udp_timeout: Option<String>,
    /// `nf_conntrack_udp_timeout_stream`, set at start (0, the default, leaves it).
    #[arg(long, value_name = "DURATION")]
    pub conntrack_udp_timeout_stream: Option<String>,
    /// (recorded) Log flush interval. Ferry writes each log line at once: nothing to flush.
    #[arg(long, value_name = "DURATION")]
    pub log_flush_frequency: Option<String>,
    /// (recorded) Per-file verbosity, `pattern=N,…`. Its patterns name kube-proxy's Go files;
    /// set RUST_LOG by Rust module instead (`RUST_LOG=info,ferry_source=debug`).
    #[arg(long, value_name = "LIST")]
    pub vmodule: Option<String>,
    /// JSON logs: errors to stderr, the rest to stdout (needs the LoggingAlphaOptions gate,
    /// as in kube-proxy).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_go_bool)]
    pub log_json_split_stream: Option<bool>,
    /// (recorded) JSON logs: info buffer size (needs the LoggingAlphaOptions gate). Ferry
    /// writes each line at once and buffers none: nothing to size.
    #[arg(long, value_name = "SIZE")]
    pub log_json_info_buffer_size: Option<String>,
    /// Text logs: errors to stderr, the rest to stdout (needs the LoggingAlphaOptions gate,
    /// as in kube-proxy).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true, default_missing_value = "true", value_parser = parse_go_bool)]
    pub log_text_split_stream: Option<bool>,
    /// (recorded) Text logs: info buffer size (needs the LoggingAlphaOptions gate). Ferry
    /// writes each line at once and buffers none: nothing to size.
    #[arg(long, value_name = "SIZE")]
    pub log_text_info_buffer_size: Option<String>,
}

impl KubeProxyFlags {
    /// `--write-config-to`, when given a path.
    pub fn write_config_to(&self) -> Option<std::path::PathBuf> {
        self.write_config_to
            .as_deref()
            .filter(|p| !p.is_empty())
            .map(Into::into)
    }

    /// `--feature-gates` names a gate Ferry does not act on (see [`crate::config::gates`]).
    fn unused_feature_gates(&self) -> bool {
        self.feature_gates.as_deref().is_some_and(|gates| {
            gates
                .split(',')
                .filter(|item| !item.trim().is_empty())
                .any(|item| {
                    let name = item.split_once('=').map_or(item, |(n, _)| n).trim();
                    !crate::config::gates::acts_on(name)
                })
        })
    }

    /// The flags given that Ferry records but does not act on (`--name`), for one warning.
    pub fn not_used(&self) -> Vec<&'static str> {
        let given = [
            (self.unused_feature_gates(), "--feature-gates"),
            (self.profiling.is_some(), "--profiling"),
            (
                self.show_hidden_metrics_for_version.is_some(),
                "--show-hidden-metrics-for-version",
            ),
            (
                self.kube_api_content_type.is_some(),
                "--kube-api-content-type",
            ),
            (self.config_sync_period.is_some(), "--config-sync-period"),
            (self.log_flush_frequency.is_some(), "--log-flush-frequency"),
            (self.vmodule.is_some(), "--vmodule"),
            (
                self.log_json_info_buffer_size.is_some(),
                "--log-json-info-buffer-size",
            ),
            (
                self.log_text_info_buffer_size.is_some(),
                "--log-text-info-buffer-size",
            ),
        ];
        given
            .into_iter()
            .filter(|(g, _)| *g)
            .map(|(_, n)| n)
            .collect()
    }
}
