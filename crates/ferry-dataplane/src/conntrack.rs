//! UDP conntrack cleanup over ctnetlink, as upstream kube-proxy does it
//! (pkg/proxy/conntrack): one dump of a family's conntrack table, filtered here with the
//! compiler's [`StaleFlowFilter`]s, then one `IPCTNL_MSG_CT_DELETE` per stale flow, addressed
//! by its original tuple (and its zone and id, so a flow created again since the dump, with the
//! same tuple, is not deleted by mistake).
//!
//! A flow that disappears between the dump and its deletion (it timed out, or another tool
//! deleted it) answers `ENOENT`: that is counted as gone, not as a failure. Each IP family is a
//! separate dump (`nfgenmsg` family `AF_INET` or `AF_INET6`).

use std::io;
use std::net::SocketAddr;

use netlink_packet_core::{
    NetlinkBuffer, NetlinkHeader, NetlinkMessage, NetlinkPayload, Nla, NLM_F_ACK, NLM_F_DUMP,
    NLM_F_REQUEST,
};
use netlink_packet_netfilter::conntrack::{
    ConntrackAttribute, ConntrackMessage, IPTuple, ProtoTuple, Tuple,
};
use netlink_packet_netfilter::{
    NetfilterHeader, NetfilterMessage, NetfilterMessageInner, NetfilterProtoFamily,
};
use netlink_sys::{protocols::NETLINK_NETFILTER, Socket, SocketAddr as NetlinkAddr};

use ferry_compile::conntrack::{StaleFlowFilter, StaleFlowIndex};
use ferry_model::IpFamily;

/// `CTA_ID`: the kernel's id of a conntrack entry.
const CTA_ID: u16 = 12;
/// `CTA_ZONE`: the conntrack zone (only present when not the default zone).
const CTA_ZONE: u16 = 18;
const ENOENT: i32 = 2;

/// What a cleanup did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CleanupReport {
    /// Entries in the dump.
    pub dumped: usize,
    /// UDP entries the filters found stale.
    pub stale: usize,
    /// Stale entries deleted.
    pub deleted: usize,
    /// Stale entries that were already gone when deleted (`ENOENT`).
    pub already_gone: usize,
    /// Dump messages that could not be decoded (skipped).
    pub undecodable: usize,
}

/// Why a cleanup failed. Nothing is retried here: the sync loop logs it, counts it, and checks
/// every frontend at its next sync.
#[derive(Debug, thiserror::Error)]
pub enum ConntrackError {
    /// The ctnetlink socket could not be opened or used.
    #[error("ctnetlink socket: {0}")]
    Socket(io::Error),
    /// The kernel refused the dump.
    #[error("the kernel refused the {family:?} conntrack dump: {error}")]
    Dump {
        /// The family dumped.
        family: IpFamily,
        /// The kernel's error.
        error: io::Error,
    },
    /// Some deletions failed (other than `ENOENT`); the others were done.
    #[error("{failed} of {} stale UDP conntrack entries could not be deleted ({first}, flow {flow})", .report.stale)]
    Delete {
        /// How many failed.
        failed: usize,
        /// The first failure.
        first: io::Error,
        /// The flow of the first failure.
        flow: String,
        /// What was done anyway.
        report: CleanupReport,
    },
}

/// One dumped conntrack entry, as far as the cleanup needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Flow {
    protocol: u8,
    orig_src: SocketAddr,
    orig_dst: SocketAddr,
    reply_src: SocketAddr,
    /// What a delete message names the entry by: its original tuple, zone and id.
    key: Vec<ConntrackAttribute>,
}

impl std::fmt::Display for Flow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "udp {} → {} (reply from {})",
            self.orig_src, self.orig_dst, self.reply_src
        )
    }
}

const IPPROTO_UDP: u8 = 17;

fn nf_family(family: IpFamily) -> NetfilterProtoFamily {
    match family {
        IpFamily::V4 => NetfilterProtoFamily::IPv4,
        IpFamily::V6 => NetfilterProtoFamily::IPv6,
    }
}

