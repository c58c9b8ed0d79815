//! Every request the client makes, reported once its answer (its status line and headers) or
//! its failure is in: what client-go counts as `rest_client_requests_total` (by code, method
//! and host) and `rest_client_request_duration_seconds` (by verb and host), which kube-proxy's
//! dashboards read. A tower layer on the client's stack; the caller keeps the metrics.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use http::{Request, Response};
use tower::{Layer, Service};

/// One request's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestRecord {
    /// `GET`, `POST`, …
    pub method: String,
    /// The API server, `host:port`.
    pub host: String,
    /// The HTTP status code, or `<error>` when no answer came (client-go's label).
    pub code: String,
    /// From the request's start until its answer's headers (a watch: until it is open).
    pub duration: Duration,
}

/// What is told of each request.
pub type RequestObserver = Arc<dyn Fn(&RequestRecord) + Send + Sync>;

/// The layer: wraps the client's service so that each request is reported.
#[derive(Clone)]
pub struct ObserveLayer {
    host: String,
    observer: RequestObserver,
}

impl ObserveLayer {
    /// Reports each request to `host` (the label) to `observer`.
    pub fn new(host: impl Into<String>, observer: RequestObserver) -> Self {
        Self {
            host: host.into(),
            observer,
        }
    }
}

impl<S> Layer<S> for ObserveLayer {
    type Service = Observe<S>;

    fn layer(&self, inner: S) -> Observe<S> {
        Observe {
            inner,
            layer: self.clone(),
        }
    }
}

/// The wrapped service.
pub struct Observe<S> {
    inner: S,
    layer: ObserveLayer,
}

type BoxFuture<T> = Pin<Box<dyn Future<Output = T> + Send>>;

impl<S, Req, Res> Service<Request<Req>> for Observe<S>
where
    S: Service<Request<Req>, Response = Response<Res>>,
    S::Future: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = BoxFuture<Result<Response<Res>, S::Error>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<Req>) -> Self::Future {
        let method = req.method().as_str().to_owned();
        let start = Instant::now();
        let answer = self.inner.call(req);
        let layer = self.layer.clone();
        Box::pin(async move {
            let result = answer.await;
            let code = match &result {
                Ok(response) => response.status().as_u16().to_string(),
                Err(_) => "<error>".to_owned(),
            };
            (layer.observer)(&RequestRecord {
                method,
                host: layer.host,
                code,
                duration: start.elapsed(),
            });
            result
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use tower::ServiceExt as _;

    fn recorder() -> (RequestObserver, Arc<Mutex<Vec<RequestRecord>>>) {
        let seen = Arc::new(Mutex::new(Vec::new()));
        let seen2 = seen.clone();
        let observer: RequestObserver =
            Arc::new(move |r| seen2.lock().expect("lock").push(r.clone()));
        (observer, seen)
    }

    #[tokio::test]
    async fn an_answer_is_reported_with_its_code_method_and_host() {
        let (observer, seen) = recorder();
        let inner = tower::service_fn(|_req: Request<()>| async {
            Ok::<_, std::convert::Infallible>(
                Response::builder().status(404).body(()).expect("response"),
            )
        });
        let service = ObserveLayer::new("10.1.1.200:6443", observer).layer(inner);
        let req = Request::post("/api/v1/namespaces")
            .body(())
            .expect("request");
        let response = service.oneshot(req).await.expect("answer");
        assert_eq!(response.status(), 404);
        let seen = seen.lock().expect("lock");
        assert_eq!(seen.len(), 1);
        assert_eq!(
            (
                seen[0].method.as_str(),
                seen[0].host.as_str(),
                seen[0].code.as_str()
            ),
            ("POST", "10.1.1.200:6443", "404")
        );
    }

    #[tokio::test]
    async fn a_failure_is_reported_as_client_gos_error_code() {
        let (observer, seen) = recorder();
        let inner =
            tower::service_fn(|_req: Request<()>| async { Err::<Response<()>, _>("refused") });
        let service = ObserveLayer::new("h:1", observer).layer(inner);
        let req = Request::get("/version").body(()).expect("request");
        assert!(service.oneshot(req).await.is_err());
        assert_eq!(seen.lock().expect("lock")[0].code, "<error>");
    }
}
