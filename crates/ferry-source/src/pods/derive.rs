//! One Service's EndpointSlices from the Pods it selects: upstream's reconciler, minus the API.
//!
//! Learned from upstream's `k8s.io/endpointslice` (`reconciler.go`, `utils.go`,
//! `util/controller_utils.go`); the rules, each applied per address type the Service has:
//! - a Pod is left out when it is terminal (`Succeeded`/`Failed`) or has no IP; a terminating Pod
//!   (`deletionTimestamp`) stays in, `serving` as its readiness says and never `ready` (unless
//!   `publishNotReadyAddresses`, which makes every endpoint `ready`);
//! - a named `targetPort` is looked up per Pod (container ports of that name and protocol); a
//!   Pod without it has that port left out of its endpoint, so it gets no traffic on it;
//! - endpoints are grouped by their resolved ports (a slice has one port list), at most
//!   [`MAX_ENDPOINTS_PER_SLICE`] per slice;
//! - a Pod whose `spec.nodeName` is not a known Node is skipped (reported), unless the Service
//!   publishes not-ready addresses;
//! - `nodeName` comes from the Pod, `zone` from the Node's `topology.kubernetes.io/zone` label;
//! - `targetRef` names the Pod; `hostname` is the Pod's `spec.hostname` when its
//!   `spec.subdomain` is the Service's name;
//! - a Service with no endpoint at all gets one empty placeholder slice per address type.
//!
//! Unlike upstream, slice names are not random: `<service>-<ipv4|ipv6>` for the placeholder,
//! `<service>-<ipv4|ipv6>-<8 hex digits of the port list>` (then `-1`, `-2`, … past 100
//! endpoints), so the same input always gives the same slices. Hints are not written: topology
//! hints are the controller's heuristics, which standalone mode does not reproduce.

use std::collections::BTreeMap;
use std::sync::Arc;

use ferry_model::{
    Endpoint, EndpointConditions, EndpointLocation, EndpointPort, EndpointSlice, EndpointTarget,
    IpFamily, Node, Pod, Service, ServiceName, TargetRef,
};

/// Upstream's default `--max-endpoints-per-slice`.
pub const MAX_ENDPOINTS_PER_SLICE: usize = 100;

/// Why a selected Pod got no endpoint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Skipped {
    /// Its `spec.nodeName` names no Node of the manifests (or is empty).
    UnknownNode(Option<Arc<str>>),
}