/// Deletes the UDP flows of `family` that any of `filters` finds stale, in the network
/// namespace of the calling thread. Does nothing (no dump) without filters.
pub fn delete_stale_udp(
    family: IpFamily,
    filters: &[StaleFlowFilter],
) -> Result<CleanupReport, ConntrackError> {
    if filters.is_empty() {
        return Ok(CleanupReport::default());
    }
    let index = StaleFlowIndex::new(filters);
    let mut ct = Ctnetlink::open()?;
    let mut report = CleanupReport::default();
    // Only the stale entries are kept: the table may hold a million.
    let stale = ct.dump(family, &mut report, |f| {
        f.protocol == IPPROTO_UDP && index.is_stale(f.orig_dst, f.reply_src)
    })?;
    report.stale = stale.len();
    let mut failed: Option<(usize, io::Error, String)> = None;
    for flow in &stale {
        tracing::debug!(%flow, "deleting stale conntrack entry");
        match ct.delete(family, flow) {
            Ok(()) => report.deleted += 1,
            Err(e) if e.raw_os_error() == Some(ENOENT) => report.already_gone += 1,
            Err(e) => match &mut failed {
                Some((n, _, _)) => *n += 1,
                None => failed = Some((1, e, flow.to_string())),
            },
        }
    }
    match failed {
        None => Ok(report),
        Some((failed, first, flow)) => Err(ConntrackError::Delete {
            failed,
            first,
            flow,
            report,
        }),
    }
}

/// A `NETLINK_NETFILTER` socket talking to ctnetlink.
struct Ctnetlink {
    socket: Socket,
    seq: u32,
    buf: Vec<u8>,
}

/// Receive buffer: larger than the biggest skb the kernel fills for a dump (32 KiB), so no
/// datagram is ever truncated, and large enough that each read carries many entries.
const RECV_BUFFER: usize = 64 * 1024;

impl Ctnetlink {
    fn open() -> Result<Self, ConntrackError> {
        let mut socket = Socket::new(NETLINK_NETFILTER).map_err(ConntrackError::Socket)?;
        socket.bind_auto().map_err(ConntrackError::Socket)?;
        socket
            .connect(&NetlinkAddr::new(0, 0))
            .map_err(ConntrackError::Socket)?;
        Ok(Self {
            socket,
            seq: 0,
            buf: vec![0; RECV_BUFFER],
        })
    }

    /// Reads one datagram into `self.buf`; returns its length.
    fn recv(&mut self) -> io::Result<usize> {
        let n = self.socket.recv(&mut &mut self.buf[..], 0)?;
        Ok(n.min(self.buf.len()))
    }

    fn send(&mut self, family: IpFamily, msg: ConntrackMessage, flags: u16) -> io::Result<u32> {
        self.seq = self.seq.wrapping_add(1);
        let mut header = NetlinkHeader::default();
        header.flags = flags;
        header.sequence_number = self.seq;
        let nf = NetfilterMessage::new(NetfilterHeader::new(nf_family(family), 0, 0), msg);
        let mut packet = NetlinkMessage::new(header, NetlinkPayload::from(nf));
        packet.finalize();
        let mut buf = vec![0; packet.buffer_len()];
        packet.serialize(&mut buf);
        self.socket.send(&buf, 0)?;
        Ok(self.seq)
    }

    /// The entries of `family`'s table that `keep` selects; counts every entry (and those that
    /// could not be decoded) in `report`.
    fn dump(
        &mut self,
        family: IpFamily,
        report: &mut CleanupReport,
        keep: impl Fn(&Flow) -> bool,
    ) -> Result<Vec<Flow>, ConntrackError> {
        let dump_err = |error| ConntrackError::Dump { family, error };
        let seq = self
            .send(
                family,
                ConntrackMessage::Get(Vec::new()),
                NLM_F_REQUEST | NLM_F_DUMP,
            )
            .map_err(dump_err)?;
        let mut flows = Vec::new();
        loop {
            let n = self.recv().map_err(dump_err)?;
            for msg in messages(&self.buf[..n]) {
                let Ok(msg) = msg else {
                    report.dumped += 1;
                    report.undecodable += 1;
                    continue;
                };
                if msg.header.sequence_number != seq {
                    continue;
                }
                match msg.payload {
                    NetlinkPayload::Done(_) => return Ok(flows),
                    NetlinkPayload::Error(e) => match e.code {
                        Some(code) => {
                            return Err(dump_err(io::Error::from_raw_os_error(-code.get())))
                        }
                        None => return Ok(flows),
                    },
                    NetlinkPayload::InnerMessage(NetfilterMessage {
                        inner: NetfilterMessageInner::Conntrack(ConntrackMessage::New(attrs)),
                        ..
                    }) => {
                        report.dumped += 1;
                        match flow(attrs) {
                            Some(f) if keep(&f) => flows.push(f),
                            Some(_) => {}
                            None => report.undecodable += 1,
                        }
                    }
                    _ => {}
                }
            }
        }
    }

