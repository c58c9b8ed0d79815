//! nf_tables expressions, each encoded as libnftnl does (`nft --debug=netlink` prints the same
//! list for the same rule, and `nft list` decodes the rule back to its text).
//!
//! Adding an expression kind: a variant of [`Expr`], its `NFTA_<KIND>_*` attributes in
//! [`Expr::encode`] (the numbers are in `linux/netfilter/nf_tables.h`; numbers are 32-bit in
//! network byte order, register data in the byte order the packet or the kernel writes it), and
//! a byte-level unit test against `nft --debug=mnl` output of an equivalent rule.

use super::{
    attr, attr_str, attr_u32, begin_attr, end_attr, NFTA_DATA_VALUE, NFTA_DATA_VERDICT,
    NFTA_LIST_ELEM, NFTA_VERDICT_CHAIN, NFTA_VERDICT_CODE, NLA_F_NESTED,
};

const NFTA_EXPR_NAME: u16 = 1;
const NFTA_EXPR_DATA: u16 = 2;

/// `NFT_PAYLOAD_NETWORK_HEADER`.
pub(super) const NETWORK_HEADER: u32 = 1;
/// `NFT_PAYLOAD_TRANSPORT_HEADER`.
pub(super) const TRANSPORT_HEADER: u32 = 2;
/// `NFT_META_L4PROTO`.
pub(super) const META_L4PROTO: u32 = 16;
/// `NFT_META_IIFNAME`.
pub(super) const META_IIFNAME: u32 = 6;
/// `IFNAMSIZ`: an interface name's room, its NUL included.
pub(super) const IFNAMSIZ: usize = 16;
/// `NFT_CMP_EQ`, `NFT_CMP_NEQ`.
pub(super) const CMP_EQ: u32 = 0;
pub(super) const CMP_NEQ: u32 = 1;
/// `NFTA_FIB_F_SADDR`, `NFT_FIB_RESULT_ADDRTYPE`.
pub(super) const FIB_F_SADDR: u32 = 1;
pub(super) const FIB_RESULT_ADDRTYPE: u32 = 3;
/// `NFT_NAT_DNAT`.
const NAT_DNAT: u32 = 1;
/// `NFT_NG_RANDOM`.
const NG_RANDOM: u32 = 1;
/// `NFT_JUMP`.
const NFT_JUMP: i32 = -3;
/// `NFT_LOOKUP_F_INV`.
const LOOKUP_F_INV: u32 = 1;

/// The register a concatenation field at 32-bit offset `i` from the start of register 1 is
/// loaded into, numbered as nft numbers it: a field that starts a 128-bit register gets that
/// register's number (`NFT_REG_1` … `NFT_REG_4`), any other its `NFT_REG32_xx` (so an IPv6
/// address in `NFT_REG_1` is followed by a field in `NFT_REG_2`, not `NFT_REG32_04`; the
/// kernel reads both alike, `nft list` too, but nft sends the former).
pub(super) fn reg32(i: u32) -> u32 {
    if i.is_multiple_of(4) {
        1 + i / 4
    } else {
        8 + i
    }
}

/// `NFT_CT_DST_IP`, `NFT_CT_DST_IP6`, `NFT_CT_PROTO_DST`.
pub(super) const CT_DST_IP: u32 = 20;
pub(super) const CT_DST_IP6: u32 = 22;
pub(super) const CT_PROTO_DST: u32 = 12;
/// `NFT_DYNSET_OP_UPDATE`.
const DYNSET_OP_UPDATE: u32 = 1;

