//! The Kubernetes API source's ServiceCIDR watch against the fake API server: objects listed
//! and watched, and an API server that does not serve them (`404`, before 1.33) or an account
//! that may not read them (`403`) never holds back the other kinds.

use std::time::Duration;

use ferry_model::{Object, ObjectKey, ServiceCidr};
use ferry_source::kube::{connect, Connection, KubeSource};
use ferry_source::SourceEvent;
use ferry_testkit::apiserver::Resource;
use ferry_testkit::{objects, FakeApiServer};
use tokio::sync::mpsc;

const WAIT: Duration = Duration::from_secs(20);
const NODE: &str = "k8s-node2";

fn server() -> FakeApiServer {
    let server = FakeApiServer::start_local().expect("start fake apiserver");
    server.apply(objects::service("dev", "web", "10.96.0.10", 80, 8080));
    server.apply(objects::node(NODE, "10.1.1.9", "192.168.169.128/26"));
    server
}

async fn start(server: &FakeApiServer) -> mpsc::Receiver<SourceEvent> {
    let connection = Connection {
        kubeconfig: None,
        master: Some(server.url()),
        ..Default::default()
    };
    let client = connect(&connection).await.expect("connect");
    let (tx, rx) = mpsc::channel(64);
    let source = KubeSource::new(client, NODE).with_retry_interval(Duration::from_millis(50));
    tokio::spawn(source.run(tx, |_| {}));
    rx
}

async fn next(rx: &mut mpsc::Receiver<SourceEvent>) -> SourceEvent {
    tokio::time::timeout(WAIT, rx.recv())
        .await
        .expect("an event in time")
        .expect("the source stopped")
}

/// Receives events until one is a Resync or Apply holding ServiceCIDR `name`.
async fn until_cidr(rx: &mut mpsc::Receiver<SourceEvent>, name: &str) -> ServiceCidr {
    loop {
        let objects = match next(rx).await {
            SourceEvent::Resync(objects) => objects,
            SourceEvent::Apply(object) => vec![object],
            _ => continue,
        };
        for object in objects {
            if let Object::ServiceCidr(c) = object {
                if c.name == name {
                    return (*c).clone();
                }
            }
        }
    }
}

fn keys(event: &SourceEvent) -> Vec<ObjectKey> {
    match event {
        SourceEvent::Resync(objects) => objects.iter().map(Object::key).collect(),
        other => panic!("a Resync first, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_cidrs_are_listed_and_watched() {
    let server = server();
    server.apply(objects::service_cidr(
        "kubernetes",
        &["10.96.0.0/12", "fd00:10:96::/112"],
    ));
    let mut rx = start(&server).await;
    let listed = until_cidr(&mut rx, "kubernetes").await;
    assert_eq!(listed.cidrs.len(), 2);

    server.apply(objects::service_cidr("extra", &["10.100.0.0/16"]));
    let extra = until_cidr(&mut rx, "extra").await;
    assert_eq!(extra.cidrs, vec!["10.100.0.0/16".parse().expect("cidr")]);

    server.delete("ServiceCIDR", "", "extra");
    loop {
        if let SourceEvent::Delete(key) = next(&mut rx).await {
            assert_eq!(key, ObjectKey::ServiceCidr("extra".into()));
            break;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_service_cidrs_still_delivers_every_other_kind() {
    for code in [404, 403] {
        let server = server();
        server.refuse(Resource::ServiceCidrs, Some(code));
        server.apply(objects::service_cidr("kubernetes", &["10.96.0.0/12"]));
        let mut rx = start(&server).await;
        let first = next(&mut rx).await;
        assert_eq!(
            keys(&first),
            [
                ObjectKey::Service(ferry_model::ServiceName::new("dev", "web")),
                ObjectKey::Node(NODE.into()),
            ],
            "{code}"
        );
        // Refused again and again (the watch keeps retrying, quietly): nothing is emitted.
        server.wait_for_requests(WAIT, |r| {
            r.iter().filter(|r| r.contains("servicecidrs")).count() >= 3
        });
        // The ClusterRole is fixed (or the server upgraded): the retry picks them up.
        server.refuse(Resource::ServiceCidrs, None);
        let cidr = until_cidr(&mut rx, "kubernetes").await;
        assert_eq!(cidr.cidrs.len(), 1, "{code}");
    }
}
