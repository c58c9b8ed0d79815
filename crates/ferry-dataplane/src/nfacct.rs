//! nfacct counters (nfnetlink_acct): named packet and byte counters held by the kernel, per
//! network namespace, that iptables rules add to with `-m nfacct --nfacct-name NAME`. This
//! creates one, reads one, and lists them, over a `NETLINK_NETFILTER` socket
//! (`NFNL_SUBSYS_ACCT`); it never deletes one (a rule naming a counter holds it).
//!
//! A kernel without nfnetlink_acct answers a get with something else than "no such counter"
//! ([`NfacctError::is_not_found`]): the caller then knows it has no counters at all.

mod message;
#[cfg(test)]
mod tests;

use std::io;

use netlink_packet_core::{NLM_F_ACK, NLM_F_CREATE, NLM_F_DUMP, NLM_F_REQUEST};
use netlink_sys::{protocols::NETLINK_NETFILTER, Socket, SocketAddr as NetlinkAddr};

use message::{Answer, MSG_GET, MSG_NEW};

/// The longest name the kernel takes (`NFACCT_NAME_MAX` is 32 with the final NUL).
pub const NAME_MAX: usize = 31;

const ENOENT: i32 = 2;

/// One counter as the kernel holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counter {
    /// Its name.
    pub name: String,
    /// Packets counted.
    pub packets: u64,
    /// Bytes counted.
    pub bytes: u64,
}

/// Why an nfacct request failed. Each variant prints its cause and has no `source()`.
#[derive(Debug, thiserror::Error)]
pub enum NfacctError {
    /// The name is empty, longer than [`NAME_MAX`] bytes, or holds a NUL.
    #[error("nfacct counter name {0:?}: 1 to 31 bytes without NUL")]
    BadName(String),
    /// The netlink socket could not be opened or used.
    #[error("nfnetlink socket for nfacct counter {name:?}: {error}")]
    Socket {
        /// The counter asked about (empty: a listing).
        name: String,
        /// What the socket said.
        error: io::Error,
    },
    /// The kernel refused the request (`ENOENT`: no such counter).
    #[error("the kernel refused to {action} nfacct counter {name:?}: {error}")]
    Refused {
        /// What was asked: `create`, `read`, `list`.
        action: &'static str,
        /// The counter (empty: a listing).
        name: String,
        /// The kernel's error.
        error: io::Error,
    },
    /// The kernel answered something that is not a counter.
    #[error("unexpected answer about nfacct counter {0:?}")]
    Protocol(String),
}

impl NfacctError {
    /// The kernel has no counter of that name (and does have nfnetlink_acct).
    pub fn is_not_found(&self) -> bool {
        matches!(self, NfacctError::Refused { error, .. } if error.raw_os_error() == Some(ENOENT))
    }
}

/// A `NETLINK_NETFILTER` socket talking to nfnetlink_acct, in the network namespace of the
/// thread that opened it.
pub struct Nfacct {
    socket: Socket,
    seq: u32,
    buf: Vec<u8>,
}

/// Receive buffer: a counter is under 100 bytes; a dump's datagrams are at most a page or two.
const RECV_BUFFER: usize = 32 * 1024;

fn check_name(name: &str) -> Result<(), NfacctError> {
    if name.is_empty() || name.len() > NAME_MAX || name.contains('\0') {
        return Err(NfacctError::BadName(name.to_owned()));
    }
    Ok(())
}

impl Nfacct {
    /// Opens the socket in the calling thread's network namespace.
    pub fn open() -> Result<Self, NfacctError> {
        let socket_err = |error| NfacctError::Socket {
            name: String::new(),
            error,
        };
        let mut socket = Socket::new(NETLINK_NETFILTER).map_err(socket_err)?;
        socket.bind_auto().map_err(socket_err)?;
        socket
            .connect(&NetlinkAddr::new(0, 0))
            .map_err(socket_err)?;
        Ok(Self {
            socket,
            seq: 0,
            buf: vec![0; RECV_BUFFER],
        })
    }

    /// Creates counter `name` (at zero); `EBUSY` when it exists already.
    pub fn add(&mut self, name: &str) -> Result<(), NfacctError> {
        check_name(name)?;
        let flags = NLM_F_REQUEST | NLM_F_CREATE | NLM_F_ACK;
        self.exchange("create", name, MSG_NEW, flags).map(|_| ())
    }

    /// Counter `name`; [`NfacctError::is_not_found`] when there is none.
    pub fn get(&mut self, name: &str) -> Result<Counter, NfacctError> {
        check_name(name)?;
        let flags = NLM_F_REQUEST | NLM_F_ACK;
        let counters = self.exchange("read", name, MSG_GET, flags)?;
        counters
            .into_iter()
            .find(|c| c.name == name)
            .ok_or_else(|| NfacctError::Protocol(name.to_owned()))
    }

    /// Creates counter `name` unless it exists (its counts are kept).
    pub fn ensure(&mut self, name: &str) -> Result<(), NfacctError> {
        match self.get(name) {
            Ok(_) => Ok(()),
            Err(e) if e.is_not_found() => self.add(name),
            Err(e) => Err(e),
        }
    }

    /// Every counter of the namespace.
    pub fn list(&mut self) -> Result<Vec<Counter>, NfacctError> {
        self.exchange("list", "", MSG_GET, NLM_F_REQUEST | NLM_F_DUMP)
    }

    /// Sends one request about `name` (empty: all) and reads its answers up to the ack, the
    /// end of the dump, or the error.
    fn exchange(
        &mut self,
        action: &'static str,
        name: &str,
        command: u8,
        flags: u16,
    ) -> Result<Vec<Counter>, NfacctError> {
        let socket_err = |error| NfacctError::Socket {
            name: name.to_owned(),
            error,
        };
        self.seq = self.seq.wrapping_add(1);
        let named = (!name.is_empty()).then_some(name);
        let request = message::request(self.seq, command, flags, named);
        self.socket.send(&request, 0).map_err(socket_err)?;
        let mut counters = Vec::new();
        loop {
            let n = self
                .socket
                .recv(&mut &mut self.buf[..], 0)
                .map_err(socket_err)?;
            for answer in message::answers(&self.buf[..n.min(self.buf.len())], self.seq) {
                match answer {
                    Answer::Counter(c) => counters.push(c),
                    Answer::Done(None) => return Ok(counters),
                    Answer::Done(Some(errno)) => {
                        return Err(NfacctError::Refused {
                            action,
                            name: name.to_owned(),
                            error: io::Error::from_raw_os_error(errno),
                        })
                    }
                    Answer::Malformed => return Err(NfacctError::Protocol(name.to_owned())),
                    Answer::Other => {}
                }
            }
        }
    }
}
