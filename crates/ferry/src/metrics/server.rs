//! The metrics server's routes.

use axum::http::header::CONTENT_TYPE;
use axum::routing::get;
use axum::Router;

use ferry_compile::mode::ProxyMode;

use super::{Metrics, CONTENT_TYPE_OPENMETRICS};

/// The metrics server, with what kube-proxy serves there: `/metrics`, `/proxyMode` (the running
/// mode), `/configz` (the effective configuration, see [`crate::configz`]) and `/healthz` (a
/// liveness ping of the server itself, `ok`, as component-base's `healthz.InstallHandler`; the
/// proxy's own health is on the health server).
pub fn router(metrics: Metrics, mode: ProxyMode) -> Router {
    Router::new()
        .route(
            "/metrics",
            get(move || {
                let metrics = metrics.clone();
                async move { ([(CONTENT_TYPE, CONTENT_TYPE_OPENMETRICS)], metrics.encode()) }
            }),
        )
        .route("/proxyMode", get(move || async move { mode.as_str() }))
        .route("/configz", get(|| async { configz() }))
        .route("/healthz", get(|| async { "ok" }))
        .route("/healthz/ping", get(|| async { "ok" }))
}

fn configz() -> axum::response::Response {
    use axum::response::IntoResponse as _;
    match crate::configz::published_body() {
        Some(body) => crate::serve::json_response(200, body.to_owned()),
        None => (
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "the configuration is not published yet",
        )
            .into_response(),
    }
}
