//! Proxy health, served on `healthzBindAddress` (`/healthz`, `/livez`), with upstream
//! kube-proxy's semantics (pkg/proxy/healthcheck/proxy_health.go):
//!
//! - the proxy is **healthy** unless a change has been queued for longer than the health
//!   timeout (2 × syncPeriod) without a successful sync since: a stuck or failing dataplane turns
//!   it unhealthy, an idle proxy stays healthy;
//! - `/livez` reports exactly that; `/healthz` is also unhealthy when this node is going away
//!   (its Node has a `deletionTimestamp` or the `ToBeDeletedByClusterAutoscaler` taint), so
//!   load balancers drain it first. With no Node object known the node counts as eligible.
//! - 200 or 503, `Content-Type: application/json`, `X-Content-Type-Options: nosniff`, and
//!   upstream's body: `{"lastUpdated": "…","currentTime": "…", "nodeEligible": true}` (no
//!   `nodeEligible` on `/livez`). Times are Go's `time.Time` text, in UTC; when healthy,
//!   `lastUpdated` is the current time, as upstream does for compatibility.
//!
//! Unlike upstream (whose per-family map only counts a family after its first successful
//! sync), a first sync that never succeeds also turns the proxy unhealthy after the timeout.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use axum::routing::any;
use axum::Router;
use tokio::time::Instant;

use ferry_model::Node;

use crate::metrics::Metrics;
use crate::serve::json_response;

#[derive(Debug)]
struct State {
    /// Wall-clock time of the last successful sync.
    last_updated: Option<SystemTime>,
    /// When the oldest change not yet synced was queued (monotonic, so tests can pause it).
    oldest_queued: Option<Instant>,
    node_eligible: bool,
}

/// The proxy's health; cheap to clone (shared).
#[derive(Debug, Clone)]
pub struct ProxyHealth {
    state: Arc<Mutex<State>>,
    timeout: Duration,
}

/// One answer of a health endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// 200 or 503.
    pub status: u16,
    /// The JSON body.
    pub body: String,
}

impl ProxyHealth {
    /// Healthy, node eligible, never synced; unhealthy once a change waits longer than
    /// `timeout`.
    pub fn new(timeout: Duration) -> Self {
        Self {
            state: Arc::new(Mutex::new(State {
                last_updated: None,
                oldest_queued: None,
                node_eligible: true,
            })),
            timeout,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A change arrived that needs a sync (upstream `QueuedUpdate`): starts the clock unless
    /// an older change is already waiting.
    pub fn queued_update(&self) {
        let mut s = self.lock();
        s.oldest_queued.get_or_insert_with(Instant::now);
    }

    /// A sync succeeded (upstream `Updated`): nothing is waiting any more.
    pub fn updated(&self) {
        let mut s = self.lock();
        s.oldest_queued = None;
        s.last_updated = Some(SystemTime::now());
    }

    /// This node's Node object changed (or is unknown: `None`).
    pub fn sync_node(&self, node: Option<&Node>) {
        self.lock().node_eligible = !node.is_some_and(Node::is_being_removed);
    }

    /// The proxy's own health, ignoring the node (what `/livez` and the health-check NodePorts
    /// report).
    pub fn is_healthy(&self) -> bool {
        let s = self.lock();
        s.oldest_queued
            .is_none_or(|queued| queued.elapsed() < self.timeout)
    }

    fn answer(&self, with_node: bool) -> Probe {
        let healthy = self.is_healthy();
        let (last_updated, node_eligible) = {
            let s = self.lock();
            (s.last_updated, s.node_eligible)
        };
        let now = SystemTime::now();
        let ok = healthy && (!with_node || node_eligible);
        let last = if ok { Some(now) } else { last_updated };
        let mut body = format!(
            r#"{{"lastUpdated": "{}","currentTime": "{}""#,
            go_time(last),
            go_time(Some(now))
        );
        if with_node {
            body.push_str(&format!(r#", "nodeEligible": {node_eligible}"#));
        }
        body.push('}');
        Probe {
            status: if ok { 200 } else { 503 },
            body,
        }
    }

    /// The `/healthz` answer.
    pub fn healthz(&self) -> Probe {
        self.answer(true)
    }

    /// The `/livez` answer.
    pub fn livez(&self) -> Probe {
        self.answer(false)
    }
}

/// Go's `time.Time.String()` in UTC (without the monotonic clock reading), as upstream's body
/// carries it: `2024-05-01 10:00:00.123456789 +0000 UTC`; never set is Go's zero time.
pub fn go_time(t: Option<SystemTime>) -> String {
    t.and_then(|t| jiff::Timestamp::try_from(t).ok())
        .map(|t| t.strftime("%Y-%m-%d %H:%M:%S%.f +0000 UTC").to_string())
        .unwrap_or_else(|| "0001-01-01 00:00:00 +0000 UTC".to_owned())
}

/// The health server: `/healthz` and `/livez` (any method, as upstream's ServeMux).
pub fn router(health: ProxyHealth, metrics: Metrics) -> Router {
    let (h, m) = (health.clone(), metrics.clone());
    Router::new()
        .route(
            "/healthz",
            any(move || {
                let p = h.healthz();
                m.healthz(p.status);
                async move { json_response(p.status, p.body) }
            }),
        )
        .route(
            "/livez",
            any(move || {
                let p = health.livez();
                metrics.livez(p.status);
                async move { json_response(p.status, p.body) }
            }),
        )
}

#[cfg(test)]
mod tests;
