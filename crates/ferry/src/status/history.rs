//! Each IP family's syncs so far, for `ferry status`: the last success (time, kind, duration),
//! the last full sync, and the failures since.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use ferry_dataplane::SyncKind;
use ferry_model::IpFamily;

use super::{FamilyStatus, KernelSummary, SyncRecord};

/// One family's sync attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attempt {
    /// The family.
    pub family: IpFamily,
    /// Its kind, or why it failed.
    pub result: Result<SyncKind, String>,
    /// How long it took.
    pub duration: Duration,
}

#[derive(Debug, Clone, Default)]
struct FamilyHistory {
    last_sync: Option<(SystemTime, SyncKind, Duration)>,
    last_full: Option<SystemTime>,
    failures: u32,
    last_error: Option<String>,
}

/// Every family's syncs so far.
#[derive(Debug, Clone, Default)]
pub struct History {
    families: BTreeMap<IpFamily, FamilyHistory>,
}

impl History {
    /// Records a round's attempts, which ended at `now`.
    pub fn record(&mut self, attempts: &[Attempt], now: SystemTime) {
        for a in attempts {
            let h = self.families.entry(a.family).or_default();
            match &a.result {
                Ok(kind) => {
                    h.last_sync = Some((now, *kind, a.duration));
                    if *kind == SyncKind::Full {
                        h.last_full = Some(now);
                    }
                    h.failures = 0;
                    h.last_error = None;
                }
                Err(e) => {
                    h.failures = h.failures.saturating_add(1);
                    h.last_error = Some(e.clone());
                }
            }
        }
    }

    /// What `ferry status` shows of `family` (the kernel summary is the caller's).
    pub(super) fn family(&self, family: IpFamily) -> FamilyStatus {
        let h = self.families.get(&family).cloned().unwrap_or_default();
        FamilyStatus {
            family: family.as_str().to_owned(),
            last_sync: h.last_sync.map(|(t, kind, d)| SyncRecord {
                time: rfc3339(t),
                kind: kind_name(kind).to_owned(),
                duration_ms: d.as_secs_f64() * 1e3,
            }),
            last_full_sync: h.last_full.map(rfc3339),
            failures: h.failures,
            last_error: h.last_error,
            kernel: KernelSummary {
                present: false,
                error: None,
                stray: Vec::new(),
            },
        }
    }
}

fn kind_name(kind: SyncKind) -> &'static str {
    match kind {
        SyncKind::Full => "full",
        SyncKind::Partial => "partial",
    }
}

/// `t` as RFC 3339, in UTC.
pub(crate) fn rfc3339(t: SystemTime) -> String {
    jiff::Timestamp::try_from(t)
        .map(|t| t.to_string())
        .unwrap_or_default()
}
