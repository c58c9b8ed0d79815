//! The Kubernetes API source driving the real kube-rs client against a fake API server over
//! real HTTP (ferry-testkit): initial list, watch updates, bookmarks, a dropped watch, an
//! outage, and a relist after `410 Gone` (at once, without the back-off).
//!
//! Why the fake: it serves an invalid object (a real API server validates it away), drops a
//! watch, sends a bookmark or a `410 Gone` at the moment the test chooses, and records every
//! request (which watches, from which resourceVersion); it also needs no root and starts in a
//! millisecond. The same source against the real API server: `crates/ferry/tests/kube_real.rs`.

use std::collections::BTreeMap;
use std::time::Duration;

use ferry_model::{Object, ObjectKey, ServiceName};
use ferry_source::kube::{connect, Connection, KubeSource};
use ferry_source::SourceEvent;
use ferry_testkit::{objects, FakeApiServer};
use tokio::sync::mpsc;

/// Longest wait for an event before a test fails (it only matters when something is broken).
const WAIT: Duration = Duration::from_secs(20);
const NODE: &str = "k8s-node2";

struct Harness {
    server: FakeApiServer,
    rx: mpsc::Receiver<SourceEvent>,
    /// The consumer's view: every event applied, as the sync loop does.
    state: BTreeMap<ObjectKey, Object>,
    /// Every event received, in order.
    events: Vec<SourceEvent>,
}

fn seeded() -> FakeApiServer {
    let server = FakeApiServer::start_local().expect("start fake apiserver");
    server.apply(objects::service("dev", "web", "10.96.0.10", 80, 8080));
    server.apply(objects::service("dev", "api", "10.96.0.11", 80, 8080));
    server.apply(objects::endpoint_slice(
        "dev",
        "web-abc",
        "web",
        8080,
        &[("192.168.169.166", true, NODE)],
    ));
    server.apply(objects::node(NODE, "10.1.1.9", "192.168.169.128/26"));
    server.apply(objects::node("k8s-node1", "10.1.1.17", "192.168.36.64/26"));
    server
}

fn svc_key(name: &str) -> ObjectKey {
    ObjectKey::Service(ServiceName::new("dev", name))
}

impl Harness {
    async fn start(server: FakeApiServer) -> Harness {
        Harness::start_with_retry(server, Duration::from_millis(50)).await
    }

    /// A source whose every retry after a failure waits `retry`.
    async fn start_with_retry(server: FakeApiServer, retry: Duration) -> Harness {
        let connection = Connection {
            kubeconfig: None,
            master: Some(server.url()),
            ..Default::default()
        };
        let client = connect(&connection).await.expect("connect");
        let (tx, rx) = mpsc::channel(64);
        let source = KubeSource::new(client, NODE).with_retry_interval(retry);
        tokio::spawn(source.run(tx, |_| {}));
        Harness {
            server,
            rx,
            state: BTreeMap::new(),
            events: Vec::new(),
        }
    }

    async fn next(&mut self) -> SourceEvent {
        let event = tokio::time::timeout(WAIT, self.rx.recv())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "no event within {WAIT:?}; requests:\n{}",
                    self.server.requests().join("\n")
                )
            })
            .expect("the source stopped");
        match &event {
            SourceEvent::Apply(o) => {
                self.state.insert(o.key(), o.clone());
            }
            SourceEvent::Delete(k) => {
                self.state.remove(k);
            }
            SourceEvent::Resync(objects) => {
                self.state = objects.iter().map(|o| (o.key(), o.clone())).collect();
            }
            // Only a ServiceCIDR list after the first Resync, with what it changed.
            SourceEvent::Batch(events) => {
                for e in events {
                    match e {
                        SourceEvent::Apply(o) => {
                            self.state.insert(o.key(), o.clone());
                        }
                        SourceEvent::Delete(k) => {
                            self.state.remove(k);
                        }
                        other => panic!("a Batch of Apply and Delete only: {other:?}"),
                    }
                }
            }
        }
        self.events.push(event.clone());
        event
    }

    /// Receives events until `done` holds for the consumer's state.
    async fn until(&mut self, done: impl Fn(&BTreeMap<ObjectKey, Object>) -> bool) {
        while !done(&self.state) {
            self.next().await;
        }
    }

    fn watches_since(&self, from: usize) -> Vec<String> {
        self.server.requests()[from..]
            .iter()
            .filter(|r| r.contains("watch=true"))
            .cloned()
            .collect()
    }

    fn lists_since(&self, from: usize) -> Vec<String> {
        self.server.requests()[from..]
            .iter()
            .filter(|r| r.starts_with("GET /a") && !r.contains("watch=true"))
            .cloned()
            .collect()
    }
}

