//! nfnetlink message encoding (no I/O; unit-tested byte for byte): the batch framing here,
//! set elements in [`elements`], dispatch chains and their rules in [`rule`] (built from the
//! expressions in [`expr`]), the chain dump request and its answers in [`dump`].

use ferry_model::IpFamily;

use super::NetlinkError;

/// The delta holds something this encoder does not write (it is then applied with `nft`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("not encodable as a netlink element batch: {0}")]
pub struct Unencodable(pub &'static str);

pub(super) const NLM_F_REQUEST: u16 = 0x1;
pub(super) const NLM_F_ACK: u16 = 0x4;
pub(super) const NLM_F_DUMP: u16 = 0x300;
pub(super) const NLM_F_CREATE: u16 = 0x400;
pub(super) const NLM_F_APPEND: u16 = 0x800;
pub(super) const NLMSG_ERROR: u16 = 0x2;
pub(super) const NLMSG_DONE: u16 = 0x3;
pub(super) const NLA_F_NESTED: u16 = 0x8000;
const NFNL_MSG_BATCH_BEGIN: u16 = 0x10;
const NFNL_MSG_BATCH_END: u16 = 0x11;
pub(super) const NFNL_SUBSYS_NFTABLES: u16 = 10;
pub(super) const NFT_MSG_NEWCHAIN: u16 = 3;
pub(super) const NFT_MSG_GETCHAIN: u16 = 4;
pub(super) const NFT_MSG_DELCHAIN: u16 = 5;
pub(super) const NFT_MSG_NEWRULE: u16 = 6;
pub(super) const NFT_MSG_DELRULE: u16 = 8;
pub(super) const NFT_MSG_NEWSET: u16 = 9;
pub(super) const NFT_MSG_NEWSETELEM: u16 = 12;
pub(super) const NFT_MSG_DELSETELEM: u16 = 14;
pub(super) const NFTA_LIST_ELEM: u16 = 1;
pub(super) const NFTA_DATA_VALUE: u16 = 1;
pub(super) const NFTA_DATA_VERDICT: u16 = 2;
pub(super) const NFTA_VERDICT_CODE: u16 = 1;
pub(super) const NFTA_VERDICT_CHAIN: u16 = 2;

/// One batch being written.
pub(crate) struct Batch {
    pub(super) buf: Vec<u8>,
    seq: u32,
    acks: usize,
    pub(super) family: u8,
    pub(super) table: &'static str,
    /// The next anonymous set's transaction-local id.
    pub(super) next_set_id: u32,
}

pub(super) fn put_u16(buf: &mut [u8], at: usize, v: u16) {
    buf[at..at + 2].copy_from_slice(&v.to_ne_bytes());
}

pub(super) fn pad(buf: &mut Vec<u8>) {
    while !buf.len().is_multiple_of(4) {
        buf.push(0);
    }
}

/// Starts an attribute; returns its offset for [`end_attr`].
pub(super) fn begin_attr(buf: &mut Vec<u8>, kind: u16) -> usize {
    let at = buf.len();
    buf.extend_from_slice(&[0, 0]);
    buf.extend_from_slice(&kind.to_ne_bytes());
    at
}

pub(super) fn end_attr(buf: &mut Vec<u8>, at: usize) {
    let len = (buf.len() - at) as u16;
    put_u16(buf, at, len);
    pad(buf);
}

pub(super) fn attr(buf: &mut Vec<u8>, kind: u16, payload: &[u8]) {
    let at = begin_attr(buf, kind);
    buf.extend_from_slice(payload);
    end_attr(buf, at);
}

pub(super) fn attr_str(buf: &mut Vec<u8>, kind: u16, s: &str) {
    let at = begin_attr(buf, kind);
    buf.extend_from_slice(s.as_bytes());
    buf.push(0);
    end_attr(buf, at);
}

/// A 32-bit attribute in network byte order (what nf_tables expects for numbers).
pub(super) fn attr_u32(buf: &mut Vec<u8>, kind: u16, v: u32) {
    attr(buf, kind, &v.to_be_bytes());
}

impl Batch {
    /// A batch whose first message gets sequence number `seq`.
    pub(crate) fn new(seq: u32, family: IpFamily, table: &'static str) -> Self {
        Self::with_capacity(seq, family, table, 0)
    }

    /// [`Batch::new`], with room for `capacity` bytes from the start.
    pub(crate) fn with_capacity(
        seq: u32,
        family: IpFamily,
        table: &'static str,
        capacity: usize,
    ) -> Self {
        let mut b = Self::bare(seq, family);
        b.buf.reserve_exact(capacity);
        b.table = table;
        let at = b.header(NFNL_MSG_BATCH_BEGIN, NLM_F_REQUEST, 0);
        b.end_msg(at);
        b
    }

    /// Messages without the batch framing (a dump request).
    pub(super) fn bare(seq: u32, family: IpFamily) -> Self {
        let family = match family {
            IpFamily::V4 => 2,  // NFPROTO_IPV4
            IpFamily::V6 => 10, // NFPROTO_IPV6
        };
        Self {
            buf: Vec::new(),
            seq,
            acks: 0,
            family,
            table: "",
            next_set_id: 1,
        }
    }

    /// Writes a message header (nlmsghdr + nfgenmsg); returns the message's offset.
    pub(super) fn header(&mut self, kind: u16, flags: u16, family: u8) -> usize {
        let at = self.buf.len();
        self.buf.extend_from_slice(&[0; 4]); // length, set by end_msg
        self.buf.extend_from_slice(&kind.to_ne_bytes());
        self.buf.extend_from_slice(&flags.to_ne_bytes());
        self.buf.extend_from_slice(&self.seq.to_ne_bytes());
        self.buf.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel's
        self.buf.push(family);
        self.buf.push(0); // NFNETLINK_V0
        self.buf
            .extend_from_slice(&NFNL_SUBSYS_NFTABLES.to_be_bytes());
        self.seq = self.seq.wrapping_add(1);
        if flags & NLM_F_ACK != 0 {
            self.acks += 1;
        }
        at
    }

    pub(super) fn end_msg(&mut self, at: usize) {
        let len = (self.buf.len() - at) as u32;
        self.buf[at..at + 4].copy_from_slice(&len.to_ne_bytes());
    }

    /// The bytes written so far.
    pub(crate) fn len(&self) -> usize {
        self.buf.len()
    }

    /// Whether it holds no message that asks for an answer (every change does).
    pub(crate) fn is_empty(&self) -> bool {
        self.acks == 0
    }

    /// Closes the batch: its bytes, how many answers to expect, the next sequence number.
    pub(crate) fn finish(mut self) -> (Vec<u8>, usize, u32) {
        let at = self.header(NFNL_MSG_BATCH_END, NLM_F_REQUEST, 0);
        self.end_msg(at);
        (self.buf, self.acks, self.seq)
    }
}

/// The sequence number of the first message of a datagram (`None` if it holds no header).
pub(crate) fn first_seq(buf: &[u8]) -> Option<u32> {
    buf.get(8..12)
        .map(|s| u32::from_ne_bytes([s[0], s[1], s[2], s[3]]))
}

/// The sequence numbers and error codes (0: ack) of the `NLMSG_ERROR` messages in one
/// datagram.
pub(crate) fn errors(mut buf: &[u8]) -> Result<Vec<(u32, i32)>, NetlinkError> {
    let mut out = Vec::new();
    while buf.len() >= 16 {
        let len = u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
        let kind = u16::from_ne_bytes([buf[4], buf[5]]);
        if len < 16 || len > buf.len() {
            return Err(NetlinkError::Protocol("bad message length"));
        }
        if kind == NLMSG_ERROR {
            if len < 20 {
                return Err(NetlinkError::Protocol("short error message"));
            }
            let seq = u32::from_ne_bytes([buf[8], buf[9], buf[10], buf[11]]);
            out.push((
                seq,
                i32::from_ne_bytes([buf[16], buf[17], buf[18], buf[19]]),
            ));
        }
        buf = &buf[((len + 3) & !3).min(buf.len())..];
    }
    Ok(out)
}

mod anon_set;
mod dump;
mod elements;
mod expr;
mod rule;

pub(crate) use dump::{
    chain_dump_request, chain_names, count_rules, each_chain, rule_dump_request,
    table_dump_request, table_names,
};
#[cfg(test)]
pub(crate) use dump::{generation, generation_request};
#[cfg(test)]
use elements::key_bytes;

#[cfg(test)]
mod tests;