/// One expression of a rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Expr<'a> {
    /// `[ payload load LENb @ BASE header + OFFSET => reg DREG ]`
    Payload {
        base: u32,
        offset: u32,
        len: u32,
        dreg: u32,
    },
    /// `[ meta load KEY => reg DREG ]`
    Meta { key: u32, dreg: u32 },
    /// `[ cmp OP reg SREG DATA ]`
    Cmp { sreg: u32, op: u32, data: Vec<u8> },
    /// `[ bitwise reg R = ( reg R & MASK ) ^ XOR ]`
    Bitwise {
        reg: u32,
        mask: Vec<u8>,
        xor: Vec<u8>,
    },
    /// `[ fib FLAGS RESULT => reg DREG ]`
    Fib { flags: u32, result: u32, dreg: u32 },
    /// `[ immediate reg 0 jump -> CHAIN ]`
    Jump(&'a str),
    /// `[ lookup reg SREG set SET [dreg DREG] [0x1] ]`; `set_id` names a set created in the
    /// same batch (anonymous sets).
    Lookup {
        sreg: u32,
        set: &'a str,
        set_id: Option<u32>,
        dreg: Option<u32>,
        invert: bool,
    },
    /// `[ numgen reg DREG = random mod MODULUS ]`
    Numgen { dreg: u32, modulus: u32 },
    /// `[ nat dnat FAMILY addr_min reg A proto_min reg P ]`
    Dnat { family: u32, addr: u32, proto: u32 },
    /// `[ ct load KEY => reg DREG , dir original ]`
    CtOriginal { key: u32, dreg: u32 },
    /// `[ dynset update reg_key KEY set SET sreg_data DATA timeout MSms ]`. nft also sends
    /// `NFTA_DYNSET_SET_ID` (an id from its own cache); the kernel looks a set up by name
    /// first, so Ferry leaves it out.
    DynsetUpdate {
        key: u32,
        data: u32,
        timeout_ms: u64,
        set: &'a str,
    },
}

