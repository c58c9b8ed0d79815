//! Dispatch chains over netlink: chain create/flush/delete and the typed dispatch rules
//! ([`ferry_compile::nft::DispatchRule`]) lowered to the expressions nft would send.
//!
//! A new match or action of the compiler's rule type is lowered in [`lower_match`] /
//! [`lower_action`] (the `match` there is exhaustive, so the compiler points here); an
//! anonymous set it needs is an [`AnonSet`], sent just before the rule (`NFT_MSG_NEWSET` with
//! `NFT_SET_ANONYMOUS | NFT_SET_CONSTANT`, its elements, then a lookup by set id).

use ipnet::IpNet;

use ferry_compile::nft::{DispatchRule, DnatKey, RuleAction, RuleMatch};
use ferry_model::IpFamily;

use super::elements::{
    NFTA_SET_ELEM_FLAGS, NFTA_SET_ELEM_KEY, NFTA_SET_ELEM_LIST_ELEMENTS, NFTA_SET_ELEM_LIST_SET,
    NFTA_SET_ELEM_LIST_SET_ID, NFTA_SET_ELEM_LIST_TABLE,
};
use super::expr::{
    reg32, Expr, CMP_EQ, CMP_NEQ, FIB_F_SADDR, FIB_RESULT_ADDRTYPE, META_L4PROTO, NETWORK_HEADER,
    TRANSPORT_HEADER,
};
use super::{
    attr, attr_str, attr_u32, begin_attr, end_attr, Batch, NFNL_SUBSYS_NFTABLES, NFTA_DATA_VALUE,
    NFT_MSG_DELCHAIN, NFT_MSG_DELRULE, NFT_MSG_NEWCHAIN, NFT_MSG_NEWRULE, NFT_MSG_NEWSET,
    NFT_MSG_NEWSETELEM, NLA_F_NESTED, NLM_F_ACK, NLM_F_APPEND, NLM_F_CREATE, NLM_F_REQUEST,
};

const NFTA_CHAIN_TABLE: u16 = 1;
const NFTA_CHAIN_NAME: u16 = 3;
const NFTA_RULE_TABLE: u16 = 1;
const NFTA_RULE_CHAIN: u16 = 2;
const NFTA_RULE_EXPRESSIONS: u16 = 4;
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
const ANON_SET_NAME: &str = "__set%d";
/// nft's datatype ids (`TYPE_IPADDR`, `TYPE_IP6ADDR`, `TYPE_INET_PROTOCOL`).
const TYPE_IPADDR: u32 = 7;
const TYPE_IP6ADDR: u32 = 8;
const TYPE_INET_PROTOCOL: u32 = 12;
/// `RTN_LOCAL`, what `fib … type` yields for a local address (host byte order).
const RTN_LOCAL: u32 = 2;
/// The set userdata nft writes for `meta l4proto { … }`: key byte order host, `typeof meta
/// l4proto` (so `nft list` prints protocol names).
const UDATA_L4PROTO: &[u8] = &[
    0, 4, 1, 0, 0, 0, 3, 14, 0, 4, 9, 0, 0, 0, 1, 6, 0, 4, 16, 0, 0, 0,
];
/// The set userdata nft writes for `ip saddr { prefixes }`: key byte order big endian, merge
/// adjacent intervals, `typeof ip saddr`.
const UDATA_IP_SADDR: &[u8] = &[
    0, 4, 2, 0, 0, 0, 2, 4, 1, 0, 0, 0, 3, 20, 0, 4, 7, 0, 0, 0, 1, 12, 0, 4, 12, 0, 0, 0, 1, 4,
    11, 0, 0, 0,
];
/// Protocols a DNAT rule's transport-header match depends on.
const DNAT_PROTOCOLS: [u8; 3] = [6, 17, 132];

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

/// A rule lowered to what goes on the wire: its anonymous sets and its expressions.
#[derive(Debug, Default)]
pub(super) struct Lowered<'a> {
    pub(super) sets: Vec<AnonSet>,
    pub(super) exprs: Vec<Expr<'a>>,
}

/// Source or destination address: offset and length in the network header.
fn addr_field(family: IpFamily, dst: bool) -> (u32, u32) {
    match (family, dst) {
        (IpFamily::V4, false) => (12, 4),
        (IpFamily::V4, true) => (16, 4),
        (IpFamily::V6, false) => (8, 16),
        (IpFamily::V6, true) => (24, 16),
    }
}

