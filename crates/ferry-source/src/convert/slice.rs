//! `discovery.k8s.io/v1 EndpointSlice` → [`ferry_model::EndpointSlice`].

use std::sync::Arc;

use ferry_model::{
    Endpoint, EndpointConditions, EndpointLocation, EndpointPort, EndpointSlice, EndpointTarget,
    Interner, IpFamily, ObjectRef, ServiceName, TargetKind, TargetRef,
};
use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::discovery::v1 as k8s;

use super::{
    ignored_by_labels, ip, namespaced_ref, non_empty, port, protocol, ANNOTATION_TRIGGER_TIME,
    LABEL_SERVICE_NAME,
};
use crate::InvalidObject;

/// Converts an EndpointSlice. `Ok(None)` for slices upstream kube-proxy ignores: those labelled
/// `service.kubernetes.io/service-proxy-name` or `service.kubernetes.io/headless`, and
/// `addressType: FQDN`.
///
/// Defaults follow kube-proxy: a port without `port` is skipped, `protocol` defaults to TCP and
/// `name` to `""`; conditions default as [`EndpointConditions`] documents. Unlike kube-proxy,
/// which skips them silently, an endpoint without addresses or with an address of the wrong
/// family is an error (the API server would have rejected it).
pub fn endpoint_slice(slice: &k8s::EndpointSlice) -> Result<Option<EndpointSlice>, InvalidObject> {
    let object = namespaced_ref("EndpointSlice", &slice.metadata)?;
    if ignored_by_labels(&slice.metadata) {
        return Ok(None);
    }
    let family = match slice.address_type.as_str() {
        "IPv4" => IpFamily::V4,
        "IPv6" => IpFamily::V6,
        "FQDN" => return Ok(None),
        other => {
            return Err(InvalidObject::new(
                &object,
                "addressType",
                format!("unsupported value {other:?} (want IPv4, IPv6 or FQDN)"),
            ))
        }
    };
    let service = slice
        .metadata
        .labels
        .as_ref()
        .and_then(|l| non_empty(l.get(LABEL_SERVICE_NAME).map(String::as_str)))
        .ok_or_else(|| {
            InvalidObject::new(
                &object,
                format!("metadata.labels[{LABEL_SERVICE_NAME}]"),
                "must be set to the name of the slice's Service",
            )
        })?;

    let mut ports = Vec::with_capacity(slice.ports.as_ref().map_or(0, Vec::len));
    for (i, p) in slice.ports.iter().flatten().enumerate() {
        // kube-proxy skips a port without a number (the API reserves it to mean "all ports").
        let Some(number) = p.port else { continue };
        ports.push(EndpointPort {
            name: p.name.clone().unwrap_or_default(),
            port: port(number, &object, &format!("ports[{i}].port"))?,
            protocol: protocol(
                p.protocol.as_deref(),
                &object,
                &format!("ports[{i}].protocol"),
            )?,
        });
    }
    let namespace: Arc<str> = object.namespace.clone();
    let endpoints = super::collect_exact(
        slice
            .endpoints
            .iter()
            .enumerate()
            .map(|(i, e)| endpoint(e, family, &object, &namespace, i)),
    )?;

    let mut converted = EndpointSlice {
        namespace,
        name: object.name.clone(),
        service: ServiceName::new(&object.namespace, service),
        family,
        ports,
        endpoints,
        trigger_time: slice
            .metadata
            .annotations
            .as_ref()
            .and_then(|a| a.get(ANNOTATION_TRIGGER_TIME))
            .cloned(),
    };
    // Endpoints on the same node (with the same zone and hints) share one location from the
    // start; the cluster state then shares it across slices.
    Interner::default().intern_slice(&mut converted);
    Ok(Some(converted))
}

