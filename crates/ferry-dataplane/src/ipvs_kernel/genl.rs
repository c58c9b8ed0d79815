//! The IPVS generic netlink family ("IPVS", version 1): commands and attributes as
//! `include/uapi/linux/ip_vs.h` defines them, and their encoding into and decoding from
//! netlink attributes.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use netlink_packet_core::{
    DecodeError, Emitable, Nla, NlaBuffer, NlasIterator, ParseableParametrized,
};
use netlink_packet_generic::{GenlFamily, GenlHeader};

use ferry_compile::ipvs::{Forward, RealServer, VirtualAddress, VirtualServer, FLAG_HASHED};
use ferry_model::{IpFamily, Protocol};

/// `IPVS_CMD_*`.
pub(crate) mod cmd {
    pub const NEW_SERVICE: u8 = 1;
    pub const SET_SERVICE: u8 = 2;
    pub const DEL_SERVICE: u8 = 3;
    pub const GET_SERVICE: u8 = 4;
    pub const NEW_DEST: u8 = 5;
    pub const SET_DEST: u8 = 6;
    pub const DEL_DEST: u8 = 7;
    pub const GET_DEST: u8 = 8;
    pub const SET_CONFIG: u8 = 12;
    pub const GET_CONFIG: u8 = 13;
    pub const GET_INFO: u8 = 15;
}

/// `IPVS_CMD_ATTR_*` (top level).
mod cmd_attr {
    pub const SERVICE: u16 = 1;
    pub const DEST: u16 = 2;
    pub const TIMEOUT_TCP: u16 = 4;
    pub const TIMEOUT_TCP_FIN: u16 = 5;
    pub const TIMEOUT_UDP: u16 = 6;
}

/// `IPVS_INFO_ATTR_*` (top level of a GET_INFO reply).
mod info_attr {
    pub const VERSION: u16 = 1;
    pub const CONN_TAB_SIZE: u16 = 2;
}

/// `IPVS_SVC_ATTR_*`.
mod svc_attr {
    pub const AF: u16 = 1;
    pub const PROTOCOL: u16 = 2;
    pub const ADDR: u16 = 3;
    pub const PORT: u16 = 4;
    pub const SCHED_NAME: u16 = 6;
    pub const FLAGS: u16 = 7;
    pub const TIMEOUT: u16 = 8;
    pub const NETMASK: u16 = 9;
}

/// `IPVS_DEST_ATTR_*`.
mod dest_attr {
    pub const ADDR: u16 = 1;
    pub const PORT: u16 = 2;
    pub const FWD_METHOD: u16 = 3;
    pub const WEIGHT: u16 = 4;
    pub const U_THRESH: u16 = 5;
    pub const L_THRESH: u16 = 6;
    pub const ACTIVE_CONNS: u16 = 7;
    pub const INACT_CONNS: u16 = 8;
    pub const PERSIST_CONNS: u16 = 9;
    pub const ADDR_FAMILY: u16 = 11;
}

const NLA_F_NESTED: u16 = 0x8000;
const AF_INET: u16 = 2;
const AF_INET6: u16 = 10;

/// One attribute to send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Attr {
    U16(u16, u16),
    U32(u16, u32),
    /// A big-endian (network order) u16: ports.
    Be16(u16, u16),
    Bytes(u16, Vec<u8>),
    /// A NUL-terminated string.
    Str(u16, String),
    Nested(u16, Vec<Attr>),
}

impl Nla for Attr {
    fn value_len(&self) -> usize {
        match self {
            Attr::U16(..) | Attr::Be16(..) => 2,
            Attr::U32(..) => 4,
            Attr::Bytes(_, v) => v.len(),
            Attr::Str(_, s) => s.len() + 1,
            Attr::Nested(_, attrs) => attrs.as_slice().buffer_len(),
        }
    }

    fn kind(&self) -> u16 {
        match self {
            Attr::U16(k, _)
            | Attr::U32(k, _)
            | Attr::Be16(k, _)
            | Attr::Bytes(k, _)
            | Attr::Str(k, _) => *k,
            Attr::Nested(k, _) => *k | NLA_F_NESTED,
        }
    }

