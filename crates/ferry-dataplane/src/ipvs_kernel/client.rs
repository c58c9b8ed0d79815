//! Ferry's IPVS client: a generic netlink socket speaking the "IPVS" family, with typed
//! operations. Changes are batched: many requests go out in one `sendmsg` (the kernel handles
//! each message of a datagram in turn and acknowledges each), so a sync of thousands of real
//! servers costs a few system calls, not thousands.

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddr;

use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_ACK, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_generic::ctrl::nlas::GenlCtrlAttrs;
use netlink_packet_generic::ctrl::{GenlCtrl, GenlCtrlCmd};
use netlink_packet_generic::GenlMessage;
use netlink_sys::{protocols::NETLINK_GENERIC, Socket, SocketAddr as NetlinkAddr};

use ferry_compile::ipvs::{RealServer, VirtualAddress, VirtualServer};

use super::genl::{self, cmd, IpvsMessage, LiveRealServer};
use super::IpvsError;

/// One change to the kernel's IPVS table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Add a virtual server.
    AddService(VirtualAddress, VirtualServer),
    /// Change a virtual server's settings.
    UpdateService(VirtualAddress, VirtualServer),
    /// Delete a virtual server (and its real servers).
    DeleteService(VirtualAddress),
    /// Add a real server.
    AddReal(VirtualAddress, RealServer),
    /// Change a real server's weight or forwarding method.
    UpdateReal(VirtualAddress, RealServer),
    /// Delete a real server.
    DeleteReal(VirtualAddress, SocketAddr),
}

impl Change {
    fn message(&self) -> IpvsMessage {
        let (cmd, attrs) = match self {
            Change::AddService(va, vs) => (cmd::NEW_SERVICE, vec![genl::service_full(va, vs)]),
            Change::UpdateService(va, vs) => (cmd::SET_SERVICE, vec![genl::service_full(va, vs)]),
            Change::DeleteService(va) => (cmd::DEL_SERVICE, vec![genl::service_ref(va)]),
            Change::AddReal(va, rs) => (
                cmd::NEW_DEST,
                vec![genl::service_ref(va), genl::dest_full(rs)],
            ),
            Change::UpdateReal(va, rs) => (
                cmd::SET_DEST,
                vec![genl::service_ref(va), genl::dest_full(rs)],
            ),
            Change::DeleteReal(va, addr) => (
                cmd::DEL_DEST,
                vec![genl::service_ref(va), genl::dest_ref(*addr)],
            ),
        };
        IpvsMessage { cmd, attrs }
    }
}

impl std::fmt::Display for Change {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Change::AddService(va, vs) => write!(f, "add virtual server {va} {}", vs.scheduler),
            Change::UpdateService(va, vs) => {
                write!(f, "update virtual server {va} {}", vs.scheduler)
            }
            Change::DeleteService(va) => write!(f, "delete virtual server {va}"),
            Change::AddReal(va, rs) => write!(f, "add real server {} to {va}", rs.address),
            Change::UpdateReal(va, rs) => write!(
                f,
                "set real server {} of {va} to weight {}",
                rs.address, rs.weight
            ),
            Change::DeleteReal(va, a) => write!(f, "delete real server {a} of {va}"),
        }
    }
}

/// A change the kernel refused, and why.
#[derive(Debug)]
pub struct Refused {
    /// The change.
    pub change: Change,
    /// The kernel's error.
    pub error: io::Error,
}

/// Largest datagram sent at once: well below the socket's send buffer (the kernel refuses a
/// datagram larger than it).
const BATCH_BYTES: usize = 48 * 1024;
/// Most messages in one datagram: the kernel queues one acknowledgement per message, each an
/// skb of its own (about 1 KiB of receive buffer counted per ack, however small), so a
/// datagram of 400 small messages overran the default 208 KiB receive buffer (`ENOBUFS`, lost
/// acks) at 1 000 services × 10 endpoints.
const BATCH_MESSAGES: usize = 128;
const RECV_BUFFER: usize = 64 * 1024;

/// A generic netlink socket bound to the IPVS family, in the network namespace of the thread
/// that opened it.
pub struct IpvsClient {
    socket: Socket,
    family: u16,
    seq: u32,
    buf: Vec<u8>,
}

impl IpvsClient {
    /// Opens the socket and resolves the family (the kernel loads `ip_vs` on demand when it
    /// can). Fails with [`IpvsError::NoIpvs`] when the kernel has no IPVS.
    pub fn open() -> Result<Self, IpvsError> {
        let mut socket = Socket::new(NETLINK_GENERIC).map_err(IpvsError::Socket)?;
        socket.bind_auto().map_err(IpvsError::Socket)?;
        // Acknowledgements without a copy of the request (NETLINK_CAP_ACK).
        socket.set_cap_ack(true).map_err(IpvsError::Socket)?;
        socket
            .connect(&NetlinkAddr::new(0, 0))
            .map_err(IpvsError::Socket)?;
        let mut client = Self {
            socket,
            family: 0,
            seq: 0,
            buf: vec![0; RECV_BUFFER],
        };
        client.family = client.resolve_family()?;
        Ok(client)
    }

