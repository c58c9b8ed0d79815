//! Every endpoint at once: listeners in the pods namespace that answer on every pod address.
//!
//! - [`TARGET_PORT`]: each connection gets one line, the address it was reached on, and is
//!   closed (who answered a new connection);
//! - [`STREAM_PORT`]: the same line, then every byte read is echoed back until the client
//!   closes (a long-lived stream, to see whether it survives what a drill does to Ferry).

use std::io::{Read as _, Write as _};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd as _;
use std::thread::JoinHandle;

use anyhow::Context as _;

pub use super::cluster::{STREAM_PORT, TARGET_PORT};

/// The running endpoint servers; stopped when dropped.
pub struct Endpoints {
    listeners: Vec<TcpListener>,
    threads: Vec<JoinHandle<()>>,
}

impl Endpoints {
    /// Listens on both ports inside namespace `ns`.
    pub fn start(ns: &str) -> anyhow::Result<Endpoints> {
        let mut e = Endpoints {
            listeners: Vec::new(),
            threads: Vec::new(),
        };
        for (port, stream) in [(TARGET_PORT, false), (STREAM_PORT, true)] {
            let listener = crate::netns::run_in(ns, || {
                TcpListener::bind(SocketAddr::from((Ipv4Addr::UNSPECIFIED, port)))
            })?
            .with_context(|| format!("listening on port {port} in {ns}"))?;
            let serving = listener.try_clone()?;
            e.threads.push(
                std::thread::Builder::new()
                    .name(format!("lab-endpoints-{port}"))
                    .spawn(move || serve(&serving, stream))?,
            );
            e.listeners.push(listener);
        }
        Ok(e)
    }
}

fn serve(listener: &TcpListener, stream: bool) {
    for conn in listener.incoming() {
        let Ok(mut conn) = conn else {
            // Shut down.
            return;
        };
        let Ok(local) = conn.local_addr() else {
            continue;
        };
        let _ = conn.write_all(format!("{}\n", local.ip()).as_bytes());
        if stream {
            let _ = std::thread::Builder::new()
                .name("lab-stream".into())
                .spawn(move || echo(&mut conn));
        }
        // One-shot: closed here, first, so the client never waits in TIME_WAIT.
    }
}

fn echo(conn: &mut TcpStream) {
    let mut buf = [0u8; 512];
    while let Ok(n) = conn.read(&mut buf) {
        if n == 0 || conn.write_all(&buf[..n]).is_err() {
            return;
        }
    }
}

impl Drop for Endpoints {
    fn drop(&mut self) {
        // Wakes the blocked accepts: they fail, and the threads end.
        for l in &self.listeners {
            let _ = nix::sys::socket::shutdown(l.as_raw_fd(), nix::sys::socket::Shutdown::Both);
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
