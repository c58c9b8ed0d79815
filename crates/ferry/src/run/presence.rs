//! Whether `--manifests` PATH is still there. A PATH that disappears while Ferry runs (an
//! unmounted volume, a deleted directory) is far more likely an accident than the wish to
//! remove every Service: the manifest source keeps the last good objects, so the last good
//! rules stay; this says so when it happens, again every few minutes until PATH returns, in
//! `ferry status`, and once when it is back.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use crate::backoff::{LogDecision, RateLimitedLog};

/// How often the missing PATH is said again.
const REMINDER: Duration = Duration::from_secs(300);

/// The state of `--manifests` PATH.
#[derive(Debug)]
pub struct Presence {
    path: PathBuf,
    missing_since: Option<SystemTime>,
    log: RateLimitedLog,
}

impl Presence {
    /// PATH, present at start (the caller checked).
    pub fn new(path: PathBuf) -> Self {
        Self {
            path,
            missing_since: None,
            log: RateLimitedLog::new(REMINDER),
        }
    }

    /// Looks at PATH now; logs when it went missing (and then now and then), or came back.
    pub fn check(&mut self, now: Instant, services: usize) {
        let missing = !self.path.exists();
        match (self.missing_since.is_some(), missing) {
            (_, true) => {
                self.missing_since.get_or_insert_with(SystemTime::now);
                if let LogDecision::Log { .. } = self.log.failure(now) {
                    tracing::warn!(
                        path = %self.path.display(),
                        "{}",
                        self.problem_text(services)
                    );
                }
            }
            (true, false) => {
                self.missing_since = None;
                self.log.recovered();
                tracing::info!(path = %self.path.display(), "the manifests are back: reading them again");
            }
            (false, false) => {}
        }
    }

    fn problem_text(&self, services: usize) -> String {
        let since = self
            .missing_since
            .map(crate::status::history::rfc3339)
            .unwrap_or_default();
        format!(
            "--manifests {} is missing (since {since}): keeping the last good rules ({services} \
             Services) until it returns",
            self.path.display()
        )
    }

    /// What `ferry status` says about the source, when something is wrong.
    pub fn problem(&self, services: usize) -> Option<String> {
        self.missing_since.map(|_| self.problem_text(services))
    }
}
