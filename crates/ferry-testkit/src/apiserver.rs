//! A fake Kubernetes API server: list and watch for Services, EndpointSlices, Nodes and
//! ServiceCIDRs over real HTTP (plain, no TLS), for driving the real kube-rs client.
//!
//! What it speaks, as the real API server does:
//! - `GET /api/v1/services`, `/apis/discovery.k8s.io/v1/endpointslices`, `/api/v1/nodes`,
//!   `/apis/networking.k8s.io/v1/servicecidrs` (all namespaces): a `…List` with
//!   `metadata.resourceVersion`, paged by `limit`/`continue`;
//!   equality-based `labelSelector` (`key`, `!key`, `key=value`, `key!=value`) and
//!   `fieldSelector` on `metadata.name`/`metadata.namespace`;
//! - the same with `watch=true`: one JSON event per line (`{"type":"ADDED","object":{…}}`),
//!   `ADDED`/`MODIFIED`/`DELETED` replayed from `resourceVersion` then live; an object
//!   entering or leaving the selector is `ADDED`/`DELETED`; `BOOKMARK`s when the client sent
//!   `allowWatchBookmarks=true` and the test calls [`FakeApiServer::bookmark`]; a watch from a
//!   resourceVersion older than the kept history ([`FakeApiServer::compact`]) gets an `ERROR`
//!   event carrying a `410 Expired` Status (as the real server does on a watch: HTTP 200, then
//!   the error event); `timeoutSeconds` ends the watch;
//! - `GET /version`; every other path is a `404` Status.
//!
//! Objects are the JSON `kubectl get -o json` shows (see [`crate::objects`]); the server sets
//! `metadata.resourceVersion` (one counter for all kinds, as etcd's revision), a `uid` if
//! missing, and `metadata.namespace` `default` if missing on namespaced kinds.
//!
//! Failures a test can cause: [`FakeApiServer::drop_watches`] ends every open watch cleanly (the
//! client re-watches from its last resourceVersion); [`FakeApiServer::set_down`] is an outage
//! (open connections are closed, new ones closed as soon as accepted);
//! [`FakeApiServer::compact`] forgets the history, so resuming watches get `410 Gone` and must
//! relist; [`FakeApiServer::refuse`] answers a resource's requests with `404` (an older server)
//! or `403` (RBAC without it).
//!
//! The server runs on its own thread and tokio runtime, so it serves sync and async tests
//! alike; every control method is synchronous. Dropping the handle stops it.
//!
//! ```no_run
//! use ferry_testkit::{objects, FakeApiServer};
//!
//! let server = FakeApiServer::start_local().expect("bind 127.0.0.1:0");
//! server.apply(objects::node("k8s-node2", "10.1.1.9", "192.168.169.128/26"));
//! println!("kube-rs: Config::new({:?})", server.url());
//! ```

use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::watch;

mod http;
mod selector;
mod store;

