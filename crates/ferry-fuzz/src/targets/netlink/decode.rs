//! Decoding an nf_tables batch with netlink-packet-core's buffers: the messages and, in each,
//! the attributes the round trip compares (chain names, set elements with their key, verdict
//! and comment). Any length that does not fit is an error.

use std::collections::BTreeMap;

use netlink_packet_core::{NetlinkBuffer, NlaBuffer, NlasIterator};

const NFNL_MSG_BATCH_BEGIN: u16 = 0x10;
const NFNL_MSG_BATCH_END: u16 = 0x11;
const SUBSYS_NFTABLES: u16 = 10 << 8;
const NEWCHAIN: u16 = SUBSYS_NFTABLES | 3;
const DELCHAIN: u16 = SUBSYS_NFTABLES | 5;
const NEWRULE: u16 = SUBSYS_NFTABLES | 6;
const DELRULE: u16 = SUBSYS_NFTABLES | 8;
const NEWSETELEM: u16 = SUBSYS_NFTABLES | 12;
const DELSETELEM: u16 = SUBSYS_NFTABLES | 14;
const NFTA_CHAIN_NAME: u16 = 3;
const NFTA_SET_ELEM_LIST_SET: u16 = 2;
const NFTA_SET_ELEM_LIST_ELEMENTS: u16 = 3;
const NFTA_SET_ELEM_KEY: u16 = 1;
const NFTA_SET_ELEM_DATA: u16 = 2;
const NFTA_SET_ELEM_USERDATA: u16 = 6;
const NFTA_DATA_VALUE: u16 = 1;
const NFTA_DATA_VERDICT: u16 = 2;
const NFTA_VERDICT_CHAIN: u16 = 2;
/// nlmsghdr + nfgenmsg.
const HEADERS: usize = 16 + 4;

/// One decoded set element.
#[derive(Debug, Default)]
pub struct Elem {
    /// The key's bytes.
    pub key: Vec<u8>,
    /// The chain of a `goto` verdict.
    pub goto: Option<String>,
    /// The user data (the comment as libnftnl writes it).
    pub comment: Option<Vec<u8>>,
}

/// What a batch holds.
#[derive(Debug, Default)]
pub struct Decoded {
    /// Messages, framing included.
    pub messages: usize,
    /// Chains created, in order.
    pub new_chains: Vec<String>,
    /// Chains deleted, in order.
    pub deleted_chains: Vec<String>,
    /// Elements by (added, set), in order.
    pub elements: BTreeMap<(bool, String), Vec<Elem>>,
}

/// Decodes a batch; an error names what does not fit.
pub fn decode(mut bytes: &[u8]) -> Result<Decoded, String> {
    let mut out = Decoded::default();
    let mut kinds = Vec::new();
    while !bytes.is_empty() {
        let msg = NetlinkBuffer::new_checked(bytes).map_err(|e| format!("message: {e}"))?;
        let len = msg.length() as usize;
        if len < HEADERS || !len.is_multiple_of(4) {
            return Err(format!("message of {len} bytes"));
        }
        let kind = msg.message_type();
        kinds.push(kind);
        let attrs = attributes(&msg.payload()[4..])?;
        match kind {
            NEWCHAIN | DELCHAIN => {
                let name = text(find(&attrs, NFTA_CHAIN_NAME)?)?;
                let list = if kind == NEWCHAIN {
                    &mut out.new_chains
                } else {
                    &mut out.deleted_chains
                };
                list.push(name);
            }
            NEWSETELEM | DELSETELEM => set_elements(kind == NEWSETELEM, &attrs, &mut out)?,
            NEWRULE | DELRULE | NFNL_MSG_BATCH_BEGIN | NFNL_MSG_BATCH_END => {}
            other => return Err(format!("unexpected message type {other:#x}")),
        }
        bytes = &bytes[len..];
    }
    out.messages = kinds.len();
    if kinds.first() != Some(&NFNL_MSG_BATCH_BEGIN) || kinds.last() != Some(&NFNL_MSG_BATCH_END) {
        return Err("the batch is not framed by BATCH_BEGIN and BATCH_END".to_owned());
    }
    Ok(out)
}

fn set_elements(add: bool, attrs: &[NlaBuffer<&[u8]>], out: &mut Decoded) -> Result<(), String> {
    let set = text(find(attrs, NFTA_SET_ELEM_LIST_SET)?)?;
    let list = out.elements.entry((add, set)).or_default();
    // A DELSETELEM without elements is a flush.
    let Ok(elements) = find(attrs, NFTA_SET_ELEM_LIST_ELEMENTS) else {
        return Ok(());
    };
    for el in attributes(elements)? {
        let inner = attributes(el.value())?;
        let key = attributes(find(&inner, NFTA_SET_ELEM_KEY)?)?;
        let mut e = Elem {
            key: find(&key, NFTA_DATA_VALUE)?.to_vec(),
            ..Elem::default()
        };
        if let Ok(data) = find(&inner, NFTA_SET_ELEM_DATA) {
            let data = attributes(data)?;
            if let Ok(verdict) = find(&data, NFTA_DATA_VERDICT) {
                let verdict = attributes(verdict)?;
                e.goto = find(&verdict, NFTA_VERDICT_CHAIN)
                    .ok()
                    .map(text)
                    .transpose()?;
            }
        }
        e.comment = find(&inner, NFTA_SET_ELEM_USERDATA)
            .ok()
            .map(<[u8]>::to_vec);
        list.push(e);
    }
    Ok(())
}

/// The attributes of a buffer (an error for any that does not fit).
fn attributes(buf: &[u8]) -> Result<Vec<NlaBuffer<&[u8]>>, String> {
    NlasIterator::new(buf)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("attribute: {e}"))
}

/// The value of the attribute of type `kind` (the nested flag ignored).
fn find<'a>(attrs: &[NlaBuffer<&'a [u8]>], kind: u16) -> Result<&'a [u8], String> {
    attrs
        .iter()
        .find(|a| a.kind() & 0x3fff == kind)
        .map(|a| {
            let len = usize::from(a.length());
            &a.into_inner()[4..len]
        })
        .ok_or_else(|| format!("no attribute {kind}"))
}

/// A NUL-terminated string attribute.
fn text(value: &[u8]) -> Result<String, String> {
    let s = value
        .strip_suffix(&[0])
        .ok_or("a string attribute without its NUL")?;
    String::from_utf8(s.to_vec()).map_err(|e| e.to_string())
}
