//! The Kubernetes API source: kube-rs watchers for Services, EndpointSlices, this node's Node
//! and ServiceCIDRs.
//!
//! Four `kube::runtime::watcher`s, like upstream kube-proxy's informers:
//! - Services and EndpointSlices cluster-wide, with kube-proxy's label selector
//!   ([`LABEL_SELECTOR`]: no slices or Services of headless Services, none handed to another
//!   proxy with `service.kubernetes.io/service-proxy-name`);
//! - this node's own Node, with the field selector `metadata.name=NODE` (its labels feed
//!   topology, its addresses the NodePorts);
//! - `networking.k8s.io/v1` ServiceCIDRs (nftables mode drops traffic to unallocated addresses
//!   inside them). This one is optional: the first sync does not wait for it, and an API server
//!   that does not serve them (`404`, before 1.33) or a ClusterRole without them (`403`) is
//!   said once and Ferry carries on without them (`optional`).
//!
//! Objects are parsed [`lean::Lean`] (without managed fields and the annotations Ferry does not
//! read: no copy of them is made) and listed in pages of [`LIST_PAGE_SIZE`], then converted
//! with [`crate::convert`], so a bad one is reported with the same
//! field-precise [`InvalidObject`] as in a manifest, and its last good version is kept
//! ([`state::State`]). Watch bookmarks are requested, so a watch that ends resumes from a recent
//! resourceVersion instead of relisting.
//!
//! Resilience comes from kube-rs's watcher: when the API server goes away, each watch retries
//! with back-off (kube-rs's default: 0.8 s doubling to 30 s, jittered) and resumes from its last
//! resourceVersion; on `410 Gone` it relists at once, without that back-off (`retry`, as
//! client-go's reflector), and the relist ends in a [`SourceEvent::Resync`] that drops objects
//! deleted meanwhile. Nothing is emitted while the server is away, so the
//! rules in the kernel stay as they are.
//!
//! ```no_run
//! use ferry_source::kube::{connect, Connection, KubeSource};
//!
//! # async fn example() -> Result<(), Box<dyn std::error::Error>> {
//! let client = connect(&Connection::default()).await?; // in-cluster service account
//! let (tx, mut rx) = tokio::sync::mpsc::channel(64);
//! tokio::spawn(KubeSource::new(client, "k8s-node2").run(tx, |_| {}));
//! let first = rx.recv().await; // a Resync, once every watch has listed once
//! # Ok(()) }
//! ```

use std::pin::Pin;
use std::time::Duration;

use ferry_model::{Object, ObjectKey, ServiceName};
use futures::stream::{select_all, Stream, StreamExt as _};
use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::discovery::v1 as discovery;
use k8s_openapi::api::networking::v1 as networking;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::runtime::utils::Backoff;
use kube::runtime::watcher;
use kube::{Api, Client};
use tokio::sync::mpsc;

use crate::{convert, InvalidObject, SourceEvent};

mod connect;
pub mod lean;
mod observe;
mod optional;
mod refusal;
mod retry;
pub mod state;
mod throttle;

pub use connect::{connect, connect_observed, retry_delays, ConnectError, Connection};
use lean::{Lean, ReadAnnotations};
pub use observe::{ObserveLayer, RequestObserver, RequestRecord};
use optional::Optional;
use retry::{is_desync, Fixed, Retry};
use state::{Change, Converted, Kind, State};
pub use throttle::{ApiRate, ThrottleLayer};

/// kube-proxy's informer label selector, for Services and EndpointSlices alike.
pub const LABEL_SELECTOR: &str =
    "!service.kubernetes.io/headless,!service.kubernetes.io/service-proxy-name";

/// Objects per list request. A page's response is held whole (twice while kube-rs reads it)
/// until its objects are parsed, so a page of large objects sets the source's peak memory;
/// kube-rs's default is 500. A smaller page costs more requests: 200 to list 10 000 Services
/// and their 10 000 EndpointSlices.
pub const LIST_PAGE_SIZE: u32 = 100;

