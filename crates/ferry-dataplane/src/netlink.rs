//! Set-element transactions over a long-lived nfnetlink socket: the hot path of incremental
//! syncs. An element-only delta (endpoint changes) goes out as one batch
//! (`NFNL_MSG_BATCH_BEGIN`, `NFT_MSG_DELSETELEM`/`NFT_MSG_NEWSETELEM`…, `NFNL_MSG_BATCH_END`),
//! atomic like an `nft -f` run, without starting the `nft` tool, without its cache read of
//! every chain, and without the RCU wait when its socket closes.
//!
//! Only elements are encoded here; tables, chains, sets and rules are still written by `nft`
//! (which also stores the set metadata `nft list` needs to print these elements).

mod encode;

use std::os::fd::{AsRawFd as _, OwnedFd};

use nix::sys::socket::{
    bind, recv, send, setsockopt, socket, sockopt, AddressFamily, MsgFlags, NetlinkAddr, SockFlag,
    SockProtocol, SockType,
};

use ferry_compile::nft::{Delta, TABLE};
use ferry_model::IpFamily;

pub use encode::Unsupported;

/// Why a netlink transaction failed. The kernel holds what it held before.
#[derive(Debug, thiserror::Error)]
pub enum NetlinkError {
    /// The socket could not be opened or used.
    #[error("nfnetlink socket: {0}")]
    Socket(#[from] nix::Error),
    /// The kernel rejected the batch.
    #[error("the kernel rejected the element batch: {0}")]
    Rejected(nix::errno::Errno),
    /// The kernel answered something unexpected.
    #[error("unexpected nfnetlink answer: {0}")]
    Protocol(&'static str),
}

/// A long-lived `NETLINK_NETFILTER` socket in the current network namespace.
#[derive(Debug)]
pub struct ElementSocket {
    fd: OwnedFd,
    seq: u32,
}

impl ElementSocket {
    /// Opens the socket (in the network namespace of the calling thread).
    pub fn open() -> Result<Self, NetlinkError> {
        let fd = socket(
            AddressFamily::Netlink,
            SockType::Raw,
            SockFlag::SOCK_CLOEXEC,
            SockProtocol::NetlinkNetFilter,
        )?;
        bind(fd.as_raw_fd(), &NetlinkAddr::new(0, 0))?;
        // Room for large batches and for one answer per message (best effort: needs
        // CAP_NET_ADMIN, which applying rules needs anyway).
        let _ = setsockopt(&fd, sockopt::SndBufForce, &(8 << 20));
        let _ = setsockopt(&fd, sockopt::RcvBufForce, &(8 << 20));
        Ok(Self { fd, seq: 1 })
    }

    /// Applies the element changes of a delta as one atomic batch (chains it would delete are
    /// left in place, unused). `Err(Unsupported)` (nothing sent) when the delta adds chains or
    /// has elements this encoder does not handle.
    pub fn apply(
        &mut self,
        family: IpFamily,
        delta: &Delta<'_>,
    ) -> Result<Result<(), NetlinkError>, Unsupported> {
        // Chains that lost their last user are left in the kernel, unreachable, until the
        // next full sync; new chains need rules, which only nft writes.
        if !delta.add_chains.is_empty() {
            return Err(Unsupported("new chains"));
        }
        let mut batch = encode::Batch::new(self.seq, family, TABLE);
        for (set, els) in &delta.delete {
            batch.elements(false, set, els)?;
        }
        for (set, els) in &delta.add {
            batch.elements(true, set, els)?;
        }
        let (bytes, acks, next_seq) = batch.finish();
        self.seq = next_seq;
        Ok(self.send_batch(&bytes, acks))
    }

    fn send_batch(&mut self, bytes: &[u8], acks: usize) -> Result<(), NetlinkError> {
        let sent = send(self.fd.as_raw_fd(), bytes, MsgFlags::empty())?;
        if sent != bytes.len() {
            return Err(NetlinkError::Protocol("short send"));
        }
        // One answer (ack or error) per message that asked for one.
        let mut buf = vec![0u8; 64 * 1024];
        let mut answered = 0;
        let mut first_error = None;
        while answered < acks {
            let n = recv(self.fd.as_raw_fd(), &mut buf, MsgFlags::empty())?;
            for code in encode::errors(&buf[..n])? {
                answered += 1;
                if code != 0 && first_error.is_none() {
                    first_error = Some(nix::errno::Errno::from_raw(-code));
                }
            }
        }
        match first_error {
            Some(e) => Err(NetlinkError::Rejected(e)),
            None => Ok(()),
        }
    }
}
