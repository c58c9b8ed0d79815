//! The proxy's sockets: listeners, the destination a redirected client used, UDP datagrams
//! with their addresses, and replies sent from a chosen local address.

use std::io::{self, IoSlice, IoSliceMut};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::os::fd::{AsFd, AsRawFd};

use nix::sys::socket::{
    getsockopt, recvmsg, sendmsg, setsockopt, sockopt, ControlMessage, ControlMessageOwned,
    MsgFlags, SockaddrStorage,
};
use socket2::{Domain, Protocol, Socket, Type};

use ferry_model::IpFamily;

fn socket(addr: SocketAddr, ty: Type, proto: Protocol) -> io::Result<Socket> {
    let sock = Socket::new(Domain::for_address(addr), ty, Some(proto))?;
    if addr.is_ipv6() {
        // The IPv4 listener of the same port is a socket of its own.
        sock.set_only_v6(true)?;
    }
    sock.set_reuse_address(true)?;
    sock.set_nonblocking(true)?;
    sock.set_cloexec(true)?;
    Ok(sock)
}

/// A TCP listener on `addr` (non-blocking, `SO_REUSEADDR`, IPv6-only for IPv6).
pub(crate) fn tcp_listener(addr: SocketAddr) -> io::Result<std::net::TcpListener> {
    let sock = socket(addr, Type::STREAM, Protocol::TCP)?;
    // Accepted connections inherit it (one system call less per connection): the proxy
    // passes on the client's segments as they come, instead of holding small ones back.
    sock.set_tcp_nodelay(true)?;
    sock.bind(&addr.into())?;
    // The kernel caps the backlog at net.core.somaxconn.
    sock.listen(4096)?;
    Ok(sock.into())
}

/// A UDP listener on `addr` that reports each datagram's destination: as received (after
/// the redirect, `IP_PKTINFO`) and as the client sent it (`IP_RECVORIGDSTADDR`).
pub(crate) fn udp_listener(addr: SocketAddr) -> io::Result<std::net::UdpSocket> {
    let sock = socket(addr, Type::DGRAM, Protocol::UDP)?;
    let set = |r: nix::Result<()>| r.map_err(io::Error::from);
    match addr {
        SocketAddr::V4(_) => {
            set(setsockopt(&sock, sockopt::Ipv4PacketInfo, &true))?;
            set(setsockopt(&sock, sockopt::Ipv4OrigDstAddr, &true))?;
        }
        SocketAddr::V6(_) => {
            set(setsockopt(&sock, sockopt::Ipv6RecvPacketInfo, &true))?;
            set(setsockopt(&sock, sockopt::Ipv6OrigDstAddr, &true))?;
        }
    }
    sock.bind(&addr.into())?;
    Ok(sock.into())
}

fn v4(sin: &nix::libc::sockaddr_in) -> SocketAddr {
    let ip = Ipv4Addr::from(u32::from_be(sin.sin_addr.s_addr));
    SocketAddr::V4(SocketAddrV4::new(ip, u16::from_be(sin.sin_port)))
}

fn v6(sin6: &nix::libc::sockaddr_in6) -> SocketAddr {
    let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
    SocketAddr::V6(SocketAddrV6::new(ip, u16::from_be(sin6.sin6_port), 0, 0))
}

/// The destination the client of an accepted connection used, before the redirect or DNAT
/// (`SO_ORIGINAL_DST` from conntrack); `None` when it was not translated.
pub(crate) fn original_dst(sock: &impl AsFd, family: IpFamily) -> Option<SocketAddr> {
    match family {
        IpFamily::V4 => getsockopt(sock, sockopt::OriginalDst).ok().map(|s| v4(&s)),
        IpFamily::V6 => getsockopt(sock, sockopt::Ip6tOriginalDst)
            .ok()
            .map(|s| v6(&s)),
    }
}

/// One datagram received on a UDP listener.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Datagram {
    /// Bytes in the buffer.
    pub(crate) len: usize,
    /// The client.
    pub(crate) client: SocketAddr,
    /// The destination address as received (the redirect's address): replies are sent from
    /// it, so that conntrack translates them back to the address the client used.
    pub(crate) local: Option<IpAddr>,
    /// The destination as the client sent it.
    pub(crate) original: Option<SocketAddr>,
}

