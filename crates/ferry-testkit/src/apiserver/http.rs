//! HTTP: accepting connections, routing, list responses and streaming watches.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use bytes::Bytes;
use futures::stream;
use http::{Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::TokioIo;
use serde_json::{json, Value};
use tokio::net::TcpListener;
use tokio::sync::{mpsc, watch};

use super::selector::Selector;
use super::store::{bookmark, event, status, Resource, Since, Store};

type Body = BoxBody<Bytes, Infallible>;

/// State shared by the server's tasks and the test's handle.
pub struct Shared {
    /// The data and switches.
    pub store: Mutex<Store>,
    /// Bumped after every change to `store`, waking watches and connections.
    pub tick: watch::Sender<u64>,
}

impl Shared {
    /// Locks the store (a panicked holder only ever leaves a consistent store).
    pub fn lock(&self) -> MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Changes the store and wakes everyone waiting on it.
    pub fn change<R>(&self, f: impl FnOnce(&mut Store) -> R) -> R {
        let r = f(&mut self.lock());
        self.tick.send_modify(|t| *t += 1);
        r
    }
}

/// Accepts connections until `stop` fires.
pub async fn serve(listener: TcpListener, shared: Arc<Shared>, mut stop: watch::Receiver<bool>) {
    loop {
        let stream = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!("fake apiserver: accept failed: {e}");
                    continue;
                }
            },
            _ = stop.changed() => return,
        };
        // As kube-apiserver's (Go sets TCP_NODELAY on every connection): a watch event is a
        // small write, which Nagle's algorithm would hold back until the client acknowledged
        // the one before.
        let _ = stream.set_nodelay(true);
        if shared.lock().down {
            // An outage: the connection is closed at once, as by a dead server.
            shared.lock().refused += 1;
            drop(stream);
            continue;
        }
        let shared = shared.clone();
        tokio::spawn(async move {
            let mut ticks = shared.tick.subscribe();
            let outages = shared.lock().outages;
            let service = hyper::service::service_fn({
                let shared = shared.clone();
                move |req| {
                    let shared = shared.clone();
                    async move { Ok::<_, Infallible>(handle(&shared, req)) }
                }
            });
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service);
            tokio::select! {
                _ = conn => {}
                _ = ticks.wait_for(|_| shared.lock().outages != outages) => {}
            }
        });
    }
}

fn handle(shared: &Arc<Shared>, req: Request<Incoming>) -> Response<Body> {
    let path = req.uri().path().to_owned();
    let query: HashMap<String, String> = req
        .uri()
        .query()
        .map(|q| {
            q.split('&')
                .filter_map(|kv| kv.split_once('=').or(Some((kv, ""))))
                .filter(|(k, _)| !k.is_empty())
                .map(|(k, v)| (k.to_owned(), decode(v)))
                .collect()
        })
        .unwrap_or_default();
    // What the test has done so far, read with the request's logging: a test that sees the
    // request logged and then drops watches must see this watch end. (Read later, in the
    // watch's task, a drop made in between went unnoticed and the watch never ended.)
    let seen = {
        let mut s = shared.lock();
        s.requests.push(format!(
            "{} {}",
            req.method(),
            req.uri().path_and_query().map(|p| p.as_str()).unwrap_or("")
        ));
        Seen {
            drops: s.drops,
            outages: s.outages,
            bookmarks: s.bookmarks,
        }
    };
    if shared.lock().down {
        // A request that slipped in on a connection the outage has not closed yet.
        let s = status(503, "ServiceUnavailable", "the fake apiserver is down");
        return json_response(StatusCode::SERVICE_UNAVAILABLE, &s);
    }
    if req.method() != http::Method::GET {
        return json_response(
            StatusCode::METHOD_NOT_ALLOWED,
            &status(405, "MethodNotAllowed", "the fake serves GET only"),
        );
    }
    if path == "/version" {
        let version = json!({
            "major": "1", "minor": "33", "gitVersion": "v1.33.0-ferry-fake",
            "gitCommit": "", "gitTreeState": "clean", "buildDate": "",
            "goVersion": "", "compiler": "", "platform": "linux/amd64",
        });
        return json_response(StatusCode::OK, &version);
    }
    let Some(resource) = Resource::from_path(&path) else {
        let message = format!("the server could not find the requested resource {path}");
        return json_response(StatusCode::NOT_FOUND, &status(404, "NotFound", &message));
    };
    if let Some(code) = shared.lock().refusals.get(&resource).copied() {
        let (http, reason) = match code {
            403 => (StatusCode::FORBIDDEN, "Forbidden"),
            _ => (StatusCode::NOT_FOUND, "NotFound"),
        };
        let message = format!("{reason}: {path} (refused by the test)");
        return json_response(http, &status(code, reason, &message));
    }
    let selector = match Selector::parse(
        query.get("labelSelector").map(String::as_str),
        query.get("fieldSelector").map(String::as_str),
    ) {
        Ok(s) => s,
        Err(m) => return json_response(StatusCode::BAD_REQUEST, &status(400, "BadRequest", &m)),
    };
    let is_watch = matches!(query.get("watch").map(String::as_str), Some("true" | "1"));
    if is_watch {
        watch_response(shared.clone(), resource, selector, &query, seen)
    } else {
        list_response(&shared.lock(), resource, &selector, &query)
    }
}

