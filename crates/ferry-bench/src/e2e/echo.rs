//! Every endpoint at once: one listener in the pods namespace that answers each connection with
//! the address it was reached on (one line), then closes it.

use std::io::Write as _;
use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::os::fd::AsRawFd as _;
use std::thread::JoinHandle;

use anyhow::Context as _;

/// The running endpoint server; stopped when dropped.
pub struct Endpoints {
    listener: TcpListener,
    thread: Option<JoinHandle<()>>,
}

impl Endpoints {
    /// Listens on `0.0.0.0:port` inside namespace `ns`.
    pub fn start(ns: &str, port: u16) -> anyhow::Result<Endpoints> {
        let listener = ferry_lab::netns::run_in(ns, || {
            TcpListener::bind(SocketAddr::from((Ipv4Addr::UNSPECIFIED, port)))
        })?
        .with_context(|| format!("listening on port {port} in {ns}"))?;
        let serving = listener.try_clone()?;
        let thread = std::thread::Builder::new()
            .name("bench-endpoints".into())
            .spawn(move || serve(&serving))?;
        Ok(Endpoints {
            listener,
            thread: Some(thread),
        })
    }
}

/// Accepts until the listener is shut down; a connection that fails is the client's business.
fn serve(listener: &TcpListener) {
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else {
            // Shut down (or out of file descriptors, which ends the benchmark's figures too).
            return;
        };
        if let Ok(local) = stream.local_addr() {
            let _ = stream.write_all(format!("{}\n", local.ip()).as_bytes());
        }
        // Closed here, first, so the client side never waits in TIME_WAIT.
    }
}

impl Drop for Endpoints {
    fn drop(&mut self) {
        // Wakes the blocked accept: it fails, and the thread ends.
        let _ =
            nix::sys::socket::shutdown(self.listener.as_raw_fd(), nix::sys::socket::Shutdown::Both);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
