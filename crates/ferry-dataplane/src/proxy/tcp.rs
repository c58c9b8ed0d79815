//! TCP: accept, choose an endpoint, connect (the next endpoint when one fails), copy.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

use super::metrics::Counters;
use super::route::{endpoint_set, Listener};
use super::{sock, splice, CopyMode, PortState};

/// Dial timeouts of the successive attempts of one connection, each to the next endpoint in
/// turn: upstream's userspace proxier (`endpointDialTimeout`). A refused connection fails
/// at once; a silent endpoint costs its timeout, longer at each attempt. After the last, the
/// client's connection is reset.
pub(crate) const DIAL_TIMEOUTS: [Duration; 4] = [
    Duration::from_millis(250),
    Duration::from_millis(500),
    Duration::from_secs(1),
    Duration::from_secs(2),
];

/// Accepts connections until `stop` (the listener closes) or the service port goes away.
pub(crate) async fn serve(
    listener: Arc<TcpListener>,
    state: Arc<PortState>,
    kind: Listener,
    stop: CancellationToken,
) {
    loop {
        let accepted = tokio::select! {
            _ = stop.cancelled() => return,
            a = listener.accept() => a,
        };
        match accepted {
            Ok((client, peer)) => {
                let state = state.clone();
                tokio::spawn(async move {
                    let closed = state.closed.clone();
                    tokio::select! {
                        // The service port was removed: its connections close with it.
                        _ = closed.cancelled() => {}
                        _ = proxy(client, peer, &state, kind) => {}
                    }
                });
            }
            // Closed: the listening socket was shut down before the task saw the stop.
            Err(_) if stop.is_cancelled() => return,
            Err(e) => {
                tracing::warn!(service = %state.name, error = %e, "accept failed");
                // Out of file descriptors (or memory): give the connections time to end
                // rather than spinning on a listener that stays readable.
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// Proxies one accepted connection.
async fn proxy(mut client: TcpStream, peer: SocketAddr, state: &PortState, kind: Listener) {
    // Not translated (a localhost NodePort, or a direct connection): the listener's address.
    let dst = sock::original_dst(&client, state.family)
        .or_else(|| client.local_addr().ok())
        .unwrap_or(peer);
    let mut endpoint = match connect(state, kind, peer, dst).await {
        Ok(ep) => ep,
        Err(e) => {
            Counters::add(&state.counters.errors, 1);
            tracing::debug!(service = %state.name, client = %peer, error = %e, "not proxied");
            sock::reset_on_close(&client);
            return;
        }
    };
    let _ = endpoint.set_nodelay(true);
    let _active = state.counters.open();
    let copied = match state.copy {
        CopyMode::Splice => splice::copy_bidirectional(&client, &endpoint, &state.counters).await,
        CopyMode::Buffered => buffered(&mut client, &mut endpoint, &state.counters).await,
    };
    if let Err(e) = copied {
        Counters::add(&state.counters.errors, 1);
        tracing::debug!(service = %state.name, client = %peer, error = %e, "copy failed");
        sock::reset_on_close(&client);
        sock::reset_on_close(&endpoint);
    }
}

/// [`CopyMode::Buffered`]: tokio's copy (half-close kept too); bytes are counted at the end.
async fn buffered(client: &mut TcpStream, ep: &mut TcpStream, c: &Counters) -> io::Result<()> {
    let (up, down) = tokio::io::copy_bidirectional(client, ep).await?;
    Counters::add(&c.to_endpoint, up);
    Counters::add(&c.to_client, down);
    Ok(())
}

/// Connects to an endpoint of the set the connection's frontend and source call for,
/// trying the next endpoint when one does not answer (the session-affinity pin is then
/// replaced). Endpoint changes of a sync in between are seen by the next attempt.
async fn connect(
    state: &PortState,
    kind: Listener,
    peer: SocketAddr,
    dst: SocketAddr,
) -> io::Result<TcpStream> {
    let mut last = io::Error::new(io::ErrorKind::NotConnected, "no usable endpoint");
    for (attempt, timeout) in DIAL_TIMEOUTS.iter().enumerate() {
        let plan = state.plan();
        let near = state.sources().is_node_or_pod(&peer.ip());
        let Some(set) = endpoint_set(&plan, kind, &dst, near) else {
            return Err(last);
        };
        let repick = attempt > 0;
        let Some(ep) = state
            .balancer
            .pick(&plan, set, peer.ip(), repick, Instant::now())
        else {
            return Err(last);
        };
        match tokio::time::timeout(*timeout, TcpStream::connect(ep)).await {
            Ok(Ok(s)) => return Ok(s),
            Ok(Err(e)) => last = e,
            Err(_) => last = io::Error::new(io::ErrorKind::TimedOut, format!("{ep}: no answer")),
        }
        Counters::add(&state.counters.dial_failures, 1);
        tracing::debug!(service = %state.name, endpoint = %ep, error = %last, "dial failed");
    }
    Err(last)
}
