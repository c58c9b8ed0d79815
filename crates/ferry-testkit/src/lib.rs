//! # ferry-testkit: test support for Ferry (dev-dependency only)
//!
//! - [`apiserver`]: [`FakeApiServer`], a small Kubernetes API server over real HTTP that
//!   speaks list and watch for Services, EndpointSlices and Nodes, with resourceVersions,
//!   `ADDED`/`MODIFIED`/`DELETED`/`BOOKMARK` events, `410 Gone` for expired resourceVersions,
//!   dropped watches and outages, so the real kube-rs client can be driven through them.
//! - [`objects`]: the JSON objects `kubectl get -o json` shows, built from a few parameters.
//!
//! Nothing here is used by the `ferry` binary or its libraries; it must never become a normal
//! dependency of them (the benchmark, `ferry-bench-e2e`, uses it to serve a large cluster).

pub mod apiserver;
pub mod objects;

pub use apiserver::FakeApiServer;