/// The slices of `service` (which must have a selector) for `pods` (the Pods it selects, in any
/// order), and the Pods skipped with the reason. `ready(pod)` is the Pod's readiness (its
/// `Ready` condition, or its readiness probes): upstream's `serving`.
pub fn endpoint_slices<'a>(
    service: &Service,
    pods: impl IntoIterator<Item = &'a Pod>,
    nodes: &BTreeMap<String, Node>,
    ready: impl Fn(&Pod) -> bool,
) -> (Vec<EndpointSlice>, Vec<(&'a Pod, Skipped)>) {
    let mut pods: Vec<&Pod> = pods.into_iter().collect();
    pods.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
    let mut skipped = Vec::new();
    let mut kept: Vec<(&Pod, Option<&Node>, bool)> = Vec::with_capacity(pods.len());
    for pod in pods {
        if pod.phase.is_terminal() || pod.ips.is_empty() {
            continue;
        }
        let node = pod.node_name.as_deref().and_then(|n| nodes.get(n));
        if node.is_none() && !service.publish_not_ready_addresses {
            skipped.push((pod, Skipped::UnknownNode(pod.node_name.clone())));
            continue;
        }
        kept.push((pod, node, ready(pod)));
    }
    let mut slices = Vec::new();
    for family in families(service) {
        slices.extend(for_family(service, &kept, family));
    }
    (slices, skipped)
}

/// The address types of a Service: the families of its ClusterIPs (which the conversion checked
/// against `spec.ipFamilies`), in their order.
fn families(service: &Service) -> Vec<IpFamily> {
    let mut out: Vec<IpFamily> = Vec::with_capacity(2);
    for ip in &service.cluster_ips {
        let family = IpFamily::of(ip);
        if !out.contains(&family) {
            out.push(family);
        }
    }
    out
}

fn for_family(
    service: &Service,
    pods: &[(&Pod, Option<&Node>, bool)],
    family: IpFamily,
) -> Vec<EndpointSlice> {
    let mut groups: BTreeMap<Vec<EndpointPort>, Vec<Endpoint>> = BTreeMap::new();
    // One shared location per node, as the cluster state would intern them anyway.
    let mut locations: BTreeMap<Option<&str>, Option<Arc<EndpointLocation>>> = BTreeMap::new();
    for (pod, node, serving) in pods {
        let Some(address) = pod.ip(family) else {
            continue;
        };
        let terminating = pod.deletion_timestamp.is_some();
        let endpoint = Endpoint {
            address,
            conditions: EndpointConditions {
                ready: service.publish_not_ready_addresses || (*serving && !terminating),
                serving: *serving,
                terminating,
            },
            location: locations
                .entry(pod.node_name.as_deref())
                .or_insert_with(|| {
                    EndpointLocation {
                        node_name: pod.node_name.clone(),
                        zone: node.and_then(|n| n.zone()).map(Arc::from),
                        ..EndpointLocation::default()
                    }
                    .shared()
                })
                .clone(),
            target: target(service, pod),
        };
        groups
            .entry(ports(service, pod))
            .or_default()
            .push(endpoint);
    }
    let prefix = format!("{}-{}", service.name.name, family_name(family));
    if groups.is_empty() {
        return vec![slice(&service.name, prefix, family, Vec::new(), Vec::new())];
    }
    let mut out = Vec::new();
    for (ports, mut endpoints) in groups {
        endpoints.sort_by_key(|e| e.address);
        let base = format!("{prefix}-{:08x}", port_list_hash(&ports));
        for (i, chunk) in endpoints.chunks(MAX_ENDPOINTS_PER_SLICE).enumerate() {
            let name = match i {
                0 => base.clone(),
                i => format!("{base}-{i}"),
            };
            out.push(slice(
                &service.name,
                name,
                family,
                ports.clone(),
                chunk.to_vec(),
            ));
        }
    }
    out
}

/// The endpoint's `targetRef` (the Pod, sharing its names) and `hostname` (upstream's
/// `ShouldSetHostname`: the Pod's hostname when its subdomain is the Service's name).
fn target(service: &Service, pod: &Pod) -> Option<Arc<EndpointTarget>> {
    let hostname = pod
        .hostname
        .clone()
        .filter(|_| pod.subdomain.as_deref() == Some(&*service.name.name));
    EndpointTarget {
        hostname,
        target_ref: Some(TargetRef::pod(pod.namespace.clone(), pod.name.clone())),
    }
    .shared()
}

/// A Pod's endpoint ports: each Service port whose `targetPort` the Pod has, sorted (upstream
/// hashes the sorted list to group endpoints).
fn ports(service: &Service, pod: &Pod) -> Vec<EndpointPort> {
    let mut ports: Vec<EndpointPort> = service
        .ports
        .iter()
        .filter_map(|p| {
            Some(EndpointPort {
                name: p.name.clone(),
                port: pod.find_port(&p.target_port, p.protocol)?,
                protocol: p.protocol,
            })
        })
        .collect();
    ports.sort();
    ports
}

fn slice(
    service: &ServiceName,
    name: String,
    family: IpFamily,
    ports: Vec<EndpointPort>,
    endpoints: Vec<Endpoint>,
) -> EndpointSlice {
    EndpointSlice {
        namespace: service.namespace.clone(),
        name: name.into(),
        service: service.clone(),
        family,
        ports,
        endpoints,
        trigger_time: None,
    }
}

/// `ipv4` / `ipv6`, for slice names.
fn family_name(family: IpFamily) -> &'static str {
    match family {
        IpFamily::V4 => "ipv4",
        IpFamily::V6 => "ipv6",
    }
}

/// FNV-1a (32 bits) of the port list: stable across runs and builds, unlike `std`'s hasher.
fn port_list_hash(ports: &[EndpointPort]) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for p in ports {
        let text = format!("{}/{}/{};", p.name, p.protocol, p.port);
        for b in text.bytes() {
            h ^= u32::from(b);
            h = h.wrapping_mul(0x0100_0193);
        }
    }
    h
}

#[cfg(test)]
mod tests;
