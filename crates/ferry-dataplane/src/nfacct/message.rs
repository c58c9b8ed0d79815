//! The nfnetlink_acct messages (`NFNL_SUBSYS_ACCT`, include/uapi/linux/netfilter/
//! nfnetlink_acct.h): a request's bytes, and the counters and errors in the kernel's answers.
//! No I/O.

use netlink_packet_core::{
    DefaultNla, NetlinkBuffer, NetlinkHeader, NetlinkMessage, NetlinkPayload,
};
use netlink_packet_netfilter::{
    NetfilterHeader, NetfilterMessage, NetfilterMessageInner, NetfilterProtoFamily,
    NetfilterSubsystem,
};

use super::Counter;

/// `NFNL_SUBSYS_ACCT`.
pub(super) const SUBSYS_ACCT: u8 = 7;
/// `NFNL_MSG_ACCT_NEW`: create a counter (also the type of each counter the kernel sends).
pub(super) const MSG_NEW: u8 = 0;
/// `NFNL_MSG_ACCT_GET`: one counter by name, or all of them with `NLM_F_DUMP`.
pub(super) const MSG_GET: u8 = 1;
/// `NFACCT_NAME`: the counter's name, NUL-terminated.
const ATTR_NAME: u16 = 1;
/// `NFACCT_PKTS`: packets, big-endian u64.
const ATTR_PKTS: u16 = 2;
/// `NFACCT_BYTES`: bytes, big-endian u64.
const ATTR_BYTES: u16 = 3;

/// One request: `command` (`MSG_NEW`, `MSG_GET`) with `flags`, numbered `seq`, naming
/// `name` (none: a dump of every counter).
pub(super) fn request(seq: u32, command: u8, flags: u16, name: Option<&str>) -> Vec<u8> {
    let attributes = name
        .map(|n| {
            let mut value = n.as_bytes().to_vec();
            value.push(0);
            DefaultNla::new(ATTR_NAME, value)
        })
        .into_iter()
        .collect();
    let inner = NetfilterMessageInner::Other {
        subsys: NetfilterSubsystem::Other(SUBSYS_ACCT),
        message_type: command,
        attributes,
    };
    // The family and resource id are not read by nfnetlink_acct.
    let header = NetfilterHeader::new(NetfilterProtoFamily::Unspec, 0, 0);
    let mut nl = NetlinkHeader::default();
    nl.flags = flags;
    nl.sequence_number = seq;
    let mut packet = NetlinkMessage::new(
        nl,
        NetlinkPayload::from(NetfilterMessage::new(header, inner)),
    );
    packet.finalize();
    let mut buf = vec![0; packet.buffer_len()];
    packet.serialize(&mut buf);
    buf
}

/// What one message of the kernel's answer says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Answer {
    /// A counter (an answer to a get, or one of a dump).
    Counter(Counter),
    /// The request is done: `None` for success (an ack), or the kernel's errno.
    Done(Option<i32>),
    /// A counter message missing its name or a count.
    Malformed,
    /// Anything else (another subsystem's message, a message of another request).
    Other,
}

/// The messages of one datagram that answer request `seq`; an undecodable message ends the
/// datagram as [`Answer::Malformed`].
pub(super) fn answers(buf: &[u8], seq: u32) -> Vec<Answer> {
    let mut out = Vec::new();
    let mut offset = 0;
    while let Some(rest) = buf.get(offset..).filter(|r| !r.is_empty()) {
        let len = NetlinkBuffer::new_checked(rest).map_or(0, |b| b.length() as usize);
        let msg = (16..=rest.len())
            .contains(&len)
            .then(|| NetlinkMessage::<NetfilterMessage>::deserialize(&rest[..len]).ok())
            .flatten();
        let Some(msg) = msg else {
            out.push(Answer::Malformed);
            break;
        };
        // NLMSG_ALIGN: messages start on 4-byte boundaries.
        offset += (len + 3) & !3;
        if msg.header.sequence_number == seq {
            out.push(answer(msg.payload));
        }
    }
    out
}

fn answer(payload: NetlinkPayload<NetfilterMessage>) -> Answer {
    match payload {
        NetlinkPayload::Done(_) => Answer::Done(None),
        NetlinkPayload::Error(e) => Answer::Done(e.code.map(|c| -c.get())),
        NetlinkPayload::InnerMessage(NetfilterMessage {
            inner:
                NetfilterMessageInner::Other {
                    subsys: NetfilterSubsystem::Other(SUBSYS_ACCT),
                    message_type: MSG_NEW,
                    attributes,
                },
            ..
        }) => counter(&attributes).map_or(Answer::Malformed, Answer::Counter),
        _ => Answer::Other,
    }
}

/// A counter from its attributes: the name and both counts are required.
pub(super) fn counter(attributes: &[DefaultNla]) -> Option<Counter> {
    use netlink_packet_core::Nla as _;
    let (mut name, mut packets, mut bytes) = (None, None, None);
    for a in attributes {
        let mut value = vec![0; a.value_len()];
        a.emit_value(&mut value);
        match a.kind() {
            ATTR_NAME => {
                let end = value.iter().position(|b| *b == 0).unwrap_or(value.len());
                name = String::from_utf8(value[..end].to_vec()).ok();
            }
            ATTR_PKTS => packets = value.try_into().ok().map(u64::from_be_bytes),
            ATTR_BYTES => bytes = value.try_into().ok().map(u64::from_be_bytes),
            _ => {}
        }
    }
    Some(Counter {
        name: name?,
        packets: packets?,
        bytes: bytes?,
    })
}