    fn emit_value(&self, buf: &mut [u8]) {
        match self {
            Attr::U16(_, v) => buf.copy_from_slice(&v.to_ne_bytes()),
            Attr::U32(_, v) => buf.copy_from_slice(&v.to_ne_bytes()),
            Attr::Be16(_, v) => buf.copy_from_slice(&v.to_be_bytes()),
            Attr::Bytes(_, v) => buf.copy_from_slice(v),
            Attr::Str(_, s) => {
                buf[..s.len()].copy_from_slice(s.as_bytes());
                buf[s.len()] = 0;
            }
            Attr::Nested(_, attrs) => attrs.as_slice().emit(buf),
        }
    }
}

/// An IPVS generic netlink message: a command and its attributes. Received messages keep
/// their attributes raw (kind, value) and are decoded by the typed functions below.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IpvsMessage {
    pub cmd: u8,
    pub attrs: Vec<Attr>,
}

impl GenlFamily for IpvsMessage {
    fn family_name() -> &'static str {
        "IPVS"
    }

    fn command(&self) -> u8 {
        self.cmd
    }

    fn version(&self) -> u8 {
        1
    }
}

impl Emitable for IpvsMessage {
    fn buffer_len(&self) -> usize {
        self.attrs.as_slice().buffer_len()
    }

    fn emit(&self, buffer: &mut [u8]) {
        self.attrs.as_slice().emit(buffer)
    }
}

impl ParseableParametrized<[u8], GenlHeader> for IpvsMessage {
    fn parse_with_param(buf: &[u8], header: GenlHeader) -> Result<Self, DecodeError> {
        Ok(Self {
            cmd: header.cmd,
            attrs: raw_attrs(buf)?,
        })
    }
}

/// Every attribute of `buf`, raw.
fn raw_attrs(buf: &[u8]) -> Result<Vec<Attr>, DecodeError> {
    NlasIterator::new(buf)
        .map(|nla| {
            let nla: NlaBuffer<&[u8]> = nla?;
            Ok(Attr::Bytes(nla.kind(), nla.value().to_vec()))
        })
        .collect()
}

fn find(attrs: &[Attr], kind: u16) -> Option<&[u8]> {
    attrs.iter().find_map(|a| match a {
        Attr::Bytes(k, v) if *k == kind => Some(v.as_slice()),
        _ => None,
    })
}

fn u16_of(v: Option<&[u8]>) -> Option<u16> {
    Some(u16::from_ne_bytes(v?.get(..2)?.try_into().ok()?))
}

fn be16_of(v: Option<&[u8]>) -> Option<u16> {
    Some(u16::from_be_bytes(v?.get(..2)?.try_into().ok()?))
}

fn u32_of(v: Option<&[u8]>) -> Option<u32> {
    Some(u32::from_ne_bytes(v?.get(..4)?.try_into().ok()?))
}

fn family_code(family: IpFamily) -> u16 {
    match family {
        IpFamily::V4 => AF_INET,
        IpFamily::V6 => AF_INET6,
    }
}

fn protocol_number(p: Protocol) -> u16 {
    match p {
        Protocol::Tcp => 6,
        Protocol::Udp => 17,
        Protocol::Sctp => 132,
    }
}

fn protocol_of(n: u16) -> Option<Protocol> {
    match n {
        6 => Some(Protocol::Tcp),
        17 => Some(Protocol::Udp),
        132 => Some(Protocol::Sctp),
        _ => None,
    }
}

/// `union nf_inet_addr`: 16 bytes, an IPv4 address in the first four.
fn inet_addr(ip: IpAddr) -> Vec<u8> {
    let mut v = vec![0u8; 16];
    match ip {
        IpAddr::V4(a) => v[..4].copy_from_slice(&a.octets()),
        IpAddr::V6(a) => v.copy_from_slice(&a.octets()),
    }
    v
}

