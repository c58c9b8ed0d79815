//! k8s-openapi objects → validated `ferry-model` objects, one [`InvalidObject`] per problem.
//!
//! Conversion takes typed k8s-openapi objects, never YAML, so the manifest source and the
//! (future) Kubernetes API source share it. Each function validates what the API server would
//! have validated before kube-proxy ever saw the object, applies the API server's defaults, and
//! decides, like upstream kube-proxy, which objects the proxy ignores (`Ok(None)`).
//!
//! Conventions shared by every converter:
//! - An empty string means "unset", as in Go, where `""` and an absent field are the same value.
//! - A missing `metadata.namespace` defaults to `default`, as `kubectl apply` would.
//! - The first problem found is returned; its `field` is a JSON path such as
//!   `spec.ports[1].port`.
//! - IP addresses must be written canonically enough for Rust's parser: IPv4 octets with leading
//!   zeros (`010.0.0.1`, which Go's legacy parser accepts) are rejected as ambiguous.
//! - CIDRs are normalised to their network address (`10.1.1.7/24` → `10.1.1.0/24`), so the
//!   compiler can put them into nft interval sets as they are.

use std::net::IpAddr;

use ferry_model::{ObjectRef, PortRef, Protocol};
use ipnet::IpNet;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

pub use crate::error::InvalidObject;

mod endpoints;
mod family;
mod node;
mod pod;
mod probe;
mod service;
mod service_cidr;
mod slice;

pub use endpoints::{endpoints, LABEL_SKIP_MIRROR, MAX_ENDPOINTS_PER_SUBSET};
pub use node::node;
pub use pod::pod;
pub use probe::{
    DEFAULT_FAILURE_THRESHOLD, DEFAULT_PERIOD_SECONDS, DEFAULT_SUCCESS_THRESHOLD,
    DEFAULT_TIMEOUT_SECONDS,
};
pub use service::{service, DEFAULT_AFFINITY_TIMEOUT_SECONDS, MAX_AFFINITY_TIMEOUT_SECONDS};
pub use service_cidr::service_cidr;
pub use slice::endpoint_slice;

/// Namespace of objects whose `metadata.namespace` is unset.
pub const DEFAULT_NAMESPACE: &str = "default";
/// Label naming the Service an EndpointSlice belongs to.
pub const LABEL_SERVICE_NAME: &str = "kubernetes.io/service-name";
/// Label handing a Service (and its slices) to another proxy; kube-proxy ignores such objects.
pub const LABEL_SERVICE_PROXY_NAME: &str = "service.kubernetes.io/service-proxy-name";
/// Label the EndpointSlice controller puts on slices of headless Services; ignored by kube-proxy.
pub const LABEL_HEADLESS: &str = "service.kubernetes.io/headless";
/// Annotation carrying the time of the change that produced a slice (RFC 3339).
pub const ANNOTATION_TRIGGER_TIME: &str = "endpoints.kubernetes.io/last-change-trigger-time";

/// Stands for the name of an object without `metadata.name` in messages
/// (`Service dev/<unnamed>: metadata.name: must be set`).
pub const UNNAMED: &str = "<unnamed>";

/// `Kind namespace/name` of a namespaced object; `metadata.name` must be set.
fn namespaced_ref(kind: &str, meta: &ObjectMeta) -> Result<ObjectRef, InvalidObject> {
    let namespace = non_empty(meta.namespace.as_deref()).unwrap_or(DEFAULT_NAMESPACE);
    match non_empty(meta.name.as_deref()) {
        Some(name) => Ok(ObjectRef::new(kind, namespace, name)),
        None => Err(InvalidObject::new(
            &ObjectRef::new(kind, namespace, UNNAMED),
            "metadata.name",
            "must be set",
        )),
    }
}

