//! [`NetworkCheck`] against real servers on the loopback: HTTP, TCP and grpc.health.v1.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use super::super::*;

/// Reads a request head (up to the blank line).
async fn read_head(conn: &mut (impl tokio::io::AsyncRead + Unpin)) -> Vec<u8> {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    while !head.ends_with(b"\r\n\r\n") {
        let n = conn.read(&mut buf).await.expect("read");
        if n == 0 {
            break;
        }
        head.extend_from_slice(&buf[..n]);
    }
    head
}

/// An HTTP server answering one request with `status`; gives back the request head.
async fn http_once(status: u16) -> (SocketAddr, oneshot::Receiver<String>) {
    let (addr, mut heads) = http_seq(vec![format!("{status} X\r\n")]).await;
    let (tx, rx) = oneshot::channel();
    tokio::spawn(async move {
        if let Some(head) = heads.recv().await {
            let _ = tx.send(head);
        }
    });
    (addr, rx)
}

/// An HTTP server answering its connections in turn with `answers` (a status line's end and
/// headers, e.g. `302 Found\r\nLocation: /ready\r\n`); sends back each request head.
async fn http_seq(
    answers: Vec<String>,
) -> (SocketAddr, tokio::sync::mpsc::UnboundedReceiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    tokio::spawn(async move {
        for answer in answers {
            let (mut conn, _) = listener.accept().await.expect("accept");
            let head = read_head(&mut conn).await;
            let answer =
                format!("HTTP/1.1 {answer}Content-Length: 2\r\nConnection: close\r\n\r\nok");
            conn.write_all(answer.as_bytes()).await.expect("write");
            let _ = tx.send(String::from_utf8_lossy(&head).into_owned());
        }
    });
    (addr, rx)
}

fn http(addr: SocketAddr, headers: &[(&str, &str)]) -> Target {
    Target::Http {
        scheme: ferry_model::HttpScheme::Http,
        host: addr.ip().to_string().into(),
        port: addr.port(),
        path: "/hello".into(),
        headers: headers
            .iter()
            .map(|(n, v)| ((*n).into(), (*v).into()))
            .collect(),
    }
}

const TIMEOUT: Duration = Duration::from_secs(5);

#[tokio::test]
async fn http_success_is_200_to_399_like_kubelet() {
    for (status, want) in [
        (200, "success"),
        (302, "success"),
        (399, "success"),
        (400, "failure"),
        (503, "failure"),
    ] {
        let (addr, _) = http_once(status).await;
        let outcome = NetworkCheck::default()
            .check(&http(addr, &[]), TIMEOUT)
            .await;
        assert_eq!(outcome.label(), want, "status {status}: {outcome:?}");
        if want == "failure" {
            assert_eq!(
                outcome,
                Outcome::Failure(format!("HTTP probe failed with statuscode: {status}"))
            );
        }
    }
}

#[tokio::test]
async fn http_requests_look_like_kubelets() {
    let (addr, head) = http_once(200).await;
    let target = http(addr, &[("X-Probe", "ferry"), ("Host", "web.example")]);
    assert_eq!(
        NetworkCheck::default().check(&target, TIMEOUT).await,
        Outcome::Success
    );
    let head = head.await.expect("the request").to_ascii_lowercase();
    assert!(head.starts_with("get /hello http/1.1\r\n"), "{head}");
    for line in [
        "user-agent: kube-probe/1.33",
        "accept: */*",
        "x-probe: ferry",
        "host: web.example",
        "connection: close",
    ] {
        assert!(head.contains(line), "{line:?} in {head}");
    }
}

#[tokio::test]
async fn tcp_success_is_an_accepted_connection() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let open = Target::Tcp {
        host: "127.0.0.1".into(),
        port: addr.port(),
    };
    assert_eq!(
        NetworkCheck::default().check(&open, TIMEOUT).await,
        Outcome::Success
    );
    drop(listener);
    let outcome = NetworkCheck::default().check(&open, TIMEOUT).await;
    assert!(
        matches!(&outcome, Outcome::Failure(t) if t.contains("refused")),
        "{outcome:?}"
    );
}

