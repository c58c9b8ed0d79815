//! nfnetlink message encoding for set-element batches (no I/O; unit-tested byte for byte).
//!
//! Concatenated keys put each field in its own 32-bit register, so every field is padded to
//! a multiple of 4 bytes: an address is 4 (or 16) bytes, a protocol 1 byte + 3, a port 2 bytes
//! (network order) + 2, a `numgen` slot 4 bytes in host order (what `numgen` writes).

use std::net::{IpAddr, SocketAddr};

use ferry_compile::nft::{Element, Key, Value, Verdict};
use ferry_model::{IpFamily, Protocol};

use super::NetlinkError;

/// The delta holds something this encoder does not write (it is then applied with `nft`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("not encodable as a netlink element batch: {0}")]
pub struct Unsupported(pub &'static str);

const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;
const NLM_F_CREATE: u16 = 0x400;
const NLMSG_ERROR: u16 = 0x2;
const NLA_F_NESTED: u16 = 0x8000;
const NFNL_MSG_BATCH_BEGIN: u16 = 0x10;
const NFNL_MSG_BATCH_END: u16 = 0x11;
const NFNL_SUBSYS_NFTABLES: u16 = 10;
const NFT_MSG_NEWSETELEM: u16 = 12;
const NFT_MSG_DELSETELEM: u16 = 14;
const NFTA_SET_ELEM_LIST_TABLE: u16 = 1;
const NFTA_SET_ELEM_LIST_SET: u16 = 2;
const NFTA_SET_ELEM_LIST_ELEMENTS: u16 = 3;
const NFTA_LIST_ELEM: u16 = 1;
const NFTA_SET_ELEM_KEY: u16 = 1;
const NFTA_SET_ELEM_DATA: u16 = 2;
const NFTA_SET_ELEM_USERDATA: u16 = 6;
const NFTA_DATA_VALUE: u16 = 1;
const NFTA_DATA_VERDICT: u16 = 2;
const NFTA_VERDICT_CODE: u16 = 1;
const NFTA_VERDICT_CHAIN: u16 = 2;
const NF_DROP: i32 = 0;
const NFT_GOTO: i32 = -4;
/// libnftnl's element comment (`NFTNL_UDATA_SET_ELEM_COMMENT`), as `nft` writes it.
const UDATA_COMMENT: u8 = 0;
/// Element attributes per message: a nested attribute must stay below 64 KiB.
const MAX_ELEMENTS_BYTES: usize = 48 * 1024;

/// One batch being written.
pub(crate) struct Batch {
    buf: Vec<u8>,
    seq: u32,
    acks: usize,
    family: u8,
    table: &'static str,
}

fn put_u16(buf: &mut [u8], at: usize, v: u16) {
    buf[at..at + 2].copy_from_slice(&v.to_ne_bytes());
}

fn pad(buf: &mut Vec<u8>) {
    while !buf.len().is_multiple_of(4) {
        buf.push(0);
    }
}

/// Starts an attribute; returns its offset for [`end_attr`].
fn begin_attr(buf: &mut Vec<u8>, kind: u16) -> usize {
    let at = buf.len();
    buf.extend_from_slice(&[0, 0]);
    buf.extend_from_slice(&kind.to_ne_bytes());
    at
}

fn end_attr(buf: &mut Vec<u8>, at: usize) {
    let len = (buf.len() - at) as u16;
    put_u16(buf, at, len);
    pad(buf);
}

fn attr(buf: &mut Vec<u8>, kind: u16, payload: &[u8]) {
    let at = begin_attr(buf, kind);
    buf.extend_from_slice(payload);
    end_attr(buf, at);
}

fn attr_str(buf: &mut Vec<u8>, kind: u16, s: &str) {
    let at = begin_attr(buf, kind);
    buf.extend_from_slice(s.as_bytes());
    buf.push(0);
    end_attr(buf, at);
}

fn addr(out: &mut Vec<u8>, a: IpAddr) {
    match a {
        IpAddr::V4(a) => out.extend_from_slice(&a.octets()),
        IpAddr::V6(a) => out.extend_from_slice(&a.octets()),
    }
}

fn proto(out: &mut Vec<u8>, p: Protocol) {
    let n = match p {
        Protocol::Tcp => 6,
        Protocol::Udp => 17,
        Protocol::Sctp => 132,
    };
    out.extend_from_slice(&[n, 0, 0, 0]);
}

fn port(out: &mut Vec<u8>, p: u16) {
    let [hi, lo] = p.to_be_bytes();
    out.extend_from_slice(&[hi, lo, 0, 0]);
}

/// The key's register bytes.
pub(crate) fn key_bytes(key: &Key) -> Result<Vec<u8>, Unsupported> {
    let mut out = Vec::with_capacity(40);
    match key {
        Key::Addr(a) => addr(&mut out, *a),
        Key::Net(_) => return Err(Unsupported("interval set elements")),
        Key::AddrPair(a, b) => {
            addr(&mut out, *a);
            addr(&mut out, *b);
        }
        Key::Frontend(a, p, n) => {
            addr(&mut out, *a);
            proto(&mut out, *p);
            port(&mut out, *n);
        }
        Key::NodePort(p, n) => {
            proto(&mut out, *p);
            port(&mut out, *n);
        }
        Key::FrontendSlot(a, p, n, slot) => {
            addr(&mut out, *a);
            proto(&mut out, *p);
            port(&mut out, *n);
            out.extend_from_slice(&slot.to_ne_bytes());
        }
        Key::NodePortSlot(p, n, slot) => {
            proto(&mut out, *p);
            port(&mut out, *n);
            out.extend_from_slice(&slot.to_ne_bytes());
        }
        Key::FrontendEndpoint(a, p, n, ep) => {
            addr(&mut out, *a);
            proto(&mut out, *p);
            port(&mut out, *n);
            out.extend(endpoint_bytes(ep));
        }
        Key::NodePortEndpoint(p, n, ep) => {
            proto(&mut out, *p);
            port(&mut out, *n);
            out.extend(endpoint_bytes(ep));
        }
        Key::FrontendClient(a, p, n, client) => {
            addr(&mut out, *a);
            proto(&mut out, *p);
            port(&mut out, *n);
            addr(&mut out, *client);
        }
        Key::NodePortClient(p, n, client) => {
            proto(&mut out, *p);
            port(&mut out, *n);
            addr(&mut out, *client);
        }
    }
    Ok(out)
}

fn endpoint_bytes(ep: &SocketAddr) -> Vec<u8> {
    let mut out = Vec::with_capacity(20);
    addr(&mut out, ep.ip());
    port(&mut out, ep.port());
    out
}

impl Batch {
    /// A batch whose first message gets sequence number `seq`.
    pub(crate) fn new(seq: u32, family: IpFamily, table: &'static str) -> Self {
        let family = match family {
            IpFamily::V4 => 2,  // NFPROTO_IPV4
            IpFamily::V6 => 10, // NFPROTO_IPV6
        };
        let mut b = Self {
            buf: Vec::new(),
            seq,
            acks: 0,
            family,
            table,
        };
        let at = b.header(NFNL_MSG_BATCH_BEGIN, NLM_F_REQUEST, 0);
        b.end_msg(at);
        b
    }

    /// Writes a message header (nlmsghdr + nfgenmsg); returns the message's offset.
    fn header(&mut self, kind: u16, flags: u16, family: u8) -> usize {
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

    fn end_msg(&mut self, at: usize) {
        let len = (self.buf.len() - at) as u32;
        self.buf[at..at + 4].copy_from_slice(&len.to_ne_bytes());
    }

    /// Adds (`add`) or deletes elements of one set, in as many messages as needed.
    pub(crate) fn elements(
        &mut self,
        add: bool,
        set: &str,
        els: &[&Element],
    ) -> Result<(), Unsupported> {
        let mut rest = els;
        while !rest.is_empty() {
            let (kind, flags) = if add {
                (NFT_MSG_NEWSETELEM, NLM_F_REQUEST | NLM_F_CREATE | NLM_F_ACK)
            } else {
                (NFT_MSG_DELSETELEM, NLM_F_REQUEST | NLM_F_ACK)
            };
            let msg = self.header((NFNL_SUBSYS_NFTABLES << 8) | kind, flags, self.family);
            attr_str(&mut self.buf, NFTA_SET_ELEM_LIST_TABLE, self.table);
            attr_str(&mut self.buf, NFTA_SET_ELEM_LIST_SET, set);
            let list = begin_attr(&mut self.buf, NFTA_SET_ELEM_LIST_ELEMENTS | NLA_F_NESTED);
            let start = self.buf.len();
            let mut written = 0;
            for e in rest {
                if self.buf.len() - start > MAX_ELEMENTS_BYTES {
                    break;
                }
                self.element(e, add)?;
                written += 1;
            }
            end_attr(&mut self.buf, list);
            self.end_msg(msg);
            rest = &rest[written..];
        }
        Ok(())
    }

    fn element(&mut self, e: &Element, with_value: bool) -> Result<(), Unsupported> {
        let buf = &mut self.buf;
        let el = begin_attr(buf, NFTA_LIST_ELEM | NLA_F_NESTED);
        let key = begin_attr(buf, NFTA_SET_ELEM_KEY | NLA_F_NESTED);
        attr(buf, NFTA_DATA_VALUE, &key_bytes(&e.key)?);
        end_attr(buf, key);
        if with_value {
            if let Some(v) = &e.value {
                let data = begin_attr(buf, NFTA_SET_ELEM_DATA | NLA_F_NESTED);
                match v {
                    Value::Endpoint(ep) => attr(buf, NFTA_DATA_VALUE, &endpoint_bytes(ep)),
                    Value::Verdict(v) => {
                        let verdict = begin_attr(buf, NFTA_DATA_VERDICT | NLA_F_NESTED);
                        let (code, chain) = match v {
                            Verdict::Drop => (NF_DROP, None),
                            Verdict::Goto(c) => (NFT_GOTO, Some(c)),
                        };
                        attr(buf, NFTA_VERDICT_CODE, &code.to_be_bytes());
                        if let Some(c) = chain {
                            attr_str(buf, NFTA_VERDICT_CHAIN, c);
                        }
                        end_attr(buf, verdict);
                    }
                }
                end_attr(buf, data);
            }
            if let Some(c) = &e.comment {
                let len = u8::try_from(c.len() + 1).map_err(|_| Unsupported("long comment"))?;
                let mut udata = vec![UDATA_COMMENT, len];
                udata.extend_from_slice(c.as_bytes());
                udata.push(0);
                attr(buf, NFTA_SET_ELEM_USERDATA, &udata);
            }
        }
        end_attr(buf, el);
        Ok(())
    }

    /// Closes the batch: its bytes, how many answers to expect, the next sequence number.
    pub(crate) fn finish(mut self) -> (Vec<u8>, usize, u32) {
        let at = self.header(NFNL_MSG_BATCH_END, NLM_F_REQUEST, 0);
        self.end_msg(at);
        (self.buf, self.acks, self.seq)
    }
}

/// The error codes (0: ack) of the `NLMSG_ERROR` messages in one datagram.
pub(crate) fn errors(mut buf: &[u8]) -> Result<Vec<i32>, NetlinkError> {
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
            out.push(i32::from_ne_bytes([buf[16], buf[17], buf[18], buf[19]]));
        }
        buf = &buf[((len + 3) & !3).min(buf.len())..];
    }
    Ok(out)
}

#[cfg(test)]
mod tests;
