use std::sync::{Arc, Mutex};
use std::time::{Duration, UNIX_EPOCH};

use ferry_dataplane::mode::FailureCounter;
use ferry_dataplane::nft::{NftDataplane, NftRunner};
use ferry_dataplane::Error;
use ferry_model::fixtures::*;
use ferry_model::{IpFamily, NodeContext, NodeTaint, Object, TO_BE_DELETED_TAINT};
use ferry_source::SourceEvent;
use serde_json::Value;
use tokio::time::advance;

use super::*;
use crate::serve::testing::get;
use crate::serve::Server;
use crate::sync::{FamilySync, Syncer};

const TIMEOUT: Duration = Duration::from_secs(60);

fn json(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"))
}

#[tokio::test(start_paused = true)]
async fn a_fresh_proxy_is_healthy() {
    let h = ProxyHealth::new(TIMEOUT);
    assert!(h.is_healthy());
    assert_eq!(h.healthz().status, 200);
    assert_eq!(h.livez().status, 200);
}

#[tokio::test(start_paused = true)]
async fn a_change_waiting_longer_than_the_timeout_is_unhealthy_until_a_sync() {
    let h = ProxyHealth::new(TIMEOUT);
    h.queued_update();
    advance(TIMEOUT - Duration::from_millis(1)).await;
    assert!(h.is_healthy(), "not late yet");
    advance(Duration::from_millis(1)).await;
    assert!(!h.is_healthy());
    assert_eq!(h.healthz().status, 503);
    assert_eq!(h.livez().status, 503);
    h.updated();
    assert!(h.is_healthy());
    assert_eq!(h.healthz().status, 200);
}

#[tokio::test(start_paused = true)]
async fn the_oldest_queued_change_counts() {
    let h = ProxyHealth::new(TIMEOUT);
    h.queued_update();
    advance(TIMEOUT / 2).await;
    h.queued_update();
    advance(TIMEOUT / 2).await;
    assert!(
        !h.is_healthy(),
        "the first change has waited the whole timeout"
    );
}

#[tokio::test(start_paused = true)]
async fn an_idle_proxy_stays_healthy() {
    let h = ProxyHealth::new(TIMEOUT);
    h.queued_update();
    h.updated();
    advance(TIMEOUT * 10).await;
    assert!(h.is_healthy());
}

#[test]
fn a_node_being_removed_fails_healthz_but_not_livez() {
    let h = ProxyHealth::new(TIMEOUT);
    let mut node = mk_node("k8s-node2", "10.1.1.9", "192.168.169.128/26");
    node.taints.push(NodeTaint {
        key: TO_BE_DELETED_TAINT.into(),
        value: "1718000000".into(),
        effect: "NoSchedule".into(),
    });
    h.sync_node(Some(&node));
    let healthz = h.healthz();
    assert_eq!(healthz.status, 503);
    assert_eq!(json(&healthz.body)["nodeEligible"], Value::Bool(false));
    assert_eq!(h.livez().status, 200);

    node.taints.clear();
    h.sync_node(Some(&node));
    assert_eq!(h.healthz().status, 200);
    node.deletion_timestamp = Some("2024-05-01T10:00:00Z".into());
    h.sync_node(Some(&node));
    assert_eq!(h.healthz().status, 503);
    h.sync_node(None);
    assert_eq!(h.healthz().status, 200, "no Node object: eligible");
}