/// Watches Services, EndpointSlices, one Node and ServiceCIDRs through the Kubernetes API.
pub struct KubeSource {
    client: Client,
    node_name: String,
    retry: Option<Duration>,
    wait_optional: bool,
}

impl KubeSource {
    /// A source for node `node_name`; nothing is requested until [`KubeSource::run`].
    pub fn new(client: Client, node_name: impl Into<String>) -> Self {
        Self {
            client,
            node_name: node_name.into(),
            retry: None,
            wait_optional: false,
        }
    }

    /// The first `Resync` also waits for ServiceCIDRs to list once (or be refused), for a
    /// one-shot read that must see them (`ferry explain`); the agent does not wait, as upstream
    /// does not.
    pub fn waiting_for_service_cidrs(mut self) -> Self {
        self.wait_optional = true;
        self
    }

    /// Retries after a fixed `interval` instead of kube-rs's exponential back-off (tests).
    pub fn with_retry_interval(mut self, interval: Duration) -> Self {
        self.retry = Some(interval);
        self
    }

    /// Watches until the receiver is dropped.
    ///
    /// The first event sent is a [`SourceEvent::Resync`] with every kind's objects, once every
    /// required watch has listed once (ServiceCIDRs are not waited for); then `Apply`/`Delete`
    /// per change, and a `Resync` after each relist. Every invalid object is logged with
    /// `tracing::warn!` and passed to `invalid` (for metrics); API errors are logged and
    /// retried, never returned.
    pub async fn run(self, tx: mpsc::Sender<SourceEvent>, mut invalid: impl FnMut(&InvalidObject)) {
        let mut events = select_all([
            self.watch::<core::Service>(Kind::Service, LABEL_SELECTOR, None),
            self.watch::<discovery::EndpointSlice>(Kind::EndpointSlice, LABEL_SELECTOR, None),
            self.watch::<core::Node>(
                Kind::Node,
                "",
                Some(&format!("metadata.name={}", self.node_name)),
            ),
            self.watch::<networking::ServiceCIDR>(Kind::ServiceCidr, "", None),
        ]);
        let mut optional = Optional::default();
        tracing::info!(node = %self.node_name, "watching the Kubernetes API");
        let mut state = match self.wait_optional {
            true => State::waiting_for_optional(),
            false => State::default(),
        };
        let mut report = |e: &InvalidObject| {
            tracing::warn!(error = %e, "invalid object from the API server");
            invalid(e);
        };
        loop {
            let next = tokio::select! {
                () = tx.closed() => return,
                next = events.next() => next,
            };
            let Some((kind, item)) = next else { return };
            let change = match item {
                Ok(change) => change,
                Err(e) if is_desync(&e) => {
                    tracing::warn!(?kind, error = %e, "Kubernetes API watch expired; relisting");
                    continue;
                }
                Err(e) if Optional::is_refusal(kind, refusal::code(&e)) => {
                    let code = refusal::code(&e).unwrap_or_default();
                    match optional.refused(kind, code) {
                        Some(why) => tracing::warn!(?kind, "{why}"),
                        None => tracing::debug!(?kind, error = %e, "still refused"),
                    }
                    let Some(first) = state.refused(kind) else {
                        continue;
                    };
                    if tx.send(first).await.is_err() {
                        return;
                    }
                    continue;
                }
                Err(e) => {
                    // The whole chain: kube-rs's message alone hides the I/O cause.
                    let error = connect::error_chain(&e);
                    match refusal::explain(kind, &e) {
                        Some(why) => tracing::warn!(
                            ?kind,
                            %error,
                            "Kubernetes API watch failed: {why}; retrying"
                        ),
                        None => {
                            tracing::warn!(?kind, %error, "Kubernetes API watch failed; retrying");
                        }
                    }
                    continue;
                }
            };
            if !kind.required() && change == Change::InitDone && optional.listed() {
                tracing::info!(?kind, "the Kubernetes API serves them now");
            }
            let was_ready = state.is_ready();
            let Some(event) = state.handle(kind, change, &mut report) else {
                continue;
            };
            if let SourceEvent::Resync(objects) = &event {
                let what = if was_ready { "relisted" } else { "listed" };
                tracing::info!(?kind, objects = objects.len(), "{what} the Kubernetes API");
            }
            if tx.send(event).await.is_err() {
                return;
            }
        }
    }

