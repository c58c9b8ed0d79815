//! The seed matrix with real packets, userspace mode (the expectations that differ say why:
//! the proxy connects to the endpoints from the node). Needs root.

const MODE: seed::Mode = seed::Mode::Userspace;

include!("support/cases.rs");

// What only the userspace mode does: a proxy between client and endpoint.

#[path = "support/services.rs"]
mod services;

use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use ferry_lab::spec::{MASTER, NODE1};
use ferry_lab::{http, Host};
use seed::{cluster_url, node_port_url, Hello, SeedLab, MASTER_POD, POD_A, POD_B};

/// A counter of a node's `/metrics` for url-analysis (summed over its series).
fn metric(seed: &SeedLab, node: &str, name: &str) -> f64 {
    metric_with(seed, node, name, "")
}

/// [`metric`], only the series whose labels contain `label` too.
fn metric_with(seed: &SeedLab, node: &str, name: &str, label: &str) -> f64 {
    let text = seed
        .lab
        .exec(node, ["curl", "-s", "http://127.0.0.1:10249/metrics"])
        .expect("scrape");
    text.lines()
        .filter(|l| l.starts_with(name) && l.contains("service=\"url-analysis\""))
        .filter(|l| l.contains(label))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// The proxy port a node's rules send url-analysis' ClusterIP to.
fn proxy_port(seed: &SeedLab, node: &str) -> u16 {
    let map = seed
        .lab
        .exec(node, ["nft", "list", "map", "ip", "ferry", "portals"])
        .expect("nft list map");
    let (_, after) = map
        .split_once("10.96.198.86 . tcp . 8080")
        .expect("element");
    let (_, value) = after.split_once(": ").expect("value");
    let digits: String = value.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().expect("port")
}

fn listening(seed: &SeedLab, node: &str, port: u16) -> bool {
    let filter = format!("sport = :{port}");
    let out = seed.lab.exec(node, ["ss", "-Hltn", &filter]).expect("ss");
    !out.trim().is_empty()
}

/// An endpoint that dies (its server stops, the EndpointSlice still lists it ready) costs the
/// proxy a retry on the next endpoint, not a failed connection; the metrics count the dials.
#[test]
#[ignore = "needs root: network namespaces"]
fn a_killed_endpoint_costs_a_retry_not_a_failed_connection() {
    let mut seed = SeedLab::start(MODE, "Cluster");
    seed.lab
        .pod_server(POD_B.0, 56010)
        .expect("pod B's server")
        .stop()
        .expect("kill pod B's server");
    for _ in 0..20 {
        let h = seed.hello(&Host::default_client(), &node_port_url("10.1.1.17"));
        assert_eq!(
            h.server_ip, POD_A.1,
            "every connection reaches the live endpoint"
        );
    }
    let failures = metric(&seed, NODE1, "ferry_userspace_endpoint_dial_failures_total");
    assert!(failures >= 1.0, "dial failures counted: {failures}");
    let proxied = metric(&seed, NODE1, "ferry_userspace_connections_total");
    assert!(proxied >= 20.0, "connections counted: {proxied}");
    // Every connection was proxied: bytes both ways, none failed, none still open.
    for direction in ["to_endpoint", "to_client"] {
        let label = format!("direction=\"{direction}\"");
        let bytes = metric_with(&seed, NODE1, "ferry_userspace_bytes_total", &label);
        assert!(bytes > 0.0, "bytes {direction}: {bytes}");
    }
    let errors = metric(&seed, NODE1, "ferry_userspace_connection_errors_total");
    assert_eq!(errors, 0.0, "a dead endpoint is not a connection error");
    let active = metric(&seed, NODE1, "ferry_userspace_active_connections");
    assert_eq!(active, 0.0, "every connection ended");
}

/// The UDP service of the UDP case: dev/dns, 10.96.0.53:53 → 56010, NodePort 30053.
fn udp_ask(seed: &SeedLab, host: &Host, to: &str) -> Hello {
    let to: SocketAddr = to.parse().expect("address");
    let reply = seed
        .lab
        .run_in(host, move || {
            let s = UdpSocket::bind("0.0.0.0:0")?;
            // Connected: only a reply from the address asked is received.
            s.connect(to)?;
            s.set_read_timeout(Some(Duration::from_secs(2)))?;
            s.send(b"hello")?;
            let mut buf = [0u8; 2048];
            let n = s.recv(&mut buf)?;
            Ok::<_, std::io::Error>(String::from_utf8_lossy(&buf[..n]).into_owned())
        })
        .expect("enter the namespace")
        .unwrap_or_else(|e| panic!("{host:?} → {to}/udp: {e}\n{}", seed.logs()));
    Hello::parse(&reply)
}

/// UDP request and reply through the proxy: the reply comes from the address the client
/// asked (ClusterIP, NodePort), and the pod sees the proxying node.
#[test]
#[ignore = "needs root: network namespaces"]
fn udp_requests_are_answered_from_the_address_asked() {
    let mut seed = SeedLab::start(MODE, "Cluster");
    let dns = services::service(
        "dns",
        "10.96.0.53",
        "UDP",
        53,
        Some(30053),
        Some(&[POD_A.1]),
    );
    services::apply(&mut seed, "dns.yaml", &dns);
    let h = udp_ask(&seed, &Host::pod(MASTER_POD.0), "10.96.0.53:53");
    assert_eq!(
        (h.server_ip.as_str(), h.client_ip.as_str()),
        (POD_A.1, "10.1.1.12")
    );
    let h = udp_ask(&seed, &Host::default_client(), "10.1.1.17:30053");
    assert_eq!(
        (h.server_ip.as_str(), h.client_ip.as_str()),
        (POD_A.1, "10.1.1.17")
    );
    let h = udp_ask(&seed, &Host::node(MASTER), "10.96.0.53:53");
    assert_eq!(h.client_ip, "10.1.1.12");
}

/// `sessionAffinity: ClientIP`: each client keeps reaching the endpoint it first reached.
#[test]
#[ignore = "needs root: network namespaces"]
fn session_affinity_keeps_each_client_on_one_endpoint() {
    let mut seed = SeedLab::start(MODE, "Cluster");
    seed.change(|m| m.affinity_timeout = Some(60));
    for (host, url) in [
        (Host::default_client(), node_port_url("10.1.1.17")),
        (Host::pod(MASTER_POD.0), cluster_url()),
    ] {
        let first = seed.hello(&host, &url).server_ip;
        for _ in 0..10 {
            assert_eq!(seed.hello(&host, &url).server_ip, first, "{host:?}");
        }
    }
}

/// A deleted Service: its redirects go, then its listeners close, and so do the connections
/// they proxied.
#[test]
#[ignore = "needs root: network namespaces"]
fn deleting_a_service_closes_its_listeners_and_connections() {
    let mut seed = SeedLab::start(MODE, "Cluster");
    let port = proxy_port(&seed, NODE1);
    assert!(listening(&seed, NODE1, port));
    let addr = "10.1.1.17:32223".parse().expect("addr");
    let mut conn = seed
        .lab
        .connect(&Host::default_client(), addr)
        .expect("connect");
    assert_eq!(http::get(&mut conn, "/hello").expect("request").status, 200);
    let before: Vec<usize> = seed::NODES.iter().map(|(n, _)| seed.syncs(n)).collect();
    std::fs::remove_file(seed.manifests.dir.path().join("service.yaml")).expect("delete");
    for ((node, _), n) in seed::NODES.iter().zip(before) {
        seed.wait_synced(node, n + 1);
    }
    assert!(!listening(&seed, NODE1, port), "listener {port} closed");
    assert!(
        http::get(&mut conn, "/hello").is_err(),
        "the proxied connection closed with its service"
    );
}
