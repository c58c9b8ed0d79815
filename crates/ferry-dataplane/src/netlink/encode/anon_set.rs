//! Anonymous constant sets (`{ tcp, udp, sctp }`, `{ prefix, prefix }`) as nft creates them for
//! a rule: `NFT_MSG_NEWSET` with `NFT_SET_ANONYMOUS | NFT_SET_CONSTANT` (and `NFT_SET_INTERVAL`
//! for prefixes), its elements, then the rule's lookup names it by its transaction-local id.

use ipnet::IpNet;

use super::elements::{
    NFTA_SET_ELEM_FLAGS, NFTA_SET_ELEM_KEY, NFTA_SET_ELEM_LIST_ELEMENTS, NFTA_SET_ELEM_LIST_SET,
    NFTA_SET_ELEM_LIST_SET_ID, NFTA_SET_ELEM_LIST_TABLE, NFTA_SET_ELEM_USERDATA,
};
use super::{
    attr, attr_str, attr_u32, begin_attr, end_attr, Batch, NFNL_SUBSYS_NFTABLES, NFTA_DATA_VALUE,
    NFT_MSG_NEWSET, NFT_MSG_NEWSETELEM, NLA_F_NESTED, NLM_F_ACK, NLM_F_CREATE, NLM_F_REQUEST,
};

const NFTA_SET_TABLE: u16 = 1;
const NFTA_SET_NAME: u16 = 2;
const NFTA_SET_FLAGS: u16 = 3;
const NFTA_SET_KEY_TYPE: u16 = 4;
const NFTA_SET_KEY_LEN: u16 = 5;
const NFTA_SET_DESC: u16 = 9;
const NFTA_SET_DESC_SIZE: u16 = 1;
const NFTA_SET_ID: u16 = 10;
const NFTA_SET_USERDATA: u16 = 13;
const NFT_SET_ANONYMOUS: u32 = 0x1;
const NFT_SET_CONSTANT: u32 = 0x2;
const NFT_SET_INTERVAL: u32 = 0x4;
const NFT_SET_ELEM_INTERVAL_END: u32 = 0x1;
/// The name nft gives anonymous sets; the kernel numbers it.
pub(super) const ANON_SET_NAME: &str = "__set%d";
/// nft's datatype ids (`TYPE_IPADDR`, `TYPE_IP6ADDR`, `TYPE_INET_PROTOCOL`).
pub(super) const TYPE_IPADDR: u32 = 7;
pub(super) const TYPE_IP6ADDR: u32 = 8;
pub(super) const TYPE_INET_PROTOCOL: u32 = 12;
/// The set userdata nft writes for `meta l4proto { … }`: key byte order host, `typeof meta
/// l4proto` (so `nft list` prints protocol names).
pub(super) const UDATA_L4PROTO: &[u8] = &[
    0, 4, 1, 0, 0, 0, 3, 14, 0, 4, 9, 0, 0, 0, 1, 6, 0, 4, 16, 0, 0, 0,
];
/// The set userdata nft writes for `ip saddr { prefixes }`: key byte order big endian, merge
/// adjacent intervals, `typeof ip saddr`.
pub(super) const UDATA_IP_SADDR: &[u8] = &[
    0, 4, 2, 0, 0, 0, 2, 4, 1, 0, 0, 0, 3, 20, 0, 4, 7, 0, 0, 0, 1, 12, 0, 4, 12, 0, 0, 0, 1, 4,
    11, 0, 0, 0,
];
/// The same for `ip6 saddr { prefixes }`: key type `ipv6_addr`, `typeof ip6 saddr` (nft's
/// protocol description 13, `ip6`, and its field 8, `saddr`).
pub(super) const UDATA_IP6_SADDR: &[u8] = &[
    0, 4, 2, 0, 0, 0, 2, 4, 1, 0, 0, 0, 3, 20, 0, 4, 7, 0, 0, 0, 1, 12, 0, 4, 13, 0, 0, 0, 1, 4, 8,
    0, 0, 0,
];
/// The element userdata nft writes on an interval that runs to the top of the address space
/// (it has no end element): `NFTNL_UDATA_SET_ELEM_FLAGS` = `NFTNL_SET_ELEM_F_INTERVAL_OPEN`.
const UDATA_INTERVAL_OPEN: &[u8] = &[1, 4, 1, 0, 0, 0];
/// An anonymous constant set a rule looks up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct AnonSet {
    /// Its transaction-local id (what the lookup names).
    pub(super) id: u32,
    interval: bool,
    key_type: u32,
    key_len: u32,
    udata: &'static [u8],
    /// Keys, with `NFT_SET_ELEM_INTERVAL_END` for interval ends.
    elements: Vec<(Vec<u8>, bool)>,
}

pub(super) fn net_bytes(net: &IpNet) -> (Vec<u8>, Vec<u8>) {
    match net {
        IpNet::V4(n) => (n.network().octets().to_vec(), n.netmask().octets().to_vec()),
        IpNet::V6(n) => (n.network().octets().to_vec(), n.netmask().octets().to_vec()),
    }
}

