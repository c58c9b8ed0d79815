//! Set elements: keys, values, comments, and whole-set flushes.
//!
//! Concatenated keys put each field in its own 32-bit register, so every field is padded to
//! a multiple of 4 bytes: an address is 4 (or 16) bytes, a protocol 1 byte + 3, a port 2 bytes
//! (network order) + 2, a `numgen` slot 4 bytes in host order (what `numgen` writes).

use std::borrow::Borrow;
use std::iter::Peekable;
use std::net::{IpAddr, SocketAddr};

use ferry_compile::nft::{Element, Key, Value, Verdict};
use ferry_model::Protocol;

use super::{
    attr, attr_str, begin_attr, end_attr, Batch, Unencodable, NFNL_SUBSYS_NFTABLES,
    NFTA_DATA_VALUE, NFTA_DATA_VERDICT, NFTA_LIST_ELEM, NFTA_VERDICT_CHAIN, NFTA_VERDICT_CODE,
    NFT_MSG_DELSETELEM, NFT_MSG_NEWSETELEM, NLA_F_NESTED, NLM_F_ACK, NLM_F_CREATE, NLM_F_REQUEST,
};

pub(super) const NFTA_SET_ELEM_LIST_TABLE: u16 = 1;
pub(super) const NFTA_SET_ELEM_LIST_SET: u16 = 2;
pub(super) const NFTA_SET_ELEM_LIST_ELEMENTS: u16 = 3;
pub(super) const NFTA_SET_ELEM_LIST_SET_ID: u16 = 4;
pub(super) const NFTA_SET_ELEM_KEY: u16 = 1;
const NFTA_SET_ELEM_DATA: u16 = 2;
pub(super) const NFTA_SET_ELEM_FLAGS: u16 = 3;
pub(super) const NFTA_SET_ELEM_USERDATA: u16 = 6;
const NFTA_SET_ELEM_KEY_END: u16 = 10;
const NF_DROP: i32 = 0;
const NFT_GOTO: i32 = -4;
/// libnftnl's element comment (`NFTNL_UDATA_SET_ELEM_COMMENT`), as `nft` writes it.
const UDATA_COMMENT: u8 = 0;
/// Element attributes per message: a nested attribute must stay below 64 KiB.
const MAX_ELEMENTS_BYTES: usize = 48 * 1024;

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
pub(crate) fn key_bytes(key: &Key) -> Result<Vec<u8>, Unencodable> {
    let mut out = Vec::with_capacity(40);
    match key {
        Key::Addr(a) => addr(&mut out, *a),
        Key::Net(_) => return Err(Unencodable("interval set elements")),
        Key::FrontendSource(a, p, n, src) => {
            addr(&mut out, *a);
            proto(&mut out, *p);
            port(&mut out, *n);
            addr(&mut out, src.network());
        }
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

/// The end of the key's range, for keys that are ranges in a concatenated interval set
/// (`NFTA_SET_ELEM_KEY_END`, the kernel's pipapo sets): the same fields, with the last
/// address of the source prefix.
pub(crate) fn key_end_bytes(key: &Key) -> Option<Vec<u8>> {
    match key {
        Key::FrontendSource(a, p, n, src) => {
            let mut out = Vec::with_capacity(40);
            addr(&mut out, *a);
            proto(&mut out, *p);
            port(&mut out, *n);
            addr(&mut out, src.broadcast());
            Some(out)
        }
        _ => None,
    }
}

fn endpoint_bytes(ep: &SocketAddr) -> Vec<u8> {
    let mut out = Vec::with_capacity(20);
    addr(&mut out, ep.ip());
    port(&mut out, ep.port());
    out
}

impl Batch {
    /// Deletes every element of a set (`NFT_MSG_DELSETELEM` without elements, as
    /// `flush set` does).
    pub(crate) fn flush_set(&mut self, set: &str) {
        let msg = self.header(
            (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_DELSETELEM,
            NLM_F_REQUEST | NLM_F_ACK,
            self.family,
        );
        attr_str(&mut self.buf, NFTA_SET_ELEM_LIST_TABLE, self.table);
        attr_str(&mut self.buf, NFTA_SET_ELEM_LIST_SET, set);
        self.end_msg(msg);
    }

    /// Adds (`add`) or deletes elements of one set, in as many messages as needed.
    pub(crate) fn elements<E: Borrow<Element>>(
        &mut self,
        add: bool,
        set: &str,
        els: impl IntoIterator<Item = E>,
    ) -> Result<usize, Unencodable> {
        self.elements_up_to(add, set, &mut els.into_iter().peekable(), usize::MAX)
    }

    /// Like [`elements`](Self::elements), but starts no message once the batch holds `bytes`
    /// bytes; what is left stays in `els`.
    pub(crate) fn elements_up_to<E: Borrow<Element>, I: Iterator<Item = E>>(
        &mut self,
        add: bool,
        set: &str,
        els: &mut Peekable<I>,
        bytes: usize,
    ) -> Result<usize, Unencodable> {
        let mut count = 0;
        while els.peek().is_some() && self.buf.len() < bytes {
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
            while self.buf.len() - start <= MAX_ELEMENTS_BYTES {
                let Some(e) = els.next() else { break };
                self.element(e.borrow(), add)?;
                count += 1;
            }
            end_attr(&mut self.buf, list);
            self.end_msg(msg);
        }
        Ok(count)
    }

    fn element(&mut self, e: &Element, with_value: bool) -> Result<(), Unencodable> {
        let buf = &mut self.buf;
        let el = begin_attr(buf, NFTA_LIST_ELEM | NLA_F_NESTED);
        let key = begin_attr(buf, NFTA_SET_ELEM_KEY | NLA_F_NESTED);
        attr(buf, NFTA_DATA_VALUE, &key_bytes(&e.key)?);
        end_attr(buf, key);
        if let Some(end) = key_end_bytes(&e.key) {
            let key_end = begin_attr(buf, NFTA_SET_ELEM_KEY_END | NLA_F_NESTED);
            attr(buf, NFTA_DATA_VALUE, &end);
            end_attr(buf, key_end);
        }
        if with_value {
            if let Some(v) = &e.value {
                let data = begin_attr(buf, NFTA_SET_ELEM_DATA | NLA_F_NESTED);
                match v {
                    Value::Endpoint(ep) => attr(buf, NFTA_DATA_VALUE, &endpoint_bytes(ep)),
                    // `inet_service` data: the port in network byte order.
                    Value::Port(p) => attr(buf, NFTA_DATA_VALUE, &p.to_be_bytes()),
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
                let len = u8::try_from(c.len() + 1).map_err(|_| Unencodable("long comment"))?;
                let mut udata = vec![UDATA_COMMENT, len];
                udata.extend_from_slice(c.as_bytes());
                udata.push(0);
                attr(buf, NFTA_SET_ELEM_USERDATA, &udata);
            }
        }
        end_attr(buf, el);
        Ok(())
    }
}
