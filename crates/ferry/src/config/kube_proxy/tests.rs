use super::*;

#[test]
fn the_field_tree_lists_every_field_nested() {
    let tree = KubeProxyConfiguration::field_tree();
    for path in [
        "/featureGates",
        "/clientConnection/qps",
        "/logging/options/json/infoBufferSize",
        "/logging/vmodule/0/filePattern",
        "/iptables/localhostNodePorts",
        "/iptables/snatNodeInternalIP",
        "/ipvs/excludeCIDRs",
        "/ipvs/strictARP",
        "/ipvs/tcpFinTimeout",
        "/nftables/masqueradeAll",
        "/winkernel/enableDSR",
        "/detectLocal/interfaceNamePrefix",
        "/clusterCIDR",
        "/conntrack/udpStreamTimeout",
        "/udpIdleTimeout",
        "/showHiddenMetricsForVersion",
        "/windowsRunAsService",
    ] {
        assert!(tree.pointer(path).is_some(), "{path} missing from {tree}");
    }
}

#[test]
fn upstream_defaults_fill_every_zero_value() {
    let mut c = KubeProxyConfiguration::empty();
    defaults::apply(&mut c);
    let v = serde_json::to_value(&c).expect("json");
    for (path, want) in [
        ("/bindAddress", serde_json::json!("0.0.0.0")),
        ("/healthzBindAddress", serde_json::json!("0.0.0.0:10256")),
        ("/metricsBindAddress", serde_json::json!("127.0.0.1:10249")),
        ("/oomScoreAdj", serde_json::json!(-999)),
        ("/iptables/syncPeriod", serde_json::json!("30s")),
        ("/iptables/minSyncPeriod", serde_json::json!("1s")),
        ("/iptables/masqueradeBit", serde_json::json!(14)),
        ("/iptables/localhostNodePorts", serde_json::json!(true)),
        ("/nftables/syncPeriod", serde_json::json!("30s")),
        ("/ipvs/syncPeriod", serde_json::json!("30s")),
        ("/ipvs/minSyncPeriod", serde_json::json!("0s")),
        ("/conntrack/maxPerCore", serde_json::json!(32768)),
        ("/conntrack/min", serde_json::json!(131072)),
        (
            "/conntrack/tcpEstablishedTimeout",
            serde_json::json!("24h0m0s"),
        ),
        (
            "/conntrack/tcpCloseWaitTimeout",
            serde_json::json!("1h0m0s"),
        ),
        ("/configSyncPeriod", serde_json::json!("15m0s")),
        ("/udpIdleTimeout", serde_json::json!("250ms")),
        ("/clientConnection/qps", serde_json::json!(5.0)),
        ("/clientConnection/burst", serde_json::json!(10)),
        ("/logging/format", serde_json::json!("text")),
        ("/logging/flushFrequency", serde_json::json!("5s")),
    ] {
        assert_eq!(v.pointer(path), Some(&want), "{path}");
    }
}

#[test]
fn ipvs_settings_are_kept() {
    let text = "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n\
                mode: ipvs\nipvs:\n  scheduler: lc\n  strictARP: true\n  excludeCIDRs: [10.0.0.0/8]\n  \
                tcpTimeout: 900s\n  udpTimeout: 30s\n";
    let f = crate::config::FileConfig::parse("x.yaml", text).expect("parses");
    assert!(f.warnings.is_empty(), "{:?}", f.warnings);
    let ipvs = &f.config.ipvs;
    assert_eq!(ipvs.scheduler, "lc");
    assert!(ipvs.strict_arp);
    assert_eq!(
        ipvs.exclude_cidrs.as_deref(),
        Some(&["10.0.0.0/8".to_owned()][..])
    );
    assert_eq!(ipvs.tcp_timeout, GoDuration::from_secs(900));
    assert_eq!(ipvs.udp_timeout, GoDuration::from_secs(30));
}