#[test]
fn bodies_carry_upstreams_fields() {
    let h = ProxyHealth::new(Duration::ZERO);
    let healthy = json(&h.healthz().body);
    assert_eq!(healthy["nodeEligible"], Value::Bool(true));
    assert_eq!(
        healthy["lastUpdated"], healthy["currentTime"],
        "healthy: lastUpdated is now"
    );
    let livez = json(&h.livez().body);
    assert!(livez.get("nodeEligible").is_none());
    assert!(livez["currentTime"]
        .as_str()
        .is_some_and(|t| t.ends_with(" +0000 UTC")));

    h.queued_update();
    let stuck = h.healthz();
    assert_eq!(stuck.status, 503);
    assert!(
        stuck
            .body
            .starts_with(r#"{"lastUpdated": "0001-01-01 00:00:00 +0000 UTC","currentTime": ""#),
        "never synced: Go's zero time; {}",
        stuck.body
    );
    assert!(
        stuck.body.ends_with(r#"", "nodeEligible": true}"#),
        "{}",
        stuck.body
    );
}

#[test]
fn times_are_written_like_go() {
    let t = UNIX_EPOCH + Duration::from_nanos(1_714_557_600_000_456_000);
    assert_eq!(go_time(Some(t)), "2024-05-01 10:00:00.000456 +0000 UTC");
    let whole = UNIX_EPOCH + Duration::from_secs(1_714_557_600);
    assert_eq!(go_time(Some(whole)), "2024-05-01 10:00:00 +0000 UTC");
}

/// An nft runner that fails while `stuck` is set, like a kernel refusing the transaction.
#[derive(Clone, Default)]
struct Flaky {
    stuck: Arc<Mutex<bool>>,
}

impl NftRunner for Flaky {
    fn run(&mut self, _script: &str) -> Result<(), Error> {
        if *self.stuck.lock().expect("lock") {
            return Err(Error::Rejected {
                program: "nft".into(),
                status: "exit status: 1".into(),
                stderr: "injected".into(),
            });
        }
        Ok(())
    }
}

fn sync_once(
    syncer: &mut Syncer<NftDataplane<Flaky>>,
) -> Result<ferry_dataplane::SyncReport, Error> {
    let (state, families) = syncer.split();
    families[0].sync(state, false)
}

/// The sync loop's calls (run.rs): a change queues, only a successful sync updates.
#[tokio::test(start_paused = true)]
async fn a_failing_dataplane_turns_healthz_503_and_recovery_turns_it_back() {
    let runner = Flaky::default();
    let ctx = NodeContext {
        node_name: "k8s-node2".into(),
        family: IpFamily::V4,
    };
    let mut syncer = Syncer::new(vec![FamilySync::new(
        ctx,
        Default::default(),
        NftDataplane::with_runner(runner.clone()),
    )]);
    let h = ProxyHealth::new(TIMEOUT);
    let svc = Object::from(mk_service("dev", "web", "10.96.0.10", 80));
    assert!(syncer.handle(SourceEvent::Resync(vec![svc])));
    h.queued_update();
    sync_once(&mut syncer).expect("first sync");
    h.updated();

    let other = Object::from(mk_service("dev", "other", "10.96.0.11", 80));
    assert!(syncer.handle(SourceEvent::Apply(other)));
    h.queued_update();
    *runner.stuck.lock().expect("lock") = true;
    for _ in 0..61 {
        assert!(sync_once(&mut syncer).is_err());
        advance(Duration::from_secs(1)).await;
    }
    assert_eq!(h.healthz().status, 503, "stuck for longer than the timeout");

    *runner.stuck.lock().expect("lock") = false;
    sync_once(&mut syncer).expect("recovered");
    h.updated();
    assert_eq!(h.healthz().status, 200);
}

#[tokio::test]
async fn the_server_answers_with_upstreams_codes_headers_and_counts_them() {
    let h = ProxyHealth::new(Duration::ZERO);
    let metrics = Metrics::new(FailureCounter::NftablesSync);
    let server = Server::start(
        "healthz",
        "127.0.0.1:0".parse().expect("addr"),
        router(h.clone(), metrics.clone()),
    )
    .await
    .expect("bind");
    let addr = server.local_addr();

    let ok = get(addr, "/healthz").await;
    assert_eq!(ok.status, 200);
    assert_eq!(ok.header("content-type"), Some("application/json"));
    assert_eq!(ok.header("x-content-type-options"), Some("nosniff"));
    assert_eq!(json(&ok.body)["nodeEligible"], Value::Bool(true));
    assert_eq!(get(addr, "/livez").await.status, 200);

    h.queued_update();
    let bad = get(addr, "/healthz").await;
    assert_eq!(bad.status, 503);
    assert_eq!(bad.header("content-type"), Some("application/json"));
    assert_eq!(get(addr, "/livez").await.status, 503);
    assert_eq!(get(addr, "/other").await.status, 404);

    let text = metrics.encode();
    for line in [
        r#"kubeproxy_proxy_healthz_total{code="200"} 1"#,
        r#"kubeproxy_proxy_healthz_total{code="503"} 1"#,
        r#"kubeproxy_proxy_livez_total{code="200"} 1"#,
        r#"kubeproxy_proxy_livez_total{code="503"} 1"#,
    ] {
        assert!(text.lines().any(|l| l == line), "{line} missing:\n{text}");
    }
    server.stop().await;
}
