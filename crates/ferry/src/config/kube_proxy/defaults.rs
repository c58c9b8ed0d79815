//! kube-proxy's defaulting (pkg/proxy/apis/config/v1alpha1/defaults.go): a zero or empty
//! value means "use the default", so kubeadm's ConfigMap (every field present, most of them
//! `0s`, `""` or `null`) means what it means to kube-proxy.

use std::net::IpAddr;
use std::time::Duration;

use super::KubeProxyConfiguration;

/// kube-proxy's health server port (`ports.ProxyHealthzPort`).
pub const HEALTHZ_PORT: u16 = 10256;
/// kube-proxy's metrics server port (`ports.ProxyStatusPort`).
pub const METRICS_PORT: u16 = 10249;
/// kube-proxy's OOM score adjustment (`qos.KubeProxyOOMScoreAdj`).
pub const OOM_SCORE_ADJ: i32 = -999;

const SYNC_PERIOD: Duration = Duration::from_secs(30);
const MIN_SYNC_PERIOD: Duration = Duration::from_secs(1);

/// Fills every unset (zero, empty, null) field with upstream's default.
pub fn apply(c: &mut KubeProxyConfiguration) {
    if c.bind_address.is_empty() {
        c.bind_address = "0.0.0.0".to_owned();
    }
    let v6 = c
        .bind_address
        .split(',')
        .next()
        .and_then(|a| a.trim().parse::<IpAddr>().ok())
        .is_some_and(|ip| ip.is_ipv6());
    let (healthz_host, metrics_host) = if v6 {
        ("[::]", "[::1]")
    } else {
        ("0.0.0.0", "127.0.0.1")
    };
    c.healthz_bind_address = with_port(&c.healthz_bind_address, healthz_host, HEALTHZ_PORT);
    c.metrics_bind_address = with_port(&c.metrics_bind_address, metrics_host, METRICS_PORT);
    c.oom_score_adj.get_or_insert(OOM_SCORE_ADJ);

    let ipt = &mut c.iptables;
    ipt.sync_period = ipt.sync_period.or(SYNC_PERIOD);
    ipt.min_sync_period = ipt.min_sync_period.or(MIN_SYNC_PERIOD);
    ipt.masquerade_bit.get_or_insert(14);
    ipt.localhost_node_ports.get_or_insert(true);
    c.ipvs.sync_period = c.ipvs.sync_period.or(SYNC_PERIOD);
    let nft = &mut c.nftables;
    nft.sync_period = nft.sync_period.or(SYNC_PERIOD);
    nft.min_sync_period = nft.min_sync_period.or(MIN_SYNC_PERIOD);
    nft.masquerade_bit.get_or_insert(14);

    let ct = &mut c.conntrack;
    ct.max_per_core.get_or_insert(32 * 1024);
    ct.min.get_or_insert(128 * 1024);
    ct.tcp_established_timeout
        .get_or_insert(super::GoDuration::from_secs(24 * 3600));
    ct.tcp_close_wait_timeout
        .get_or_insert(super::GoDuration::from_secs(3600));
    c.config_sync_period = c.config_sync_period.or(Duration::from_secs(15 * 60));
    // The userspace proxier's (upstream until 1.26; Ferry's userspace proxy reads it).
    c.udp_idle_timeout = c.udp_idle_timeout.or(Duration::from_millis(250));

    let cc = &mut c.client_connection;
    if cc.content_type.is_empty() {
        cc.content_type = "application/vnd.kubernetes.protobuf".to_owned();
    }
    if cc.qps == 0.0 {
        cc.qps = 5.0;
    }
    if cc.burst == 0 {
        cc.burst = 10;
    }
    if c.logging.format.is_empty() {
        c.logging.format = "text".to_owned();
    }
    c.logging.flush_frequency = c.logging.flush_frequency.or(Duration::from_secs(5));
}

/// `addr` with `port` appended when it has none (upstream `AppendPortIfNeeded`); `host:port`
/// when empty.
pub fn with_port(addr: &str, host: &str, port: u16) -> String {
    let addr = addr.trim();
    if addr.is_empty() {
        return format!("{host}:{port}");
    }
    match addr.parse::<IpAddr>() {
        Ok(IpAddr::V4(ip)) => format!("{ip}:{port}"),
        Ok(IpAddr::V6(ip)) => format!("[{ip}]:{port}"),
        Err(_) => addr.to_owned(),
    }
}
