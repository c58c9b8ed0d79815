//! The API client's rate limit, as client-go's: a token bucket of `burst` tokens refilled at
//! `qps` per second (kube-proxy's `clientConnection.qps` / `burst`, `--kube-api-qps` /
//! `--kube-api-burst`, defaults 5 and 10). Each request takes one token when it starts; a
//! watch is one request however long it stays open, as in client-go. A `qps` of zero or less
//! means no limit (client-go's rule). A paged list is one request: kube-proxy 1.37 lists with
//! one streaming request per kind (client-go's watch-list), while Ferry reads its list in pages
//! of a few hundred objects (`continue=`), so the token a continuation page took is handed to
//! the next request (a list of any length costs two tokens: its first page's and the one its
//! pages pass on). Without that, 10 000 Services and their slices (300 pages) took 40 s to
//! list at the defaults. A tower layer on the client's stack, outside the observer, so that
//! `rest_client_request_duration_seconds` does not count the wait (as client-go's does not).

use std::future::Future;
use std::num::NonZeroU32;
use std::pin::Pin;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::task::{ready, Context, Poll};
use std::time::Duration;

use governor::clock::{Clock as _, DefaultClock};
use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use tower::{Layer, Service};

/// The rate: one token every `period`, at most `burst` saved up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ApiRate {
    period: Duration,
    burst: NonZeroU32,
}

impl ApiRate {
    /// client-go's limiter for `qps` and `burst`; `None` (no limit) when `qps` is not above
    /// zero. A `burst` below 1 is taken as 1.
    pub fn new(qps: f32, burst: i32) -> Option<Self> {
        if !(qps.is_finite() && qps > 0.0) {
            return None;
        }
        let period = Duration::from_secs_f64(1.0 / f64::from(qps));
        let burst = NonZeroU32::new(u32::try_from(burst).unwrap_or(0).max(1))?;
        Some(Self {
            period: period.max(Duration::from_nanos(1)),
            burst,
        })
    }
}

/// The layer; every service it wraps shares one bucket.
#[derive(Clone)]
pub struct ThrottleLayer {
    limiter: Option<Arc<DefaultDirectRateLimiter>>,
    /// Tokens continuation pages took, for the next requests to use.
    credit: Arc<AtomicU32>,
}

impl ThrottleLayer {
    /// A bucket of `rate`, or no limit (`None`).
    pub fn new(rate: Option<ApiRate>) -> Self {
        let limiter = rate.map(|r| {
            let quota = Quota::with_period(r.period)
                .expect("period above zero")
                .allow_burst(r.burst);
            Arc::new(RateLimiter::direct(quota))
        });
        Self {
            limiter,
            credit: Arc::new(AtomicU32::new(0)),
        }
    }
}

impl<S> Layer<S> for ThrottleLayer {
    type Service = Throttle<S>;

    fn layer(&self, inner: S) -> Throttle<S> {
        Throttle {
            inner,
            limiter: self.limiter.clone(),
            credit: self.credit.clone(),
            wait: None,
            permitted: false,
        }
    }
}

/// The wrapped service: ready once a token is taken and the inner service is ready.
pub struct Throttle<S> {
    inner: S,
    limiter: Option<Arc<DefaultDirectRateLimiter>>,
    credit: Arc<AtomicU32>,
    wait: Option<Pin<Box<tokio::time::Sleep>>>,
    /// A token was taken for the next call (kept while the inner service is not ready).
    permitted: bool,
}

impl<S, B> Service<http::Request<B>> for Throttle<S>
where
    S: Service<http::Request<B>>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        if let Some(limiter) = &self.limiter {
            while !self.permitted {
                let saved = self
                    .credit
                    .fetch_update(Ordering::AcqRel, Ordering::Acquire, |c| c.checked_sub(1));
                if saved.is_ok() {
                    self.permitted = true;
                    break;
                }
                if let Some(wait) = self.wait.as_mut() {
                    ready!(wait.as_mut().poll(cx));
                    self.wait = None;
                }
                match limiter.check() {
                    Ok(()) => self.permitted = true,
                    Err(not_until) => {
                        let delay = not_until.wait_time_from(DefaultClock::default().now());
                        self.wait = Some(Box::pin(tokio::time::sleep(delay)));
                    }
                }
            }
        }
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> S::Future {
        if self.limiter.is_some() && is_continuation(&req) {
            self.credit.fetch_add(1, Ordering::AcqRel);
        }
        self.permitted = false;
        self.inner.call(req)
    }
}