/// `[last + 1]` of a prefix, `None` when it ends at the top of the address space.
fn after(net: &IpNet) -> Option<Vec<u8>> {
    let mut b = match net {
        IpNet::V4(n) => n.broadcast().octets().to_vec(),
        IpNet::V6(n) => n.broadcast().octets().to_vec(),
    };
    for byte in b.iter_mut().rev() {
        if *byte == 0xff {
            *byte = 0;
        } else {
            *byte += 1;
            return Some(b);
        }
    }
    None
}

/// The elements nft writes for an interval set of prefixes: an interval end at 0 when the
/// first range starts above 0, then each (merged) range's start and its end + 1.
pub(super) fn interval_elements(nets: &[IpNet], len: usize) -> Vec<(Vec<u8>, bool)> {
    let mut ranges: Vec<(Vec<u8>, Option<Vec<u8>>)> =
        nets.iter().map(|n| (net_bytes(n).0, after(n))).collect();
    ranges.sort();
    let mut merged: Vec<(Vec<u8>, Option<Vec<u8>>)> = Vec::new();
    for (start, end) in ranges {
        if let Some(last) = merged.last_mut() {
            // Overlapping or adjacent: extend (None = up to the top).
            if last.1.as_ref().is_none_or(|e| *e >= start) {
                if last.1.is_some() && end.as_ref().is_none_or(|e| Some(e) > last.1.as_ref()) {
                    last.1 = end;
                }
                continue;
            }
        }
        merged.push((start, end));
    }
    let mut out = Vec::new();
    if merged
        .first()
        .is_some_and(|(s, _)| s.iter().any(|b| *b != 0))
    {
        out.push((vec![0; len], true));
    }
    for (start, end) in merged {
        out.push((start, false));
        if let Some(end) = end {
            out.push((end, true));
        }
    }
    out
}

impl AnonSet {
    /// An interval set whose last range starts with no end after it: it runs to the top
    /// (`::/0`, `255.0.0.0/8`).
    fn open(&self) -> bool {
        self.interval && self.elements.last().is_some_and(|(_, end)| !end)
    }
}

impl Batch {
    pub(super) fn anon_set(
        &mut self,
        interval: bool,
        key_type: u32,
        key_len: u32,
        udata: &'static [u8],
        elements: Vec<(Vec<u8>, bool)>,
    ) -> AnonSet {
        let id = self.next_set_id;
        self.next_set_id += 1;
        AnonSet {
            id,
            interval,
            key_type,
            key_len,
            udata,
            elements,
        }
    }

    pub(super) fn new_anon_set(&mut self, set: &AnonSet) {
        let flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_ACK;
        let msg = self.header(
            (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWSET,
            flags,
            self.family,
        );
        let buf = &mut self.buf;
        attr_str(buf, NFTA_SET_TABLE, self.table);
        attr_str(buf, NFTA_SET_NAME, ANON_SET_NAME);
        let mut set_flags = NFT_SET_ANONYMOUS | NFT_SET_CONSTANT;
        if set.interval {
            set_flags |= NFT_SET_INTERVAL;
        }
        attr_u32(buf, NFTA_SET_FLAGS, set_flags);
        attr_u32(buf, NFTA_SET_KEY_TYPE, set.key_type);
        attr_u32(buf, NFTA_SET_KEY_LEN, set.key_len);
        attr_u32(buf, NFTA_SET_ID, set.id);
        let desc = begin_attr(buf, NFTA_SET_DESC | NLA_F_NESTED);
        // nft counts the end an interval to the top does not have.
        let size = set.elements.len() + usize::from(set.open());
        attr_u32(buf, NFTA_SET_DESC_SIZE, size as u32);
        end_attr(buf, desc);
        attr(buf, NFTA_SET_USERDATA, set.udata);
        self.end_msg(msg);

        let msg = self.header(
            (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWSETELEM,
            flags,
            self.family,
        );
        let buf = &mut self.buf;
        attr_str(buf, NFTA_SET_ELEM_LIST_TABLE, self.table);
        attr_str(buf, NFTA_SET_ELEM_LIST_SET, ANON_SET_NAME);
        attr_u32(buf, NFTA_SET_ELEM_LIST_SET_ID, set.id);
        let list = begin_attr(buf, NFTA_SET_ELEM_LIST_ELEMENTS | NLA_F_NESTED);
        // Numbered like libnftnl does (the kernel does not read the number).
        let count = set.elements.len();
        let open = set.open();
        for (i, (key, end)) in (1u16..).zip(&set.elements) {
            let el = begin_attr(buf, i | NLA_F_NESTED);
            if *end {
                attr_u32(buf, NFTA_SET_ELEM_FLAGS, NFT_SET_ELEM_INTERVAL_END);
            }
            let k = begin_attr(buf, NFTA_SET_ELEM_KEY | NLA_F_NESTED);
            attr(buf, NFTA_DATA_VALUE, key);
            end_attr(buf, k);
            if open && usize::from(i) == count {
                attr(buf, NFTA_SET_ELEM_USERDATA, UDATA_INTERVAL_OPEN);
            }
            end_attr(buf, el);
        }
        end_attr(buf, list);
        self.end_msg(msg);
    }
}
