//! Transactions over a long-lived nfnetlink socket: the dispatch chains and every set element.
//!
//! A batch (`NFNL_MSG_BATCH_BEGIN`, messages…, `NFNL_MSG_BATCH_END`) is atomic like an `nft -f`
//! run, without starting the `nft` tool, without its cache read of every chain, without parsing
//! text, and without the RCU wait when its socket closes. Two kinds:
//!
//! - a full sync's bulk ([`NetlinkSocket::apply_full`]): create the dispatch chains, rewrite
//!   their rules, flush every set and map and load all elements, delete chains no longer
//!   wanted — one batch, after `nft` wrote the table's skeleton
//!   ([`ferry_compile::nft::Transaction::skeleton`]); into a new table, several in a row;
//! - an incremental delta ([`NetlinkSocket::apply`]): new dispatch chains with their rules, the
//!   changed elements, then the chains whose last user went.
//!
//! The table, the base and fixed chains and the set declarations are written by `nft` (which
//! also stores the set metadata `nft list` needs to print these elements). The dispatch rules
//! are written here because nft 1.0.6 cannot add a rule reading a `typeof` endpoint map once
//! the map exists (see [`ferry_compile::nft::DispatchRule`]).

mod encode;
#[cfg(test)]
mod kernel_tests;

use std::collections::BTreeMap;
use std::os::fd::{AsRawFd as _, OwnedFd};

use nix::sys::socket::{
    bind, recv, send, setsockopt, socket, sockopt, AddressFamily, MsgFlags, NetlinkAddr, SockFlag,
    SockProtocol, SockType,
};

use ferry_compile::nft::{Delta, Ruleset, FILLED_LAST, NODE_LEVEL_SETS, TABLE};
use ferry_model::IpFamily;

