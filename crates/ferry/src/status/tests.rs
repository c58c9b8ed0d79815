use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use ferry_compile::NodeCompiler;
use ferry_dataplane::live::KernelReport;
use ferry_dataplane::SyncKind;
use ferry_model::fixtures::*;
use ferry_model::{ClusterState, IpFamily, NodeContext, Object, ServiceName, TrafficPolicy};

use super::build::frontends_of;
use super::history::Attempt;
use super::*;
use crate::config::Config;

/// dev/web: a NodePort with externalTrafficPolicy Local, seen from k8s-node2, with a ready
/// local endpoint, a ready one on k8s-node1 and a terminating local one.
fn state() -> ClusterState {
    let mut state = ClusterState::new();
    let svc = with_node_port(
        mk_service("dev", "web", "10.96.198.86", 8080),
        32223,
        TrafficPolicy::Local,
    );
    state.apply(Object::from(svc));
    let eps = vec![
        mk_endpoint("192.168.169.166", "k8s-node2"),
        mk_endpoint("192.168.36.86", "k8s-node1"),
        mk_endpoint_with("192.168.169.170", "k8s-node2", false, true, true),
    ];
    state.apply(Object::from(mk_slice("dev", "web", 56010, eps)));
    state.apply(Object::from(mk_node(
        "k8s-node2",
        "10.1.1.9",
        "192.168.169.128/26",
    )));
    state
}

fn frontends(kernel: &Result<KernelReport, String>) -> Vec<Frontend> {
    let state = state();
    let config = Config {
        node_name: "k8s-node2".into(),
        ..Config::default()
    };
    let context = NodeContext {
        node_name: "k8s-node2".into(),
        family: IpFamily::V4,
    };
    let compile = config.compile_config(IpFamily::V4);
    let compiler = NodeCompiler::new(&state, &context, &compile);
    let view = compiler.view(&state);
    frontends_of(&view, &compiler.plan_of(&view), kernel, None)
}

fn programmed() -> Result<KernelReport, String> {
    Ok(KernelReport {
        present: true,
        services: BTreeMap::from([(ServiceName::new("dev", "web"), Vec::new())]),
        stray: Vec::new(),
    })
}

fn used(f: &Frontend) -> Vec<&str> {
    f.backends
        .iter()
        .filter(|b| b.used)
        .map(|b| b.address.as_str())
        .collect()
}

#[test]
fn each_frontend_lists_the_backends_its_policy_uses_and_why_not_the_others() {
    let fs = frontends(&programmed());
    assert_eq!(
        fs.iter()
            .map(|f| (f.kind.as_str(), f.address.as_str()))
            .collect::<Vec<_>>(),
        [("ClusterIP", "10.96.198.86:8080"), ("NodePort", "*:32223")]
    );
    let (cluster_ip, node_port) = (&fs[0], &fs[1]);
    assert_eq!(cluster_ip.policy.traffic_policy, "Cluster");
    assert_eq!(cluster_ip.endpoint_set.as_deref(), Some("cluster"));
    // Endpoints are sorted by address.
    assert_eq!(
        used(cluster_ip),
        ["192.168.36.86:56010", "192.168.169.166:56010"]
    );
    assert_eq!(node_port.policy.traffic_policy, "Local");
    assert_eq!(node_port.endpoint_set.as_deref(), Some("local"));
    assert_eq!(used(node_port), ["192.168.169.166:56010"]);
    assert_eq!(node_port.policy.answers_on.as_deref(), Some("10.1.1.9/32"));
    let remote = &node_port.backends[0];
    assert_eq!(
        (
            remote.address.as_str(),
            remote.local,
            remote.excluded.as_deref()
        ),
        (
            "192.168.36.86:56010",
            false,
            Some("on another node (k8s-node1)")
        )
    );
    let terminating = &cluster_ip.backends[2];
    assert!(terminating.terminating && terminating.serving && !terminating.ready);
    assert_eq!(
        terminating.excluded.as_deref(),
        Some("terminating (ready endpoints exist, so no fallback)")
    );
    assert!(fs.iter().all(|f| f.kernel.state == "programmed"));
}

#[test]
fn the_kernel_state_is_programmed_differs_or_unknown() {
    let mut differs = programmed().expect("report");
    differs.services.insert(
        ServiceName::new("dev", "web"),
        vec!["map service-ips lacks element 10.96.198.86 . tcp . 8080".to_owned()],
    );
    let fs = frontends(&Ok(differs));
    assert_eq!(fs[0].kernel.state, "differs");
    assert_eq!(fs[0].kernel.differences.len(), 1);
    let fs = frontends(&Err("could not run nft".to_owned()));
    assert_eq!(fs[1].kernel.state, "unknown");
    assert_eq!(
        fs[1].kernel.differences,
        ["the kernel could not be read: could not run nft"]
    );
}