/// A list, paged by `limit` and `continue` (the token is `<resourceVersion>:<namespace>/<name>`
/// of the page's last object; pages after the first are read from the current state, not a
/// snapshot).
fn list_response(
    store: &Store,
    resource: Resource,
    selector: &Selector,
    query: &HashMap<String, String>,
) -> Response<Body> {
    let (rv, after) = match query.get("continue").filter(|c| !c.is_empty()) {
        None => (store.rv(), None),
        Some(token) => match token.split_once(':').and_then(|(rv, key)| {
            let (namespace, name) = key.split_once('/')?;
            Some((rv.parse().ok()?, Some((namespace.into(), name.into()))))
        }) {
            Some(parsed) => parsed,
            None => {
                let s = status(400, "BadRequest", "invalid continue token");
                return json_response(StatusCode::BAD_REQUEST, &s);
            }
        },
    };
    let limit = query
        .get("limit")
        .and_then(|l| l.parse::<usize>().ok())
        .filter(|l| *l > 0)
        .unwrap_or(usize::MAX);
    let (page, next) = store.list_page(resource, selector, after, limit);
    let mut metadata = json!({ "resourceVersion": rv.to_string() });
    if let Some((namespace, name)) = next {
        metadata["continue"] = json!(format!("{rv}:{namespace}/{name}"));
    }
    // Written item by item from the store: a page of 500 objects copied into one `Value`
    // first took the fake server most of a large list's time (it shares the machine's
    // cores with the proxy under test).
    let envelope = json!({
        "kind": format!("{}List", resource.kind()),
        "apiVersion": resource.api_version(),
        "metadata": metadata,
    });
    let mut text = envelope.to_string().into_bytes();
    text.pop(); // the closing brace: the items come before it.
    text.extend_from_slice(b",\"items\":[");
    for (i, item) in page.into_iter().enumerate() {
        if i > 0 {
            text.push(b',');
        }
        serde_json::to_writer(&mut text, item).expect("a JSON value serializes");
    }
    text.extend_from_slice(b"]}\n");
    bytes_response(StatusCode::OK, Bytes::from(text))
}

/// A watch: one JSON event per line, streamed until the client goes away, the test drops
/// watches or takes the server down, or `timeoutSeconds` passes.
fn watch_response(
    shared: Arc<Shared>,
    resource: Resource,
    selector: Selector,
    query: &HashMap<String, String>,
    seen: Seen,
) -> Response<Body> {
    let from = query
        .get("resourceVersion")
        .and_then(|rv| rv.parse::<u64>().ok())
        .filter(|rv| *rv != 0);
    let bookmarks = query.get("allowWatchBookmarks").map(String::as_str) == Some("true");
    let timeout = query
        .get("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .map(Duration::from_secs);
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    tokio::spawn(async move {
        let run = stream_events(&shared, resource, &selector, from, bookmarks, seen, &tx);
        match timeout {
            Some(t) => {
                let _ = tokio::time::timeout(t, run).await;
            }
            None => run.await,
        }
    });
    let body = stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok(Frame::data(b)), rx))
    });
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "application/json")
        .body(BodyExt::boxed(StreamBody::new(body)))
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new()).boxed()))
}

/// The test's drops, outages and bookmarks counted when a request came in.
#[derive(Debug, Clone, Copy)]
struct Seen {
    drops: u64,
    outages: u64,
    bookmarks: u64,
}

async fn stream_events(
    shared: &Shared,
    resource: Resource,
    selector: &Selector,
    mut from: Option<u64>,
    allow_bookmarks: bool,
    seen: Seen,
    tx: &mpsc::Sender<Bytes>,
) {
    let mut ticks = shared.tick.subscribe();
    let Seen {
        drops,
        outages,
        mut bookmarks,
    } = seen;
    let mut starting = true;
    loop {
        // Everything that happened before a drop is still sent, in order, then the watch
        // ends: a test that bookmarks and then drops knows the client saw the bookmark.
        let step = {
            let s = shared.lock();
            if s.outages != outages {
                None
            } else {
                match s.since(resource, selector, from, starting) {
                    Since::Gone(rv) => {
                        let message = format!("too old resource version: {rv} ({})", s.rv());
                        Some((vec![event("ERROR", status(410, "Expired", &message))], true))
                    }
                    Since::Events(mut lines, reached) => {
                        from = Some(reached);
                        starting = false;
                        if s.bookmarks != bookmarks {
                            bookmarks = s.bookmarks;
                            if allow_bookmarks {
                                lines.push(bookmark(resource, s.rv()));
                            }
                        }
                        Some((lines, s.drops != drops))
                    }
                }
            }
        };
        let Some((lines, end)) = step else {
            // An outage cuts the connection (the connection's task does that): nothing more
            // gets through, not even a clean end of this response.
            tx.closed().await;
            return;
        };
        for l in &lines {
            if tx.send(line(l)).await.is_err() {
                return;
            }
        }
        if end {
            return;
        }
        tokio::select! {
            changed = ticks.changed() => if changed.is_err() { return },
            () = tx.closed() => return,
        }
    }
}

fn line(value: &Value) -> Bytes {
    let mut text = value.to_string();
    text.push('\n');
    Bytes::from(text)
}

fn json_response(code: StatusCode, value: &Value) -> Response<Body> {
    bytes_response(code, line(value))
}

fn bytes_response(code: StatusCode, body: Bytes) -> Response<Body> {
    let mut response = Response::new(Full::new(body).boxed());
    *response.status_mut() = code;
    response.headers_mut().insert(
        "content-type",
        http::HeaderValue::from_static("application/json"),
    );
    response
}

/// Percent-decodes a query value (`%2C` → `,`, `%21` → `!`, `+` stays).
fn decode(v: &str) -> String {
    let bytes = v.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
            if let Ok(b) = u8::from_str_radix(hex, 16) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