    fn resolve_family(&mut self) -> Result<u16, IpvsError> {
        let mut msg = GenlMessage::from_payload(GenlCtrl {
            cmd: GenlCtrlCmd::GetFamily,
            nlas: vec![GenlCtrlAttrs::FamilyName("IPVS".into())],
        });
        msg.finalize();
        let mut nl = NetlinkMessage::from(msg);
        nl.header.flags = NLM_F_REQUEST;
        nl.header.sequence_number = self.next_seq();
        nl.finalize();
        let mut out = vec![0; nl.buffer_len()];
        nl.serialize(&mut out);
        self.socket.send(&out, 0).map_err(IpvsError::Socket)?;
        let n = self.recv().map_err(IpvsError::Socket)?;
        let reply = NetlinkMessage::<GenlMessage<GenlCtrl>>::deserialize(&self.buf[..n])
            .map_err(|e| IpvsError::Decode(e.to_string()))?;
        match reply.payload {
            NetlinkPayload::InnerMessage(m) => m
                .payload
                .nlas
                .iter()
                .find_map(|a| match a {
                    GenlCtrlAttrs::FamilyId(id) => Some(*id),
                    _ => None,
                })
                .ok_or_else(|| IpvsError::Decode("family reply without an id".into())),
            NetlinkPayload::Error(e) => Err(IpvsError::NoIpvs(e.to_io())),
            other => Err(IpvsError::Decode(format!("unexpected reply {other:?}"))),
        }
    }

    fn next_seq(&mut self) -> u32 {
        self.seq = self.seq.wrapping_add(1);
        self.seq
    }

    fn recv(&mut self) -> io::Result<usize> {
        let n = self.socket.recv(&mut &mut self.buf[..], 0)?;
        Ok(n.min(self.buf.len()))
    }

    /// Serializes `msg` with `flags` onto `out`; returns its sequence number.
    fn push(&mut self, out: &mut Vec<u8>, msg: IpvsMessage, flags: u16) -> u32 {
        let mut genl = GenlMessage::from_payload(msg);
        genl.set_resolved_family_id(self.family);
        genl.finalize();
        let mut header = NetlinkHeader::default();
        header.flags = flags;
        header.sequence_number = self.next_seq();
        let mut nl = NetlinkMessage::new(header, NetlinkPayload::from(genl));
        nl.finalize();
        let start = out.len();
        out.resize(start + nl.buffer_len(), 0);
        nl.serialize(&mut out[start..]);
        nl.header.sequence_number
    }

    /// Messages in the receive buffer's first `n` bytes.
    fn parse(&self, n: usize) -> Result<Vec<NetlinkMessage<GenlMessage<IpvsMessage>>>, IpvsError> {
        let mut out = Vec::new();
        let mut offset = 0;
        while offset < n {
            let msg = NetlinkMessage::<GenlMessage<IpvsMessage>>::deserialize(&self.buf[offset..n])
                .map_err(|e| IpvsError::Decode(e.to_string()))?;
            let len = msg.header.length as usize;
            out.push(msg);
            if len == 0 {
                break;
            }
            offset += (len + 3) & !3;
        }
        Ok(out)
    }

    /// Applies `changes` in order, batched; returns the ones the kernel refused (the others
    /// are done: IPVS has no transactions).
    pub fn apply(&mut self, changes: &[Change]) -> Result<Vec<Refused>, IpvsError> {
        let mut refused = Vec::new();
        let mut start = 0;
        while start < changes.len() {
            let mut out = Vec::with_capacity(BATCH_BYTES + 1024);
            let mut pending: BTreeMap<u32, usize> = BTreeMap::new();
            let mut i = start;
            while i < changes.len() && out.len() < BATCH_BYTES && i - start < BATCH_MESSAGES {
                let seq = self.push(&mut out, changes[i].message(), NLM_F_REQUEST | NLM_F_ACK);
                pending.insert(seq, i);
                i += 1;
            }
            self.socket.send(&out, 0).map_err(IpvsError::Socket)?;
            while !pending.is_empty() {
                let n = self.recv().map_err(IpvsError::Socket)?;
                for msg in self.parse(n)? {
                    let Some(idx) = pending.remove(&msg.header.sequence_number) else {
                        continue;
                    };
                    if let NetlinkPayload::Error(e) = msg.payload {
                        if e.code.is_some() {
                            refused.push(Refused {
                                change: changes[idx].clone(),
                                error: e.to_io(),
                            });
                        }
                    }
                }
            }
            start = i;
        }
        Ok(refused)
    }

