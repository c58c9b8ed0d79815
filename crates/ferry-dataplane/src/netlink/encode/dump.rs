//! The chain dump (`NFT_MSG_GETCHAIN` with `NLM_F_DUMP`): which chains Ferry's table holds,
//! so that a full sync can delete the ones no longer wanted.

use super::{
    attr_str, Batch, NetlinkError, NFNL_SUBSYS_NFTABLES, NFT_MSG_GETCHAIN, NFT_MSG_NEWCHAIN,
    NLMSG_DONE, NLMSG_ERROR, NLM_F_DUMP, NLM_F_REQUEST,
};

const NFTA_CHAIN_TABLE: u16 = 1;
const NFTA_CHAIN_NAME: u16 = 3;
const NLA_TYPE_MASK: u16 = 0x3fff;

/// The dump request for every chain of `family` (filtered by table when read).
pub(crate) fn chain_dump_request(seq: u32, family: ferry_model::IpFamily, table: &str) -> Vec<u8> {
    let mut b = Batch::bare(seq, family);
    let msg = b.header(
        (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_GETCHAIN,
        NLM_F_REQUEST | NLM_F_DUMP,
        b.family,
    );
    attr_str(&mut b.buf, NFTA_CHAIN_TABLE, table);
    b.end_msg(msg);
    b.buf
}

/// One datagram of the dump's answer: the names of `table`'s chains it holds, appended to
/// `out`. `Ok(true)` once the dump is complete.
pub(crate) fn chain_names(
    mut buf: &[u8],
    table: &str,
    out: &mut Vec<String>,
) -> Result<bool, NetlinkError> {
    while buf.len() >= 16 {
        let len = u32::from_ne_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
        let kind = u16::from_ne_bytes([buf[4], buf[5]]);
        if len < 16 || len > buf.len() {
            return Err(NetlinkError::Protocol("bad message length"));
        }
        match kind {
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
            k if k == (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWCHAIN => {
                // nlmsghdr (16) + nfgenmsg (4), then attributes.
                let (mut t, mut name) = (None, None);
                let mut attrs = buf.get(20..len).unwrap_or_default();
                while attrs.len() >= 4 {
                    let alen = u16::from_ne_bytes([attrs[0], attrs[1]]) as usize;
                    let akind = u16::from_ne_bytes([attrs[2], attrs[3]]) & NLA_TYPE_MASK;
                    if alen < 4 || alen > attrs.len() {
                        return Err(NetlinkError::Protocol("bad attribute length"));
                    }
                    let value = &attrs[4..alen];
                    let text = || {
                        let end = value.iter().position(|b| *b == 0).unwrap_or(value.len());
                        String::from_utf8_lossy(&value[..end]).into_owned()
                    };
                    match akind {
                        NFTA_CHAIN_TABLE => t = Some(text()),
                        NFTA_CHAIN_NAME => name = Some(text()),
                        _ => {}
                    }
                    attrs = &attrs[((alen + 3) & !3).min(attrs.len())..];
                }
                if let (Some(t), Some(name)) = (t, name) {
                    if t == table {
                        out.push(name);
                    }
                }
            }
            _ => {}
        }
        buf = &buf[((len + 3) & !3).min(buf.len())..];
    }
    Ok(false)
}
