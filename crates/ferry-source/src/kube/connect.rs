//! Finding and reaching the API server: kubeconfig, `--master`, or the in-cluster service account.
//!
//! A configuration that cannot work (none found, a bad kubeconfig or `--master`, a client that
//! cannot be built) is an error at once: waiting would not fix it. An API server that does not
//! answer is waited for, as kube-proxy's informers do (kube-proxy never exits because the API
//! server is away): `GET /version` is tried again after 1 s, 2 s, 4 s … up to 30 s, with one
//! warning per failed attempt naming the URL, the reason and the delay before the next one.

use std::path::PathBuf;
use std::time::Duration;

use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::{Client, Config};

/// How long one attempt of [`connect`] waits for the API server to answer `GET /version`.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(10);
/// The delay after the first failed attempt; it doubles after each further one.
pub const FIRST_RETRY: Duration = Duration::from_secs(1);
/// The longest delay between two attempts (as the watches' back-off).
pub const MAX_RETRY: Duration = Duration::from_secs(30);

/// Where the API server is, as kube-proxy's `--kubeconfig` / `clientConnection.kubeconfig` and
/// `--master` say. Both unset: the in-cluster service account (`KUBERNETES_SERVICE_HOST`/`PORT`
/// and the token and CA mounted at `/var/run/secrets/kubernetes.io/serviceaccount`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Connection {
    /// A kubeconfig file (its current context is used).
    pub kubeconfig: Option<PathBuf>,
    /// The API server's URL; overrides the kubeconfig's server. Alone (no kubeconfig), it is
    /// used without credentials, like kube-proxy's `--master`.
    pub master: Option<String>,
    /// `clientConnection.qps` / `burst`: the client's token bucket (`None`: no limit).
    pub rate: Option<super::ApiRate>,
}

/// Why no API server could be used.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// Neither a kubeconfig nor `--master`, and not running in a pod.
    #[error(
        "no Kubernetes API server: not running in a pod ({0}); pass --kubeconfig or --master, \
         or --manifests to run from files"
    )]
    NoConfig(kube::config::InClusterError),
    /// The kubeconfig file cannot be read or used.
    #[error("--kubeconfig {}: {reason}", path.display())]
    Kubeconfig {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// `--master` is not a URL.
    #[error("--master {url:?}: not a URL: {reason}")]
    Master {
        /// The value given.
        url: String,
        /// The parser's complaint.
        reason: String,
    },
    /// The client could not be built (e.g. a bad TLS setting).
    #[error("cannot build a Kubernetes client for {url}")]
    Client {
        /// The API server's URL.
        url: String,
        /// What kube-rs reported.
        #[source]
        source: kube::Error,
    },
    /// The API server did not answer (one attempt; [`connect`] retries).
    #[error("cannot reach the Kubernetes API server at {url}: {reason}")]
    Unreachable {
        /// The API server's URL.
        url: String,
        /// What went wrong.
        reason: String,
    },
}

/// Builds a client and waits until the API server answers `GET /version` (each attempt at most
/// [`PROBE_TIMEOUT`], retried with [`retry_delays`]). Only a configuration error is returned;
/// an API server that stays away is waited for as long as it takes.
pub async fn connect(connection: &Connection) -> Result<Client, ConnectError> {
    connect_observed(connection, None).await
}

/// [`connect`], with each request the client makes reported to `observer` (the API server's
/// `host:port` as its host).
pub async fn connect_observed(
    connection: &Connection,
    observer: Option<super::RequestObserver>,
) -> Result<Client, ConnectError> {
    let config = config(connection).await?;
    let url = config.cluster_url.to_string();
    let host = config
        .cluster_url
        .authority()
        .map_or_else(|| url.clone(), ToString::to_string);
    let builder =
        kube::client::ClientBuilder::try_from(config).map_err(|source| ConnectError::Client {
            url: url.clone(),
            source,
        })?;
    // The bucket outside the observer: a request's duration does not count its wait.
    let throttle = super::ThrottleLayer::new(connection.rate);
    let client = match observer {
        Some(observer) => builder
            .with_layer(&super::ObserveLayer::new(host, observer))
            .with_layer(&throttle)
            .build(),
        None => builder.with_layer(&throttle).build(),
    };
    let mut delays = retry_delays();
    let mut attempt: u32 = 1;
    loop {
        match probe(&client, &url).await {
            Ok(version) => {
                tracing::info!(%url, %version, "connected to the Kubernetes API");
                return Ok(client);
            }
            Err(e) => {
                let delay = delays.next().unwrap_or(MAX_RETRY);
                tracing::warn!(
                    %url,
                    attempt,
                    retry_in = ?delay,
                    "{e}; trying again in {delay:?}"
                );
                tokio::time::sleep(delay).await;
                attempt = attempt.saturating_add(1);
            }
        }
    }
}

/// The delays between attempts: [`FIRST_RETRY`], doubling, capped at [`MAX_RETRY`], forever.
pub fn retry_delays() -> impl Iterator<Item = Duration> {
    std::iter::successors(Some(FIRST_RETRY), |d| Some((*d * 2).min(MAX_RETRY)))
}

/// One `GET /version`: the server's version, or why there is none.
async fn probe(client: &Client, url: &str) -> Result<String, ConnectError> {
    let unreachable = |reason: String| ConnectError::Unreachable {
        url: url.to_owned(),
        reason,
    };
    match tokio::time::timeout(PROBE_TIMEOUT, client.apiserver_version()).await {
        Ok(Ok(version)) => Ok(version.git_version),
        Ok(Err(e)) => Err(unreachable(error_chain(&e))),
        Err(_) => Err(unreachable(format!("no answer within {PROBE_TIMEOUT:?}"))),
    }
}

async fn config(connection: &Connection) -> Result<Config, ConnectError> {
    let master = connection
        .master
        .as_deref()
        .filter(|m| !m.is_empty())
        .map(|m| {
            m.parse::<http::Uri>().map_err(|e| ConnectError::Master {
                url: m.to_owned(),
                reason: e.to_string(),
            })
        })
        .transpose()?;
    let mut config = match (&connection.kubeconfig, &master) {
        (Some(path), _) => {
            let bad = |reason: String| ConnectError::Kubeconfig {
                path: path.clone(),
                reason,
            };
            let file = Kubeconfig::read_from(path).map_err(|e| bad(error_chain(&e)))?;
            Config::from_custom_kubeconfig(file, &KubeConfigOptions::default())
                .await
                .map_err(|e| bad(error_chain(&e)))?
        }
        (None, Some(url)) => Config::new(url.clone()),
        (None, None) => Config::incluster().map_err(ConnectError::NoConfig)?,
    };
    if let Some(url) = master {
        config.cluster_url = url;
    }
    Ok(config)
}

/// `error: cause: cause`, for errors whose causes are not in their message.
pub(super) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let more = s.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = s.source();
    }
    text
}