use http::Shared;
pub use store::Resource;

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// Binding or configuring the listening socket failed.
    #[error("fake apiserver: cannot listen")]
    Listen(#[source] std::io::Error),
    /// The server's thread or runtime could not be started.
    #[error("fake apiserver: cannot start its runtime")]
    Runtime(#[source] std::io::Error),
}

/// A running fake API server; stopped when dropped.
pub struct FakeApiServer {
    shared: Arc<Shared>,
    addr: std::net::SocketAddr,
    stop: watch::Sender<bool>,
    thread: Option<JoinHandle<()>>,
}

impl FakeApiServer {
    /// Starts on 127.0.0.1 with a free port.
    pub fn start_local() -> Result<FakeApiServer, StartError> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(StartError::Listen)?;
        FakeApiServer::start(listener)
    }

    /// Starts serving on `listener`, which may have been created in another network namespace
    /// (a socket stays in the namespace it was created in, whichever thread uses it).
    pub fn start(listener: std::net::TcpListener) -> Result<FakeApiServer, StartError> {
        listener.set_nonblocking(true).map_err(StartError::Listen)?;
        let addr = listener.local_addr().map_err(StartError::Listen)?;
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(StartError::Runtime)?;
        let shared = Arc::new(Shared {
            store: Default::default(),
            tick: watch::channel(0).0,
        });
        let (stop, stop_rx) = watch::channel(false);
        let server_shared = shared.clone();
        let thread = std::thread::Builder::new()
            .name("fake-apiserver".into())
            .spawn(move || {
                runtime.block_on(async move {
                    match tokio::net::TcpListener::from_std(listener) {
                        Ok(l) => http::serve(l, server_shared, stop_rx).await,
                        Err(e) => tracing::error!("fake apiserver: {e}"),
                    }
                });
            })
            .map_err(StartError::Runtime)?;
        Ok(FakeApiServer {
            shared,
            addr,
            stop,
            thread: Some(thread),
        })
    }

    /// `http://ADDR:PORT`, for kube-rs `Config::new` or ferry's `--master`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// The listening address.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }

    /// Creates or replaces an object (by kind, namespace and name); returns the
    /// resourceVersion after it (unchanged when the object is equal to the stored one). Panics on an object the fake cannot store (unsupported kind, no name):
    /// that is a bug in the test.
    pub fn apply(&self, object: Value) -> u64 {
        self.shared
            .change(|s| s.apply(object))
            .unwrap_or_else(|e| panic!("fake apiserver: {e}"))
    }

    /// Deletes an object; false if there was none. `namespace` is ignored for Nodes.
    pub fn delete(&self, kind: &str, namespace: &str, name: &str) -> bool {
        self.shared.change(|s| s.delete(kind, namespace, name))
    }

    /// Makes the stored objects exactly `objects`: applies each (an unchanged one is no event)
    /// and deletes every other object.
    pub fn replace_all(&self, objects: Vec<Value>) {
        let keep: Vec<(String, String, String)> = objects.iter().map(key_of).collect();
        self.shared.change(|s| {
            for (kind, ns, name) in s.keys() {
                if !keep
                    .iter()
                    .any(|k| *k == (kind.clone(), ns.clone(), name.clone()))
                {
                    s.delete(&kind, &ns, &name);
                }
            }
        });
        for object in objects {
            self.apply(object);
        }
    }

    /// The current resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.shared.lock().rv()
    }

    /// Forgets the event history: a watch resuming from any earlier resourceVersion gets
    /// `410 Gone`. Open watches go on.
    pub fn compact(&self) {
        self.shared.change(|s| s.compact());
    }

    /// Ends every open watch cleanly (the response ends, as when the API server's watch
    /// timeout passes or a load balancer closes a long connection).
    pub fn drop_watches(&self) {
        self.shared.change(|s| s.drops += 1);
    }

    /// Sends a `BOOKMARK` at the current resourceVersion on every open watch that allows them.
    pub fn bookmark(&self) {
        self.shared.change(|s| s.bookmarks += 1);
    }

    /// Starts (`true`) or ends an outage: while down, open connections are closed and new
    /// ones closed as soon as they are accepted.
    pub fn set_down(&self, down: bool) {
        self.shared.change(|s| {
            if down && !s.down {
                s.outages += 1;
            }
            s.down = down;
        });
    }

    /// Answers every request for `resource` with `code` (`404`: a server that does not serve
    /// it, `403`: an account without the right), or serves it again with `None`.
    pub fn refuse(&self, resource: Resource, code: Option<u16>) {
        self.shared.change(|s| match code {
            Some(code) => {
                s.refusals.insert(resource, code);
            }
            None => {
                s.refusals.remove(&resource);
            }
        });
    }

    /// Connections closed because the server was down.
    pub fn refused(&self) -> u64 {
        self.shared.lock().refused
    }

    /// `GET path?query` of every request served so far, in order.
    pub fn requests(&self) -> Vec<String> {
        self.shared.lock().requests.clone()
    }

    /// Polls the request log until `pred` holds (e.g. "three watches were opened"); panics
    /// after `timeout`, printing the log. Blocks the calling thread: from a tokio test, use
    /// the multi-threaded runtime.
    pub fn wait_for_requests(&self, timeout: Duration, pred: impl Fn(&[String]) -> bool) {
        let deadline = Instant::now() + timeout;
        loop {
            let log = self.requests();
            if pred(&log) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "fake apiserver: condition not met within {timeout:?}; requests:\n{}",
                log.join("\n")
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for FakeApiServer {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        // Ending the accept loop drops the runtime with it, which ends every connection.
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn key_of(object: &Value) -> (String, String, String) {
    let s = |p: &str| {
        object
            .pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
    };
    let kind = s("/kind");
    let ns = match (kind, s("/metadata/namespace")) {
        ("Node", _) => "",
        (_, "") => "default",
        (_, ns) => ns,
    };
    (
        kind.to_owned(),
        ns.to_owned(),
        s("/metadata/name").to_owned(),
    )
}