/// Receives one datagram into `buf` (`WouldBlock` when none is queued). `cmsg` is the
/// control-message buffer, reused between calls.
pub(crate) fn recv_datagram(
    sock: &impl AsRawFd,
    buf: &mut [u8],
    cmsg: &mut [u8],
) -> io::Result<Datagram> {
    let mut iov = [IoSliceMut::new(buf)];
    let msg = recvmsg::<SockaddrStorage>(sock.as_raw_fd(), &mut iov, Some(cmsg), MsgFlags::empty())
        .map_err(io::Error::from)?;
    let client = msg
        .address
        .and_then(|a| match (a.as_sockaddr_in(), a.as_sockaddr_in6()) {
            (Some(sin), _) => Some(SocketAddr::from(*sin)),
            (_, Some(sin6)) => Some(SocketAddr::from(*sin6)),
            _ => None,
        })
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "datagram without source"))?;
    let mut d = Datagram {
        len: msg.bytes,
        client,
        local: None,
        original: None,
    };
    for c in msg.cmsgs().map_err(io::Error::from)? {
        match c {
            ControlMessageOwned::Ipv4PacketInfo(i) => {
                d.local = Some(IpAddr::V4(Ipv4Addr::from(u32::from_be(i.ipi_addr.s_addr))));
            }
            ControlMessageOwned::Ipv6PacketInfo(i) => {
                d.local = Some(IpAddr::V6(Ipv6Addr::from(i.ipi6_addr.s6_addr)));
            }
            ControlMessageOwned::Ipv4OrigDstAddr(sin) => d.original = Some(v4(&sin)),
            ControlMessageOwned::Ipv6OrigDstAddr(sin6) => d.original = Some(v6(&sin6)),
            _ => {}
        }
    }
    Ok(d)
}

/// The control-message buffer [`recv_datagram`] needs.
pub(crate) fn cmsg_buffer() -> Vec<u8> {
    nix::cmsg_space!(nix::libc::in6_pktinfo, nix::libc::sockaddr_in6)
}

/// Sends `data` to `to` from the local address `from` (`IP_PKTINFO`), whatever address the
/// listener is bound to.
pub(crate) fn send_from(
    sock: &impl AsRawFd,
    data: &[u8],
    from: Option<IpAddr>,
    to: SocketAddr,
) -> io::Result<usize> {
    let iov = [IoSlice::new(data)];
    let dest = SockaddrStorage::from(to);
    let v4info;
    let v6info;
    let cmsgs: Vec<ControlMessage<'_>> = match from {
        Some(IpAddr::V4(a)) => {
            v4info = nix::libc::in_pktinfo {
                ipi_ifindex: 0,
                ipi_spec_dst: nix::libc::in_addr {
                    s_addr: u32::from(a).to_be(),
                },
                ipi_addr: nix::libc::in_addr { s_addr: 0 },
            };
            vec![ControlMessage::Ipv4PacketInfo(&v4info)]
        }
        Some(IpAddr::V6(a)) => {
            v6info = nix::libc::in6_pktinfo {
                ipi6_addr: nix::libc::in6_addr {
                    s6_addr: a.octets(),
                },
                ipi6_ifindex: 0,
            };
            vec![ControlMessage::Ipv6PacketInfo(&v6info)]
        }
        None => Vec::new(),
    };
    sendmsg(
        sock.as_raw_fd(),
        &iov,
        &cmsgs,
        MsgFlags::empty(),
        Some(&dest),
    )
    .map_err(io::Error::from)
}

/// Every address of this node's interfaces (upstream's `GetLocalAddrs`, read at each sync).
pub(crate) fn local_addresses() -> Vec<IpAddr> {
    let Ok(addrs) = nix::ifaddrs::getifaddrs() else {
        return Vec::new();
    };
    let mut out: Vec<IpAddr> = addrs
        .filter_map(|i| i.address)
        .filter_map(|a| match (a.as_sockaddr_in(), a.as_sockaddr_in6()) {
            (Some(sin), _) => Some(IpAddr::V4(sin.ip())),
            (_, Some(sin6)) => Some(IpAddr::V6(sin6.ip())),
            _ => None,
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

/// Closes a TCP socket with a reset instead of a FIN (`SO_LINGER` 0): a refused or broken
/// proxied connection is reset, as the kernel modes' reject or the endpoint's reset would.
pub(crate) fn reset_on_close(sock: &impl AsFd) {
    let _ = socket2::SockRef::from(sock).set_linger(Some(std::time::Duration::ZERO));
}

/// `shutdown(SHUT_WR)`: the peer reads end-of-file, the other direction stays open.
pub(crate) fn shutdown_write(sock: &impl AsFd) -> io::Result<()> {
    socket2::SockRef::from(sock).shutdown(std::net::Shutdown::Write)
}
