//! The userspace proxy engine with real sockets, in a network namespace of each test's own:
//! clients connect to the proxy port directly (the redirect rules are in
//! `userspace_rules.rs`), backends listen on loopback addresses.

#[allow(dead_code)]
mod support;
#[path = "support/userspace.rs"]
mod us;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use ferry_dataplane::userspace::{CopyMode, ProxyConfig, SyncReport, UserspaceProxy};
use ferry_model::{IpFamily, TrafficPolicy};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpStream, UdpSocket};

use us::{backend_of, eventually, request, Svc};

const PROXY: &str = "127.0.0.1:40001";

fn proxy_addr() -> SocketAddr {
    PROXY.parse().expect("address")
}

/// Runs `test` in a fresh network namespace with `lo` up, on a two-worker runtime, with an
/// engine listening on 127.0.0.1.
fn run<F, Fut>(test: F)
where
    F: FnOnce(UserspaceProxy) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    run_with(CopyMode::Splice, test)
}

fn run_with<F, Fut>(copy: CopyMode, test: F)
where
    F: FnOnce(UserspaceProxy) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()>,
{
    support::in_new_netns(move || {
        us::ip(&["link", "set", "lo", "up"]);
        let rt = us::runtime();
        let config = ProxyConfig {
            listen_v4: std::net::Ipv4Addr::LOCALHOST,
            copy,
            ..ProxyConfig::default()
        };
        let proxy = UserspaceProxy::new(config, rt.handle().clone());
        rt.block_on(test(proxy));
    });
}

fn sync(proxy: &mut UserspaceProxy, svc: &Svc) {
    let report = try_sync(proxy, svc);
    assert!(report.failed.is_empty(), "{:?}", report.failed);
}

/// Serves the service on proxy port 40001, with its localhost NodePort.
fn try_sync(proxy: &mut UserspaceProxy, svc: &Svc) -> SyncReport {
    let plan = svc.plan();
    proxy.sync_full(
        svc.family,
        plan.local.cidrs(),
        svc.proxied(Some(40001), true),
    )
}

async fn three_backends() {
    us::tcp_backend("127.0.0.11:8080", "b1").await;
    us::tcp_backend("127.0.0.12:8080", "b2").await;
    us::tcp_backend("127.0.0.13:8080", "b3").await;
}

const THREE: [&str; 3] = ["127.0.0.11", "127.0.0.12", "127.0.0.13"];

#[test]
#[ignore = "needs root: network namespaces"]
fn connections_go_round_robin_and_half_close_is_kept() {
    run(round_robin_and_half_close);
}

#[test]
#[ignore = "needs root: network namespaces"]
fn the_buffered_copy_keeps_half_close_too() {
    run_with(CopyMode::Buffered, round_robin_and_half_close);
}

async fn round_robin_and_half_close(mut proxy: UserspaceProxy) {
    three_backends().await;
    sync(&mut proxy, &Svc::tcp(&THREE));
    let mut seen = Vec::new();
    for _ in 0..6 {
        let reply = request(proxy_addr(), None).await.expect("proxied");
        // The backend read our end-of-file and still got its last words through.
        assert!(reply.ends_with("\nhello bye\n"), "{reply:?}");
        seen.push(backend_of(&reply).to_owned());
    }
    assert_eq!(seen, ["b1", "b2", "b3", "b1", "b2", "b3"]);
    // The buffered copy counts a connection's bytes when it ends, which may be just after the
    // client read its reply: read them once no connection is active.
    assert!(eventually(|| proxy.metrics()[0].active == 0).await);
    let m = &proxy.metrics()[0];
    assert_eq!((m.connections, m.errors), (6, 0));
    assert_eq!(m.bytes_to_endpoint, 6 * "hello ".len() as u64);
}

#[test]
#[ignore = "needs root: network namespaces"]
fn session_affinity_keeps_each_client_on_its_endpoint() {
    run(|mut proxy| async move {
        three_backends().await;
        let svc = Svc {
            affinity: Some(10_800),
            ..Svc::tcp(&THREE)
        };
        sync(&mut proxy, &svc);
        let mut by_client: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for _ in 0..4 {
            for client in ["127.0.0.50", "127.0.0.51"] {
                let from = Some(client.parse().expect("ip"));
                let reply = request(proxy_addr(), from).await.expect("proxied");
                by_client
                    .entry(client)
                    .or_default()
                    .push(backend_of(&reply).into());
            }
        }
        let firsts: Vec<&String> = by_client.values().map(|v| &v[0]).collect();
        assert_ne!(firsts[0], firsts[1], "round-robin pinned them apart");
        for (client, backends) in &by_client {
            assert!(
                backends.iter().all(|b| b == &backends[0]),
                "{client}: {backends:?}"
            );
        }
    });
}

