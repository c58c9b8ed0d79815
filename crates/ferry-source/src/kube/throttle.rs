//! The API client's rate limit, as client-go's: a token bucket of `burst` tokens refilled at
//! `qps` per second (kube-proxy's `clientConnection.qps` / `burst`, `--kube-api-qps` /
//! `--kube-api-burst`, defaults 5 and 10). Each request takes one token when it starts; a
//! watch is one request however long it stays open, as in client-go. A `qps` of zero or less
//! means no limit (client-go's rule). A tower layer on the client's stack, outside the
//! observer, so that `rest_client_request_duration_seconds` does not count the wait (as
//! client-go's does not).

use std::future::Future;
use std::num::NonZeroU32;
use std::pin::Pin;
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
        Self { limiter }
    }
}

impl<S> Layer<S> for ThrottleLayer {
    type Service = Throttle<S>;

    fn layer(&self, inner: S) -> Throttle<S> {
        Throttle {
            inner,
            limiter: self.limiter.clone(),
            wait: None,
            permitted: false,
        }
    }
}

/// The wrapped service: ready once a token is taken and the inner service is ready.
pub struct Throttle<S> {
    inner: S,
    limiter: Option<Arc<DefaultDirectRateLimiter>>,
    wait: Option<Pin<Box<tokio::time::Sleep>>>,
    /// A token was taken for the next call (kept while the inner service is not ready).
    permitted: bool,
}

impl<S, Req> Service<Req> for Throttle<S>
where
    S: Service<Req>,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = S::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        if let Some(limiter) = &self.limiter {
            while !self.permitted {
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

    fn call(&mut self, req: Req) -> S::Future {
        self.permitted = false;
        self.inner.call(req)
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use futures::FutureExt as _;
    use tower::ServiceExt as _;

    use super::*;

    /// A service whose answers never come (a watch that stays open).
    fn watches() -> impl Service<(), Response = (), Error = Infallible> {
        tower::service_fn(|()| std::future::pending::<Result<(), Infallible>>())
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
            drop(ready.expect("ready").call(()));
        }
        assert!(service.ready().now_or_never().is_none(), "bucket empty");
        // Another service on the same layer shares the bucket.
        let mut other = layer.layer(watches());
        assert!(other.ready().now_or_never().is_none(), "shared bucket");
    }

    #[tokio::test]
    async fn a_waiting_request_goes_once_a_token_is_refilled() {
        let mut service = ThrottleLayer::new(ApiRate::new(50.0, 1)).layer(watches());
        drop(service.ready().await.expect("ready").call(()));
        assert!(service.ready().now_or_never().is_none(), "bucket empty");
        // The next token comes 20 ms later; waiting for it ends.
        drop(service.ready().await.expect("ready").call(()));
    }

    #[tokio::test]
    async fn without_a_rate_nothing_waits() {
        let mut service = ThrottleLayer::new(None).layer(watches());
        for _ in 0..100 {
            let ready = service.ready().now_or_never().expect("unlimited");
            drop(ready.expect("ready").call(()));
        }
    }
}
