//! Real connections from the client namespace: who answers a ClusterIP, when a change shows,
//! how long a connection takes to set up. Every function must run on a thread inside the
//! client namespace (see [`super::net::Net::ensure_in_client`]), in a tokio runtime.

use std::io;
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::Duration;

use tokio::io::AsyncReadExt as _;
use tokio::net::TcpStream;
use tokio::task::JoinSet;
use tokio::time::{sleep, timeout, Instant};

/// How long one probe may take before it counts as unanswered.
const PROBE_TIMEOUT: Duration = Duration::from_millis(500);
/// The same while waiting for the first rules: an answered probe takes well under a
/// millisecond, and one that times out delays the figure by this much.
const FIRST_TIMEOUT: Duration = Duration::from_millis(20);
/// Pause between rounds while waiting for rules to appear.
const ROUND_PAUSE: Duration = Duration::from_millis(1);

/// Connects to `target`, reads the endpoint's line (the address it was reached on).
pub async fn ask(target: SocketAddrV4) -> io::Result<Ipv4Addr> {
    ask_within(target, PROBE_TIMEOUT).await
}

async fn ask_within(target: SocketAddrV4, limit: Duration) -> io::Result<Ipv4Addr> {
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

/// One ClusterIP to wait for, and the endpoints that may answer it.
#[derive(Debug, Clone)]
pub struct Expect {
    /// The ClusterIP and port.
    pub target: SocketAddrV4,
    /// Its endpoints.
    pub endpoints: Vec<Ipv4Addr>,
}

/// Probes every target in rounds until each has been answered by one of its endpoints, or
/// `deadline` passes; returns when each was first answered (`None`: never), measured from
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
            round.spawn(async move { (i, ask_within(target, FIRST_TIMEOUT).await) });
        }
        while let Some(Ok((i, reply))) = round.join_next().await {
            match reply {
                Ok(ip) if targets[i].endpoints.contains(&ip) => answered[i] = Some(start.elapsed()),
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
        inflight.spawn(ask(target));
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
        inflight.spawn(ask(target));
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
        inflight.spawn(ask(target));
        started += 1;
    }
    while let Some(done) = inflight.join_next().await {
        if matches!(done, Ok(Ok(ip)) if ip == endpoint) {
            return true;
        }
        if started < tries && Instant::now() < deadline {
            inflight.spawn(ask(target));
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
            round.spawn(ask(target));
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