fn addr_of(v: Option<&[u8]>, af: u16) -> Option<IpAddr> {
    let v = v?;
    match af {
        AF_INET => Some(IpAddr::V4(Ipv4Addr::from(
            <[u8; 4]>::try_from(v.get(..4)?).ok()?,
        ))),
        AF_INET6 => Some(IpAddr::V6(Ipv6Addr::from(
            <[u8; 16]>::try_from(v.get(..16)?).ok()?,
        ))),
        _ => None,
    }
}

/// The attributes naming a virtual server (enough for DEL_SERVICE and as a GET_DEST filter).
pub(crate) fn service_key(va: &VirtualAddress) -> Vec<Attr> {
    vec![
        Attr::U16(svc_attr::AF, family_code(va.family())),
        Attr::U16(svc_attr::PROTOCOL, protocol_number(va.protocol)),
        Attr::Bytes(svc_attr::ADDR, inet_addr(va.ip)),
        Attr::Be16(svc_attr::PORT, va.port),
    ]
}

/// `IPVS_CMD_ATTR_SERVICE` naming `va` only.
pub(crate) fn service_ref(va: &VirtualAddress) -> Attr {
    Attr::Nested(cmd_attr::SERVICE, service_key(va))
}

/// `IPVS_CMD_ATTR_SERVICE` with every setting (NEW_SERVICE and SET_SERVICE need them all).
pub(crate) fn service_full(va: &VirtualAddress, vs: &VirtualServer) -> Attr {
    let mut attrs = service_key(va);
    let mut flags = Vec::with_capacity(8);
    flags.extend_from_slice(&vs.flags.to_ne_bytes());
    // `struct ip_vs_flags { flags, mask }`: every bit is set as given.
    flags.extend_from_slice(&u32::MAX.to_ne_bytes());
    attrs.extend([
        Attr::Str(svc_attr::SCHED_NAME, vs.scheduler.clone()),
        Attr::Bytes(svc_attr::FLAGS, flags),
        Attr::U32(svc_attr::TIMEOUT, vs.timeout),
        Attr::U32(svc_attr::NETMASK, vs.netmask),
    ]);
    Attr::Nested(cmd_attr::SERVICE, attrs)
}

/// `IPVS_CMD_ATTR_DEST` naming a real server only (DEL_DEST).
pub(crate) fn dest_ref(addr: std::net::SocketAddr) -> Attr {
    Attr::Nested(
        cmd_attr::DEST,
        vec![
            Attr::Bytes(dest_attr::ADDR, inet_addr(addr.ip())),
            Attr::Be16(dest_attr::PORT, addr.port()),
        ],
    )
}

/// `IPVS_CMD_ATTR_DEST` with every setting (NEW_DEST and SET_DEST need them all).
pub(crate) fn dest_full(rs: &RealServer) -> Attr {
    Attr::Nested(
        cmd_attr::DEST,
        vec![
            Attr::Bytes(dest_attr::ADDR, inet_addr(rs.address.ip())),
            Attr::Be16(dest_attr::PORT, rs.address.port()),
            Attr::U16(
                dest_attr::ADDR_FAMILY,
                family_code(IpFamily::of(&rs.address.ip())),
            ),
            Attr::U32(dest_attr::FWD_METHOD, rs.forward.code()),
            Attr::U32(dest_attr::WEIGHT, rs.weight),
            Attr::U32(dest_attr::U_THRESH, 0),
            Attr::U32(dest_attr::L_THRESH, 0),
        ],
    )
}

/// The three timeouts of SET_CONFIG (0 leaves one as it is).
pub(crate) fn timeouts(tcp: u32, tcp_fin: u32, udp: u32) -> Vec<Attr> {
    vec![
        Attr::U32(cmd_attr::TIMEOUT_TCP, tcp),
        Attr::U32(cmd_attr::TIMEOUT_TCP_FIN, tcp_fin),
        Attr::U32(cmd_attr::TIMEOUT_UDP, udp),
    ]
}

