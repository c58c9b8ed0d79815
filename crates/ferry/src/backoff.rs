//! Retrying failed syncs without spinning (issue 15, phase 2): the retry interval starts at 1 s
//! and doubles up to `syncPeriod`, and the failure is logged when it starts, then at most once
//! per interval with how many failures were not logged, then once when it ends.
//!
//! Pure: the caller passes the clock. The sync loop (run.rs) adopts it once the mode seam
//! (issue 11) has landed.
#![allow(dead_code)]

use std::time::{Duration, Instant};

/// The retry interval after a first failure (upstream's retry interval).
pub const FIRST_RETRY: Duration = Duration::from_secs(1);

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
        let max = max.max(FIRST_RETRY);
        Self {
            max,
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

    /// Failures in a row so far.
    pub fn failures(&self) -> u32 {
        self.failures
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
mod tests {
    use super::*;

    #[test]
    fn retries_double_from_one_second_up_to_the_sync_period_and_reset() {
        let mut b = Backoff::new(Duration::from_secs(30));
        let waits: Vec<u64> = (0..7).map(|_| b.failed().as_secs()).collect();
        assert_eq!(waits, [1, 2, 4, 8, 16, 30, 30]);
        assert_eq!(b.succeeded(), 7);
        assert_eq!(b.failed(), FIRST_RETRY);
    }

    #[test]
    fn a_sync_period_under_a_second_still_waits_a_second() {
        let mut b = Backoff::new(Duration::from_millis(100));
        assert_eq!(b.failed(), FIRST_RETRY);
        assert_eq!(b.failed(), FIRST_RETRY);
    }

    #[test]
    fn a_repeating_failure_is_logged_once_per_interval_with_the_count_in_between() {
        let t0 = Instant::now();
        let mut log = RateLimitedLog::new(Duration::from_secs(60));
        assert_eq!(log.failure(t0), LogDecision::Log { suppressed: 0 });
        for s in 1..60 {
            assert_eq!(log.failure(t0 + Duration::from_secs(s)), LogDecision::Quiet);
        }
        assert_eq!(
            log.failure(t0 + Duration::from_secs(60)),
            LogDecision::Log { suppressed: 59 }
        );
        log.recovered();
        assert_eq!(
            log.failure(t0 + Duration::from_secs(61)),
            LogDecision::Log { suppressed: 0 }
        );
    }
}
