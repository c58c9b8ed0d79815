//! Running one probe over the network, as kubelet's `pkg/probe/{http,tcp,grpc}` do.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use ferry_model::HttpScheme;
use http_body_util::Empty;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::health_client::HealthClient;
use tonic_health::pb::HealthCheckRequest;

use super::threshold::Outcome;
use super::tls;
use super::Target;

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
                    Target::Http { .. } => self.http(target).await,
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

impl NetworkCheck {
    /// kubelet's HTTP probe: one `GET` on a fresh connection (`Connection: close`), `Host` from
    /// the headers or the target, `User-Agent: kube-probe/…` and `Accept: */*` unless the probe
    /// sets them; success is a status from 200 to 399. Certificates are not verified (HTTPS).
    async fn http(&self, target: &Target) -> Outcome {
        let Target::Http {
            scheme,
            host,
            path,
            headers,
            ..
        } = target
        else {
            return Outcome::Error("not an HTTP probe".into());
        };
        let authority = target.authority();
        let stream = match TcpStream::connect(&authority).await {
            Ok(s) => s,
            Err(e) => return Outcome::Failure(format!("{target}: dial tcp {authority}: {e}")),
        };
        let mut request = http::Request::get(&**path);
        let has = |name: &str| headers.iter().any(|(n, _)| n.eq_ignore_ascii_case(name));
        if !has("host") {
            request = request.header(http::header::HOST, &authority);
        }
        if !has("user-agent") {
            request = request.header(http::header::USER_AGENT, USER_AGENT);
        }
        if !has("accept") {
            request = request.header(http::header::ACCEPT, "*/*");
        }
        // An `Accept` header set to "" removes the default one (kubelet's rule).
        let wanted =
            |(n, v): &&(Box<str>, Box<str>)| !v.is_empty() || !n.eq_ignore_ascii_case("accept");
        for (name, value) in headers.iter().filter(wanted) {
            request = request.header(&**name, &**value);
        }
        let request = match request
            .header(http::header::CONNECTION, "close")
            .body(Empty::<Bytes>::new())
        {
            Ok(r) => r,
            Err(e) => return Outcome::Error(format!("{target}: bad request: {e}")),
        };
        let status = match scheme {
            HttpScheme::Http => exchange(TokioIo::new(stream), request).await,
            HttpScheme::Https => match tls::connect(&self.tls, host, stream).await {
                Ok(tls) => exchange(TokioIo::new(tls), request).await,
                Err(e) => return Outcome::Failure(format!("{target}: TLS handshake: {e}")),
            },
        };
        match status {
            Ok(code) if (200..400).contains(&code.as_u16()) => Outcome::Success,
            Ok(code) => Outcome::Failure(format!(
                "HTTP probe failed with statuscode: {}",
                code.as_u16()
            )),
            Err(e) => Outcome::Failure(format!("{target}: {e}")),
        }
    }
}

/// Sends one request on a new HTTP/1.1 connection; returns the response's status.
async fn exchange<IO>(
    io: IO,
    request: http::Request<Empty<Bytes>>,
) -> Result<http::StatusCode, hyper::Error>
where
    IO: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
{
    let (mut sender, connection) = hyper::client::conn::http1::handshake(io).await?;
    // The connection task ends with the exchange (the request says `Connection: close`) or
    // when the sender is dropped.
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(sender.send_request(request).await?.status())
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
