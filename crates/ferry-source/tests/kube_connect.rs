//! `connect` against an API server that is not up yet: it waits, retrying with back-off, and
//! returns once the server answers (over real HTTP on loopback, the fake API server of
//! ferry-testkit).
//!
//! Why the fake: it starts answering at the moment the test chooses, on a loopback port, with
//! no root and no network namespace; against the real API server (as root): `kube_real.rs`.

use std::net::TcpListener;
use std::time::Duration;

use ferry_source::kube::{connect, retry_delays, ConnectError, Connection};
use ferry_testkit::FakeApiServer;

#[test]
fn the_retry_delays_double_from_one_second_up_to_thirty() {
    let delays: Vec<u64> = retry_delays().take(8).map(|d| d.as_secs()).collect();
    assert_eq!(delays, [1, 2, 4, 8, 16, 30, 30, 30]);
}

#[tokio::test]
async fn connect_waits_for_an_api_server_that_is_not_up_yet() {
    // A port that was free a moment ago: connection refused until the server listens there.
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let connection = Connection {
        kubeconfig: None,
        master: Some(format!("http://127.0.0.1:{port}")),
        ..Default::default()
    };
    let connecting = tokio::spawn(async move { connect(&connection).await });
    // Long enough for the first attempt to fail (it is refused at once).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(
        !connecting.is_finished(),
        "connect returned without a server"
    );
    let listener = TcpListener::bind(("127.0.0.1", port)).expect("bind the freed port");
    let server = FakeApiServer::start(listener).expect("fake API server");
    let connected = tokio::time::timeout(Duration::from_secs(60), connecting)
        .await
        .expect("connected once the server listens")
        .expect("task");
    if let Err(e) = connected {
        panic!("connect: {e}");
    }
    assert!(server.requests().iter().any(|r| r.contains("/version")));
}

#[tokio::test]
async fn a_bad_master_is_an_error_at_once() {
    let connection = Connection {
        kubeconfig: None,
        master: Some("http://[oops".to_owned()),
        ..Default::default()
    };
    let Err(e) = connect(&connection).await else {
        panic!("a bad URL connected")
    };
    assert!(matches!(e, ConnectError::Master { .. }), "{e}");
}
