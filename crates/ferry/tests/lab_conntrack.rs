//! UDP conntrack cleanup with real packets, in every proxy mode. Needs root (skips otherwise).
//!
//! The UDP clients keep their source port (a bound, connected socket), so every datagram after
//! the first belongs to the same conntrack entry: without the cleanup they would keep going
//! where the first one went. The nodes' Ferries run with a long sync period, so no periodic full
//! sync (which checks every UDP frontend) can do the cleanup in the test's place.

#[macro_use]
#[path = "support/modes.rs"]
mod modes;
#[path = "support/seed.rs"]
mod seed;
#[path = "support/services.rs"]
mod services;

use std::net::{SocketAddr, UdpSocket};
use std::time::Duration;

use ferry_lab::spec::{CLIENT, MASTER, NODE1};
use ferry_lab::Host;
use seed::{Hello, Mode, SeedLab, MASTER_POD, POD_A, POD_B};
use services::{apply, entries, service, table};

/// The UDP service of the first case: dev/dns, 10.96.0.53:53/UDP → 56010, NodePort 30053.
const DNS_IP: &str = "10.96.0.53";
const DNS_NODE_PORT: u16 = 30053;
/// The UDP service created while a client already sends to it: dev/late-dns, 10.96.0.54:53.
const LATE_IP: &str = "10.96.0.54";
/// k8s-node1: receives the NodePort traffic and has no endpoint itself (Cluster policy).
const NODE1_IP: &str = "10.1.1.17";

fn start(mode: Mode) -> SeedLab {
    SeedLab::start_with(mode, "Cluster", &["--sync-period", "1h"])
}

/// A UDP socket in `host`'s namespace bound to `bind` and connected to `to`: one source port,
/// so one conntrack entry, for its whole life.
fn udp_client(seed: &SeedLab, host: &Host, bind: SocketAddr, to: SocketAddr) -> UdpSocket {
    let sock = seed
        .lab
        .run_in(host, move || {
            let s = UdpSocket::bind(bind)?;
            s.connect(to)?;
            s.set_read_timeout(Some(Duration::from_secs(2)))?;
            Ok::<_, std::io::Error>(s)
        })
        .expect("enter the namespace")
        .unwrap_or_else(|e| panic!("UDP socket {bind} → {to} in {host:?}: {e}"));
    sock
}

/// Sends one datagram and returns the answering pod's name, or the error (time-out, refused).
fn ask(sock: &UdpSocket) -> Result<String, std::io::Error> {
    sock.send(b"hello")?;
    let mut buf = [0u8; 2048];
    let n = sock.recv(&mut buf)?;
    Ok(Hello::parse(&String::from_utf8_lossy(&buf[..n])).server_name)
}

fn answer(seed: &SeedLab, sock: &UdpSocket, what: &str) -> String {
    ask(sock).unwrap_or_else(|e| panic!("{what}: no answer: {e}\n{}", seed.logs()))
}

/// A pod and an outside client talk to a UDP service (ClusterIP and NodePort) from fixed source
/// ports. Adding an endpoint leaves their flows alone; removing the endpoint they use moves the
/// very next datagram to the remaining one, and the nodes' conntrack tables hold no entry
/// towards the removed endpoint for those tuples any more.
fn udp_client_reaches_the_next_endpoint_once_its_endpoint_is_removed(mode: Mode) {
    let mut seed = start(mode);
    let (a, b) = (POD_A.1, POD_B.1);
    let file = "dns.yaml";
    apply(
        &mut seed,
        file,
        &service("dns", DNS_IP, "UDP", 53, Some(DNS_NODE_PORT), Some(&[a])),
    );

    let pod_src: SocketAddr = format!("{}:40053", MASTER_POD.1).parse().expect("addr");
    let client_src: SocketAddr = "10.1.1.100:40053".parse().expect("addr");
    let pod = udp_client(
        &seed,
        &Host::pod(MASTER_POD.0),
        pod_src,
        format!("{DNS_IP}:53").parse().expect("addr"),
    );
    let client = udp_client(
        &seed,
        &Host::client(CLIENT),
        client_src,
        format!("{NODE1_IP}:{DNS_NODE_PORT}").parse().expect("addr"),
    );
    assert_eq!(answer(&seed, &pod, "pod → ClusterIP"), POD_A.0);
    assert_eq!(answer(&seed, &client, "client → NodePort"), POD_A.0);
    // The flows are in the tables of the nodes that DNATed them.
    assert_eq!(
        entries(&seed, MASTER, "udp", pod_src, a).len(),
        1,
        "{}",
        table(&seed, MASTER)
    );
    assert_eq!(
        entries(&seed, NODE1, "udp", client_src, a).len(),
        1,
        "{}",
        table(&seed, NODE1)
    );

    // A second endpoint: live flows stay where they are.
    apply(
        &mut seed,
        file,
        &service("dns", DNS_IP, "UDP", 53, Some(DNS_NODE_PORT), Some(&[a, b])),
    );
    assert_eq!(answer(&seed, &pod, "pod, A and B"), POD_A.0);
    assert_eq!(answer(&seed, &client, "client, A and B"), POD_A.0);

    // Pod A leaves the slice (it keeps running, so a stale flow would still be answered by it).
    apply(
        &mut seed,
        file,
        &service("dns", DNS_IP, "UDP", 53, Some(DNS_NODE_PORT), Some(&[b])),
    );
    let (master_table, node1_table) = (table(&seed, MASTER), table(&seed, NODE1));
    assert!(
        entries(&seed, MASTER, "udp", pod_src, a).is_empty(),
        "stale entry on {MASTER}:\n{master_table}"
    );
    assert!(
        entries(&seed, NODE1, "udp", client_src, a).is_empty(),
        "stale entry on {NODE1}:\n{node1_table}"
    );
    assert_eq!(answer(&seed, &pod, "pod, after A left"), POD_B.0);
    assert_eq!(answer(&seed, &client, "client, after A left"), POD_B.0);
    assert_eq!(
        entries(&seed, MASTER, "udp", pod_src, b).len(),
        1,
        "{}",
        table(&seed, MASTER)
    );
    assert_eq!(
        entries(&seed, NODE1, "udp", client_src, b).len(),
        1,
        "{}",
        table(&seed, NODE1)
    );
    for node in [MASTER, NODE1] {
        let log = seed.ferry(node).log();
        assert!(
            log.contains("cleaned UDP conntrack entries"),
            "{node}:\n{log}"
        );
    }
}