/// A list's next page (`continue=` in the query).
fn is_continuation<B>(req: &http::Request<B>) -> bool {
    req.uri()
        .query()
        .is_some_and(|q| q.split('&').any(|kv| kv.starts_with("continue=")))
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use futures::FutureExt as _;
    use tower::ServiceExt as _;

    use super::*;

    /// A service whose answers never come (a watch that stays open).
    fn watches() -> impl Service<http::Request<()>, Response = (), Error = Infallible> {
        tower::service_fn(|_| std::future::pending::<Result<(), Infallible>>())
    }

    fn get(uri: &str) -> http::Request<()> {
        http::Request::get(uri).body(()).expect("request")
    }

    #[test]
    fn no_limit_unless_qps_is_above_zero_and_burst_is_at_least_one() {
        assert_eq!(ApiRate::new(0.0, 10), None);
        assert_eq!(ApiRate::new(-1.0, 10), None);
        let rate = ApiRate::new(5.0, 0).expect("limited");
        assert_eq!(
            (rate.period, rate.burst.get()),
            (Duration::from_millis(200), 1)
        );
    }

    #[tokio::test]
    async fn a_burst_passes_at_once_then_requests_wait_for_tokens() {
        // One token an hour: after the burst, nothing is ready.
        let layer = ThrottleLayer::new(ApiRate::new(1.0 / 3600.0, 3));
        let mut service = layer.layer(watches());
        for _ in 0..3 {
            let ready = service.ready().now_or_never().expect("a token is there");
            // Each call is a watch that never ends: it still took one token only.
            drop(
                ready
                    .expect("ready")
                    .call(get("/api/v1/services?watch=true")),
            );
        }
        assert!(service.ready().now_or_never().is_none(), "bucket empty");
        // Another service on the same layer shares the bucket.
        let mut other = layer.layer(watches());
        assert!(other.ready().now_or_never().is_none(), "shared bucket");
    }

    #[tokio::test]
    async fn a_waiting_request_goes_once_a_token_is_refilled() {
        let mut service = ThrottleLayer::new(ApiRate::new(50.0, 1)).layer(watches());
        drop(
            service
                .ready()
                .await
                .expect("ready")
                .call(get("/api/v1/services?watch=true")),
        );
        assert!(service.ready().now_or_never().is_none(), "bucket empty");
        // The next token comes 20 ms later; waiting for it ends.
        drop(
            service
                .ready()
                .await
                .expect("ready")
                .call(get("/api/v1/services?watch=true")),
        );
    }

    #[tokio::test]
    async fn the_pages_of_a_list_take_one_token() {
        let layer = ThrottleLayer::new(ApiRate::new(1.0 / 3600.0, 2));
        let mut service = layer.layer(watches());
        // The first page takes a token, the second the other one (a token is taken before the
        // request is seen); each next page gets the one its previous took.
        let first = service
            .ready()
            .now_or_never()
            .expect("a token")
            .expect("ready");
        drop(first.call(get("/api/v1/services?limit=500")));
        for _ in 0..100 {
            let page = service
                .ready()
                .now_or_never()
                .expect("a page's token is handed on");
            drop(
                page.expect("ready")
                    .call(get("/api/v1/services?limit=500&continue=abc")),
            );
        }
        // The last page's token goes to the next request; the one after it waits.
        drop(
            service
                .ready()
                .now_or_never()
                .expect("handed on")
                .expect("ready")
                .call(get("/api/v1/nodes")),
        );
        assert!(service.ready().now_or_never().is_none(), "bucket empty");
    }

    #[tokio::test]
    async fn without_a_rate_nothing_waits() {
        let mut service = ThrottleLayer::new(None).layer(watches());
        for _ in 0..100 {
            let ready = service.ready().now_or_never().expect("unlimited");
            drop(
                ready
                    .expect("ready")
                    .call(get("/api/v1/services?watch=true")),
            );
        }
    }
}
