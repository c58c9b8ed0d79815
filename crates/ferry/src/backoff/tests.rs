use super::*;

const SECOND: Duration = Duration::from_secs(1);

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

/// The input that made a failing proxy spin (≈5 500 log lines a second): minSyncPeriod under a
/// second, and a first full sync that keeps failing (the periodic round stays due).
#[test]
fn a_failing_first_sync_waits_for_the_back_off_whatever_is_due() {
    let t0 = Instant::now();
    let mut s = Schedule::new(t0, Duration::ZERO, 30 * SECOND);
    assert_eq!(s.due(t0), t0, "the first round is due at once");
    let mut now = t0;
    let mut waits = Vec::new();
    for _ in 0..7 {
        assert!(
            s.start(now),
            "every retry of the first sync is the periodic round"
        );
        let wait = s.failed(now);
        // A change arrives at once: it does not bring the retry forward.
        s.changed();
        assert_eq!(s.due(now), now + wait);
        waits.push(wait.as_secs());
        now += wait;
    }
    assert_eq!(waits, [1, 2, 4, 8, 16, 30, 30]);
    assert_eq!(s.succeeded(now, true), 7);
    assert_eq!(s.due(now), now + 30 * SECOND, "next: the periodic round");
}

#[test]
fn changes_wait_for_min_sync_period_after_the_last_round() {
    let t0 = Instant::now();
    let mut s = Schedule::new(t0, SECOND, 30 * SECOND);
    assert!(s.start(t0));
    assert_eq!(s.succeeded(t0, true), 0);
    let t1 = t0 + Duration::from_millis(200);
    s.changed();
    assert_eq!(s.due(t1), t0 + SECOND);
    let t2 = t0 + 2 * SECOND;
    assert_eq!(s.due(t2), t2, "already waited long enough");
    assert!(!s.start(t2), "a change alone is not the periodic round");
    let wait = s.failed(t2);
    assert_eq!(wait, SECOND);
    assert_eq!(s.succeeded(t2 + wait, false), 1);
    assert_eq!(
        s.failed(t2 + 2 * SECOND),
        SECOND,
        "the back-off starts over"
    );
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