/// The last endpoint leaves the slice (the pod keeps running): the client's very next datagram
/// is refused ("connection refused", the service's reject rule) instead of still reaching the
/// old pod through its conntrack entry.
fn udp_client_is_refused_once_the_last_endpoint_is_removed(mode: Mode) {
    let mut seed = start(mode);
    let file = "dns.yaml";
    let dns = |eps: &[&str]| service("dns", DNS_IP, "UDP", 53, None, Some(eps));
    apply(&mut seed, file, &dns(&[POD_A.1]));
    let src: SocketAddr = format!("{}:40056", MASTER_POD.1).parse().expect("addr");
    let to = format!("{DNS_IP}:53").parse().expect("addr");
    let pod = udp_client(&seed, &Host::pod(MASTER_POD.0), src, to);
    assert_eq!(answer(&seed, &pod, "pod → ClusterIP"), POD_A.0);

    apply(&mut seed, file, &dns(&[]));
    let master_table = table(&seed, MASTER);
    assert!(
        entries(&seed, MASTER, "udp", src, POD_A.1).is_empty(),
        "stale entry on {MASTER}:\n{master_table}"
    );
    match ask(&pod) {
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => {}
        other => panic!(
            "expected connection refused, got {other:?}\n{}",
            seed.logs()
        ),
    }
}

/// A pod sends to a UDP ClusterIP before its Service exists (the datagrams are routed away, not
/// DNATed: an entry that later datagrams keep following). The Service appears without
/// endpoints: still nothing answers. Its first endpoint appears: the same socket reaches it at
/// once, because the entry that was never DNATed is deleted.
fn udp_service_getting_its_first_endpoint_is_reached_at_once(mode: Mode) {
    let mut seed = start(mode);
    let src: SocketAddr = format!("{}:40054", MASTER_POD.1).parse().expect("addr");
    let pod = udp_client(
        &seed,
        &Host::pod(MASTER_POD.0),
        src,
        format!("{LATE_IP}:53").parse().expect("addr"),
    );
    assert!(ask(&pod).is_err(), "nothing serves {LATE_IP} yet");
    assert_eq!(
        entries(&seed, MASTER, "udp", src, LATE_IP).len(),
        1,
        "an entry that was not DNATed:\n{}",
        table(&seed, MASTER)
    );

    let file = "late-dns.yaml";
    apply(
        &mut seed,
        file,
        &service("late-dns", LATE_IP, "UDP", 53, None, Some(&[])),
    );
    assert!(ask(&pod).is_err(), "no endpoint yet");

    apply(
        &mut seed,
        file,
        &service("late-dns", LATE_IP, "UDP", 53, None, Some(&[POD_B.1])),
    );
    let master_table = table(&seed, MASTER);
    assert!(
        entries(&seed, MASTER, "udp", src, LATE_IP).is_empty(),
        "the entry that was not DNATed is still there:\n{master_table}"
    );
    assert_eq!(answer(&seed, &pod, "first endpoint"), POD_B.0);
    assert_eq!(
        entries(&seed, MASTER, "udp", src, POD_B.1).len(),
        1,
        "{}",
        table(&seed, MASTER)
    );
}

every_mode!(
    udp_client_reaches_the_next_endpoint_once_its_endpoint_is_removed,
    udp_client_is_refused_once_the_last_endpoint_is_removed,
    udp_service_getting_its_first_endpoint_is_reached_at_once,
);
