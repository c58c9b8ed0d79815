//! Running one probe over the network, as kubelet's `pkg/probe/{http,tcp,grpc}` do.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpStream;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;

use super::threshold::Outcome;
use super::{tls, Target};

/// The `User-Agent` of every probe. Applications commonly recognise kubelet's probes by the
/// `kube-probe/` prefix (and skip them in access logs), so Ferry's probes use it too.
pub const USER_AGENT: &str = "kube-probe/1.33";

/// A boxed future, so [`Check`] can be a trait object.
pub type CheckFuture<'a> = Pin<Box<dyn Future<Output = Outcome> + Send + 'a>>;

/// Runs probes. [`NetworkCheck`] is the real one; tests of the probe schedule use their own.
pub trait Check: Send + Sync + 'static {
    /// Runs one probe; gives up (a failure) after `timeout`.
    fn check<'a>(&'a self, target: &'a Target, timeout: Duration) -> CheckFuture<'a>;
}

/// Probes over the network from this node, with sockets of the process's own network
/// namespace.
#[derive(Debug, Clone)]
pub struct NetworkCheck {
    tls: Arc<rustls::ClientConfig>,
}

impl Default for NetworkCheck {
    fn default() -> Self {
        Self {
            tls: tls::insecure_client_config(),
        }
    }
}

impl Check for NetworkCheck {
    fn check<'a>(&'a self, target: &'a Target, timeout: Duration) -> CheckFuture<'a> {
        Box::pin(async move {
            let run = async {
                match target {
                    Target::Http { .. } => super::http::probe(&self.tls, target).await,
                    Target::Tcp { .. } => tcp(target).await,
                    Target::Grpc { service, .. } => grpc(target, service, timeout).await,
                }
            };
            match tokio::time::timeout(timeout, run).await {
                Ok(outcome) => outcome,
                Err(_) => Outcome::Failure(format!(
                    "{target}: no answer within {}s (timeoutSeconds)",
                    timeout.as_secs_f32()
                )),
            }
        })
    }
}

/// kubelet's TCP probe: success when the connection is accepted; it is closed at once.
async fn tcp(target: &Target) -> Outcome {
    let authority = target.authority();
    match TcpStream::connect(&authority).await {
        Ok(_) => Outcome::Success,
        Err(e) => Outcome::Failure(format!("dial tcp {authority}: {e}")),
    }
}

/// kubelet's gRPC probe: `grpc.health.v1.Health/Check` for `service` over plain-text HTTP/2;
/// success is `SERVING`.
async fn grpc(target: &Target, service: &str, timeout: Duration) -> Outcome {
    let authority = target.authority();
    let endpoint = tonic::transport::Endpoint::from_shared(format!("http://{authority}"))
        .and_then(|e| e.user_agent(USER_AGENT))
        .map(|e| e.connect_timeout(timeout).timeout(timeout));
    let endpoint = match endpoint {
        Ok(e) => e,
        Err(e) => return Outcome::Error(format!("{target}: {e}")),
    };
    let channel = match endpoint.connect().await {
        Ok(c) => c,
        Err(e) => {
            return Outcome::Failure(format!(
                "error: failed to connect service at {authority:?}: {e}"
            ))
        }
    };
    let request = HealthCheckRequest {
        service: service.to_owned(),
    };
    match HealthClient::new(channel).check(request).await {
        Ok(response) => match response.into_inner().status() {
            ServingStatus::Serving => Outcome::Success,
            other => Outcome::Failure(format!(
                "service unhealthy (responded with {:?})",
                other.as_str_name()
            )),
        },
        Err(status) if status.code() == tonic::Code::Unimplemented => Outcome::Failure(format!(
            "error: this server does not implement the grpc health protocol \
             (grpc.health.v1.Health): {}",
            status.message()
        )),
        Err(status) => Outcome::Failure(format!("error: health rpc probe failed: {status}")),
    }
}
