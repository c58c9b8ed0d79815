//! The `kube-ipvs0` dummy interface and its addresses, over rtnetlink.
//!
//! Upstream creates it once (a dummy link stays down and NOARP: it only makes the kernel take
//! its addresses as local, so IPVS, which hooks local input, sees their traffic) and binds
//! every service address to it as a /32 (/128).

use std::io;
use std::net::IpAddr;

use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_CREATE, NLM_F_DUMP, NLM_F_EXCL,
    NLM_F_REQUEST,
};
use netlink_packet_route::address::{AddressAttribute, AddressMessage, AddressScope};
use netlink_packet_route::link::{InfoKind, LinkAttribute, LinkInfo, LinkMessage};
use netlink_packet_route::{AddressFamily, RouteNetlinkMessage};
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr as NetlinkAddr};

const ENODEV: i32 = 19;
const EEXIST: i32 = 17;
const EADDRNOTAVAIL: i32 = 99;

/// An rtnetlink socket in the calling thread's network namespace.
pub struct Links {
    socket: Socket,
    seq: u32,
    buf: Vec<u8>,
}

impl Links {
    /// Opens the socket.
    pub fn open() -> io::Result<Self> {
        let mut socket = Socket::new(NETLINK_ROUTE)?;
        socket.bind_auto()?;
        socket.connect(&NetlinkAddr::new(0, 0))?;
        Ok(Self {
            socket,
            seq: 0,
            buf: vec![0; 64 * 1024],
        })
    }