/// Why a netlink transaction failed. The kernel holds what it held before (but for the
/// transactions a new table's first sync had committed already). Each variant prints its cause
/// and has no `source()`.
#[derive(Debug, thiserror::Error)]
pub enum NetlinkError {
    /// The socket could not be opened or used.
    #[error("nfnetlink socket: {0}")]
    Socket(nix::Error),
    /// The kernel rejected the batch.
    #[error("the kernel rejected the netlink batch: {0}")]
    Rejected(nix::errno::Errno),
    /// The ruleset holds something the encoder does not write; nothing was sent.
    #[error("not encodable over netlink: {0}")]
    Unencodable(&'static str),
    /// The kernel answered something unexpected.
    #[error("unexpected nfnetlink answer: {0}")]
    Protocol(&'static str),
}

impl From<nix::Error> for NetlinkError {
    fn from(e: nix::Error) -> Self {
        NetlinkError::Socket(e)
    }
}

impl From<encode::Unencodable> for NetlinkError {
    fn from(u: encode::Unencodable) -> Self {
        NetlinkError::Unencodable(u.0)
    }
}

/// The batch [`NetlinkSocket::apply`] sends for `delta` (messages numbered from `seq`), without
/// sending it: no I/O, for the encoder's round-trip fuzz target (`ferry-fuzz`).
pub fn encode_delta(
    seq: u32,
    family: IpFamily,
    delta: &Delta<'_>,
) -> Result<Vec<u8>, NetlinkError> {
    Ok(delta_batch(seq, family, delta)?.0)
}

/// A delta's batch: its bytes, the answers to expect, the next sequence number.
fn delta_batch(
    seq: u32,
    family: IpFamily,
    delta: &Delta<'_>,
) -> Result<(Vec<u8>, usize, u32), NetlinkError> {
    let mut batch = encode::Batch::new(seq, family, TABLE);
    for c in &delta.add_chains {
        batch.add_chain(&c.name);
        batch.flush_chain(&c.name);
        for r in &c.rules {
            batch.add_rule(&c.name, r);
        }
    }
    for (set, els) in &delta.delete {
        batch.elements(false, set, els.iter().map(|e| &**e))?;
    }
    for (set, els) in &delta.add {
        batch.elements(true, set, els.iter().map(|e| &**e))?;
    }
    for name in &delta.delete_chains {
        batch.flush_chain(name);
        batch.delete_chain(name);
    }
    Ok(batch.finish())
}

/// A long-lived `NETLINK_NETFILTER` socket in the current network namespace.
#[derive(Debug)]
pub struct NetlinkSocket {
    fd: OwnedFd,
    seq: u32,
    /// The send buffer size asked for (one batch must fit in it).
    sndbuf: usize,
    /// The receive buffer size asked for (one batch's answers must fit in it).
    rcvbuf: usize,
}

/// Answers are read with this buffer: an error answer quotes the failed message (up to
/// 64 KiB).
const RECV_BUFFER: usize = 128 * 1024;
/// Where the first sync into a new table closes one transaction and starts the next
/// ([`NetlinkSocket::apply_full`]).
pub const FRESH_BATCH_BYTES: usize = 1 << 20;
/// Room for the message that takes a transaction past [`FRESH_BATCH_BYTES`].
const FRESH_BATCH_SLACK: usize = 64 << 10;
/// The send buffer asked for at first (enough for any incremental batch).
const SNDBUF: usize = 8 << 20;
/// The receive buffer asked for at first.
const RCVBUF: usize = 8 << 20;
/// What one answer (an ack) costs in the receive buffer, with room to spare: the kernel
/// charges each its own packet (on this machine 8 MiB, doubled by the kernel, held between
/// 16 000 and 32 000 acks: about 700 bytes each).
const ANSWER_BYTES: usize = 1024;

impl NetlinkSocket {
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
        let _ = setsockopt(&fd, sockopt::SndBufForce, &SNDBUF);
        let _ = setsockopt(&fd, sockopt::RcvBufForce, &RCVBUF);
        Ok(Self {
            fd,
            seq: 1,
            sndbuf: SNDBUF,
            rcvbuf: RCVBUF,
        })
    }

    /// Applies a delta as one atomic batch: new dispatch chains and their rules, element
    /// deletions and additions, then the chains whose last user went.
    /// [`NetlinkError::Unencodable`] (nothing sent) when it has elements this encoder does not
    /// write.
    pub fn apply(&mut self, family: IpFamily, delta: &Delta<'_>) -> Result<(), NetlinkError> {
        let first = self.seq;
        let (bytes, acks, next_seq) = delta_batch(first, family, delta)?;
        self.seq = next_seq;
        self.send_batch(&bytes, acks, first)
    }

    /// The chains of Ferry's table in the kernel (empty when there is no table).
    ///
    /// The kernel does not filter a chain dump by table: it sends every chain of the family,
    /// and iptables-nft's tables are nftables tables (kube-proxy's iptables layout at 10 000
    /// Services × 10 endpoints: 110 000 chains, ~250 ms to dump). So the tables are listed
    /// first (a few), and the chains dumped only when Ferry's table is there: an iptables-mode
    /// node's look for the other modes' tables after its first sync took 2 × 245 ms, which
    /// the first change waited for.
    pub fn chains(&mut self, family: IpFamily) -> Result<Vec<String>, NetlinkError> {
        let name = ferry_compile::family::nft_family(family);
        if !self.tables()?.iter().any(|(f, t)| f == name && t == TABLE) {
            return Ok(Vec::new());
        }
        let req = encode::chain_dump_request(self.seq, family, TABLE);
        let mut names = Vec::new();
        self.dump(&req, |buf| encode::chain_names(buf, TABLE, &mut names))?;
        Ok(names)
    }

    /// The chains of every table of `family` whose name `wanted` accepts, by table, each
    /// table's sorted. One dump of the family, whatever its tables hold: iptables-nft's tables
    /// are nftables tables (`ip nat`, …), and `iptables-nft-save` takes seconds over tens of
    /// thousands of chains (it prints every rule) where this takes milliseconds.
    pub fn chains_by_table(
        &mut self,
        family: IpFamily,
        wanted: impl Fn(&str) -> bool,
    ) -> Result<BTreeMap<String, Vec<String>>, NetlinkError> {
        let req = encode::chain_dump_request(self.seq, family, "");
        let mut tables: BTreeMap<String, Vec<String>> = BTreeMap::new();
        self.dump(&req, |buf| {
            encode::each_chain(buf, |table, chain| {
                if wanted(&table) {
                    tables.entry(table).or_default().push(chain);
                }
            })
        })?;
        for chains in tables.values_mut() {
            chains.sort_unstable();
        }
        Ok(tables)
    }

    /// Every table of this network namespace, as (family as `nft` names it, name).
    pub fn tables(&mut self) -> Result<Vec<(String, String)>, NetlinkError> {
        let req = encode::table_dump_request(self.seq);
        let mut tables = Vec::new();
        self.dump(&req, |buf| encode::table_names(buf, &mut tables))?;
        Ok(tables)
    }

    /// The ruleset's generation, which every committed transaction (any table's) moves on by
    /// one: the tests count transactions with it.
    #[cfg(test)]
    pub fn generation(&mut self) -> Result<u32, NetlinkError> {
        let req = encode::generation_request(self.seq);
        let mut id = None;
        self.dump(&req, |buf| encode::generation(buf, &mut id))?;
        id.ok_or(NetlinkError::Protocol("no generation in the answer"))
    }

    /// How many rules `chain` of Ferry's table holds (0 when there is no such chain): one dump
    /// of that chain's rules, whatever the rest of the table holds.
    pub fn rule_count(&mut self, family: IpFamily, chain: &str) -> Result<usize, NetlinkError> {
        let req = encode::rule_dump_request(self.seq, family, TABLE, chain);
        let mut count = 0;
        self.dump(&req, |buf| {
            encode::count_rules(buf, TABLE, chain, &mut count)
        })?;
        Ok(count)
    }

    /// Sends a dump request and feeds each datagram of the answer to `read` until it says the
    /// dump is complete. No table (`ENOENT`) is an empty answer.
    fn dump(
        &mut self,
        req: &[u8],
        mut read: impl FnMut(&[u8]) -> Result<bool, NetlinkError>,
    ) -> Result<(), NetlinkError> {
        let seq = self.seq;
        self.seq = self.seq.wrapping_add(1);
        self.drain();
        send(self.fd.as_raw_fd(), req, MsgFlags::empty())?;
        let mut buf = vec![0u8; RECV_BUFFER];
        loop {
            let n = recv(self.fd.as_raw_fd(), &mut buf, MsgFlags::empty())?;
            // An earlier request's answer (one each datagram) is not this dump's.
            if encode::first_seq(&buf[..n]).is_some_and(|s| s != seq) {
                continue;
            }
            match read(&buf[..n]) {
                Ok(true) => return Ok(()),
                Ok(false) => {}
                Err(NetlinkError::Rejected(nix::errno::Errno::ENOENT)) => return Ok(()),
                Err(e) => return Err(e),
            }
        }
    }

    /// The bulk of a full sync, once `nft` has written the skeleton: creates the dispatch
    /// chains and rewrites their rules, replaces every element of every set and map but the
    /// node-level ones, and deletes the chains of the table that `desired` does not have
    /// (`existing`: what [`chains`](Self::chains) found). Returns the elements written.
    ///
    /// One atomic batch, unless `fresh` (the table did not exist before this sync, so it
    /// serves nothing yet): then a transaction is sent whenever the batch reaches
    /// [`FRESH_BATCH_BYTES`], so the whole batch (8 MiB at 10 000 services × 10 endpoints) is
    /// never held at once. In order, each transaction builds on those before it: chains, rules,
    /// then elements, the dispatch maps last ([`FILLED_LAST`]), so a frontend is served only
    /// once all its parts are in. If one of them fails, the table holds part of `desired`
    /// and the caller's next sync, no longer fresh, rewrites it in one batch.
    pub fn apply_full(
        &mut self,
        desired: &Ruleset,
        existing: &[String],
        fresh: bool,
    ) -> Result<usize, NetlinkError> {
        let limit = if fresh { FRESH_BATCH_BYTES } else { usize::MAX };
        let wanted: std::collections::BTreeSet<&str> = desired.chain_names().collect();
        let mut batch = Self::batch_for(self.seq, desired.family, limit);
        for c in desired.dispatch_chains() {
            batch.add_chain(&c.name);
            batch = self.send_if_full(batch, desired.family, limit)?;
        }
        // Elements first out (verdict elements hold references to the chains deleted below).
        let mut bulk: Vec<&str> = desired
            .sets
            .iter()
            // Node-level sets are nft's; the dynamic maps hold session affinity pins the
            // kernel wrote, which must survive (stale ones are swept by the applier).
            .filter(|s| !NODE_LEVEL_SETS.contains(&s.name) && !s.dynamic)
            .map(|s| s.name)
            .collect();
        bulk.sort_by_key(|s| FILLED_LAST.iter().position(|l| l == s));
        for set in &bulk {
            batch.flush_set(set);
        }
        for name in existing.iter().filter(|n| !wanted.contains(n.as_str())) {
            batch.flush_chain(name);
            batch.delete_chain(name);
        }
        for c in desired.dispatch_chains() {
            batch.flush_chain(&c.name);
            for r in &c.rules {
                batch.add_rule(&c.name, r);
            }
            batch = self.send_if_full(batch, desired.family, limit)?;
        }
        let mut written = 0;
        for set in &bulk {
            let mut elements = desired.set_elements(set).peekable();
            loop {
                written += batch.elements_up_to(true, set, &mut elements, limit)?;
                if elements.peek().is_none() {
                    break;
                }
                batch = self.send_if_full(batch, desired.family, limit)?;
            }
        }
        self.send(batch).map(|()| written)
    }

    /// `batch` while it holds less than `limit` bytes; else sends it as one transaction and
    /// returns the next, empty.
    fn send_if_full(
        &mut self,
        batch: encode::Batch,
        family: IpFamily,
        limit: usize,
    ) -> Result<encode::Batch, NetlinkError> {
        if batch.len() < limit {
            return Ok(batch);
        }
        self.send(batch)?;
        Ok(Self::batch_for(self.seq, family, limit))
    }

    /// An empty batch for transactions of about `limit` bytes: the room is taken at once, not
    /// grown by doubling (each transaction a little over [`FRESH_BATCH_BYTES`] grew its
    /// buffer through 1 MiB to 2 MiB, copying, and left the smaller ones free in the syncing
    /// thread's heap). At 10 000 × 10 from manifests: VmHWM 77.3–77.6 → 76.2–76.7 MiB.
    fn batch_for(seq: u32, family: IpFamily, limit: usize) -> encode::Batch {
        let room = if limit == usize::MAX {
            0
        } else {
            limit.saturating_add(FRESH_BATCH_SLACK)
        };
        encode::Batch::with_capacity(seq, family, TABLE, room)
    }

    /// Closes and sends a batch (nothing when it holds no change).
    fn send(&mut self, batch: encode::Batch) -> Result<(), NetlinkError> {
        if batch.is_empty() {
            return Ok(());
        }
        let (bytes, acks, next_seq) = batch.finish();
        let first = encode::first_seq(&bytes).unwrap_or(self.seq);
        self.seq = next_seq;
        self.send_batch(&bytes, acks, first)
    }

    /// Sends a batch whose messages are numbered from `first` and reads its `acks` answers.
    /// Answers to other sequence numbers (left by an earlier batch whose answers overflowed
    /// the receive buffer) are not this batch's.
    fn send_batch(&mut self, bytes: &[u8], acks: usize, first: u32) -> Result<(), NetlinkError> {
        if bytes.len() > self.sndbuf {
            // One batch is one datagram: make room for it (with some slack for the kernel's
            // accounting).
            self.sndbuf = bytes.len() + (1 << 20);
            setsockopt(&self.fd, sockopt::SndBufForce, &self.sndbuf)?;
        }
        // The kernel queues every answer before `send` returns: they must all fit, or the
        // ones that do not are lost (`ENOBUFS`, drill 6).
        let answers = acks * ANSWER_BYTES + (1 << 20);
        if answers > self.rcvbuf {
            self.rcvbuf = answers;
            setsockopt(&self.fd, sockopt::RcvBufForce, &self.rcvbuf)?;
        }
        self.drain();
        let span = self.seq.wrapping_sub(first);
        let sent = send(self.fd.as_raw_fd(), bytes, MsgFlags::empty())?;
        if sent != bytes.len() {
            return Err(NetlinkError::Protocol("short send"));
        }
        // One answer (ack or error) per message that asked for one.
        let mut buf = vec![0u8; RECV_BUFFER];
        let mut answered = 0;
        let mut first_error = None;
        while answered < acks {
            let n = recv(self.fd.as_raw_fd(), &mut buf, MsgFlags::empty())?;
            for (seq, code) in encode::errors(&buf[..n])? {
                if seq.wrapping_sub(first) >= span {
                    continue;
                }
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

    /// Reads whatever an earlier request left queued (answers lost to `ENOBUFS` leave the
    /// rest behind), without waiting.
    fn drain(&mut self) {
        let mut buf = vec![0u8; RECV_BUFFER];
        loop {
            match recv(self.fd.as_raw_fd(), &mut buf, MsgFlags::MSG_DONTWAIT) {
                // The error a lost answer left is read once; what is queued after it goes too.
                Ok(_) | Err(nix::errno::Errno::ENOBUFS) => {}
                // EAGAIN: nothing left.
                Err(_) => return,
            }
        }
    }
}
