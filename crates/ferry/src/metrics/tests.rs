use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use ferry_compile::mode::ProxyMode;
use ferry_dataplane::mode::FailureCounter;
use ferry_dataplane::SyncKind;

use super::*;
use crate::serve::testing::get;
use crate::serve::Server;
use ferry_model::IpFamily;

/// `# TYPE name type` lines of an exposition.
fn types(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        .map(|(n, t)| (n.to_owned(), t.to_owned()))
        .collect()
}

/// The value of the sample `series` (name with labels, exactly as written).
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn every_metric_is_declared_with_upstreams_name_and_type() {
    let m = Metrics::new(FailureCounter::NftablesSync);
    m.healthz(200);
    m.livez(200);
    m.invalid_object("Service");
    let text = m.encode();
    let declared = types(&text);
    for (name, kind) in [
        ("kubeproxy_sync_proxy_rules_duration_seconds", "histogram"),
        (
            "kubeproxy_sync_full_proxy_rules_duration_seconds",
            "histogram",
        ),
        (
            "kubeproxy_sync_partial_proxy_rules_duration_seconds",
            "histogram",
        ),
        ("kubeproxy_sync_proxy_rules_last_timestamp_seconds", "gauge"),
        (
            "kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds",
            "gauge",
        ),
        (
            "kubeproxy_network_programming_duration_seconds",
            "histogram",
        ),
        (
            "kubeproxy_sync_proxy_rules_endpoint_changes_pending",
            "gauge",
        ),
        ("kubeproxy_sync_proxy_rules_endpoint_changes", "counter"),
        (
            "kubeproxy_sync_proxy_rules_service_changes_pending",
            "gauge",
        ),
        ("kubeproxy_sync_proxy_rules_service_changes", "counter"),
        (
            "kubeproxy_sync_proxy_rules_no_local_endpoints_total",
            "gauge",
        ),
        ("kubeproxy_proxy_healthz", "counter"),
        ("kubeproxy_proxy_livez", "counter"),
        (
            "kubeproxy_sync_proxy_rules_nftables_sync_failures",
            "counter",
        ),
        ("ferry_invalid_objects", "counter"),
        ("ferry_service_health_check_servers", "gauge"),
    ] {
        assert_eq!(
            declared.get(name).map(String::as_str),
            Some(kind),
            "{name}:\n{text}"
        );
    }
    assert!(text.ends_with("# EOF\n"), "OpenMetrics");
    // Counters are sampled with `_total`, so the series names are upstream's.
    assert_eq!(
        sample(&text, "kubeproxy_sync_proxy_rules_service_changes_total"),
        Some(0.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"kubeproxy_sync_proxy_rules_nftables_sync_failures_total{ip_family="IPv4"}"#
        ),
        Some(0.0)
    );
}

