//! Both ends of `/status`: the agent's route (it asks the agent's task, which owns the state,
//! and answers with its [`Status`] as JSON) and `ferry status` (fetches it and prints it).

use std::process::ExitCode;
use std::time::Duration;

use axum::routing::get;
use axum::Router;
use clap::{Args, ValueEnum};
use http_body_util::{BodyExt as _, Empty};
use hyper::body::Bytes;
use tokio::sync::{mpsc, oneshot};

use super::Status;

/// A request for the status: the agent's task answers on the channel.
pub type Request = oneshot::Sender<Status>;

/// How long `/status` waits for the agent's task (busy with a sync, or still starting).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a client waits for `/status`: a little longer than the agent may take to answer.
const FETCH_TIMEOUT: Duration = Duration::from_secs(35);

/// `/status` on the metrics server: asks the agent's task through `requests`.
pub fn router(requests: mpsc::Sender<Request>) -> Router {
    Router::new().route(
        "/status",
        get(move || {
            let requests = requests.clone();
            async move { answer(&requests).await }
        }),
    )
}

async fn answer(requests: &mpsc::Sender<Request>) -> axum::response::Response {
    let (tx, rx) = oneshot::channel();
    let asked = requests.send(tx).await.is_ok();
    let error = match tokio::time::timeout(ANSWER_TIMEOUT, rx).await {
        Ok(Ok(status)) if asked => {
            let body = serde_json::to_string(&status).unwrap_or_default();
            return crate::serve::json_response(200, body);
        }
        Ok(_) => "the agent is stopping".to_owned(),
        // The agent takes the request between syncs and reads the kernel back for it: a long
        // sync, or a large ruleset read back on a loaded node, can outlast the wait.
        Err(_) => format!(
            "the agent did not answer within {ANSWER_TIMEOUT:?}: busy (a long sync, or reading \
             a large ruleset back), or still starting; ask again"
        ),
    };
    crate::serve::json_response(503, serde_json::json!({ "error": error }).to_string())
}

/// `ferry status` flags.
#[derive(Debug, Clone, Args)]
pub struct StatusArgs {
    /// The agent's metrics server (its `metricsBindAddress`), HOST:PORT. Default: the
    /// `metricsBindAddress` of `--config`, else 127.0.0.1:10249.
    #[arg(long, value_name = "HOST:PORT")]
    pub address: Option<String>,
    /// The agent's configuration file (kube-proxy's format, or its ConfigMap): its
    /// `metricsBindAddress` says where to ask (an unspecified address is asked on loopback).
    #[arg(long, value_name = "FILE")]
    pub config: Option<std::path::PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub output: Format,
}

/// `ferry status --output`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// For people.
    Text,
    /// The agent's JSON, indented.
    Json,
}

/// `ferry status`: fetches `/status` from the agent at `--address` and prints it.
pub fn main(args: &StatusArgs) -> ExitCode {
    let address = match address(args) {
        Ok(address) => address,
        Err(e) => {
            eprintln!("ferry status: {e}");
            return ExitCode::from(crate::cli::exit::EXIT_USAGE);
        }
    };
    let text = fetch_body(&address).and_then(|body| render(&body, args.output));
    match text {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("ferry status: {address}: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Where the agent's metrics server listens: `--address`, else the `metricsBindAddress` of
/// `--config` (with kube-proxy's default), else kube-proxy's default, 127.0.0.1:10249.
fn address(args: &StatusArgs) -> Result<String, crate::config::ConfigError> {
    use crate::config::kube_proxy::defaults::{self, METRICS_PORT};
    if let Some(address) = &args.address {
        return Ok(address.clone());
    }
    let Some(path) = &args.config else {
        return Ok(format!("127.0.0.1:{METRICS_PORT}"));
    };
    let mut kp = crate::config::FileConfig::load(path)?.config;
    defaults::apply(&mut kp);
    let place = format!("{}: metricsBindAddress", path.display());
    let bound = crate::config::parse_bind_address(&place, &kp.metrics_bind_address, METRICS_PORT)?
        .ok_or_else(|| {
            crate::config::ConfigError::new(place, "the agent serves no metrics (port 0)")
        })?;
    let ip = if bound.ip().is_unspecified() {
        std::net::IpAddr::from([127, 0, 0, 1])
    } else {
        bound.ip()
    };
    Ok(std::net::SocketAddr::new(ip, bound.port()).to_string())
}

/// The status of the agent at `address` (HOST:PORT), fetched now.
pub fn fetch_status(address: &str) -> Result<Status, String> {
    let body = fetch_body(address)?;
    serde_json::from_str(&body).map_err(|e| format!("not a Ferry status: {e}"))
}

/// The body of `GET /status` when the agent answers 200.
fn fetch_body(address: &str) -> Result<String, String> {
    let fetched = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| e.to_string())
        .and_then(|rt| {
            rt.block_on(async {
                tokio::time::timeout(FETCH_TIMEOUT, fetch(address))
                    .await
                    .unwrap_or_else(|_| Err(format!("no answer within {FETCH_TIMEOUT:?}")))
            })
        });
    match fetched? {
        (200, body) => Ok(body),
        (code, body) => Err(format!("the agent answered {code}: {}", body.trim())),
    }
}

fn render(body: &str, output: Format) -> Result<String, String> {
    let bad = |e: serde_json::Error| format!("not a Ferry status: {e}");
    match output {
        Format::Json => {
            let v: serde_json::Value = serde_json::from_str(body).map_err(bad)?;
            Ok(serde_json::to_string_pretty(&v).map_err(bad)? + "\n")
        }
        Format::Text => Ok(super::text::render(
            &serde_json::from_str::<Status>(body).map_err(bad)?,
        )),
    }
}

/// `GET /status` over HTTP/1.1: the status code and body.
async fn fetch(address: &str) -> Result<(u16, String), String> {
    let stream = tokio::net::TcpStream::connect(address).await.map_err(|e| {
        format!("cannot connect ({e}): is `ferry run` running here with its metrics server there?")
    })?;
    let io = hyper_util::rt::TokioIo::new(stream);
    let (mut sender, conn) = hyper::client::conn::http1::handshake::<_, Empty<Bytes>>(io)
        .await
        .map_err(|e| e.to_string())?;
    tokio::spawn(conn);
    let request = hyper::Request::get("/status")
        .header(hyper::header::HOST, address)
        .body(Empty::new())
        .map_err(|e| e.to_string())?;
    let response = sender
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    let code = response.status().as_u16();
    let body = response
        .into_body()
        .collect()
        .await
        .map_err(|e| e.to_string())?
        .to_bytes();
    Ok((code, String::from_utf8_lossy(&body).into_owned()))
}

#[cfg(test)]
mod address_tests {
    use super::*;

    fn args(address: Option<&str>, config: Option<std::path::PathBuf>) -> StatusArgs {
        StatusArgs {
            address: address.map(str::to_owned),
            config,
            output: Format::Text,
        }
    }

    #[test]
    fn the_agents_config_file_says_where_to_ask() {
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("config.conf");
        std::fs::write(
            &file,
            "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n\
             metricsBindAddress: 0.0.0.0:10999\n",
        )
        .expect("write");
        assert_eq!(
            address(&args(None, Some(file.clone()))).expect("ok"),
            "127.0.0.1:10999"
        );
        assert_eq!(
            address(&args(Some("10.0.0.1:1"), Some(file))).expect("ok"),
            "10.0.0.1:1"
        );
        assert_eq!(address(&args(None, None)).expect("ok"), "127.0.0.1:10249");
    }
}
