//! When the next sync round is due ([`Schedule`]: upstream's bounded-frequency runner, with
//! back-off), and a failure log that does not flood ([`RateLimitedLog`]).
//!
//! A failed sync is retried after 1 s, then 2 s, 4 s … up to `syncPeriod` ([`Backoff`]), and
//! nothing else brings the retry forward: neither a change (a busy API server would otherwise
//! retry a failing kernel many times a second) nor the periodic round (due at once while the
//! first sync keeps failing). The failure is logged when it starts, then at most once
//! a minute with how many were not logged, and once when it ends.
//!
//! Pure: the caller passes the clock.

use std::time::Duration;

use tokio::time::Instant;

/// The retry interval after a first failure (upstream's retry interval).
pub const FIRST_RETRY: Duration = Duration::from_secs(1);

/// At most one failure line per this interval.
pub const FAILURE_LOG_INTERVAL: Duration = Duration::from_secs(60);

/// Retry intervals: 1 s, 2 s, 4 s … capped at `max` (the sync period).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Backoff {
    max: Duration,
    next: Duration,
    failures: u32,
}

impl Backoff {
    /// No failure yet; intervals capped at `max` (at least 1 s).
    pub fn new(max: Duration) -> Self {
        Self {
            max: max.max(FIRST_RETRY),
            next: FIRST_RETRY,
            failures: 0,
        }
    }

    /// A sync failed: how long to wait before the next try.
    pub fn failed(&mut self) -> Duration {
        let wait = self.next;
        self.failures = self.failures.saturating_add(1);
        self.next = (self.next * 2).min(self.max);
        wait
    }

    /// A sync succeeded: the next failure waits 1 s again. Returns how many failures there were
    /// in a row.
    pub fn succeeded(&mut self) -> u32 {
        self.next = FIRST_RETRY;
        std::mem::take(&mut self.failures)
    }
}

/// When the next sync round is due: the periodic round every `syncPeriod` (it checks the
/// rules are still in the kernel, see [`crate::sync`]), a change no sooner than
/// `minSyncPeriod` after the last round, and after a failure the back-off alone.
#[derive(Debug, Clone)]
pub struct Schedule {
    min_sync_period: Duration,
    sync_period: Duration,
    last_round: Option<Instant>,
    next_periodic: Instant,
    pending: bool,
    retry_at: Option<Instant>,
    backoff: Backoff,
}

impl Schedule {
    /// Nothing synced yet: the first round (periodic, and full) is due at once.
    pub fn new(now: Instant, min_sync_period: Duration, sync_period: Duration) -> Self {
        Self {
            min_sync_period,
            sync_period,
            last_round: None,
            next_periodic: now,
            pending: true,
            retry_at: None,
            backoff: Backoff::new(sync_period),
        }
    }

    /// A change is waiting for a round.
    pub fn changed(&mut self) {
        self.pending = true;
    }

    /// When the next round is due.
    pub fn due(&self, now: Instant) -> Instant {
        if let Some(retry) = self.retry_at {
            return retry;
        }
        let mut due = self.next_periodic;
        if self.pending {
            let earliest = self.last_round.map_or(now, |t| t + self.min_sync_period);
            due = due.min(earliest.max(now));
        }
        due
    }

    /// A round starts at `now`; true when it is the periodic one.
    pub fn start(&mut self, now: Instant) -> bool {
        self.last_round = Some(now);
        now >= self.next_periodic
    }

    /// The round failed at `now`: how long until it is retried.
    pub fn failed(&mut self, now: Instant) -> Duration {
        let wait = self.backoff.failed();
        self.retry_at = Some(now + wait);
        wait
    }

    /// The round that started at `started` succeeded (`periodic`: it was the periodic one).
    /// Returns how many rounds had failed in a row before it.
    pub fn succeeded(&mut self, started: Instant, periodic: bool) -> u32 {
        self.pending = false;
        self.retry_at = None;
        if periodic {
            self.next_periodic = started + self.sync_period;
        }
        self.backoff.succeeded()
    }
}

/// What to log for one event of a repeating failure.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogDecision {
    /// Log it; `suppressed` failures were not logged since the last line.
    Log {
        /// Failures not logged since the previous line.
        suppressed: u64,
    },
    /// Stay quiet.
    Quiet,
}

/// At most one line per `interval` for a repeating failure.
#[derive(Debug, Clone)]
pub struct RateLimitedLog {
    interval: Duration,
    last: Option<Instant>,
    suppressed: u64,
}

impl RateLimitedLog {
    /// At most one line per `interval`.
    pub fn new(interval: Duration) -> Self {
        Self {
            interval,
            last: None,
            suppressed: 0,
        }
    }

    /// A failure at `now`: log it or not.
    pub fn failure(&mut self, now: Instant) -> LogDecision {
        match self.last {
            Some(last) if now.duration_since(last) < self.interval => {
                self.suppressed += 1;
                LogDecision::Quiet
            }
            _ => {
                self.last = Some(now);
                LogDecision::Log {
                    suppressed: std::mem::take(&mut self.suppressed),
                }
            }
        }
    }

    /// The failure is over: the next one is logged at once.
    pub fn recovered(&mut self) {
        self.last = None;
        self.suppressed = 0;
    }
}

#[cfg(test)]
mod tests;
