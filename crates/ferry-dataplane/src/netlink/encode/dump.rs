//! Dumps (`NLM_F_DUMP`) of Ferry's table: which chains it holds (`NFT_MSG_GETCHAIN`), so that
//! a full sync can delete the ones no longer wanted, and how many rules one chain holds
//! (`NFT_MSG_GETRULE` filtered by table and chain), so that the periodic check notices a
//! flushed chain. And which tables the network namespace holds (`NFT_MSG_GETTABLE`, every
//! family), for the start-up look for kube-proxy's tables and for the cleanups: `nft list
//! tables` reads every table whole first (3.7 s with Ferry's table at 10 000 × 10).

use super::{
    attr_str, Batch, NetlinkError, NFNL_SUBSYS_NFTABLES, NFT_MSG_GETCHAIN, NFT_MSG_NEWCHAIN,
    NFT_MSG_NEWRULE, NLMSG_DONE, NLMSG_ERROR, NLM_F_DUMP, NLM_F_REQUEST,
};

const NFT_MSG_NEWTABLE: u16 = 0;
const NFT_MSG_GETTABLE: u16 = 1;
const NFTA_TABLE_NAME: u16 = 1;
const NFTA_CHAIN_TABLE: u16 = 1;
const NFTA_CHAIN_NAME: u16 = 3;
const NFTA_RULE_TABLE: u16 = 1;
const NFTA_RULE_CHAIN: u16 = 2;
const NFT_MSG_GETRULE: u16 = 7;
const NLA_TYPE_MASK: u16 = 0x3fff;
#[cfg(test)]
const NFT_MSG_NEWGEN: u16 = 15;
#[cfg(test)]
const NFT_MSG_GETGEN: u16 = 16;
#[cfg(test)]
const NFTA_GEN_ID: u16 = 1;