/// The raw attributes nested in top-level attribute `kind`.
fn nested(msg: &IpvsMessage, kind: u16) -> Option<Vec<Attr>> {
    raw_attrs(find(&msg.attrs, kind)?).ok()
}

/// Decodes a virtual server from a GET_SERVICE dump message. `None` for what Ferry never
/// programs (firewall-mark services, unknown protocols).
pub(crate) fn decode_service(msg: &IpvsMessage) -> Option<(VirtualAddress, VirtualServer)> {
    let a = nested(msg, cmd_attr::SERVICE)?;
    let af = u16_of(find(&a, svc_attr::AF))?;
    let addr = VirtualAddress {
        protocol: protocol_of(u16_of(find(&a, svc_attr::PROTOCOL))?)?,
        ip: addr_of(find(&a, svc_attr::ADDR), af)?,
        port: be16_of(find(&a, svc_attr::PORT))?,
    };
    let sched = find(&a, svc_attr::SCHED_NAME).unwrap_or_default();
    let sched = sched.split(|b| *b == 0).next().unwrap_or_default();
    let vs = VirtualServer {
        scheduler: String::from_utf8_lossy(sched).into_owned(),
        flags: u32_of(find(&a, svc_attr::FLAGS)).unwrap_or(0) & !FLAG_HASHED,
        timeout: u32_of(find(&a, svc_attr::TIMEOUT)).unwrap_or(0),
        netmask: u32_of(find(&a, svc_attr::NETMASK)).unwrap_or(0),
    };
    Some((addr, vs))
}

/// A real server as the kernel reports it, with its connection counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveRealServer {
    /// Address, weight and forwarding method.
    pub server: RealServer,
    /// Active connections (TCP established).
    pub active: u32,
    /// Inactive connections (other states, UDP).
    pub inactive: u32,
    /// Persistence templates pointing at it.
    pub persistent: u32,
}

/// Decodes a real server of a GET_DEST dump message of a service of family `af`.
pub(crate) fn decode_dest(msg: &IpvsMessage, family: IpFamily) -> Option<LiveRealServer> {
    let a = nested(msg, cmd_attr::DEST)?;
    let af = u16_of(find(&a, dest_attr::ADDR_FAMILY)).unwrap_or(family_code(family));
    let ip = addr_of(find(&a, dest_attr::ADDR), af)?;
    let port = be16_of(find(&a, dest_attr::PORT))?;
    Some(LiveRealServer {
        server: RealServer {
            address: std::net::SocketAddr::new(ip, port),
            weight: u32_of(find(&a, dest_attr::WEIGHT)).unwrap_or(0),
            forward: Forward::from_code(u32_of(find(&a, dest_attr::FWD_METHOD)).unwrap_or(0)),
        },
        active: u32_of(find(&a, dest_attr::ACTIVE_CONNS)).unwrap_or(0),
        inactive: u32_of(find(&a, dest_attr::INACT_CONNS)).unwrap_or(0),
        persistent: u32_of(find(&a, dest_attr::PERSIST_CONNS)).unwrap_or(0),
    })
}

/// The connection timeouts (seconds) of a GET_CONFIG reply: TCP, TCP FIN, UDP.
pub(crate) fn decode_timeouts(msg: &IpvsMessage) -> (u32, u32, u32) {
    let get = |k| u32_of(find(&msg.attrs, k)).unwrap_or(0);
    (
        get(cmd_attr::TIMEOUT_TCP),
        get(cmd_attr::TIMEOUT_TCP_FIN),
        get(cmd_attr::TIMEOUT_UDP),
    )
}

/// IPVS's version (`0x010201` is 1.2.1) and connection table size, from a GET_INFO reply.
pub(crate) fn decode_info(msg: &IpvsMessage) -> (u32, u32) {
    (
        u32_of(find(&msg.attrs, info_attr::VERSION)).unwrap_or(0),
        u32_of(find(&msg.attrs, info_attr::CONN_TAB_SIZE)).unwrap_or(0),
    )
}

#[cfg(test)]
mod tests;