#[test]
#[ignore = "needs root: network namespaces"]
fn a_dead_endpoint_costs_a_retry_not_a_failed_connection() {
    run(|mut proxy| async move {
        // 127.0.0.12 has no backend: connections to it are refused at once.
        us::tcp_backend("127.0.0.11:8080", "b1").await;
        us::tcp_backend("127.0.0.13:8080", "b3").await;
        sync(&mut proxy, &Svc::tcp(&THREE));
        for _ in 0..9 {
            let reply = request(proxy_addr(), None)
                .await
                .expect("proxied after a retry");
            assert_ne!(backend_of(&reply), "");
        }
        let m = &proxy.metrics()[0];
        assert_eq!(m.errors, 0);
        // Picks go b1, dead, b3, b1, …: the dead endpoint is every third pick, and each
        // failed pick is followed by a retry pick (13 picks for 9 connections).
        assert_eq!(m.dial_failures, 4);
    });
}

#[test]
#[ignore = "needs root: network namespaces"]
fn endpoint_changes_reach_new_connections_and_spare_established_ones() {
    run(|mut proxy| async move {
        three_backends().await;
        sync(&mut proxy, &Svc::tcp(&["127.0.0.11"]));
        let mut old = TcpStream::connect(PROXY).await.expect("connect");
        let mut greeting = [0u8; 3];
        old.read_exact(&mut greeting).await.expect("greeting");
        assert_eq!(&greeting, b"b1\n");

        sync(&mut proxy, &Svc::tcp(&["127.0.0.12"]));
        assert_eq!(
            proxy.listeners().len(),
            1,
            "same listener, updated in place"
        );
        let reply = request(proxy_addr(), None).await.expect("proxied");
        assert_eq!(backend_of(&reply), "b2");
        // The established connection still reaches b1.
        old.write_all(b"still there").await.expect("write");
        let mut echo = [0u8; 11];
        old.read_exact(&mut echo).await.expect("echo");
        assert_eq!(&echo, b"still there");
    });
}

#[test]
#[ignore = "needs root: network namespaces"]
fn a_removed_service_closes_its_listeners_and_connections() {
    run(|mut proxy| async move {
        three_backends().await;
        let svc = Svc {
            node_port: Some((30080, TrafficPolicy::Cluster)),
            ..Svc::tcp(&THREE)
        };
        sync(&mut proxy, &svc);
        assert_eq!(
            proxy.listeners().len(),
            2,
            "proxy port and localhost NodePort"
        );
        let mut conn = TcpStream::connect(PROXY).await.expect("connect");
        let mut greeting = [0u8; 3];
        conn.read_exact(&mut greeting).await.expect("greeting");

        let report = proxy.sync_full(IpFamily::V4, &[], Vec::new());
        assert_eq!((report.removed, report.listeners_closed), (1, 2));
        let mut rest = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(5), conn.read_to_end(&mut rest));
        assert!(
            read.await.is_ok(),
            "the connection is closed, not left hanging"
        );
        for addr in [PROXY, "127.0.0.1:30080"] {
            let refused = TcpStream::connect(addr).await;
            assert!(refused.is_err(), "{addr} still listening");
        }
        assert!(proxy.metrics().is_empty());
    });
}

#[test]
#[ignore = "needs root: network namespaces"]
fn localhost_node_ports_are_served_while_the_service_has_endpoints() {
    run(|mut proxy| async move {
        three_backends().await;
        let mut svc = Svc {
            node_port: Some((30080, TrafficPolicy::Local)),
            ..Svc::tcp(&THREE)
        };
        sync(&mut proxy, &svc);
        // Local policy, no endpoint on this node: the node itself reaches them all.
        let lo: SocketAddr = "127.0.0.1:30080".parse().expect("address");
        let reply = request(lo, None).await.expect("localhost NodePort");
        assert!(reply.starts_with('b'), "{reply:?}");
        // Without endpoints the listener closes: refused by the kernel, as in kernel modes.
        svc.endpoints.clear();
        sync(&mut proxy, &svc);
        assert!(TcpStream::connect(lo).await.is_err());
        assert_eq!(proxy.listeners().len(), 1, "the proxy port stays");
    });
}

#[test]
#[ignore = "needs root: network namespaces"]
fn udp_requests_get_replies_and_idle_associations_expire() {
    run(|mut proxy| async move {
        us::udp_backend("127.0.0.11:8080", "u1").await;
        us::udp_backend("127.0.0.12:8080", "u2").await;
        sync(&mut proxy, &Svc::udp(&["127.0.0.11", "127.0.0.12"]));
        let client = UdpSocket::bind("127.0.0.60:0").await.expect("client");
        let mut buf = [0u8; 64];
        let mut ask = async |payload: &[u8]| {
            client.send_to(payload, PROXY).await.expect("send");
            let got = tokio::time::timeout(Duration::from_secs(5), client.recv_from(&mut buf));
            let (n, from) = got.await.expect("a reply").expect("recv");
            assert_eq!(
                from,
                proxy_addr(),
                "the reply comes from the address we used"
            );
            String::from_utf8_lossy(&buf[..n]).into_owned()
        };
        // One association: both datagrams go to the same endpoint.
        let first = ask(b"ping").await;
        let second = ask(b"again").await;
        assert_eq!(first[..3], second[..3], "{first} / {second}");
        assert_eq!(proxy.metrics()[0].active, 1);
        // 250 ms without a datagram ends it; the next one starts a new association, on
        // the next endpoint in turn.
        assert!(eventually(|| proxy.metrics()[0].active == 0).await);
        let third = ask(b"later").await;
        assert_ne!(first[..3], third[..3], "{first} / {third}");
        assert_eq!(proxy.metrics()[0].connections, 2);
    });
}