#[test]
fn syncs_fill_the_histograms_by_kind_and_failures_are_counted() {
    let m = Metrics::new(FailureCounter::NftablesSync);
    m.sync_ran_for(IpFamily::V4, Some(SyncKind::Full), Duration::from_millis(3));
    m.sync_ran_for(
        IpFamily::V4,
        Some(SyncKind::Partial),
        Duration::from_millis(1),
    );
    m.sync_ran_for(IpFamily::V4, None, Duration::from_millis(2));
    let text = m.encode();
    let count = |name: &str| sample(&text, &format!(r#"{name}_count{{ip_family="IPv4"}}"#));
    assert_eq!(
        count("kubeproxy_sync_proxy_rules_duration_seconds"),
        Some(3.0)
    );
    assert_eq!(
        count("kubeproxy_sync_full_proxy_rules_duration_seconds"),
        Some(1.0)
    );
    assert_eq!(
        count("kubeproxy_sync_partial_proxy_rules_duration_seconds"),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"kubeproxy_sync_proxy_rules_nftables_sync_failures_total{ip_family="IPv4"}"#
        ),
        Some(1.0)
    );
    // Upstream's buckets: 1 ms doubling 15 times.
    for le in ["0.001", "0.002", "0.004", "16.384", "+Inf"] {
        let series = format!(
            r#"kubeproxy_sync_full_proxy_rules_duration_seconds_bucket{{le="{le}",ip_family="IPv4"}}"#
        );
        assert!(sample(&text, &series).is_some(), "{series}:\n{text}");
    }
}

#[test]
fn network_programming_latency_comes_from_trigger_times() {
    let m = Metrics::new(FailureCounter::NftablesSync);
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_714_557_610);
    m.sync_succeeded_for(
        IpFamily::V4,
        now,
        &[
            "2024-05-01T10:00:00Z".to_owned(), // 10 s before
            "2024-05-01T10:00:20Z".to_owned(), // in the future: skew, skipped
            "yesterday".to_owned(),            // unparseable, skipped
        ],
    );
    let text = m.encode();
    let h = "kubeproxy_network_programming_duration_seconds";
    assert_eq!(
        sample(&text, &format!(r#"{h}_count{{ip_family="IPv4"}}"#)),
        Some(1.0)
    );
    assert_eq!(
        sample(&text, &format!(r#"{h}_sum{{ip_family="IPv4"}}"#)),
        Some(10.0)
    );
    assert_eq!(
        sample(
            &text,
            &format!(r#"{h}_bucket{{le="10.0",ip_family="IPv4"}}"#)
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            &format!(r#"{h}_bucket{{le="9.0",ip_family="IPv4"}}"#)
        ),
        Some(0.0)
    );
    assert_eq!(
        sample(
            &text,
            r#"kubeproxy_sync_proxy_rules_last_timestamp_seconds{ip_family="IPv4"}"#
        ),
        Some(1_714_557_610.0)
    );
}

#[test]
fn changes_and_invalid_objects_are_counted() {
    let m = Metrics::new(FailureCounter::NftablesSync);
    let mut changes = crate::sync::PendingChanges::default();
    changes
        .services
        .insert(ferry_model::ServiceName::new("dev", "web"));
    changes.services_total = 3;
    changes.slices_total = 5;
    m.changes(&changes);
    m.changes(&changes);
    m.invalid_object("Service");
    m.invalid_object("Service");
    m.invalid_object("");
    m.no_local_endpoints_for(
        IpFamily::V4,
        NoLocalEndpoints {
            internal: 1,
            external: 2,
        },
    );
    let text = m.encode();
    for (series, value) in [
        ("kubeproxy_sync_proxy_rules_service_changes_pending", 1.0),
        ("kubeproxy_sync_proxy_rules_service_changes_total", 3.0),
        ("kubeproxy_sync_proxy_rules_endpoint_changes_pending", 0.0),
        ("kubeproxy_sync_proxy_rules_endpoint_changes_total", 5.0),
        (r#"ferry_invalid_objects_total{kind="Service"}"#, 2.0),
        (r#"ferry_invalid_objects_total{kind="file"}"#, 1.0),
        (
            r#"kubeproxy_sync_proxy_rules_no_local_endpoints_total{ip_family="IPv4",traffic_policy="external"}"#,
            2.0,
        ),
    ] {
        assert_eq!(sample(&text, series), Some(value), "{series}:\n{text}");
    }
}

#[tokio::test]
async fn the_server_serves_metrics_text() {
    let m = Metrics::new(FailureCounter::NftablesSync);
    m.sync_ran_for(IpFamily::V4, Some(SyncKind::Full), Duration::from_millis(3));
    let server = Server::start(
        "metrics",
        "127.0.0.1:0".parse().expect("addr"),
        router(m.clone(), ProxyMode::Nftables),
    )
    .await
    .expect("bind");
    let r = get(server.local_addr(), "/metrics").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some(CONTENT_TYPE_OPENMETRICS));
    assert!(types(&r.body).contains_key("kubeproxy_sync_proxy_rules_duration_seconds"));
    assert_eq!(
        get(server.local_addr(), "/proxyMode").await.body,
        "nftables"
    );
    server.stop().await;
}

#[tokio::test]
async fn the_metrics_server_also_answers_healthz_and_configz_like_kube_proxys() {
    let mut config = crate::config::Config::default();
    crate::config::kube_proxy::defaults::apply(&mut config.kube_proxy);
    crate::configz::publish(&config);
    let server = Server::start(
        "metrics",
        "127.0.0.1:0".parse().expect("addr"),
        router(
            Metrics::new(FailureCounter::NftablesSync),
            ProxyMode::Nftables,
        ),
    )
    .await
    .expect("bind");
    let r = get(server.local_addr(), "/healthz").await;
    assert_eq!((r.status, r.body.as_str()), (200, "ok"));
    let r = get(server.local_addr(), "/configz").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    let v: serde_json::Value = serde_json::from_str(&r.body).expect("json");
    assert_eq!(
        v["kubeproxy.config.k8s.io"]["metricsBindAddress"],
        "127.0.0.1:10249"
    );
    server.stop().await;
}

#[tokio::test]
async fn proxy_mode_names_the_running_mode() {
    let m = Metrics::new(FailureCounter::IptablesRestore);
    let server = Server::start(
        "metrics",
        "127.0.0.1:0".parse().expect("addr"),
        router(m, ProxyMode::Iptables),
    )
    .await
    .expect("bind");
    assert_eq!(
        get(server.local_addr(), "/proxyMode").await.body,
        "iptables"
    );
    server.stop().await;
}

#[test]
fn build_info_is_exported_with_ferrys_version() {
    let text = Metrics::new(FailureCounter::NftablesSync).encode();
    let line = text
        .lines()
        .find(|l| l.starts_with("kubernetes_build_info{"))
        .unwrap_or_else(|| panic!("no kubernetes_build_info:\n{text}"));
    assert!(
        line.contains(&format!("git_version=\"v{}\"", crate::version::VERSION)),
        "{line}"
    );
    assert!(line.ends_with(" 1"), "{line}");
}

#[test]
fn failed_syncs_count_in_the_modes_counter() {
    let m = Metrics::new(FailureCounter::IptablesRestore);
    m.sync_ran_for(IpFamily::V4, None, Duration::from_millis(5));
    let text = m.encode();
    let ipt = r#"kubeproxy_sync_proxy_rules_iptables_restore_failures_total{ip_family="IPv4"}"#;
    let nft = r#"kubeproxy_sync_proxy_rules_nftables_sync_failures_total{ip_family="IPv4"}"#;
    assert_eq!(sample(&text, ipt), Some(1.0), "{text}");
    assert_eq!(sample(&text, nft), Some(0.0), "{text}");
}

#[test]
fn ipv6_syncs_are_labelled_with_their_family() {
    let m = Metrics::new(FailureCounter::NftablesSync);
    m.sync_ran_for(IpFamily::V6, Some(SyncKind::Full), Duration::from_millis(3));
    m.no_local_endpoints_for(
        IpFamily::V6,
        NoLocalEndpoints {
            internal: 0,
            external: 2,
        },
    );
    let text = m.encode();
    assert!(
        text.contains(
            "kubeproxy_sync_full_proxy_rules_duration_seconds_count{ip_family=\"IPv6\"} 1"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "kubeproxy_sync_proxy_rules_no_local_endpoints_total{ip_family=\"IPv6\",traffic_policy=\"external\"} 2"
        ),
        "{text}"
    );
}

#[test]
fn conntrack_cleanups_are_timed_and_counted_per_family() {
    let m = Metrics::new(FailureCounter::NftablesSync);
    let text = m.encode();
    let declared = types(&text);
    for (name, kind) in [
        (
            "kubeproxy_conntrack_reconciler_sync_duration_seconds",
            "histogram",
        ),
        ("kubeproxy_conntrack_reconciler_deleted_entries", "counter"),
        ("ferry_conntrack_cleanup_failures", "counter"),
    ] {
        assert_eq!(declared.get(name).map(String::as_str), Some(kind), "{name}");
    }
    m.conntrack_cleaned(IpFamily::V4, Duration::from_millis(3), 2, true);
    m.conntrack_cleaned(IpFamily::V4, Duration::from_millis(1), 1, false);
    let text = m.encode();
    let family = "{ip_family=\"IPv4\"}";
    assert_eq!(
        sample(
            &text,
            &format!("kubeproxy_conntrack_reconciler_deleted_entries_total{family}")
        ),
        Some(3.0)
    );
    assert_eq!(
        sample(
            &text,
            &format!("ferry_conntrack_cleanup_failures_total{family}")
        ),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &text,
            &format!("kubeproxy_conntrack_reconciler_sync_duration_seconds_count{family}")
        ),
        Some(2.0)
    );
}

#[test]
fn readiness_probe_results_are_counted_per_service_from_the_book() {
    use ferry_source::pods::PodKey;
    use ferry_source::probe::{Outcome, ProbeBook, ProbeReport, PROBE_RESULTS_METRIC};

    let m = Metrics::new(FailureCounter::NftablesSync);
    let book = Arc::new(std::sync::Mutex::new(ProbeBook::default()));
    m.follow_probes(book.clone());
    let web = [ferry_model::ServiceName::new("dev", "web")];
    let report = |outcome| ProbeReport {
        pod: PodKey::new("dev", "web-a"),
        container: "app".into(),
        outcome,
        at: SystemTime::UNIX_EPOCH,
        run: 1,
        verdict: None,
        changed: false,
    };
    {
        let mut b = book.lock().expect("book");
        b.record(&report(Outcome::Success), &web);
        b.record(&report(Outcome::Success), &web);
        b.record(&report(Outcome::Failure("503".into())), &web);
    }
    let text = m.encode();
    assert_eq!(
        types(&text)
            .get("ferry_readiness_probe_results")
            .map(String::as_str),
        Some("counter"),
        "{text}"
    );
    let series = |result: &str| {
        format!("{PROBE_RESULTS_METRIC}{{namespace=\"dev\",service=\"web\",result=\"{result}\"}}")
    };
    assert_eq!(sample(&text, &series("success")), Some(2.0), "{text}");
    assert_eq!(sample(&text, &series("failure")), Some(1.0), "{text}");
    assert_eq!(sample(&text, &series("error")), Some(0.0), "{text}");
    // Scraped again: the counters follow the book, they do not add it twice.
    assert_eq!(sample(&m.encode(), &series("success")), Some(2.0));
}

/// The series kube-proxy's Grafana dashboard queries (kubernetes-mixin's
/// `dashboards/proxy.libsonnet`: rules sync rate and latency, network programming rate and
/// latency, API request rate by code and GET/POST latency, memory and CPU), each found on
/// Ferry's `/metrics` once the agent has done each thing once. `up` is Prometheus' own;
/// `go_goroutines` is not exported (the reference says why).
#[test]
fn every_series_kube_proxys_dashboard_queries_is_exported() {
    let text = crate::reference::metrics::exercised().encode();
    let queried = [
        "kubeproxy_sync_proxy_rules_duration_seconds_count{",
        "kubeproxy_sync_proxy_rules_duration_seconds_bucket{",
        "kubeproxy_network_programming_duration_seconds_count{",
        "kubeproxy_network_programming_duration_seconds_bucket{",
        "rest_client_requests_total{code=\"200\"",
        "rest_client_request_duration_seconds_bucket{",
        "process_resident_memory_bytes ",
        "process_cpu_seconds_total ",
    ];
    for series in queried {
        assert!(
            text.lines().any(|l| l.starts_with(series)),
            "{series} is not on /metrics:\n{text}"
        );
    }
    let get = text
        .lines()
        .find(|l| l.starts_with("rest_client_request_duration_seconds_bucket{"))
        .expect("a latency bucket");
    assert!(
        get.contains("verb=\"GET\"") && get.contains("host=\""),
        "{get}"
    );
    assert!(!text.contains("go_goroutines"));
}