    /// Sends one request with `NLM_F_DUMP` and collects every reply message.
    fn dump(&mut self, msg: IpvsMessage) -> Result<Vec<IpvsMessage>, IpvsError> {
        let mut replies = Vec::new();
        self.exchange(msg, NLM_F_REQUEST | NLM_F_DUMP, |payload| match payload {
            NetlinkPayload::Done(_) => Some(Ok(())),
            NetlinkPayload::Error(e) if e.code.is_some() => Some(Err(IpvsError::Kernel(e.to_io()))),
            NetlinkPayload::InnerMessage(g) => {
                replies.push(g.payload);
                None
            }
            _ => None,
        })?;
        Ok(replies)
    }

    /// One request answered by one message.
    fn get(&mut self, cmd: u8) -> Result<IpvsMessage, IpvsError> {
        let mut reply = None;
        let msg = IpvsMessage { cmd, attrs: vec![] };
        self.exchange(msg, NLM_F_REQUEST, |payload| match payload {
            NetlinkPayload::InnerMessage(g) => {
                reply = Some(g.payload);
                Some(Ok(()))
            }
            NetlinkPayload::Error(e) => Some(Err(IpvsError::Kernel(e.to_io()))),
            _ => None,
        })?;
        reply.ok_or_else(|| IpvsError::Decode("no reply".into()))
    }

    /// Sends `msg` with `flags` and hands each reply to it to `on_reply` until that returns
    /// a result.
    fn exchange(
        &mut self,
        msg: IpvsMessage,
        flags: u16,
        mut on_reply: impl FnMut(
            NetlinkPayload<GenlMessage<IpvsMessage>>,
        ) -> Option<Result<(), IpvsError>>,
    ) -> Result<(), IpvsError> {
        let mut out = Vec::new();
        let seq = self.push(&mut out, msg, flags);
        self.socket.send(&out, 0).map_err(IpvsError::Socket)?;
        loop {
            let n = self.recv().map_err(IpvsError::Socket)?;
            for m in self.parse(n)? {
                if m.header.sequence_number != seq {
                    continue;
                }
                if let Some(done) = on_reply(m.payload) {
                    return done;
                }
            }
        }
    }

    /// Every virtual server (firewall-mark services and unknown protocols left out).
    pub fn services(&mut self) -> Result<Vec<(VirtualAddress, VirtualServer)>, IpvsError> {
        let replies = self.dump(IpvsMessage {
            cmd: cmd::GET_SERVICE,
            attrs: vec![],
        })?;
        Ok(replies.iter().filter_map(genl::decode_service).collect())
    }

    /// The real servers of a virtual server.
    pub fn real_servers(&mut self, va: &VirtualAddress) -> Result<Vec<LiveRealServer>, IpvsError> {
        let replies = self.dump(IpvsMessage {
            cmd: cmd::GET_DEST,
            attrs: vec![genl::service_ref(va)],
        })?;
        Ok(replies
            .iter()
            .filter_map(|m| genl::decode_dest(m, va.family()))
            .collect())
    }

    /// The whole table: every virtual server with its real servers.
    pub fn table(&mut self) -> Result<Table, IpvsError> {
        let mut table = Table::new();
        for (va, vs) in self.services()? {
            let reals = self.real_servers(&va)?;
            table.insert(va, (vs, reals));
        }
        Ok(table)
    }

    /// The connection timeouts in seconds: TCP, TCP FIN, UDP (`ipvsadm -L --timeout`).
    pub fn timeouts(&mut self) -> Result<(u32, u32, u32), IpvsError> {
        Ok(genl::decode_timeouts(&self.get(cmd::GET_CONFIG)?))
    }

    /// Sets the connection timeouts (`ipvsadm --set`); 0 leaves a timeout as it is.
    pub fn set_timeouts(&mut self, tcp: u32, tcp_fin: u32, udp: u32) -> Result<(), IpvsError> {
        let msg = IpvsMessage {
            cmd: cmd::SET_CONFIG,
            attrs: genl::timeouts(tcp, tcp_fin, udp),
        };
        self.exchange(msg, NLM_F_REQUEST | NLM_F_ACK, |payload| match payload {
            NetlinkPayload::Error(e) => Some(match e.code {
                None => Ok(()),
                Some(_) => Err(IpvsError::Kernel(e.to_io())),
            }),
            _ => None,
        })
    }

    /// IPVS's version (`0x010201` for 1.2.1) and connection table size.
    pub fn info(&mut self) -> Result<(u32, u32), IpvsError> {
        Ok(genl::decode_info(&self.get(cmd::GET_INFO)?))
    }
}

/// The kernel's IPVS table.
pub type Table = BTreeMap<VirtualAddress, (VirtualServer, Vec<LiveRealServer>)>;
