//! Dispatch chains over netlink: chain create/flush/delete and the typed dispatch rules
//! ([`ferry_compile::nft::DispatchRule`]) lowered to the expressions nft would send.
//!
//! A new match or action of the compiler's rule type is lowered in `Batch::lower_match` /
//! `Batch::lower_action` (the `match` there is exhaustive, so the compiler points here); an
//! anonymous set it needs is an [`AnonSet`] (see [`super::anon_set`]), sent just before the rule (`NFT_MSG_NEWSET` with
//! `NFT_SET_ANONYMOUS | NFT_SET_CONSTANT`, its elements, then a lookup by set id).

use ferry_compile::nft::{DispatchRule, DnatKey, RuleAction, RuleMatch};
use ferry_model::IpFamily;

use super::anon_set::{
    interval_elements, net_bytes, AnonSet, ANON_SET_NAME, TYPE_INET_PROTOCOL, TYPE_IP6ADDR,
    TYPE_IPADDR, UDATA_IP6_SADDR, UDATA_IP_SADDR, UDATA_L4PROTO,
};
use super::expr::{
    reg32, Expr, CMP_EQ, CMP_NEQ, FIB_F_SADDR, FIB_RESULT_ADDRTYPE, IFNAMSIZ, META_IIFNAME,
    META_L4PROTO, NETWORK_HEADER, TRANSPORT_HEADER,
};
use super::{
    attr_str, begin_attr, end_attr, Batch, NFNL_SUBSYS_NFTABLES, NFT_MSG_DELCHAIN, NFT_MSG_DELRULE,
    NFT_MSG_NEWCHAIN, NFT_MSG_NEWRULE, NLA_F_NESTED, NLM_F_ACK, NLM_F_APPEND, NLM_F_CREATE,
    NLM_F_REQUEST,
};

const NFTA_CHAIN_TABLE: u16 = 1;
const NFTA_CHAIN_NAME: u16 = 3;
const NFTA_RULE_TABLE: u16 = 1;
const NFTA_RULE_CHAIN: u16 = 2;
const NFTA_RULE_EXPRESSIONS: u16 = 4;
/// `RTN_LOCAL`, what `fib … type` yields for a local address (host byte order).
const RTN_LOCAL: u32 = 2;
/// Protocols a DNAT rule's transport-header match depends on.
const DNAT_PROTOCOLS: [u8; 3] = [6, 17, 132];

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

/// `NFPROTO_IPV4` or `NFPROTO_IPV6`.
fn nfproto(family: IpFamily) -> u32 {
    match family {
        IpFamily::V4 => 2,
        IpFamily::V6 => 10,
    }
}

/// `ip saddr` / `ip daddr` (or `ip6 …`) into `dreg`.
fn addr_load<'a>(family: IpFamily, dst: bool, dreg: u32) -> Expr<'a> {
    let (offset, len) = addr_field(family, dst);
    Expr::Payload {
        base: NETWORK_HEADER,
        offset,
        len,
        dreg,
    }
}

/// `th dport` into `dreg`.
fn dport_load<'a>(dreg: u32) -> Expr<'a> {
    Expr::Payload {
        base: TRANSPORT_HEADER,
        offset: 2,
        len: 2,
        dreg,
    }
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
                    if prefix % 8 == 0 && prefix > 0 {
                        // Whole bytes: compare just those (as nft does). `/0` has none: nft
                        // masks the whole address to zero and compares that (below).
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
                        IpFamily::V6 => (TYPE_IP6ADDR, UDATA_IP6_SADDR),
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
            RuleMatch::Iifname {
                negate,
                name,
                prefix,
            } => {
                out.exprs.push(Expr::Meta {
                    key: META_IIFNAME,
                    dreg: 1,
                });
                // A whole name is compared with its NUL padding (as nft does); a prefix, its
                // bytes only.
                let mut data = name.as_bytes().to_vec();
                if !prefix {
                    data.resize(IFNAMSIZ, 0);
                }
                let op = if *negate { CMP_NEQ } else { CMP_EQ };
                out.exprs.push(Expr::Cmp { sreg: 1, op, data });
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
                self.transport_protocols(out);
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
                out.exprs.push(Expr::Dnat {
                    family: nfproto(family),
                    addr: 1,
                    proto: reg32(addr_len / 4),
                });
            }
            RuleAction::PinnedDnat { key, map } => {
                self.transport_protocols(out);
                pinned_dnat(family, *key, map, out);
            }
            RuleAction::RecordPin { key, timeout, map } => {
                self.transport_protocols(out);
                record_pin(family, *key, *timeout, map, out);
            }
        }
    }

    /// `meta l4proto { tcp, udp, sctp }`: the dependency of a transport-header field.
    pub(super) fn transport_protocols(&mut self, out: &mut Lowered<'_>) {
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
}

mod affinity;
use affinity::{pinned_dnat, record_pin};

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_affinity;
#[cfg(test)]
mod tests_v6;