    /// Deletes one entry; `ENOENT` when it is gone.
    fn delete(&mut self, family: IpFamily, flow: &Flow) -> io::Result<()> {
        let seq = self.send(
            family,
            ConntrackMessage::Delete(flow.key.clone()),
            NLM_F_REQUEST | NLM_F_ACK,
        )?;
        loop {
            let n = self.recv()?;
            for msg in messages(&self.buf[..n]).flatten() {
                if msg.header.sequence_number != seq {
                    continue;
                }
                if let NetlinkPayload::Error(e) = msg.payload {
                    return match e.code {
                        None => Ok(()),
                        Some(code) => Err(io::Error::from_raw_os_error(-code.get())),
                    };
                }
            }
        }
    }
}

/// The netlink messages of one datagram.
fn messages(buf: &[u8]) -> impl Iterator<Item = Result<NetlinkMessage<NetfilterMessage>, ()>> + '_ {
    let mut offset = 0;
    std::iter::from_fn(move || {
        let rest = buf.get(offset..).filter(|r| !r.is_empty())?;
        let Ok(nl) = NetlinkBuffer::new_checked(rest) else {
            offset = buf.len();
            return Some(Err(()));
        };
        let len = nl.length() as usize;
        if len < 16 || len > rest.len() {
            offset = buf.len();
            return Some(Err(()));
        }
        let msg = NetlinkMessage::<NetfilterMessage>::deserialize(&rest[..len]).map_err(|_| ());
        // NLMSG_ALIGN: messages start on 4-byte boundaries.
        offset += (len + 3) & !3;
        Some(msg)
    })
}

/// Source and destination (address, port) and protocol of a tuple.
fn endpoints(tuple: &[Tuple]) -> Option<(u8, SocketAddr, SocketAddr)> {
    let (mut src, mut dst, mut proto, mut sport, mut dport) = (None, None, None, 0, 0);
    for t in tuple {
        match t {
            Tuple::Ip(ips) => {
                for ip in ips {
                    match ip {
                        IPTuple::SourceAddress(a) => src = Some(*a),
                        IPTuple::DestinationAddress(a) => dst = Some(*a),
                        _ => {}
                    }
                }
            }
            Tuple::Proto(ps) => {
                for p in ps {
                    match p {
                        ProtoTuple::Protocol(p) => proto = Some(u8::from(*p)),
                        ProtoTuple::SourcePort(p) => sport = *p,
                        ProtoTuple::DestinationPort(p) => dport = *p,
                        _ => {}
                    }
                }
            }
            _ => {}
        }
    }
    Some((
        proto?,
        SocketAddr::new(src?, sport),
        SocketAddr::new(dst?, dport),
    ))
}

/// The flow a dumped entry describes; `None` when its tuples are incomplete.
fn flow(attrs: Vec<ConntrackAttribute>) -> Option<Flow> {
    let mut orig = None;
    let mut reply = None;
    let mut key = Vec::new();
    for attr in attrs {
        match attr {
            ConntrackAttribute::CtaTupleOrig(t) => {
                orig = endpoints(&t);
                key.push(ConntrackAttribute::CtaTupleOrig(t));
            }
            ConntrackAttribute::CtaTupleReply(t) => reply = endpoints(&t),
            ConntrackAttribute::Other(nla) if matches!(nla.kind(), CTA_ID | CTA_ZONE) => {
                key.push(ConntrackAttribute::Other(nla));
            }
            _ => {}
        }
    }
    let (protocol, orig_src, orig_dst) = orig?;
    let (_, reply_src, _) = reply?;
    Some(Flow {
        protocol,
        orig_src,
        orig_dst,
        reply_src,
        key,
    })
}

#[cfg(test)]
mod tests;
