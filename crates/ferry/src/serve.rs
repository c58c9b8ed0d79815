//! Small HTTP servers (axum on tokio): started on an address, stopped gracefully.
//!
//! Every one of them answers in JSON with upstream's headers ([`json_response`]).
//!
//! Used by the proxy health server, the metrics server and every service health-check NodePort
//! server. Stopping one closes its listener at once (so the port is free again) and lets
//! requests in flight finish; idle keep-alive connections are closed, so a load balancer that
//! keeps its connection open learns at once that the check is gone.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use axum::http::header::{HeaderName, CONTENT_TYPE};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Router;
use tokio::net::TcpListener;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

/// `X-Content-Type-Options`, sent with every health answer.
pub const NOSNIFF: (HeaderName, &str) =
    (HeaderName::from_static("x-content-type-options"), "nosniff");

/// A JSON answer with upstream's headers.
pub fn json_response(status: u16, body: String) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        status,
        [(CONTENT_TYPE, "application/json"), (NOSNIFF.0, NOSNIFF.1)],
        body,
    )
        .into_response()
}

/// How long [`Server::stop`] waits for requests in flight.
const STOP_GRACE: Duration = Duration::from_secs(2);
/// After a failed bind, [`keep_serving`] tries again this often (upstream: 5 s).
const REBIND_INTERVAL: Duration = Duration::from_secs(5);

/// A running server.
#[derive(Debug)]
pub struct Server {
    local_addr: SocketAddr,
    shutdown: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl Server {
    /// Binds `addr` and serves `router` on it. Fails only if the address cannot be bound.
    pub async fn start(name: &'static str, addr: SocketAddr, router: Router) -> io::Result<Self> {
        let listener = TcpListener::bind(addr).await?;
        let local_addr = listener.local_addr()?;
        let (shutdown, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let serve = axum::serve(listener, router).with_graceful_shutdown(async move {
                let _ = stopped.await;
            });
            if let Err(e) = serve.await {
                tracing::error!(server = name, address = %local_addr, "HTTP server failed: {e}");
            }
        });
        tracing::debug!(server = name, address = %local_addr, "serving");
        Ok(Self {
            local_addr,
            shutdown,
            task,
        })
    }

    /// The bound address (the real port when started on port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    /// Stops accepting, lets requests in flight finish (at most 2 s), then returns.
    pub async fn stop(self) {
        let _ = self.shutdown.send(());
        let mut task = self.task;
        if tokio::time::timeout(STOP_GRACE, &mut task).await.is_err() {
            task.abort();
        }
    }
}

/// Serves `router` on `addr` until `shutdown` turns true. If the address cannot be bound, logs
/// the error and tries again every 5 s, like kube-proxy (a busy port must not stop the proxy).
pub async fn keep_serving(
    name: &'static str,
    addr: SocketAddr,
    router: Router,
    mut shutdown: watch::Receiver<bool>,
) {
    loop {
        match Server::start(name, addr, router.clone()).await {
            Ok(server) => return serve_until(name, server, shutdown).await,
            Err(e) => {
                tracing::error!(
                    server = name,
                    address = %addr,
                    "cannot listen, retrying in {REBIND_INTERVAL:?}: {e}"
                );
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(REBIND_INTERVAL) => {}
            _ = shutdown.wait_for(|stop| *stop) => return,
        }
    }
}

/// Serves with `server` until `shutdown` turns true (kube-proxy's `bindAddressHardFail`: the
/// caller bound it, and a failure to was fatal).
pub async fn serve_until(name: &'static str, server: Server, mut shutdown: watch::Receiver<bool>) {
    tracing::info!(server = name, address = %server.local_addr(), "serving");
    let _ = shutdown.wait_for(|stop| *stop).await;
    server.stop().await;
}

/// Test helpers: a plain HTTP/1.1 client.
#[cfg(test)]
pub mod testing {
    use std::net::SocketAddr;
    use std::time::Duration;

    pub use ferry_lab::http::HttpResponse;

    /// `GET path` on `addr`, on a new connection.
    pub async fn get(addr: SocketAddr, path: &str) -> HttpResponse {
        let path = path.to_owned();
        tokio::task::spawn_blocking(move || {
            let mut conn = std::net::TcpStream::connect(addr).expect("connect");
            conn.set_read_timeout(Some(Duration::from_secs(10)))
                .expect("timeout");
            ferry_lab::http::get(&mut conn, &path).expect("GET")
        })
        .await
        .expect("client thread")
    }
}
