//! SCTP packets by hand, for kernels without SCTP sockets (no `IP_SCTP`) whose conntrack and NAT
//! still handle SCTP: an INIT chunk in a common header with its CRC32c (RFC 9260 §3, App. A),
//! sent and captured with raw `IPPROTO_SCTP` sockets.

#![allow(dead_code)]

use std::io::Read as _;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::Duration;

use socket2::{Domain, Protocol, SockAddr, Socket, Type};

pub const IPPROTO_SCTP: i32 = 132;
const CHUNK_INIT: u8 = 1;

/// CRC32c (Castagnoli, reflected polynomial 0x82F63B78), as SCTP's checksum.
pub fn crc32c(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &byte in data {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

/// An SCTP packet (common header + one INIT chunk) from `src_port` to `dst_port`, with the
/// checksum set. The verification tag of a packet carrying INIT is 0.
pub fn init_packet(src_port: u16, dst_port: u16, initiate_tag: u32) -> Vec<u8> {
    let mut p = Vec::with_capacity(32);
    p.extend(src_port.to_be_bytes());
    p.extend(dst_port.to_be_bytes());
    p.extend(0u32.to_be_bytes()); // verification tag
    p.extend(0u32.to_be_bytes()); // checksum, set below
    p.push(CHUNK_INIT);
    p.push(0); // flags
    p.extend(20u16.to_be_bytes()); // chunk length: header + fixed parameters
    p.extend(initiate_tag.to_be_bytes());
    p.extend(65_535u32.to_be_bytes()); // advertised receiver window
    p.extend(1u16.to_be_bytes()); // outbound streams
    p.extend(1u16.to_be_bytes()); // inbound streams
    p.extend(1u32.to_be_bytes()); // initial TSN
                                  // The checksum is stored least significant byte first (Linux: cpu_to_le32 of the CRC).
    let crc = crc32c(&p);
    p[8..12].copy_from_slice(&crc.to_le_bytes());
    p
}

/// An SCTP packet as received on a raw IPv4 socket (IP header included).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Received {
    pub src: SocketAddrV4,
    pub dst: SocketAddrV4,
    pub chunk_type: u8,
    pub initiate_tag: u32,
    pub checksum_ok: bool,
}

/// Parses an IPv4 datagram carrying SCTP; `None` when it is something else or too short.
pub fn parse(datagram: &[u8]) -> Option<Received> {
    let ihl = usize::from(datagram.first()? & 0x0f) * 4;
    if *datagram.get(9)? != IPPROTO_SCTP as u8 || datagram.len() < ihl + 20 {
        return None;
    }
    let ip = |at: usize| {
        Ipv4Addr::new(
            datagram[at],
            datagram[at + 1],
            datagram[at + 2],
            datagram[at + 3],
        )
    };
    let sctp = &datagram[ihl..];
    let u16_at = |at: usize| u16::from_be_bytes([sctp[at], sctp[at + 1]]);
    let mut zeroed = sctp.to_vec();
    zeroed[8..12].fill(0);
    let stored = u32::from_le_bytes([sctp[8], sctp[9], sctp[10], sctp[11]]);
    Some(Received {
        src: SocketAddrV4::new(ip(12), u16_at(0)),
        dst: SocketAddrV4::new(ip(16), u16_at(2)),
        chunk_type: sctp[12],
        initiate_tag: u32::from_be_bytes([sctp[16], sctp[17], sctp[18], sctp[19]]),
        checksum_ok: crc32c(&zeroed) == stored,
    })
}

/// A raw IPv4 `IPPROTO_SCTP` socket (create it inside the namespace it is for).
pub fn raw_socket() -> std::io::Result<Socket> {
    let s = Socket::new(Domain::IPV4, Type::RAW, Some(Protocol::from(IPPROTO_SCTP)))?;
    s.set_read_timeout(Some(Duration::from_millis(500)))?;
    Ok(s)
}

/// Sends `packet` (an SCTP packet; the kernel adds the IP header) to `dst`.
pub fn send(socket: &Socket, packet: &[u8], dst: Ipv4Addr) -> std::io::Result<()> {
    socket.send_to(packet, &SockAddr::from(SocketAddr::from((dst, 0))))?;
    Ok(())
}

/// The next INIT with initiate tag `tag` captured on `socket` (the tag survives NAT, which may
/// change both addresses and ports), if one arrives before the socket's read timeout.
pub fn capture(socket: &Socket, tag: u32) -> Option<Received> {
    let mut buf = [0u8; 2048];
    loop {
        let n = (&*socket).read(&mut buf).ok()?;
        match parse(&buf[..n]) {
            Some(r) if r.chunk_type == CHUNK_INIT && r.initiate_tag == tag => return Some(r),
            _ => continue,
        }
    }
}