    /// Sends `msg`; returns the replies (up to the ack, or the end of a dump).
    fn request(
        &mut self,
        msg: RouteNetlinkMessage,
        flags: u16,
    ) -> io::Result<Vec<RouteNetlinkMessage>> {
        self.seq = self.seq.wrapping_add(1);
        let mut header = NetlinkHeader::default();
        // A request that is not a dump is acknowledged, so its reply is known to be complete
        // (a GET answers with one message and no end marker otherwise).
        header.flags = if flags & NLM_F_DUMP == 0 {
            NLM_F_REQUEST | NLM_F_ACK | flags
        } else {
            NLM_F_REQUEST | flags
        };
        header.sequence_number = self.seq;
        let mut nl = NetlinkMessage::new(header, NetlinkPayload::from(msg));
        nl.finalize();
        let mut out = vec![0; nl.buffer_len()];
        nl.serialize(&mut out);
        self.socket.send(&out, 0)?;
        let mut replies = Vec::new();
        loop {
            let n = self
                .socket
                .recv(&mut &mut self.buf[..], 0)?
                .min(self.buf.len());
            let mut offset = 0;
            while offset < n {
                let m = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&self.buf[offset..n])
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
                let len = m.header.length as usize;
                if m.header.sequence_number == self.seq {
                    match m.payload {
                        NetlinkPayload::Done(_) => return Ok(replies),
                        NetlinkPayload::Error(e) => {
                            return match e.code {
                                None => Ok(replies),
                                Some(_) => Err(e.to_io()),
                            }
                        }
                        NetlinkPayload::InnerMessage(r) => replies.push(r),
                        _ => {}
                    }
                }
                if len == 0 {
                    break;
                }
                offset += (len + 3) & !3;
            }
        }
    }

    /// The index of the link named `name`, if there is one.
    pub fn index_of(&mut self, name: &str) -> io::Result<Option<u32>> {
        let mut msg = LinkMessage::default();
        msg.attributes.push(LinkAttribute::IfName(name.to_owned()));
        match self.request(RouteNetlinkMessage::GetLink(msg), 0) {
            Ok(replies) => Ok(replies.into_iter().find_map(|r| match r {
                RouteNetlinkMessage::NewLink(l) => Some(l.header.index),
                _ => None,
            })),
            Err(e) if e.raw_os_error() == Some(ENODEV) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Creates the dummy link `name` unless it exists; returns its index and whether it was
    /// created.
    pub fn ensure_dummy(&mut self, name: &str) -> io::Result<(u32, bool)> {
        if let Some(index) = self.index_of(name)? {
            return Ok((index, false));
        }
        let mut msg = LinkMessage::default();
        msg.attributes.push(LinkAttribute::IfName(name.to_owned()));
        msg.attributes
            .push(LinkAttribute::LinkInfo(vec![LinkInfo::Kind(
                InfoKind::Dummy,
            )]));
        match self.request(
            RouteNetlinkMessage::NewLink(msg),
            NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL,
        ) {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(EEXIST) => {}
            Err(e) => return Err(e),
        }
        let index = self.index_of(name)?.ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("{name} vanished after creation"),
            )
        })?;
        Ok((index, true))
    }

    /// Deletes the link `name`; false when there was none.
    pub fn delete(&mut self, name: &str) -> io::Result<bool> {
        let Some(index) = self.index_of(name)? else {
            return Ok(false);
        };
        let mut msg = LinkMessage::default();
        msg.header.index = index;
        self.request(RouteNetlinkMessage::DelLink(msg), NLM_F_ACK)?;
        Ok(true)
    }

    /// The addresses of link `index` (every family).
    pub fn addresses(&mut self, index: u32) -> io::Result<Vec<IpAddr>> {
        let replies = self.request(
            RouteNetlinkMessage::GetAddress(AddressMessage::default()),
            NLM_F_DUMP,
        )?;
        Ok(replies
            .into_iter()
            .filter_map(|r| match r {
                RouteNetlinkMessage::NewAddress(a) if a.header.index == index => address_of(&a),
                _ => None,
            })
            .collect())
    }

    /// Every address of every link but `except` (an index): the node's own addresses.
    pub fn addresses_except(&mut self, except: Option<u32>) -> io::Result<Vec<IpAddr>> {
        let replies = self.request(
            RouteNetlinkMessage::GetAddress(AddressMessage::default()),
            NLM_F_DUMP,
        )?;
        Ok(replies
            .into_iter()
            .filter_map(|r| match r {
                RouteNetlinkMessage::NewAddress(a) if Some(a.header.index) != except => {
                    address_of(&a)
                }
                _ => None,
            })
            .collect())
    }

    fn address_message(index: u32, ip: IpAddr) -> AddressMessage {
        let mut msg = AddressMessage::default();
        msg.header.index = index;
        msg.header.scope = AddressScope::Universe;
        match ip {
            IpAddr::V4(_) => {
                msg.header.family = AddressFamily::Inet;
                msg.header.prefix_len = 32;
            }
            IpAddr::V6(_) => {
                msg.header.family = AddressFamily::Inet6;
                msg.header.prefix_len = 128;
            }
        }
        msg.attributes.push(AddressAttribute::Local(ip));
        msg.attributes.push(AddressAttribute::Address(ip));
        msg
    }

    /// Adds `ip` as a host address (/32, /128) to link `index`; already there is fine.
    pub fn add_address(&mut self, index: u32, ip: IpAddr) -> io::Result<()> {
        let msg = Self::address_message(index, ip);
        match self.request(
            RouteNetlinkMessage::NewAddress(msg),
            NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL,
        ) {
            Err(e) if e.raw_os_error() == Some(EEXIST) => Ok(()),
            r => r.map(|_| ()),
        }
    }

    /// Removes `ip` from link `index`; already gone is fine.
    pub fn delete_address(&mut self, index: u32, ip: IpAddr) -> io::Result<()> {
        let msg = Self::address_message(index, ip);
        match self.request(RouteNetlinkMessage::DelAddress(msg), NLM_F_ACK) {
            Err(e) if e.raw_os_error() == Some(EADDRNOTAVAIL) => Ok(()),
            r => r.map(|_| ()),
        }
    }
}

fn address_of(a: &AddressMessage) -> Option<IpAddr> {
    // IFA_LOCAL is the interface's own address (IFA_ADDRESS is the peer's on point-to-point
    // links); IPv6 has only IFA_ADDRESS.
    let local = a.attributes.iter().find_map(|x| match x {
        AddressAttribute::Local(ip) => Some(*ip),
        _ => None,
    });
    local.or_else(|| {
        a.attributes.iter().find_map(|x| match x {
            AddressAttribute::Address(ip) => Some(*ip),
            _ => None,
        })
    })
}
