//! Real connections from the client namespace: who answers a ClusterIP or NodePort, and which
//! rules a Service is served by. Every function must run on a thread inside the client
//! namespace (see [`super::net::Ns::block_on`]), in a tokio runtime.

use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::Duration;

use tokio::io::AsyncReadExt as _;
use tokio::net::TcpStream;
use tokio::task::JoinSet;
use tokio::time::timeout;

/// How long one probe may take before it counts as unanswered.
pub const PROBE_TIMEOUT: Duration = Duration::from_millis(500);

/// Connects to `target`, reads the endpoint's line (the address it was reached on).
pub async fn ask(target: SocketAddrV4, limit: Duration) -> io::Result<Ipv4Addr> {
    let exchange = async {
        let mut stream = TcpStream::connect(SocketAddr::V4(target)).await?;
        let mut reply = String::new();
        stream.read_to_string(&mut reply).await?;
        reply
            .trim()
            .parse::<Ipv4Addr>()
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, format!("{reply:?}: {e}")))
    };
    timeout(limit, exchange)
        .await
        .unwrap_or_else(|_| Err(io::ErrorKind::TimedOut.into()))
}

/// What a Service was served by, from several connections to it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Served {
    /// Every connection reached one of its old endpoints.
    Old,
    /// Every connection reached one of its new endpoints.
    New,
    /// No connection was answered.
    Nothing,
    /// Some connections were answered and some not, or by old and new endpoints alike: a
    /// broken state.
    Mixed,
    /// A connection reached an address that is none of its endpoints.
    Wrong,
}

/// A Service to probe: its address, and its endpoints before and after a change (equal when
/// it did not change).
#[derive(Debug, Clone)]
pub struct Expect {
    /// ClusterIP:port or node address:NodePort.
    pub target: SocketAddrV4,
    /// Endpoints before the change.
    pub old: Vec<Ipv4Addr>,
    /// Endpoints after it.
    pub new: Vec<Ipv4Addr>,
}

/// Asks each Service `asks` times (all at once, at most 64 connections in flight) and says
/// what served it.
pub async fn served(expect: &[Expect], asks: usize) -> Vec<Served> {
    let mut replies: Vec<Vec<io::Result<Ipv4Addr>>> = expect.iter().map(|_| Vec::new()).collect();
    let mut inflight: JoinSet<(usize, io::Result<Ipv4Addr>)> = JoinSet::new();
    let jobs = expect
        .iter()
        .enumerate()
        .flat_map(|(i, e)| std::iter::repeat_n((i, e.target), asks));
    for (i, target) in jobs {
        if inflight.len() >= 64 {
            if let Some(Ok((k, r))) = inflight.join_next().await {
                replies[k].push(r);
            }
        }
        inflight.spawn(async move { (i, ask(target, PROBE_TIMEOUT).await) });
    }
    while let Some(done) = inflight.join_next().await {
        if let Ok((k, r)) = done {
            replies[k].push(r);
        }
    }
    expect
        .iter()
        .zip(replies)
        .map(|(e, r)| verdict(e, &r))
        .collect()
}

fn verdict(e: &Expect, replies: &[io::Result<Ipv4Addr>]) -> Served {
    let answered: Vec<Ipv4Addr> = replies
        .iter()
        .filter_map(|r| r.as_ref().ok().copied())
        .collect();
    if answered.is_empty() {
        return Served::Nothing;
    }
    if answered
        .iter()
        .any(|a| !e.old.contains(a) && !e.new.contains(a))
    {
        return Served::Wrong;
    }
    if answered.len() < replies.len() {
        return Served::Mixed;
    }
    // An address in both sets (no change) counts for both.
    if answered.iter().all(|a| e.new.contains(a)) {
        Served::New
    } else if answered.iter().all(|a| e.old.contains(a)) {
        Served::Old
    } else {
        Served::Mixed
    }
}
