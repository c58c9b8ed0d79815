//! The session affinity actions lowered to expressions: the DNAT through a pin map and the
//! `dynset update` that records a pin (after the `meta l4proto { tcp, udp, sctp }` dependency
//! the caller adds).

use ferry_compile::nft::DnatKey;
use ferry_model::IpFamily;

use super::super::expr::{reg32, Expr, CT_DST_IP, CT_DST_IP6, CT_PROTO_DST, META_L4PROTO};
use super::{addr_field, addr_load, dport_load, nfproto, Lowered};

/// `dnat ip to [ip daddr .] meta l4proto . th dport . ip saddr map @MAP`.
pub(super) fn pinned_dnat<'a>(family: IpFamily, key: DnatKey, map: &'a str, out: &mut Lowered<'a>) {
    // The pin map key: [daddr .] l4proto . dport . saddr.
    let words = addr_field(family, true).1 / 4;
    let mut at = 0;
    if key == DnatKey::ServiceIp {
        out.exprs.push(addr_load(family, true, reg32(0)));
        at += words;
    }
    out.exprs.push(Expr::Meta {
        key: META_L4PROTO,
        dreg: reg32(at),
    });
    out.exprs.push(dport_load(reg32(at + 1)));
    out.exprs.push(addr_load(family, false, reg32(at + 2)));
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
        proto: reg32(words),
    });
}

/// `update @MAP { [ct original ip daddr .] meta l4proto . ct original proto-dst . ip saddr
/// timeout T : ip daddr . th dport }`.
pub(super) fn record_pin<'a>(
    family: IpFamily,
    key: DnatKey,
    timeout: u32,
    map: &'a str,
    out: &mut Lowered<'a>,
) {
    // The key: [ct original daddr .] l4proto . ct original proto-dst . saddr.
    let words = addr_field(family, true).1 / 4;
    let mut at = 0;
    if key == DnatKey::ServiceIp {
        let ct_key = match family {
            IpFamily::V4 => CT_DST_IP,
            IpFamily::V6 => CT_DST_IP6,
        };
        out.exprs.push(Expr::CtOriginal {
            key: ct_key,
            dreg: reg32(0),
        });
        at += words;
    }
    out.exprs.push(Expr::Meta {
        key: META_L4PROTO,
        dreg: reg32(at),
    });
    out.exprs.push(Expr::CtOriginal {
        key: CT_PROTO_DST,
        dreg: reg32(at + 1),
    });
    out.exprs.push(addr_load(family, false, reg32(at + 2)));
    at += 2 + words;
    // The data (daddr . dport) starts at the next 16-byte register when it fits, as nft places
    // it; IPv6 service IPs (a 40-byte key) leave no room for that, and it follows the key
    // directly (nft 1.0.6 cannot generate that rule at all; the kernel accepts it).
    let aligned = at.next_multiple_of(4);
    // The data is `words + 1` registers; 16 in all.
    let data = if aligned + words < 16 { aligned } else { at };
    out.exprs.push(addr_load(family, true, reg32(data)));
    out.exprs.push(dport_load(reg32(data + words)));
    out.exprs.push(Expr::DynsetUpdate {
        key: 1,
        data: reg32(data),
        timeout_ms: u64::from(timeout) * 1000,
        set: map,
    });
}
