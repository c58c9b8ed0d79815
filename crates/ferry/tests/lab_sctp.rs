//! SCTP with real packets, in every proxy mode. The kernel here has no SCTP sockets (no
//! `IP_SCTP`), but conntrack and NAT for SCTP are built in: the client sends an INIT it built
//! itself through a raw socket, and the endpoint pod captures it with another. Needs root (skips
//! otherwise).

#[macro_use]
#[path = "support/modes.rs"]
mod modes;
#[path = "support/sctp.rs"]
mod sctp;
#[path = "support/seed.rs"]
mod seed;
#[path = "support/services.rs"]
mod services;

use std::net::{SocketAddr, SocketAddrV4};

use ferry_lab::spec::{CLIENT, MASTER, NODE1};
use ferry_lab::Host;
use seed::{Mode, SeedLab, MASTER_POD, POD_A};
use services::{apply, entries, service, table};

/// The SCTP service: dev/sctp, 10.96.0.55:7777/SCTP → 56010.
const SCTP_IP: &str = "10.96.0.55";
const SCTP_PORT: u16 = 7777;
const SCTP_NODE_PORT: u16 = 30777;
/// k8s-node1: receives the NodePort traffic and has no endpoint itself.
const NODE1_IP: &str = "10.1.1.17";

fn start(mode: Mode) -> SeedLab {
    SeedLab::start(mode, "Cluster")
}

/// Sends an INIT from `from` (source port `src_port`) to `dst`, resending a few times (the
/// first may wait for ARP on its way), and returns what pod A captured.
fn deliver(
    seed: &SeedLab,
    from: &Host,
    src_port: u16,
    dst: SocketAddrV4,
    tag: u32,
) -> sctp::Received {
    let capture = seed
        .lab
        .run_in(&Host::pod(POD_A.0), sctp::raw_socket)
        .expect("enter pod A")
        .expect("raw SCTP socket in pod A");
    let sender = seed
        .lab
        .run_in(from, sctp::raw_socket)
        .expect("enter the sender")
        .expect("raw SCTP socket in the sender");
    let init = sctp::init_packet(src_port, dst.port(), tag);
    for _ in 0..6 {
        sctp::send(&sender, &init, *dst.ip()).expect("send INIT");
        if let Some(got) = sctp::capture(&capture, tag) {
            return got;
        }
    }
    panic!(
        "pod A captured no INIT from {from:?} to {dst}\n{}",
        seed.logs()
    )
}

fn init_to_pod_a(src: SocketAddrV4, tag: u32) -> sctp::Received {
    sctp::Received {
        src,
        dst: format!("{}:56010", POD_A.1).parse().expect("addr"),
        chunk_type: 1,
        initiate_tag: tag,
        checksum_ok: true,
    }
}

/// An SCTP INIT, built by hand and sent from a pod with a raw socket, to an SCTP ClusterIP:
/// the endpoint pod captures it addressed to itself (port 56010, valid checksum after NAT,
/// from the pod's own IP), and the client's node holds the DNATed SCTP entry.
fn sctp_init_to_a_cluster_ip_is_dnated_to_the_endpoint(mode: Mode) {
    let mut seed = start(mode);
    let svc = service("sctp", SCTP_IP, "SCTP", SCTP_PORT, None, Some(&[POD_A.1]));
    apply(&mut seed, "sctp.yaml", &svc);
    let src: SocketAddrV4 = format!("{}:40055", MASTER_POD.1).parse().expect("addr");
    let dst = SocketAddrV4::new(SCTP_IP.parse().expect("ip"), SCTP_PORT);
    let got = deliver(
        &seed,
        &Host::pod(MASTER_POD.0),
        src.port(),
        dst,
        0x5eed_cafe,
    );
    assert_eq!(got, init_to_pod_a(src, 0x5eed_cafe));
    let ct = entries(&seed, MASTER, "sctp", SocketAddr::V4(src), POD_A.1);
    assert_eq!(ct.len(), 1, "{}", table(&seed, MASTER));
    assert!(
        ct[0].contains(&format!("dst={SCTP_IP}")) && ct[0].contains(&format!("dport={SCTP_PORT}")),
        "{ct:?}"
    );
}

/// The same from outside the cluster to the service's NodePort on k8s-node1 (no endpoint
/// there, Cluster policy): DNATed to pod A and masqueraded to node1's address.
fn sctp_init_to_a_node_port_is_dnated_and_masqueraded(mode: Mode) {
    let mut seed = start(mode);
    let svc = service(
        "sctp",
        SCTP_IP,
        "SCTP",
        SCTP_PORT,
        Some(SCTP_NODE_PORT),
        Some(&[POD_A.1]),
    );
    apply(&mut seed, "sctp.yaml", &svc);
    let dst = SocketAddrV4::new(NODE1_IP.parse().expect("ip"), SCTP_NODE_PORT);
    let got = deliver(&seed, &Host::client(CLIENT), 40057, dst, 0x0bad_f00d);
    // Masquerading may pick another source port; the INIT itself arrives intact.
    assert_eq!(
        *got.src.ip(),
        NODE1_IP.parse::<std::net::Ipv4Addr>().expect("ip")
    );
    assert_eq!(got, init_to_pod_a(got.src, 0x0bad_f00d));
    let client: SocketAddr = "10.1.1.100:40057".parse().expect("addr");
    let ct = entries(&seed, NODE1, "sctp", client, POD_A.1);
    assert_eq!(ct.len(), 1, "{}", table(&seed, NODE1));
}

#[test]
fn crc32c_matches_the_standard_check_value() {
    // The CRC-32C check value of "123456789" (RFC 3720, B.4 lists the same polynomial).
    assert_eq!(sctp::crc32c(b"123456789"), 0xE306_9283);
    let p = sctp::init_packet(1, 2, 3);
    assert_eq!(p.len(), 32);
    let mut ip = vec![
        0x45, 0, 0, 52, 0, 0, 0, 0, 64, 132, 0, 0, 10, 0, 0, 1, 10, 0, 0, 2,
    ];
    ip.extend(&p);
    let r = sctp::parse(&ip).expect("an SCTP packet");
    assert!(r.checksum_ok);
    assert_eq!(
        (r.src.port(), r.dst.port(), r.chunk_type, r.initiate_tag),
        (1, 2, 1, 3)
    );
}

every_mode!(
    sctp_init_to_a_cluster_ip_is_dnated_to_the_endpoint,
    sctp_init_to_a_node_port_is_dnated_and_masqueraded,
);
