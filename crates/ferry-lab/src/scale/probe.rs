//! Real connections from the client namespace: who answers a ClusterIP or NodePort, when a
//! change shows, how long a connection takes to set up, and which rules a Service is served by.
//! Every function must run on a thread inside the client namespace (see
//! [`super::net::Net::ensure_in_client`], [`super::net::Netns::block_on`]), in a tokio runtime.

use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::Duration;

use tokio::io::AsyncReadExt as _;
use tokio::net::TcpStream;
use tokio::task::JoinSet;
use tokio::time::{sleep, timeout, Instant};

/// How long one probe may take before it counts as unanswered.
pub const PROBE_TIMEOUT: Duration = Duration::from_millis(500);
/// The same while waiting for the first rules: an answered probe takes well under a
/// millisecond, and one that times out delays the figure by this much.
const FIRST_TIMEOUT: Duration = Duration::from_millis(20);
/// Pause between rounds while waiting for rules to appear.
const ROUND_PAUSE: Duration = Duration::from_millis(1);

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

/// Probes every target in rounds until each has been answered by one of its endpoints, or
/// `deadline` passes; returns when each was first answered by one of its `new` endpoints (`None`: never), measured from
/// `start`. An answer from a wrong address counts as unanswered (and is counted in the second
/// value).
pub async fn first_answers(
    targets: &[Expect],
    start: Instant,
    deadline: Instant,
) -> (Vec<Option<Duration>>, usize) {
    let mut answered: Vec<Option<Duration>> = vec![None; targets.len()];
    let mut wrong = 0;
    while answered.iter().any(Option::is_none) && Instant::now() < deadline {
        let mut round = JoinSet::new();
        for (i, t) in targets
            .iter()
            .enumerate()
            .filter(|(i, _)| answered[*i].is_none())
        {
            let target = t.target;
            round.spawn(async move { (i, ask(target, FIRST_TIMEOUT).await) });
        }
        while let Some(Ok((i, reply))) = round.join_next().await {
            match reply {
                Ok(ip) if targets[i].new.contains(&ip) => answered[i] = Some(start.elapsed()),
                Ok(_) => wrong += 1,
                Err(_) => {}
            }
        }
        sleep(ROUND_PAUSE).await;
    }
    (answered, wrong)
}

/// Keeps `parallel` connections to `target` in flight until one lands on `endpoint`; returns
/// when that connection was answered, or `None` at `deadline`.
pub async fn until_lands(
    target: SocketAddrV4,
    endpoint: Ipv4Addr,
    parallel: usize,
    deadline: Instant,
) -> Option<Instant> {
    let mut inflight = JoinSet::new();
    for _ in 0..parallel {
        inflight.spawn(ask(target, PROBE_TIMEOUT));
    }
    while let Some(done) = inflight.join_next().await {
        if let Ok(Ok(ip)) = done {
            if ip == endpoint {
                return Some(Instant::now());
            }
        }
        if Instant::now() >= deadline {
            return None;
        }
        inflight.spawn(ask(target, PROBE_TIMEOUT));
    }
    None
}

/// Asks `target` up to `tries` times (`parallel` at a time) for `endpoint`: true once it
/// answered.
pub async fn reaches(target: SocketAddrV4, endpoint: Ipv4Addr, tries: usize) -> bool {
    let deadline = Instant::now() + PROBE_TIMEOUT * tries as u32;
    let mut inflight = JoinSet::new();
    let mut started = 0;
    while started < tries.min(4) {
        inflight.spawn(ask(target, PROBE_TIMEOUT));
        started += 1;
    }
    while let Some(done) = inflight.join_next().await {
        if matches!(done, Ok(Ok(ip)) if ip == endpoint) {
            return true;
        }
        if started < tries && Instant::now() < deadline {
            inflight.spawn(ask(target, PROBE_TIMEOUT));
            started += 1;
        }
    }
    false
}

/// Connection set-up time (connect until established) to each of `targets`, `rounds` times,
/// interleaved so that noise hits every target alike. Failed connections are left out.
pub async fn connect_times(targets: &[SocketAddrV4], rounds: usize) -> Vec<Vec<Duration>> {
    let mut times = vec![Vec::with_capacity(rounds); targets.len()];
    for _ in 0..rounds {
        for (i, target) in targets.iter().enumerate() {
            let t = Instant::now();
            let connected =
                timeout(PROBE_TIMEOUT, TcpStream::connect(SocketAddr::V4(*target))).await;
            if matches!(connected, Ok(Ok(_))) {
                times[i].push(t.elapsed());
            }
        }
    }
    times
}

/// Like [`until_lands`], paced: `burst` connections every `every`, so that many changes can be
/// followed at once without the probes taking over the machine.
pub async fn until_lands_paced(
    target: SocketAddrV4,
    endpoint: Ipv4Addr,
    burst: usize,
    every: Duration,
    deadline: Instant,
) -> Option<Instant> {
    loop {
        let mut round = JoinSet::new();
        for _ in 0..burst {
            round.spawn(ask(target, PROBE_TIMEOUT));
        }
        while let Some(done) = round.join_next().await {
            if matches!(done, Ok(Ok(ip)) if ip == endpoint) {
                return Some(Instant::now());
            }
        }
        if Instant::now() >= deadline {
            return None;
        }
        sleep(every).await;
    }
}