#[test]
#[ignore = "needs root: network namespaces"]
fn ipv6_service_ports_and_localhost_node_ports_are_served() {
    run(|mut proxy| async move {
        for a in ["fd00:10:244::11", "fd00:10:244::12"] {
            us::ip(&[
                "-6",
                "addr",
                "add",
                &format!("{a}/128"),
                "dev",
                "lo",
                "nodad",
            ]);
        }
        // The kernel adds a new IPv6 address's local route a moment later (from a work
        // queue, late on a busy machine): until then packets to it are unroutable.
        let routed = || {
            let out = std::process::Command::new("ip")
                .args(["-6", "route", "show", "table", "local", "dev", "lo"])
                .output()
                .expect("ip");
            let routes = String::from_utf8_lossy(&out.stdout).into_owned();
            routes.contains("fd00:10:244::11") && routes.contains("fd00:10:244::12")
        };
        assert!(us::eventually(routed).await, "no local routes yet");
        us::tcp_backend("[fd00:10:244::11]:8080", "b1").await;
        us::tcp_backend("[fd00:10:244::12]:8080", "b2").await;
        us::udp_backend("[fd00:10:244::11]:8080", "u1").await;
        let svc = Svc {
            node_port: Some((30080, TrafficPolicy::Cluster)),
            ..Svc::tcp(&["fd00:10:244::11", "fd00:10:244::12"]).v6()
        };
        sync(&mut proxy, &svc);
        let proxy_port: SocketAddr = "[::1]:40001".parse().expect("address");
        let localhost: SocketAddr = "[::1]:30080".parse().expect("address");
        let mut seen = Vec::new();
        for to in [proxy_port, proxy_port, localhost, localhost] {
            let reply = request(to, None).await.expect("proxied");
            seen.push(backend_of(&reply).to_owned());
        }
        assert_eq!(seen, ["b1", "b2", "b1", "b2"], "{:?}", proxy.metrics());

        let udp = Svc {
            protocol: ferry_model::Protocol::Udp,
            ..Svc::tcp(&["fd00:10:244::11"]).v6()
        };
        sync(&mut proxy, &udp);
        let client = UdpSocket::bind("[::1]:0").await.expect("client");
        client.send_to(b"ping", proxy_port).await.expect("send");
        let mut buf = [0u8; 64];
        let got = tokio::time::timeout(Duration::from_secs(5), client.recv_from(&mut buf));
        let (n, from) = got.await.expect("a reply").expect("recv");
        assert_eq!((&buf[..n], from), (&b"u1:ping"[..], proxy_port));
    });
}

#[test]
#[ignore = "needs root: network namespaces"]
fn a_busy_port_is_reported_and_retried_at_the_next_sync() {
    run(|mut proxy| async move {
        three_backends().await;
        let squatter = std::net::TcpListener::bind(PROXY).expect("another program's socket");
        let report = try_sync(&mut proxy, &Svc::tcp(&THREE));
        let [failed] = report.failed.as_slice() else {
            panic!("{:?}", report.failed)
        };
        assert!(failed.in_use, "{failed}");
        assert!(failed.to_string().contains("dev/web:http"), "{failed}");
        drop(squatter);
        let report = try_sync(&mut proxy, &Svc::tcp(&THREE));
        assert!(report.failed.is_empty(), "{:?}", report.failed);
        assert_eq!(report.listeners_opened, 1);
        assert_eq!(
            backend_of(&request(proxy_addr(), None).await.expect("proxied")),
            "b1"
        );
    });
}

#[test]
#[ignore = "needs root: network namespaces"]
fn a_service_sync_leaves_the_other_services_alone() {
    run(|mut proxy| async move {
        three_backends().await;
        let web = Svc::tcp(&["127.0.0.11"]);
        let mut api = web.proxied(Some(40002), false);
        api[0].plan.name.service = ferry_model::ServiceName::new("dev", "api");
        let mut both = web.proxied(Some(40001), false);
        both.extend(api.clone());
        let plan = web.plan();
        proxy.sync_full(IpFamily::V4, plan.local.cidrs(), both);
        assert_eq!(proxy.listeners().len(), 2);
        // dev/api goes away; dev/web is untouched.
        let report = proxy.sync_service(
            IpFamily::V4,
            plan.local.cidrs(),
            &api[0].plan.name.service,
            Vec::new(),
        );
        assert_eq!((report.removed, report.updated, report.added), (1, 0, 0));
        let left: Vec<String> = proxy
            .listeners()
            .iter()
            .map(|(n, _)| n.to_string())
            .collect();
        assert_eq!(left, ["dev/web:http"]);
        assert_eq!(
            backend_of(&request(proxy_addr(), None).await.expect("proxied")),
            "b1"
        );
    });
}