impl Expr<'_> {
    fn name(&self) -> &'static str {
        match self {
            Expr::Payload { .. } => "payload",
            Expr::Meta { .. } => "meta",
            Expr::Cmp { .. } => "cmp",
            Expr::Bitwise { .. } => "bitwise",
            Expr::Fib { .. } => "fib",
            Expr::Jump(_) => "immediate",
            Expr::Lookup { .. } => "lookup",
            Expr::Numgen { .. } => "numgen",
            Expr::Dnat { .. } => "nat",
            Expr::CtOriginal { .. } => "ct",
            Expr::DynsetUpdate { .. } => "dynset",
        }
    }

    /// Appends the expression as one `NFTA_LIST_ELEM` of `NFTA_RULE_EXPRESSIONS`.
    pub(super) fn encode(&self, buf: &mut Vec<u8>) {
        let elem = begin_attr(buf, NFTA_LIST_ELEM | NLA_F_NESTED);
        attr_str(buf, NFTA_EXPR_NAME, self.name());
        let data = begin_attr(buf, NFTA_EXPR_DATA | NLA_F_NESTED);
        match self {
            Expr::Payload {
                base,
                offset,
                len,
                dreg,
            } => {
                attr_u32(buf, 1, *dreg); // NFTA_PAYLOAD_DREG
                attr_u32(buf, 2, *base); // NFTA_PAYLOAD_BASE
                attr_u32(buf, 3, *offset); // NFTA_PAYLOAD_OFFSET
                attr_u32(buf, 4, *len); // NFTA_PAYLOAD_LEN
            }
            Expr::Meta { key, dreg } => {
                attr_u32(buf, 2, *key); // NFTA_META_KEY
                attr_u32(buf, 1, *dreg); // NFTA_META_DREG
            }
            Expr::Cmp { sreg, op, data } => {
                attr_u32(buf, 1, *sreg); // NFTA_CMP_SREG
                attr_u32(buf, 2, *op); // NFTA_CMP_OP
                value(buf, 3, data); // NFTA_CMP_DATA
            }
            Expr::Bitwise { reg, mask, xor } => {
                attr_u32(buf, 1, *reg); // NFTA_BITWISE_SREG
                attr_u32(buf, 2, *reg); // NFTA_BITWISE_DREG
                attr_u32(buf, 3, mask.len() as u32); // NFTA_BITWISE_LEN
                value(buf, 4, mask); // NFTA_BITWISE_MASK
                value(buf, 5, xor); // NFTA_BITWISE_XOR
            }
            Expr::Fib {
                flags,
                result,
                dreg,
            } => {
                attr_u32(buf, 3, *flags); // NFTA_FIB_FLAGS
                attr_u32(buf, 2, *result); // NFTA_FIB_RESULT
                attr_u32(buf, 1, *dreg); // NFTA_FIB_DREG
            }
            Expr::Jump(chain) => {
                attr_u32(buf, 1, 0); // NFTA_IMMEDIATE_DREG: the verdict register
                let d = begin_attr(buf, 2 | NLA_F_NESTED); // NFTA_IMMEDIATE_DATA
                let v = begin_attr(buf, NFTA_DATA_VERDICT | NLA_F_NESTED);
                attr(buf, NFTA_VERDICT_CODE, &NFT_JUMP.to_be_bytes());
                attr_str(buf, NFTA_VERDICT_CHAIN, chain);
                end_attr(buf, v);
                end_attr(buf, d);
            }
            Expr::Lookup {
                sreg,
                set,
                set_id,
                dreg,
                invert,
            } => {
                attr_u32(buf, 2, *sreg); // NFTA_LOOKUP_SREG
                if let Some(d) = dreg {
                    attr_u32(buf, 3, *d); // NFTA_LOOKUP_DREG
                }
                attr_str(buf, 1, set); // NFTA_LOOKUP_SET
                if let Some(id) = set_id {
                    attr_u32(buf, 4, *id); // NFTA_LOOKUP_SET_ID
                }
                if *invert {
                    attr_u32(buf, 5, LOOKUP_F_INV); // NFTA_LOOKUP_FLAGS
                }
            }
            Expr::Numgen { dreg, modulus } => {
                attr_u32(buf, 1, *dreg); // NFTA_NG_DREG
                attr_u32(buf, 2, *modulus); // NFTA_NG_MODULUS
                attr_u32(buf, 3, NG_RANDOM); // NFTA_NG_TYPE
                attr_u32(buf, 4, 0); // NFTA_NG_OFFSET
            }
            Expr::Dnat {
                family,
                addr,
                proto,
            } => {
                attr_u32(buf, 1, NAT_DNAT); // NFTA_NAT_TYPE
                attr_u32(buf, 2, *family); // NFTA_NAT_FAMILY
                attr_u32(buf, 3, *addr); // NFTA_NAT_REG_ADDR_MIN
                attr_u32(buf, 5, *proto); // NFTA_NAT_REG_PROTO_MIN
            }
            Expr::CtOriginal { key, dreg } => {
                attr_u32(buf, 2, *key); // NFTA_CT_KEY
                attr_u32(buf, 1, *dreg); // NFTA_CT_DREG
                attr(buf, 3, &[0]); // NFTA_CT_DIRECTION: IP_CT_DIR_ORIGINAL
            }
            Expr::DynsetUpdate {
                key,
                data,
                timeout_ms,
                set,
            } => {
                attr_u32(buf, 4, *key); // NFTA_DYNSET_SREG_KEY
                attr_u32(buf, 5, *data); // NFTA_DYNSET_SREG_DATA
                attr_u32(buf, 3, DYNSET_OP_UPDATE); // NFTA_DYNSET_OP
                attr(buf, 6, &timeout_ms.to_be_bytes()); // NFTA_DYNSET_TIMEOUT
                attr_str(buf, 1, set); // NFTA_DYNSET_SET_NAME
            }
        }
        end_attr(buf, data);
        end_attr(buf, elem);
    }
}

/// A nested `NFTA_DATA_VALUE` attribute.
fn value(buf: &mut Vec<u8>, kind: u16, bytes: &[u8]) {
    let at = begin_attr(buf, kind | NLA_F_NESTED);
    attr(buf, NFTA_DATA_VALUE, bytes);
    end_attr(buf, at);
}