#[test]
fn history_keeps_the_last_success_and_counts_failures_since() {
    let mut h = History::default();
    let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_714_557_610);
    let ok = |kind| Attempt {
        family: IpFamily::V4,
        result: Ok(kind),
        duration: Duration::from_millis(3),
    };
    h.record(&[ok(SyncKind::Full)], t);
    h.record(&[ok(SyncKind::Partial)], t + Duration::from_secs(5));
    let failed = Attempt {
        family: IpFamily::V4,
        result: Err("could not run nft: No such file or directory".to_owned()),
        duration: Duration::ZERO,
    };
    h.record(&[failed.clone(), failed], t + Duration::from_secs(9));
    let f = h.family(IpFamily::V4);
    let last = f.last_sync.expect("a success");
    assert_eq!(
        (last.time.as_str(), last.kind.as_str()),
        ("2024-05-01T10:00:15Z", "partial")
    );
    assert_eq!(f.last_full_sync.as_deref(), Some("2024-05-01T10:00:10Z"));
    assert_eq!(f.failures, 2);
    assert!(f.last_error.expect("error").contains("could not run nft"));
    assert_eq!(h.family(IpFamily::V6).last_sync, None);
}

fn status() -> Status {
    Status {
        version: "0.1.0".into(),
        node: "k8s-node2".into(),
        mode: "nftables mode".into(),
        source: SourceStatus {
            description: "manifests /etc/ferry".into(),
            problem: None,
        },
        families: vec![FamilyStatus {
            family: "IPv4".into(),
            last_sync: Some(SyncRecord {
                time: "2024-05-01T10:00:15Z".into(),
                kind: "partial".into(),
                duration_ms: 1.25,
            }),
            last_full_sync: Some("2024-05-01T10:00:10Z".into()),
            failures: 0,
            last_error: None,
            kernel: KernelSummary {
                present: true,
                error: None,
                stray: Vec::new(),
            },
        }],
        conntrack: vec![
            "net.netfilter.nf_conntrack_tcp_timeout_established = 86400 (was 432000; \
             conntrack.tcpEstablishedTimeout)"
                .into(),
        ],
        frontends: frontends(&programmed()),
    }
}

#[test]
fn the_text_shows_each_frontend_then_its_backends() {
    let text = text::render(&status());
    let expected = "\
ferry v0.1.0 on node k8s-node2: nftables mode; source manifests /etc/ferry
IPv4: last sync 2024-05-01T10:00:15Z (partial, 1.2 ms), last full sync 2024-05-01T10:00:10Z; kernel: the mode's rules are there
conntrack: net.netfilter.nf_conntrack_tcp_timeout_established = 86400 (was 432000; conntrack.tcpEstablishedTimeout)

10.96.198.86:8080/tcp  ClusterIP  dev/web:http  policy Cluster; forward to cluster endpoints; kernel: programmed
    => 192.168.36.86:56010   ready (node k8s-node1)
    => 192.168.169.166:56010 ready, local (node k8s-node2)
       192.168.169.170:56010 serving, terminating, local (node k8s-node2): not used: terminating (ready endpoints exist, so no fallback)
*:32223/tcp            NodePort   dev/web:http  policy Local; forward to local endpoints; kernel: programmed
    answers on 10.1.1.9/32
       192.168.36.86:56010   ready (node k8s-node1): not used: on another node (k8s-node1)
    => 192.168.169.166:56010 ready, local (node k8s-node2)
       192.168.169.170:56010 serving, terminating, local (node k8s-node2): not used: terminating (ready endpoints exist, so no fallback)
";
    assert_eq!(text, expected, "\n{text}");
}

#[test]
fn the_json_is_camel_case_and_reads_back() {
    let s = status();
    let json = serde_json::to_value(&s).expect("json");
    assert_eq!(json["families"][0]["lastSync"]["durationMs"], 1.25);
    assert_eq!(json["frontends"][1]["policy"]["trafficPolicy"], "Local");
    assert_eq!(json["frontends"][1]["endpointSet"], "local");
    assert_eq!(json["frontends"][0]["backends"][0]["ready"], true);
    let back: Status = serde_json::from_value(json).expect("reads back");
    assert_eq!(back, s);
    // A newer agent may add per-endpoint fields (probe state): older clients still read it.
    let mut newer = serde_json::to_value(&s).expect("json");
    newer["frontends"][0]["backends"][0]["probe"] = serde_json::json!({"state": "passing"});
    assert!(serde_json::from_value::<Status>(newer).is_ok());
}