/// One `endpoints[i]` entry (`namespace`: the slice's).
fn endpoint(
    e: &k8s::Endpoint,
    family: IpFamily,
    object: &ObjectRef,
    namespace: &Arc<str>,
    i: usize,
) -> Result<Endpoint, InvalidObject> {
    let mut addresses = Vec::with_capacity(e.addresses.len());
    for (j, s) in e.addresses.iter().enumerate() {
        let field = format!("endpoints[{i}].addresses[{j}]");
        let addr = ip(s, object, &field)?;
        if IpFamily::of(&addr) != family {
            let want = family.as_str();
            return Err(InvalidObject::new(
                object,
                field,
                format!("must be an {want} address (addressType is {want}), got {s:?}"),
            ));
        }
        addresses.push(addr);
    }
    // Upstream kube-proxy uses only the first address of an endpoint.
    let Some(&address) = addresses.first() else {
        return Err(InvalidObject::new(
            object,
            format!("endpoints[{i}].addresses"),
            "must have at least one address",
        ));
    };
    let conditions = e.conditions.as_ref();
    Ok(Endpoint {
        address,
        conditions: EndpointConditions {
            ready: conditions.and_then(|c| c.ready).unwrap_or(true),
            serving: conditions.and_then(|c| c.serving).unwrap_or(true),
            terminating: conditions.and_then(|c| c.terminating).unwrap_or(false),
        },
        location: EndpointLocation {
            node_name: non_empty(e.node_name.as_deref()).map(Arc::from),
            zone: non_empty(e.zone.as_deref()).map(Arc::from),
            zone_hints: hints(
                e.hints.as_ref().and_then(|h| h.for_zones.as_ref()),
                |z| &z.name,
                object,
                &format!("endpoints[{i}].hints.forZones"),
            )?,
            node_hints: hints(
                e.hints.as_ref().and_then(|h| h.for_nodes.as_ref()),
                |n| &n.name,
                object,
                &format!("endpoints[{i}].hints.forNodes"),
            )?,
        }
        .shared(),
        target: target(e.hostname.as_deref(), e.target_ref.as_ref(), namespace),
    })
}

/// An endpoint's `hostname` and `targetRef` (whose namespace defaults to `namespace`, the
/// object's, and shares it when equal). A `targetRef` without a name is left out: it names
/// nothing `ferry status` could show.
pub(super) fn target(
    hostname: Option<&str>,
    target_ref: Option<&ObjectReference>,
    namespace: &Arc<str>,
) -> Option<Arc<EndpointTarget>> {
    let target_ref = target_ref.and_then(|r| {
        let name = non_empty(r.name.as_deref())?;
        let kind = match r.kind.as_deref().unwrap_or_default() {
            "Pod" => TargetKind::Pod,
            other => TargetKind::Other(other.into()),
        };
        let namespace = match non_empty(r.namespace.as_deref()) {
            Some(ns) if ns != &**namespace => Arc::from(ns),
            _ => namespace.clone(),
        };
        Some(TargetRef {
            kind,
            namespace,
            name: name.into(),
        })
    });
    EndpointTarget {
        hostname: non_empty(hostname).map(Box::from),
        target_ref,
    }
    .shared()
}

/// Most entries the API server accepts in `hints.forZones` and in `hints.forNodes`.
pub const MAX_HINTS: usize = 8;

/// `hints.forZones` / `hints.forNodes`: the names, `None` when unset or empty. Checked as the
/// API server checks them: at most [`MAX_HINTS`] entries, no name twice.
fn hints<T>(
    list: Option<&Vec<T>>,
    name: fn(&T) -> &String,
    object: &ObjectRef,
    field: &str,
) -> Result<Option<Box<[Arc<str>]>>, InvalidObject> {
    let Some(list) = list.filter(|l| !l.is_empty()) else {
        return Ok(None);
    };
    if list.len() > MAX_HINTS {
        return Err(InvalidObject::new(
            object,
            field,
            format!("must have at most {MAX_HINTS} entries, got {}", list.len()),
        ));
    }
    let mut names: Vec<Arc<str>> = Vec::with_capacity(list.len());
    for (j, entry) in list.iter().enumerate() {
        let n = name(entry);
        if names.iter().any(|m| **m == **n) {
            return Err(InvalidObject::new(
                object,
                format!("{field}[{j}].name"),
                format!("duplicate value {n:?}"),
            ));
        }
        names.push(Arc::from(n.as_str()));
    }
    Ok(Some(names.into_boxed_slice()))
}
