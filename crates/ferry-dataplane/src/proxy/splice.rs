//! Copying a proxied TCP connection both ways with `splice(2)`: socket → pipe → socket, so
//! the bytes never enter user space, and no buffer is held per connection.
//!
//! A pipe is taken from a small per-thread pool when data arrives and given back once the
//! source has nothing more to read (the pipe is then empty): an idle connection holds two
//! sockets and nothing else, whatever it carried before, and a busy one reuses pipes instead
//! of creating them. Each direction ends on its own: end-of-file from one side is passed on
//! as `shutdown(SHUT_WR)` to the other (half-close), and the copy ends when both have.

use std::cell::RefCell;
use std::io;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use nix::fcntl::{splice, SpliceFFlags};
use tokio::io::Interest;
use tokio::net::TcpStream;

use super::metrics::Counters;
use super::sock;

/// The most a single `splice` moves; the pipe's capacity limits it further.
const CHUNK: usize = 1 << 20;
/// The capacity a pipe grows to (`F_SETPIPE_SZ`) once a transfer fills it: 1 MiB, Linux's
/// default `pipe-max-size`. Each wake-up of a bulk transfer then moves up to this much:
/// measured against 256 KiB pipes, the proxy's CPU per Gbit/s fell by about a third (median
/// 0.053 → 0.034–0.039 core). Pipes start at the kernel's default (64 KiB) and only those of
/// bulk transfers grow: the kernel counts a pipe's capacity against the user's
/// `pipe-user-pages-soft` (64 MiB) and, past it, gives an unprivileged process's new pipes
/// two pages. A pipe that cannot grow still works. Only pages holding data use memory, and a
/// pipe goes back to the pool empty, keeping its size.
const PIPE_SIZE: usize = 1024 * 1024;
/// Empty pipes kept per worker thread.
const POOL: usize = 32;

struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
    /// Its capacity, as the kernel reported it.
    size: usize,
}

thread_local! {
    static PIPES: RefCell<Vec<Pipe>> = const { RefCell::new(Vec::new()) };
}

impl Pipe {
    fn take() -> io::Result<Pipe> {
        if let Some(p) = PIPES.with(|p| p.borrow_mut().pop()) {
            return Ok(p);
        }
        let flags = nix::fcntl::OFlag::O_NONBLOCK | nix::fcntl::OFlag::O_CLOEXEC;
        let (read, write) = nix::unistd::pipe2(flags).map_err(io::Error::from)?;
        let size = nix::fcntl::fcntl(&write, nix::fcntl::FcntlArg::F_GETPIPE_SZ)
            .map_or(65536, |s| usize::try_from(s).unwrap_or(65536));
        Ok(Pipe { read, write, size })
    }

    /// Grows the pipe to [`PIPE_SIZE`] once a transfer filled it (`moved` bytes at once).
    fn grow_if_full(&mut self, moved: usize) {
        if moved < self.size || self.size >= PIPE_SIZE {
            return;
        }
        let want = i32::try_from(PIPE_SIZE).unwrap_or(i32::MAX);
        // Refused past the user's pipe-pages limit: the pipe keeps its size.
        if let Ok(size) = nix::fcntl::fcntl(&self.write, nix::fcntl::FcntlArg::F_SETPIPE_SZ(want)) {
            self.size = usize::try_from(size).unwrap_or(self.size);
        }
    }

    /// Returns an empty pipe to this thread's pool.
    fn give_back(self) {
        PIPES.with(|p| {
            let mut pool = p.borrow_mut();
            if pool.len() < POOL {
                pool.push(self);
            }
        });
    }
}

fn would_block(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::WouldBlock
}

fn flags() -> SpliceFFlags {
    SpliceFFlags::SPLICE_F_NONBLOCK | SpliceFFlags::SPLICE_F_MOVE
}

/// Moves `n` bytes from the pipe into `dst`.
async fn drain(pipe: &Pipe, dst: &TcpStream, mut n: usize, bytes: &AtomicU64) -> io::Result<()> {
    while n > 0 {
        dst.writable().await?;
        let moved = dst.try_io(Interest::WRITABLE, || {
            splice(&pipe.read, None, dst, None, n, flags()).map_err(io::Error::from)
        });
        match moved {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(m) => {
                n -= m;
                Counters::add(bytes, m as u64);
            }
            Err(e) if would_block(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// Copies `src` to `dst` until `src` ends, then half-closes `dst`, unless the other
/// direction has ended already (`ended`): both sockets close at once then, and closing sends
/// the FIN (one system call less per connection).
async fn one_way(
    src: &TcpStream,
    dst: &TcpStream,
    bytes: &AtomicU64,
    ended: &AtomicBool,
) -> io::Result<()> {
    loop {
        src.readable().await?;
        let mut pipe = Pipe::take()?;
        loop {
            let filled = src.try_io(Interest::READABLE, || {
                splice(src, None, &pipe.write, None, CHUNK, flags()).map_err(io::Error::from)
            });
            match filled {
                Ok(0) => {
                    pipe.give_back();
                    if !ended.swap(true, Ordering::AcqRel) {
                        // A peer that already went away cannot be half-closed: nothing to do.
                        let _ = sock::shutdown_write(dst);
                    }
                    return Ok(());
                }
                Ok(n) => {
                    drain(&pipe, dst, n, bytes).await?;
                    pipe.grow_if_full(n);
                }
                Err(e) if would_block(&e) => break,
                Err(e) => return Err(e),
            }
        }
        pipe.give_back();
    }
}

/// Copies both ways between the client and the endpoint until both directions have ended.
/// An error in either direction ends both (the caller resets the connections).
pub(crate) async fn copy_bidirectional(
    client: &TcpStream,
    endpoint: &TcpStream,
    counters: &Counters,
) -> io::Result<()> {
    let ended = AtomicBool::new(false);
    let up = one_way(client, endpoint, &counters.to_endpoint, &ended);
    let down = one_way(endpoint, client, &counters.to_client, &ended);
    tokio::try_join!(up, down).map(|_| ())
}
