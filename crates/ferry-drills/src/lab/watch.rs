//! A steady stream of new connections from the client, recorded: when did the Services stop
//! answering, and for how long.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::probe::{ask, Expect, PROBE_TIMEOUT};

/// Connections to a few Services every `every`, from a thread in the client namespace.
pub struct Watch {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<anyhow::Result<Vec<Sample>>>>,
    start: Instant,
}

/// One round of connections: when it started (since the watch started) and whether every
/// Service answered from one of its endpoints.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    /// When the round started.
    pub at: Duration,
    /// Every connection answered.
    pub ok: bool,
    /// Connections that failed (or reached an address that is not an endpoint).
    pub failed: usize,
}

impl Watch {
    /// Starts watching `targets` from namespace `client`, one round every `every`.
    pub fn start(client: &str, targets: Vec<Expect>, every: Duration) -> Watch {
        let stop = Arc::new(AtomicBool::new(false));
        let start = Instant::now();
        let flag = stop.clone();
        let ns = client.to_owned();
        let thread = std::thread::spawn(move || {
            ferry_lab::netns::run_in(&ns, move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                Ok(rt.block_on(rounds(&targets, every, start, &flag)))
            })?
        });
        Watch {
            stop,
            thread: Some(thread),
            start,
        }
    }

    /// Time since the watch started (to mark when a fault was made).
    pub fn now(&self) -> Duration {
        self.start.elapsed()
    }

    /// Stops and returns the timeline.
    pub fn finish(mut self) -> anyhow::Result<Timeline> {
        self.stop.store(true, Ordering::Relaxed);
        let samples = match self.thread.take() {
            Some(t) => t
                .join()
                .map_err(|_| anyhow::anyhow!("watch thread panicked"))??,
            None => Vec::new(),
        };
        Ok(Timeline { samples })
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

async fn rounds(
    targets: &[Expect],
    every: Duration,
    start: Instant,
    stop: &AtomicBool,
) -> Vec<Sample> {
    let mut samples = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let at = start.elapsed();
        let mut failed = 0;
        for t in targets {
            let answered = ask(t.target, PROBE_TIMEOUT).await;
            if !matches!(answered, Ok(ip) if t.new.contains(&ip) || t.old.contains(&ip)) {
                failed += 1;
            }
        }
        samples.push(Sample {
            at,
            ok: failed == 0,
            failed,
        });
        tokio::time::sleep(every).await;
    }
    samples
}

/// What the watch saw.
#[derive(Debug, Clone, Default)]
pub struct Timeline {
    /// Every round, in order.
    pub samples: Vec<Sample>,
}

impl Timeline {
    /// The time without working Services from `from` to `to`: from the first failed round to
    /// the first good round after the last failed one (zero without a failure).
    pub fn outage(&self, from: Duration, to: Duration) -> Duration {
        let window: Vec<&Sample> = self
            .samples
            .iter()
            .filter(|s| s.at >= from && s.at < to)
            .collect();
        let Some(first) = window.iter().position(|s| !s.ok) else {
            return Duration::ZERO;
        };
        let last = window.iter().rposition(|s| !s.ok).unwrap_or(first);
        let back = window.get(last + 1).map_or(to, |s| s.at);
        back.saturating_sub(window[first].at)
    }

    /// Rounds that failed between `from` and `to`.
    pub fn failed(&self, from: Duration, to: Duration) -> usize {
        self.samples
            .iter()
            .filter(|s| s.at >= from && s.at < to && !s.ok)
            .count()
    }

    /// Connections made, and those that failed.
    pub fn connections(&self, per_round: usize) -> (usize, usize) {
        let failed = self.samples.iter().map(|s| s.failed).sum();
        (self.samples.len() * per_round, failed)
    }

    /// Rounds between `from` and `to`.
    pub fn rounds(&self, from: Duration, to: Duration) -> usize {
        self.samples
            .iter()
            .filter(|s| s.at >= from && s.at < to)
            .count()
    }
}
