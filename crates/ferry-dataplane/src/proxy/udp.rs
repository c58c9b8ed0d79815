//! UDP: one association per client (its own socket connected to the endpoint chosen for
//! the client's first datagram), ended after `udpIdleTimeout` without a datagram either way,
//! like upstream's userspace proxier. Replies leave the listener from the address the
//! client's datagrams arrived at, so conntrack turns them back into the service address the
//! client used (upstream's wildcard socket let the kernel pick the source, and clients such
//! as DNS resolvers dropped the replies).

use std::cell::RefCell;
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tokio::io::Interest;
use tokio::net::UdpSocket;
use tokio_util::sync::CancellationToken;

use super::metrics::Counters;
use super::route::{endpoint_set, Listener};
use super::sock::{self, Datagram};
use super::PortState;

/// A receive buffer per worker thread, used synchronously only: a UDP listener holds no
/// buffer of its own, however many services there are.
struct Scratch {
    data: Vec<u8>,
    cmsg: Vec<u8>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch {
        data: vec![0; 65536],
        cmsg: sock::cmsg_buffer(),
    });
}

/// One client's association.
struct Assoc {
    upstream: UdpSocket,
    /// The local address the client's datagrams arrived at.
    reply_from: Option<IpAddr>,
    /// Last datagram either way, in milliseconds since `epoch`.
    last: AtomicU64,
    epoch: Instant,
}

impl Assoc {
    fn touch(&self) {
        let ms = self.epoch.elapsed().as_millis();
        self.last
            .store(u64::try_from(ms).unwrap_or(u64::MAX), Ordering::Relaxed);
    }

    fn last_activity(&self) -> Instant {
        self.epoch + std::time::Duration::from_millis(self.last.load(Ordering::Relaxed))
    }
}

type Assocs = Arc<Mutex<HashMap<SocketAddr, Arc<Assoc>>>>;

/// One UDP listener: its socket, its associations and what ends them.
struct Server {
    sock: Arc<UdpSocket>,
    state: Arc<PortState>,
    kind: Listener,
    assocs: Assocs,
    stop: CancellationToken,
    /// The listener's port: the destination of a datagram that was not translated.
    port: u16,
}

/// Receives datagrams until `stop` (the listener closes, and its associations with it).
pub(crate) async fn serve(
    sock: UdpSocket,
    state: Arc<PortState>,
    kind: Listener,
    stop: CancellationToken,
) {
    let port = sock.local_addr().map_or(0, |a| a.port());
    let server = Server {
        port,
        sock: Arc::new(sock),
        state,
        kind,
        assocs: Arc::default(),
        stop,
    };
    loop {
        tokio::select! {
            _ = server.stop.cancelled() => return,
            r = server.sock.readable() => if r.is_err() { return },
        }
        // Everything queued, in one go, with this thread's buffer.
        SCRATCH.with(|s| {
            let mut s = s.borrow_mut();
            let Scratch { data, cmsg } = &mut *s;
            loop {
                let got = server.sock.try_io(Interest::READABLE, || {
                    sock::recv_datagram(&*server.sock, data, cmsg)
                });
                match got {
                    Ok(d) => server.forward(d, &data[..d.len]),
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(e) => {
                        tracing::debug!(service = %server.state.name, error = %e, "recv failed");
                        break;
                    }
                }
            }
        });
    }
}

impl Server {
    /// Sends a client's datagram on its association (created for its first one).
    fn forward(&self, d: Datagram, data: &[u8]) {
        let counters = &self.state.counters;
        let assoc = match self.association(&d) {
            Ok(a) => a,
            Err(e) => {
                Counters::add(&counters.errors, 1);
                tracing::debug!(service = %self.state.name, client = %d.client, error = %e, "not proxied");
                return;
            }
        };
        // Sent without waiting for (or tracking) write readiness, which a new socket does not
        // have yet: a full send buffer or an endpoint that went away loses the datagram, as
        // UDP allows, and the association ends on the endpoint's ICMP error.
        match socket2::SockRef::from(&assoc.upstream).send(data) {
            Ok(n) => Counters::add(&counters.to_endpoint, n as u64),
            Err(_) => Counters::add(&counters.errors, 1),
        }
        assoc.touch();
    }