/// One watch per kind (Services, EndpointSlices, the Node, ServiceCIDRs) since `from`.
fn every_watch(requests: &[String], from: usize) -> bool {
    requests[from..]
        .iter()
        .filter(|r| r.contains("watch=true"))
        .count()
        >= 4
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_event_is_one_resync_of_every_kind_with_upstreams_selectors() {
    let server = seeded();
    // Ignored like upstream: a headless Service's slice, and this node's neighbour.
    let mut headless = objects::endpoint_slice("dev", "db-xyz", "db", 5432, &[]);
    headless["metadata"]["labels"]["service.kubernetes.io/headless"] = "".into();
    server.apply(headless);
    let mut h = Harness::start(server).await;
    let SourceEvent::Resync(objects) = h.next().await else {
        panic!("first event must be a Resync: {:?}", h.events);
    };
    let keys: Vec<ObjectKey> = objects.iter().map(Object::key).collect();
    assert_eq!(
        keys,
        vec![
            svc_key("api"),
            svc_key("web"),
            ObjectKey::EndpointSlice {
                namespace: "dev".into(),
                name: "web-abc".into()
            },
            ObjectKey::Node(NODE.into()),
        ]
    );
    let requests = h.server.requests().join("\n");
    assert!(requests.contains(
        "labelSelector=%21service.kubernetes.io%2Fheadless%2C%21service.kubernetes.io%2Fservice-proxy-name"
    ), "{requests}");
    assert!(
        requests.contains("fieldSelector=metadata.name%3Dk8s-node2"),
        "{requests}"
    );
    h.server.wait_for_requests(WAIT, |r| every_watch(r, 0));
    for w in h.watches_since(0) {
        assert!(w.contains("allowWatchBookmarks=true"), "{w}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_updates_become_apply_and_delete_events() {
    let mut h = Harness::start(seeded()).await;
    h.next().await;
    h.server
        .apply(objects::service("dev", "web", "10.96.0.99", 80, 8080));
    let ev = h.next().await;
    let SourceEvent::Apply(Object::Service(svc)) = ev else {
        panic!("{ev:?}")
    };
    assert_eq!(
        svc.cluster_ips,
        vec!["10.96.0.99".parse::<std::net::IpAddr>().expect("ip")]
    );
    h.server.delete("Service", "dev", "api");
    assert_eq!(h.next().await, SourceEvent::Delete(svc_key("api")));
    // A change to another node is filtered out by the field selector: the next event is ours.
    h.server
        .apply(objects::node("k8s-node1", "10.1.1.18", "192.168.36.64/26"));
    h.server
        .apply(objects::node(NODE, "10.1.1.10", "192.168.169.128/26"));
    let ev = h.next().await;
    assert!(
        matches!(&ev, SourceEvent::Apply(Object::Node(n)) if n.name == NODE),
        "{ev:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_invalid_update_is_skipped_and_the_last_good_version_kept() {
    let mut h = Harness::start(seeded()).await;
    h.next().await;
    h.server
        .apply(objects::service("dev", "web", "not-an-ip", 80, 8080));
    h.server
        .apply(objects::service("dev", "new", "10.96.0.12", 80, 8080));
    let ev = h.next().await;
    assert!(
        matches!(&ev, SourceEvent::Apply(Object::Service(s)) if &*s.name.name == "new"),
        "the invalid update emits nothing: {ev:?}"
    );
    assert!(h.state.contains_key(&svc_key("web")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_watch_resumes_from_its_resource_version_without_a_relist() {
    let mut h = Harness::start(seeded()).await;
    h.next().await;
    h.server.wait_for_requests(WAIT, |r| every_watch(r, 0));
    let mark = h.server.requests().len();
    h.server.drop_watches();
    h.server.wait_for_requests(WAIT, |r| every_watch(r, mark));
    h.server.delete("Service", "dev", "api");
    assert_eq!(h.next().await, SourceEvent::Delete(svc_key("api")));
    assert!(h.lists_since(mark).is_empty(), "{:?}", h.lists_since(mark));
    let rv = format!("resourceVersion={}", 5);
    assert!(
        h.watches_since(mark).iter().all(|w| w.contains(&rv)),
        "resumed from the last resourceVersion seen: {:?}",
        h.watches_since(mark)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bookmarks_let_a_watch_resume_after_compaction_without_a_relist() {
    let mut h = Harness::start(seeded()).await;
    h.next().await;
    h.server.wait_for_requests(WAIT, |r| every_watch(r, 0));
    // Changes the watches do not see (another node) move the resourceVersion on.
    for ip in ["10.1.1.18", "10.1.1.19", "10.1.1.20"] {
        h.server
            .apply(objects::node("k8s-node1", ip, "192.168.36.64/26"));
    }
    let rv = h.server.resource_version();
    let mark = h.server.requests().len();
    h.server.bookmark();
    h.server.compact();
    h.server.drop_watches();
    h.server.wait_for_requests(WAIT, |r| every_watch(r, mark));
    let resumed = h.watches_since(mark);
    assert!(
        resumed
            .iter()
            .all(|w| w.contains(&format!("resourceVersion={rv}"))),
        "every watch resumed from the bookmark: {resumed:?}"
    );
    h.server.delete("Service", "dev", "api");
    assert_eq!(h.next().await, SourceEvent::Delete(svc_key("api")));
    assert!(
        h.lists_since(mark).is_empty(),
        "no relist: {:?}",
        h.lists_since(mark)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_outage_emits_nothing_then_the_watches_resume_and_converge() {
    let mut h = Harness::start(seeded()).await;
    h.next().await;
    h.server.wait_for_requests(WAIT, |r| every_watch(r, 0));
    h.server.set_down(true);
    h.server.delete("Service", "dev", "api");
    h.server
        .apply(objects::service("dev", "new", "10.96.0.12", 80, 8080));
    // Each watch has retried (and failed) a few times: nothing reached the consumer, so the
    // sync loop leaves the rules in the kernel alone.
    while h.server.refused() < 6 {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(h.rx.try_recv().is_err(), "no event during the outage");
    h.server.set_down(false);
    h.until(|s| !s.contains_key(&svc_key("api")) && s.contains_key(&svc_key("new")))
        .await;
    assert!(h.state.contains_key(&svc_key("web")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_410_gone_a_relist_removes_objects_deleted_meanwhile() {
    let mut h = Harness::start(seeded()).await;
    h.next().await;
    h.server.wait_for_requests(WAIT, |r| every_watch(r, 0));
    h.server.set_down(true);
    h.server.delete("Service", "dev", "api");
    h.server.delete("EndpointSlice", "dev", "web-abc");
    h.server.compact();
    let mark = h.server.requests().len();
    h.server.set_down(false);
    h.until(|s| {
        !s.contains_key(&svc_key("api"))
            && !s
                .keys()
                .any(|k| matches!(k, ObjectKey::EndpointSlice { .. }))
    })
    .await;
    assert!(h.state.contains_key(&svc_key("web")));
    assert!(
        h.events.iter().any(|e| matches!(e, SourceEvent::Resync(_))),
        "{:?}",
        h.events
    );
    assert!(
        !h.lists_since(mark).is_empty(),
        "relisted after 410: {:?}",
        &h.server.requests()[mark..]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_410_gone_the_relist_does_not_wait_for_the_back_off() {
    // An hour between retries after a failure: the test converges within WAIT only if the
    // relist after the 410 does not wait for it.
    let mut h = Harness::start_with_retry(seeded(), Duration::from_secs(3600)).await;
    h.next().await;
    h.server.wait_for_requests(WAIT, |r| every_watch(r, 0));
    // Changes no watch sees (another node) move the resourceVersion on; the history is
    // forgotten, so every watch resuming from where it was gets 410 Gone.
    for ip in ["10.1.1.18", "10.1.1.19"] {
        h.server
            .apply(objects::node("k8s-node1", ip, "192.168.36.64/26"));
    }
    let rv = h.server.resource_version();
    h.server.compact();
    let mark = h.server.requests().len();
    h.server.drop_watches();
    // Each kind: its watch from the old resourceVersion (410), a list, a watch from the list.
    let relisted = format!("resourceVersion={rv}");
    h.server.wait_for_requests(WAIT, |r| {
        r[mark..]
            .iter()
            .filter(|r| r.contains("watch=true") && r.contains(&relisted))
            .count()
            >= 4
    });
    let requests = &h.server.requests()[mark..];
    assert_eq!(h.lists_since(mark).len(), 4, "{requests:#?}");
    for kind in [
        "/services?",
        "/endpointslices?",
        "/nodes?",
        "/servicecidrs?",
    ] {
        let of_kind: Vec<&String> = requests.iter().filter(|r| r.contains(kind)).collect();
        assert!(of_kind.len() >= 3, "{kind}: {of_kind:#?}");
        assert!(!of_kind[0].contains(&relisted), "{kind}: {of_kind:#?}");
        assert!(!of_kind[1].contains("watch=true"), "{kind}: {of_kind:#?}");
        assert!(of_kind[2].contains(&relisted), "{kind}: {of_kind:#?}");
    }
    // The relist's Resync, then the new watches carry on.
    h.server.delete("Service", "dev", "api");
    h.until(|s| !s.contains_key(&svc_key("api"))).await;
    assert!(
        h.events[1..]
            .iter()
            .any(|e| matches!(e, SourceEvent::Resync(_))),
        "{:?}",
        h.events
    );
    assert!(h.state.contains_key(&svc_key("web")));
}