#[tokio::test]
async fn a_server_that_never_answers_fails_at_the_timeout() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let outcome = NetworkCheck::default()
        .check(&http(addr, &[]), Duration::from_millis(200))
        .await;
    assert!(
        matches!(&outcome, Outcome::Failure(t) if t.contains("no answer within")),
        "{outcome:?}"
    );
    drop(listener);
}

#[tokio::test]
async fn grpc_probes_ask_grpc_health_v1() {
    let (reporter, service) = tonic_health::server::health_reporter();
    reporter
        .set_service_status("ready", tonic_health::ServingStatus::Serving)
        .await;
    reporter
        .set_service_status("draining", tonic_health::ServingStatus::NotServing)
        .await;
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let incoming = tokio_stream::wrappers::TcpListenerStream::new(listener);
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(incoming),
    );
    let grpc = |service: &str| Target::Grpc {
        host: "127.0.0.1".into(),
        port: addr.port(),
        service: service.into(),
    };
    let check = NetworkCheck::default();
    assert_eq!(check.check(&grpc("ready"), TIMEOUT).await, Outcome::Success);
    assert_eq!(
        check.check(&grpc("draining"), TIMEOUT).await,
        Outcome::Failure("service unhealthy (responded with \"NOT_SERVING\")".into())
    );
    let unknown = check.check(&grpc("nope"), TIMEOUT).await;
    assert!(
        matches!(&unknown, Outcome::Failure(t) if t.starts_with("error: health rpc probe failed")),
        "{unknown:?}"
    );
}

#[tokio::test]
async fn redirects_are_followed_on_the_same_host_only() {
    let (addr, mut heads) = http_seq(vec![
        "302 Found\r\nLocation: /ready\r\n".into(),
        "503 Unavailable\r\n".into(),
    ])
    .await;
    let outcome = NetworkCheck::default()
        .check(&http(addr, &[]), TIMEOUT)
        .await;
    assert_eq!(
        outcome,
        Outcome::Failure("HTTP probe failed with statuscode: 503".into())
    );
    heads.recv().await.expect("first request");
    let second = heads.recv().await.expect("the followed redirect");
    assert!(second.starts_with("GET /ready HTTP/1.1"), "{second}");

    // To another host: not followed, and the redirect itself counts as success.
    let (addr, _) = http_seq(vec!["302 Found\r\nLocation: http://192.0.2.1/\r\n".into()]).await;
    let outcome = NetworkCheck::default()
        .check(&http(addr, &[]), TIMEOUT)
        .await;
    assert_eq!(outcome, Outcome::Success);
}

/// An HTTPS server (a self-signed certificate for 127.0.0.1, `tests/cert.pem`, made for these
/// tests only) answering one request with `status`.
async fn https_once(status: u16) -> SocketAddr {
    use rustls::pki_types::pem::PemObject;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};

    let cert = CertificateDer::from_pem_slice(include_bytes!("cert.pem")).expect("cert");
    let key = PrivateKeyDer::from_pem_slice(include_bytes!("key.pem")).expect("key");
    let config = rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("TLS versions")
    .with_no_client_auth()
    .with_single_cert(vec![cert], key)
    .expect("server config");
    let acceptor = tokio_rustls::TlsAcceptor::from(std::sync::Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    tokio::spawn(async move {
        let (conn, _) = listener.accept().await.expect("accept");
        let mut conn = acceptor.accept(conn).await.expect("TLS handshake");
        read_head(&mut conn).await;
        let answer =
            format!("HTTP/1.1 {status} X\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
        conn.write_all(answer.as_bytes()).await.expect("write");
        let _ = conn.shutdown().await;
    });
    addr
}

#[tokio::test]
async fn https_probes_do_not_verify_the_certificate() {
    for (status, want) in [
        (200, Outcome::Success),
        (
            500,
            Outcome::Failure("HTTP probe failed with statuscode: 500".into()),
        ),
    ] {
        let addr = https_once(status).await;
        let target = Target::Http {
            scheme: ferry_model::HttpScheme::Https,
            host: "127.0.0.1".into(),
            port: addr.port(),
            path: "/healthz".into(),
            headers: Vec::new(),
        };
        assert_eq!(NetworkCheck::default().check(&target, TIMEOUT).await, want);
    }
}