    fn association(&self, d: &Datagram) -> io::Result<Arc<Assoc>> {
        let mut assocs = self.assocs.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(a) = assocs.get(&d.client) {
            return Ok(a.clone());
        }
        let state = &self.state;
        let plan = state.plan();
        let dst = d
            .original
            .or_else(|| d.local.map(|ip| SocketAddr::new(ip, self.port)));
        let dst = dst.unwrap_or(d.client);
        let near = state.sources().is_node_or_pod(&d.client.ip());
        let no_endpoint = || io::Error::new(io::ErrorKind::NotConnected, "no usable endpoint");
        let set = endpoint_set(&plan, self.kind, &dst, near).ok_or_else(no_endpoint)?;
        let ep = state
            .balancer
            .pick(&plan, set, d.client.ip(), false, Instant::now())
            .ok_or_else(no_endpoint)?;
        let bind: SocketAddr = match ep {
            SocketAddr::V4(_) => (std::net::Ipv4Addr::UNSPECIFIED, 0).into(),
            SocketAddr::V6(_) => (std::net::Ipv6Addr::UNSPECIFIED, 0).into(),
        };
        let std_sock = std::net::UdpSocket::bind(bind)?;
        std_sock.connect(ep)?;
        std_sock.set_nonblocking(true)?;
        let assoc = Arc::new(Assoc {
            upstream: UdpSocket::from_std(std_sock)?,
            reply_from: d.local,
            last: AtomicU64::new(0),
            epoch: Instant::now(),
        });
        assocs.insert(d.client, assoc.clone());
        tokio::spawn(replies(
            assoc.clone(),
            d.client,
            self.sock.clone(),
            state.clone(),
            self.assocs.clone(),
            self.stop.clone(),
        ));
        Ok(assoc)
    }
}

/// Relays an association's replies to its client until it has been idle for the timeout,
/// the endpoint refuses (ICMP), or the listener stops.
async fn replies(
    assoc: Arc<Assoc>,
    client: SocketAddr,
    listener: Arc<UdpSocket>,
    state: Arc<PortState>,
    assocs: Assocs,
    stop: CancellationToken,
) {
    let counters = &state.counters;
    let _active = counters.open();
    loop {
        let idle_at = tokio::time::Instant::from_std(assoc.last_activity() + state.udp_idle);
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep_until(idle_at) => {
                if assoc.last_activity().elapsed() >= state.udp_idle {
                    break;
                }
            }
            r = assoc.upstream.readable() => {
                if r.is_err() || !relay(&assoc, client, &listener, counters) {
                    break;
                }
            }
        }
    }
    let mut table = assocs.lock().unwrap_or_else(|e| e.into_inner());
    if table.get(&client).is_some_and(|a| Arc::ptr_eq(a, &assoc)) {
        table.remove(&client);
    }
}

/// Sends every queued reply to the client; false when the association must end.
fn relay(assoc: &Assoc, client: SocketAddr, listener: &UdpSocket, counters: &Counters) -> bool {
    SCRATCH.with(|s| {
        let data = &mut s.borrow_mut().data;
        loop {
            let n = match assoc.upstream.try_recv(data) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
                Err(_) => {
                    // ECONNREFUSED: the endpoint's ICMP port unreachable.
                    Counters::add(&counters.errors, 1);
                    return false;
                }
            };
            assoc.touch();
            // As for requests: a reply that does not fit the send buffer is lost.
            match sock::send_from(listener, &data[..n], assoc.reply_from, client) {
                Ok(m) => Counters::add(&counters.to_client, m as u64),
                Err(_) => Counters::add(&counters.errors, 1),
            }
        }
    })
}