/// The request for the ruleset's generation (`NFT_MSG_GETGEN`): one message answers it.
#[cfg(test)]
pub(crate) fn generation_request(seq: u32) -> Vec<u8> {
    let mut b = Batch::bare(seq, ferry_model::IpFamily::V4);
    let msg = b.header(
        (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_GETGEN,
        NLM_F_REQUEST,
        0,
    );
    b.end_msg(msg);
    b.buf
}

/// The generation in the answer to [`generation_request`], into `out`: `Ok(true)` once found.
#[cfg(test)]
pub(crate) fn generation(buf: &[u8], out: &mut Option<u32>) -> Result<bool, NetlinkError> {
    walk(buf, NFT_MSG_NEWGEN, |attrs| {
        each_attr(attrs, |kind, value| {
            if let (NFTA_GEN_ID, Ok(id)) = (kind, <[u8; 4]>::try_from(value)) {
                *out = Some(u32::from_be_bytes(id));
            }
        })
    })?;
    Ok(out.is_some())
}

/// The dump request for every chain of `family` (filtered by table when read; `table` may be
/// empty, then none is named).
pub(crate) fn chain_dump_request(seq: u32, family: ferry_model::IpFamily, table: &str) -> Vec<u8> {
    let mut b = Batch::bare(seq, family);
    let msg = b.header(
        (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_GETCHAIN,
        NLM_F_REQUEST | NLM_F_DUMP,
        b.family,
    );
    if !table.is_empty() {
        attr_str(&mut b.buf, NFTA_CHAIN_TABLE, table);
    }
    b.end_msg(msg);
    b.buf
}

/// The dump request for every table of every family (`NFPROTO_UNSPEC`).
pub(crate) fn table_dump_request(seq: u32) -> Vec<u8> {
    let mut b = Batch::bare(seq, ferry_model::IpFamily::V4);
    let msg = b.header(
        (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_GETTABLE,
        NLM_F_REQUEST | NLM_F_DUMP,
        0,
    );
    b.end_msg(msg);
    b.buf
}

/// One datagram of the table dump's answer: (family as `nft` names it, table name) of each
/// table it holds, appended to `out`. `Ok(true)` once the dump is complete.
pub(crate) fn table_names(
    buf: &[u8],
    out: &mut Vec<(String, String)>,
) -> Result<bool, NetlinkError> {
    walk_with_family(buf, NFT_MSG_NEWTABLE, |family, attrs| {
        let mut name = None;
        each_attr(attrs, |kind, value| {
            if kind == NFTA_TABLE_NAME {
                name = Some(text(value));
            }
        })?;
        if let Some(name) = name {
            out.push((family_name(family).to_owned(), name));
        }
        Ok(())
    })
}

/// The name `nft` gives an `NFPROTO_*` family.
fn family_name(family: u8) -> &'static str {
    match family {
        1 => "inet",
        2 => "ip",
        3 => "arp",
        5 => "netdev",
        7 => "bridge",
        10 => "ip6",
        _ => "unknown",
    }
}

/// The dump request for the rules of one chain: the kernel looks the chain up by name and
/// dumps its rules only, whatever else the table holds.
pub(crate) fn rule_dump_request(
    seq: u32,
    family: ferry_model::IpFamily,
    table: &str,
    chain: &str,
) -> Vec<u8> {
    let mut b = Batch::bare(seq, family);
    let msg = b.header(
        (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_GETRULE,
        NLM_F_REQUEST | NLM_F_DUMP,
        b.family,
    );
    attr_str(&mut b.buf, NFTA_RULE_TABLE, table);
    attr_str(&mut b.buf, NFTA_RULE_CHAIN, chain);
    b.end_msg(msg);
    b.buf
}

/// One datagram of the chain dump's answer: the names of `table`'s chains it holds, appended
/// to `out`. `Ok(true)` once the dump is complete.
pub(crate) fn chain_names(
    buf: &[u8],
    table: &str,
    out: &mut Vec<String>,
) -> Result<bool, NetlinkError> {
    each_chain(buf, |t, name| {
        if t == table {
            out.push(name);
        }
    })
}

/// One datagram of the chain dump's answer: `(table, chain)` of every chain it holds, to
/// `each`. `Ok(true)` once the dump is complete.
pub(crate) fn each_chain(
    buf: &[u8],
    mut each: impl FnMut(String, String),
) -> Result<bool, NetlinkError> {
    walk(buf, NFT_MSG_NEWCHAIN, |attrs| {
        let (mut t, mut name) = (None, None);
        each_attr(attrs, |kind, value| match kind {
            NFTA_CHAIN_TABLE => t = Some(text(value)),
            NFTA_CHAIN_NAME => name = Some(text(value)),
            _ => {}
        })?;
        if let (Some(t), Some(name)) = (t, name) {
            each(t, name);
        }
        Ok(())
    })
}

/// One datagram of a rule dump's answer: the rules of `table`'s `chain` it holds are added to
/// `count`. `Ok(true)` once the dump is complete.
pub(crate) fn count_rules(
    buf: &[u8],
    table: &str,
    chain: &str,
    count: &mut usize,
) -> Result<bool, NetlinkError> {
    walk(buf, NFT_MSG_NEWRULE, |attrs| {
        let (mut t, mut c) = (false, false);
        each_attr(attrs, |kind, value| match kind {
            NFTA_RULE_TABLE => t = text(value) == table,
            NFTA_RULE_CHAIN => c = text(value) == chain,
            _ => {}
        })?;
        if t && c {
            *count += 1;
        }
        Ok(())
    })
}

/// Calls `each` with the attributes of every message of `kind` (in the nftables subsystem)
/// of one datagram. `Ok(true)` at the end of the dump; an error answer is an error.
fn walk(
    buf: &[u8],
    kind: u16,
    mut each: impl FnMut(&[u8]) -> Result<(), NetlinkError>,
) -> Result<bool, NetlinkError> {
    walk_with_family(buf, kind, |_, attrs| each(attrs))
}

/// [`walk`], also giving each message's family (`nfgenmsg.nfgen_family`).
fn walk_with_family(
    mut buf: &[u8],
    kind: u16,
    mut each: impl FnMut(u8, &[u8]) -> Result<(), NetlinkError>,
) -> Result<bool, NetlinkError> {
    let wanted = (NFNL_SUBSYS_NFTABLES << 8) | kind;
    while buf.len() >= 16 {
        let len = u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
        let msg_kind = u16::from_ne_bytes([buf[4], buf[5]]);
        if len < 16 || len > buf.len() {
            return Err(NetlinkError::Protocol("bad message length"));
        }
        match msg_kind {
            NLMSG_DONE => return Ok(true),
            NLMSG_ERROR => {
                let code = buf
                    .get(16..20)
                    .map(|b| i32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
                    .ok_or(NetlinkError::Protocol("short error message"))?;
                if code != 0 {
                    return Err(NetlinkError::Rejected(nix::errno::Errno::from_raw(-code)));
                }
            }
            // nlmsghdr (16) + nfgenmsg (4), then attributes.
            k if k == wanted => each(buf[16], buf.get(20..len).unwrap_or_default())?,
            _ => {}
        }
        buf = &buf[((len + 3) & !3).min(buf.len())..];
    }
    Ok(false)
}

/// Calls `each` with the kind and payload of every top-level attribute.
fn each_attr(mut attrs: &[u8], mut each: impl FnMut(u16, &[u8])) -> Result<(), NetlinkError> {
    while attrs.len() >= 4 {
        let alen = u16::from_ne_bytes([attrs[0], attrs[1]]) as usize;
        let akind = u16::from_ne_bytes([attrs[2], attrs[3]]) & NLA_TYPE_MASK;
        if alen < 4 || alen > attrs.len() {
            return Err(NetlinkError::Protocol("bad attribute length"));
        }
        each(akind, &attrs[4..alen]);
        attrs = &attrs[((alen + 3) & !3).min(attrs.len())..];
    }
    Ok(())
}

/// A NUL-terminated string attribute.
fn text(value: &[u8]) -> String {
    let end = value.iter().position(|b| *b == 0).unwrap_or(value.len());
    String::from_utf8_lossy(&value[..end]).into_owned()
}
