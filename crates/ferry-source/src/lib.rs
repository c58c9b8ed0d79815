//! Ferry's sources: where the cluster's Services, EndpointSlices and Nodes come from.
//!
//! Place in the data flow (**source** → cluster state → node view → compiler → applier): a source
//! turns Kubernetes objects into validated [`ferry_model`] objects and reports them as a stream
//! of [`SourceEvent`]s. There are two sources, sharing [`convert`] and [`SourceEvent`]:
//! [`kube`], the Kubernetes API (kube-rs watchers), and [`manifest`], Kubernetes-format
//! YAML/JSON manifests on disk (the folder you would `kubectl apply`), re-read file by file when
//! they change.
//!
//! What this crate must never do:
//! - stop on bad input: a bad object becomes an [`InvalidObject`] naming the file, the object and
//!   the field; it is reported, its last good version is kept, and every other object goes on;
//! - touch the cluster state, the kernel, or anything but the files and the API server it was
//!   pointed at, and (standalone mode) the Pods whose readiness probes it runs: it only reads
//!   (list and watch; a probe's `GET`, TCP connect or gRPC health check), and only emits events;
//! - make up what an API server would allocate (ClusterIPs, node ports): a manifest that lacks
//!   them is rejected, with the field named.
//!
//! # Layout
//! - [`event`]: [`SourceEvent`], the one event type of every source.
//! - [`convert`]: k8s-openapi objects → model objects, with field-precise [`InvalidObject`]s.
//! - [`manifest`]: [`manifest::load`] reads a file or directory once;
//!   [`manifest::ManifestSource`] remembers the last good objects file by file and watches the
//!   files, re-reading only what changed ([`manifest::ManifestSource::run`]).
//! - [`kube`]: [`kube::connect`] finds the API server (kubeconfig, `--master`, in-cluster) and
//!   waits until it answers;
//!   [`kube::KubeSource::run`] watches Services, EndpointSlices and this node's Node.
//! - [`pods`]: standalone mode's EndpointSlice controller, a stage between a source and the
//!   cluster state that turns Pods into EndpointSlices ([`pods::EndpointController`], pure) and
//!   runs it with the probes ([`pods::run`]);
//! - [`probe`]: readiness probes as kubelet runs them (HTTP(S), TCP, gRPC), their schedule and
//!   their results as data ([`probe::ProbeBook`]).

#![allow(
    clippy::result_large_err,
    reason = "InvalidObject (file, object, field, reason) is returned once per bad object, never \
              on a hot path; boxing it would only make the converters' signatures noisier"
)]

pub mod convert;
mod error;
pub mod event;
pub mod kube;
pub mod manifest;
pub mod pods;
pub mod probe;

pub use error::InvalidObject;
pub use event::SourceEvent;