/// True when kube-proxy's informer label selector
/// (`!service.kubernetes.io/service-proxy-name, !service.kubernetes.io/headless`) filters the
/// object out. The label's value does not matter.
fn ignored_by_labels(meta: &ObjectMeta) -> bool {
    meta.labels.as_ref().is_some_and(|labels| {
        labels.contains_key(LABEL_SERVICE_PROXY_NAME) || labels.contains_key(LABEL_HEADLESS)
    })
}

/// Collects converted items into a vector of exactly their number (`collect` into a `Result`
/// cannot know it and grows 4 → 8 → 16: 640 bytes for a slice's 10 endpoints instead of 400,
/// kept for the object's life, at 10 000 slices 2.4 MB).
fn collect_exact<T, E>(items: impl ExactSizeIterator<Item = Result<T, E>>) -> Result<Vec<T>, E> {
    let mut all = Vec::with_capacity(items.len());
    for item in items {
        all.push(item?);
    }
    Ok(all)
}

/// `Some(s)` unless `s` is unset or empty.
fn non_empty(s: Option<&str>) -> Option<&str> {
    s.filter(|s| !s.is_empty())
}

/// A port number, 1..=65535.
fn port(value: i32, object: &ObjectRef, field: &str) -> Result<u16, InvalidObject> {
    u16::try_from(value)
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(|| {
            InvalidObject::new(
                object,
                field,
                format!("must be between 1 and 65535, got {value}"),
            )
        })
}

/// An IP address.
fn ip(value: &str, object: &ObjectRef, field: &str) -> Result<IpAddr, InvalidObject> {
    value.parse().map_err(|_| {
        InvalidObject::new(
            object,
            field,
            format!("must be an IP address, got {value:?}"),
        )
    })
}

/// A CIDR such as `10.0.0.0/8`, normalised to its network address. A bare IP is rejected, as
/// the API server does (`must be a list of IP ranges`).
fn cidr(value: &str, object: &ObjectRef, field: &str) -> Result<IpNet, InvalidObject> {
    value
        .trim()
        .parse::<IpNet>()
        .map(|net| net.trunc())
        .map_err(|_| {
            InvalidObject::new(
                object,
                field,
                format!("must be a CIDR such as 10.0.0.0/8 or 2001:db8::/64, got {value:?}"),
            )
        })
}

/// A port by number or name (`targetPort`, a probe's `port`), checked as the API server checks
/// it: a number from 1 to 65535, or a [`port_name`].
fn port_ref(
    value: &IntOrString,
    object: &ObjectRef,
    field: &str,
) -> Result<PortRef, InvalidObject> {
    match value {
        IntOrString::Int(n) => port(*n, object, field).map(PortRef::Number),
        IntOrString::String(s) => port_name(s, object, field).map(PortRef::Name),
    }
}

/// A port name: an IANA service name (at most 15 lower-case letters, digits and `-`, with at
/// least one letter, no `-` at either end and no `--`).
fn port_name(s: &str, object: &ObjectRef, field: &str) -> Result<Box<str>, InvalidObject> {
    if is_iana_svc_name(s) {
        return Ok(s.into());
    }
    Err(InvalidObject::new(
        object,
        field,
        format!(
            "must be a port number or a port name (at most 15 lower-case letters, digits and \
             '-', with a letter, no '-' at either end and no '--'), got {s:?}"
        ),
    ))
}

/// Kubernetes' `IsValidPortName`.
fn is_iana_svc_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 15
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b.iter().any(u8::is_ascii_lowercase)
        && b.first() != Some(&b'-')
        && b.last() != Some(&b'-')
        && !s.contains("--")
}

/// A protocol, `TCP` when unset.
fn protocol(
    value: Option<&str>,
    object: &ObjectRef,
    field: &str,
) -> Result<Protocol, InvalidObject> {
    match non_empty(value) {
        None => Ok(Protocol::Tcp),
        Some(p) => p
            .parse()
            .map_err(|reason: String| InvalidObject::new(object, field, reason)),
    }
}

#[cfg(test)]
mod tests;