    /// One kind's watcher, its objects converted, tagged with the kind.
    fn watch<K>(&self, kind: Kind, labels: &str, fields: Option<&str>) -> KindStream
    where
        K: kube::Resource<DynamicType = ()>
            + Clone
            + serde::de::DeserializeOwned
            + std::fmt::Debug
            + Send
            + Sync
            + 'static,
        K: Convert + ReadAnnotations,
    {
        let api: Api<Lean<K>> = Api::all(self.client.clone());
        let mut config = watcher::Config::default().page_size(LIST_PAGE_SIZE);
        if !labels.is_empty() {
            config = config.labels(labels);
        }
        if let Some(fields) = fields {
            config = config.fields(fields);
        }
        let backoff: Box<dyn Backoff> = match self.retry {
            Some(interval) => Box::new(Fixed(interval)),
            None => Box::new(watcher::DefaultBackoff::default()),
        };
        Retry::new(watcher(api, config).boxed(), backoff)
            .map(move |item| (kind, item.map(to_change::<K>)))
            .boxed()
    }
}

type KindStream =
    Pin<Box<dyn Stream<Item = (Kind, Result<Change, watcher::Error>)> + Send + 'static>>;

fn to_change<K: Convert>(event: watcher::Event<Lean<K>>) -> Change {
    match event {
        watcher::Event::Apply(o) => Change::Apply(o.0.convert()),
        watcher::Event::Delete(o) => Change::Delete(o.0.convert().key),
        watcher::Event::Init => Change::Init,
        watcher::Event::InitApply(o) => Change::InitApply(o.0.convert()),
        watcher::Event::InitDone => Change::InitDone,
    }
}

/// A k8s-openapi object the source watches: converted with [`convert`].
trait Convert {
    fn convert(&self) -> Converted;
}

fn namespace_and_name(meta: &ObjectMeta) -> (String, String) {
    let namespace = meta
        .namespace
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| convert::DEFAULT_NAMESPACE.to_owned());
    (namespace, meta.name.clone().unwrap_or_default())
}

impl Convert for core::Service {
    fn convert(&self) -> Converted {
        let (namespace, name) = namespace_and_name(&self.metadata);
        Converted {
            key: ObjectKey::Service(ServiceName::new(namespace, name)),
            result: convert::service(self).map(|s| s.map(Object::from)),
        }
    }
}

impl ReadAnnotations for core::Service {
    const READ_ANNOTATIONS: &'static [&'static str] = &[];
}

impl Convert for discovery::EndpointSlice {
    fn convert(&self) -> Converted {
        let (namespace, name) = namespace_and_name(&self.metadata);
        Converted {
            key: ObjectKey::EndpointSlice { namespace, name },
            result: convert::endpoint_slice(self).map(|s| s.map(Object::from)),
        }
    }
}

impl ReadAnnotations for discovery::EndpointSlice {
    const READ_ANNOTATIONS: &'static [&'static str] = &[convert::ANNOTATION_TRIGGER_TIME];
}

impl ReadAnnotations for core::Node {
    const READ_ANNOTATIONS: &'static [&'static str] = &[];
}

impl Convert for core::Node {
    fn convert(&self) -> Converted {
        Converted {
            key: ObjectKey::Node(self.metadata.name.clone().unwrap_or_default()),
            result: convert::node(self).map(|n| Some(Object::from(n))),
        }
    }
}

impl ReadAnnotations for networking::ServiceCIDR {
    const READ_ANNOTATIONS: &'static [&'static str] = &[];
}

impl Convert for networking::ServiceCIDR {
    fn convert(&self) -> Converted {
        Converted {
            key: ObjectKey::ServiceCidr(self.metadata.name.clone().unwrap_or_default()),
            result: convert::service_cidr(self).map(|c| Some(Object::from(c))),
        }
    }
}

#[cfg(test)]
mod tests;