fn net_bytes(net: &IpNet) -> (Vec<u8>, Vec<u8>) {
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
fn interval_elements(nets: &[IpNet], len: usize) -> Vec<(Vec<u8>, bool)> {
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

impl Batch {
    fn lower_match<'a>(&mut self, family: IpFamily, m: &RuleMatch, out: &mut Lowered<'a>) {
        match m {
            RuleMatch::Saddr { negate, nets } => {
                let (offset, len) = addr_field(family, false);
                if let [net] = nets.as_slice() {
                    let (addr, mask) = net_bytes(net);
                    let prefix = u32::from(net.prefix_len());
                    let op = if *negate { CMP_NEQ } else { CMP_EQ };
                    if prefix % 8 == 0 {
                        // Whole bytes: compare just those (as nft does).
                        let bytes = (prefix / 8) as usize;
                        out.exprs.push(Expr::Payload {
                            base: NETWORK_HEADER,
                            offset,
                            len: bytes as u32,
                            dreg: 1,
                        });
                        let data = addr[..bytes].to_vec();
                        out.exprs.push(Expr::Cmp { sreg: 1, op, data });
                    } else {
                        out.exprs.push(Expr::Payload {
                            base: NETWORK_HEADER,
                            offset,
                            len,
                            dreg: 1,
                        });
                        let xor = vec![0; mask.len()];
                        out.exprs.push(Expr::Bitwise { reg: 1, mask, xor });
                        out.exprs.push(Expr::Cmp {
                            sreg: 1,
                            op,
                            data: addr,
                        });
                    }
                } else {
                    let (key_type, udata) = match family {
                        IpFamily::V4 => (TYPE_IPADDR, UDATA_IP_SADDR),
                        IpFamily::V6 => (TYPE_IP6ADDR, &[0u8, 4, 2, 0, 0, 0][..]),
                    };
                    let set = self.anon_set(
                        true,
                        key_type,
                        len,
                        udata,
                        interval_elements(nets, len as usize),
                    );
                    out.exprs.push(Expr::Payload {
                        base: NETWORK_HEADER,
                        offset,
                        len,
                        dreg: 1,
                    });
                    out.exprs.push(Expr::Lookup {
                        sreg: 1,
                        set: ANON_SET_NAME,
                        set_id: Some(set.id),
                        dreg: None,
                        invert: *negate,
                    });
                    out.sets.push(set);
                }
            }
            RuleMatch::SaddrLocal => {
                out.exprs.push(Expr::Fib {
                    flags: FIB_F_SADDR,
                    result: FIB_RESULT_ADDRTYPE,
                    dreg: 1,
                });
                out.exprs.push(Expr::Cmp {
                    sreg: 1,
                    op: CMP_EQ,
                    data: RTN_LOCAL.to_ne_bytes().to_vec(),
                });
            }
        }
    }

    fn lower_action<'a>(&mut self, family: IpFamily, a: &'a RuleAction, out: &mut Lowered<'a>) {
        match a {
            RuleAction::Jump(chain) => out.exprs.push(Expr::Jump(chain)),
            RuleAction::Dnat { key, slots, map } => {
                // `meta l4proto { tcp, udp, sctp }`: the transport-header dependency.
                let protos = DNAT_PROTOCOLS.iter().map(|p| (vec![*p], false)).collect();
                let set = self.anon_set(false, TYPE_INET_PROTOCOL, 1, UDATA_L4PROTO, protos);
                out.exprs.push(Expr::Meta {
                    key: META_L4PROTO,
                    dreg: 1,
                });
                out.exprs.push(Expr::Lookup {
                    sreg: 1,
                    set: ANON_SET_NAME,
                    set_id: Some(set.id),
                    dreg: None,
                    invert: false,
                });
                out.sets.push(set);
                // The map key, one field per 32-bit register run: [daddr .] l4proto . dport . slot.
                let mut at = 0;
                let (_, addr_len) = addr_field(family, true);
                if *key == DnatKey::ServiceIp {
                    let (offset, len) = addr_field(family, true);
                    out.exprs.push(Expr::Payload {
                        base: NETWORK_HEADER,
                        offset,
                        len,
                        dreg: reg32(at),
                    });
                    at += len / 4;
                }
                out.exprs.push(Expr::Meta {
                    key: META_L4PROTO,
                    dreg: reg32(at),
                });
                out.exprs.push(Expr::Payload {
                    base: TRANSPORT_HEADER,
                    offset: 2,
                    len: 2,
                    dreg: reg32(at + 1),
                });
                out.exprs.push(Expr::Numgen {
                    dreg: reg32(at + 2),
                    modulus: *slots,
                });
                out.exprs.push(Expr::Lookup {
                    sreg: 1,
                    set: map,
                    set_id: None,
                    dreg: Some(1),
                    invert: false,
                });
                let nfproto = match family {
                    IpFamily::V4 => 2,
                    IpFamily::V6 => 10,
                };
                out.exprs.push(Expr::Dnat {
                    family: nfproto,
                    addr: 1,
                    proto: reg32(addr_len / 4),
                });
            }
        }
    }

    fn anon_set(
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

    /// Lowers a rule (allocating ids for its anonymous sets).
    pub(super) fn lower<'a>(&mut self, rule: &'a DispatchRule) -> Lowered<'a> {
        let mut out = Lowered::default();
        for m in &rule.matches {
            self.lower_match(rule.family, m, &mut out);
        }
        self.lower_action(rule.family, &rule.action, &mut out);
        out
    }

    fn chain_msg(&mut self, kind: u16, flags: u16, chain: &str) {
        let msg = self.header((NFNL_SUBSYS_NFTABLES << 8) | kind, flags, self.family);
        attr_str(&mut self.buf, NFTA_CHAIN_TABLE, self.table);
        attr_str(&mut self.buf, NFTA_CHAIN_NAME, chain);
        self.end_msg(msg);
    }

    /// Creates a regular chain (nothing happens if it exists: `add chain`).
    pub(crate) fn add_chain(&mut self, chain: &str) {
        let flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_ACK;
        self.chain_msg(NFT_MSG_NEWCHAIN, flags, chain);
    }

    /// Deletes a chain (it must hold no rules and no element may refer to it by then).
    pub(crate) fn delete_chain(&mut self, chain: &str) {
        self.chain_msg(NFT_MSG_DELCHAIN, NLM_F_REQUEST | NLM_F_ACK, chain);
    }

    /// Deletes every rule of a chain (`flush chain`).
    pub(crate) fn flush_chain(&mut self, chain: &str) {
        let msg = self.header(
            (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_DELRULE,
            NLM_F_REQUEST | NLM_F_ACK,
            self.family,
        );
        attr_str(&mut self.buf, NFTA_RULE_TABLE, self.table);
        attr_str(&mut self.buf, NFTA_RULE_CHAIN, chain);
        self.end_msg(msg);
    }

    /// Appends a rule to a chain, preceded by the anonymous sets it looks up.
    pub(crate) fn add_rule(&mut self, chain: &str, rule: &DispatchRule) {
        let lowered = self.lower(rule);
        for set in &lowered.sets {
            self.new_anon_set(set);
        }
        let msg = self.header(
            (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWRULE,
            NLM_F_REQUEST | NLM_F_CREATE | NLM_F_APPEND | NLM_F_ACK,
            self.family,
        );
        attr_str(&mut self.buf, NFTA_RULE_TABLE, self.table);
        attr_str(&mut self.buf, NFTA_RULE_CHAIN, chain);
        let list = begin_attr(&mut self.buf, NFTA_RULE_EXPRESSIONS | NLA_F_NESTED);
        for e in &lowered.exprs {
            e.encode(&mut self.buf);
        }
        end_attr(&mut self.buf, list);
        self.end_msg(msg);
    }

    fn new_anon_set(&mut self, set: &AnonSet) {
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
        attr_u32(buf, NFTA_SET_DESC_SIZE, set.elements.len() as u32);
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
        for (i, (key, end)) in (1u16..).zip(&set.elements) {
            let el = begin_attr(buf, i | NLA_F_NESTED);
            if *end {
                attr_u32(buf, NFTA_SET_ELEM_FLAGS, NFT_SET_ELEM_INTERVAL_END);
            }
            let k = begin_attr(buf, NFTA_SET_ELEM_KEY | NLA_F_NESTED);
            attr(buf, NFTA_DATA_VALUE, key);
            end_attr(buf, k);
            end_attr(buf, el);
        }
        end_attr(buf, list);
        self.end_msg(msg);
    }
}

#[cfg(test)]
mod tests;
