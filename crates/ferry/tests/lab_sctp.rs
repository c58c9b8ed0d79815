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

use std::net::SocketAddr;

use ferry_lab::spec::MASTER;
use ferry_lab::Host;
use seed::{Mode, SeedLab, MASTER_POD, POD_A};
use services::{apply, entries, service, table};

/// The SCTP service: dev/sctp, 10.96.0.55:7777/SCTP → 56010.
const SCTP_IP: &str = "10.96.0.55";
const SCTP_PORT: u16 = 7777;

fn start(mode: Mode) -> Option<SeedLab> {
    SeedLab::start(mode, "Cluster")
}

/// An SCTP INIT, built by hand and sent from a pod with a raw socket, to an SCTP ClusterIP:
/// the endpoint pod captures it addressed to itself (port 56010, valid checksum after NAT,
/// from the pod's own IP), and the client's node holds the DNATed SCTP entry.
fn sctp_init_to_a_cluster_ip_is_dnated_to_the_endpoint(mode: Mode) {
    let Some(mut seed) = start(mode) else { return };
    apply(
        &mut seed,
        "sctp.yaml",
        &service("sctp", SCTP_IP, "SCTP", SCTP_PORT, None, Some(&[POD_A.1])),
    );
    let capture = seed
        .lab
        .run_in(&Host::pod(POD_A.0), sctp::raw_socket)
        .expect("enter pod A")
        .expect("raw SCTP socket in pod A");
    let sender = seed
        .lab
        .run_in(&Host::pod(MASTER_POD.0), sctp::raw_socket)
        .expect("enter the client pod")
        .expect("raw SCTP socket in the client pod");
    let (src_port, tag) = (40055, 0x5eed_cafe);
    let init = sctp::init_packet(src_port, SCTP_PORT, tag);
    let mut got = None;
    // An INIT may wait for ARP on its way; resend (same tuple) a few times.
    for _ in 0..6 {
        sctp::send(&sender, &init, SCTP_IP.parse().expect("ip")).expect("send INIT");
        got = sctp::capture(&capture, src_port);
        if got.is_some() {
            break;
        }
    }
    let got = got.unwrap_or_else(|| {
        panic!(
            "pod A captured no INIT\n{}\n{}",
            table(&seed, MASTER),
            seed.logs()
        )
    });
    assert_eq!(
        got,
        sctp::Received {
            src: format!("{}:{src_port}", MASTER_POD.1)
                .parse()
                .expect("addr"),
            dst: format!("{}:56010", POD_A.1).parse().expect("addr"),
            chunk_type: 1,
            initiate_tag: tag,
            checksum_ok: true,
        }
    );
    let src: SocketAddr = format!("{}:{src_port}", MASTER_POD.1)
        .parse()
        .expect("addr");
    let ct = entries(&seed, MASTER, "sctp", src, POD_A.1);
    assert_eq!(ct.len(), 1, "{}", table(&seed, MASTER));
    assert!(
        ct[0].contains(&format!("dst={SCTP_IP}")) && ct[0].contains(&format!("dport={SCTP_PORT}")),
        "{ct:?}"
    );
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

every_mode!(sctp_init_to_a_cluster_ip_is_dnated_to_the_endpoint);
