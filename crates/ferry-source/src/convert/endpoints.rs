//! Legacy `v1 Endpoints` → [`ferry_model::EndpointSlice`]s, the way the EndpointSlice mirroring
//! controller (kubernetes `pkg/controller/endpointslicemirroring`) derives them.

use std::collections::BTreeMap;
use std::sync::Arc;

use ferry_model::{
    Endpoint, EndpointConditions, EndpointLocation, EndpointPort, EndpointSlice, Interner,
    IpFamily, ObjectRef, ServiceName,
};
use k8s_openapi::api::core::v1 as k8s;

use super::slice::target;
use super::{ignored_by_labels, ip, namespaced_ref, non_empty, port, protocol};
use crate::InvalidObject;

/// Label with which an Endpoints object opts out of mirroring (value `"true"`).
pub const LABEL_SKIP_MIRROR: &str = "endpointslice.kubernetes.io/skip-mirror";
/// Annotation of leader-election Endpoints, which the mirroring controller never mirrors.
const ANNOTATION_LEADER: &str = "control-plane.alpha.kubernetes.io/leader";
/// Addresses mirrored per subset, and endpoints per mirrored slice (the controller's
/// `--mirroring-max-endpoints-per-subset` default); further addresses are dropped with a warning.
pub const MAX_ENDPOINTS_PER_SUBSET: usize = 1000;

/// One mirrored slice being built: an address family and a set of ports.
struct Group {
    family: IpFamily,
    /// The ports, sorted: the grouping key together with the family.
    key: Vec<EndpointPort>,
    ports: Vec<EndpointPort>,
    endpoints: Vec<Endpoint>,
}

/// Converts an Endpoints object into the slices the mirroring controller would create.
///
/// - Addresses are grouped into one slice per (address family, set of ports), as upstream does;
///   subsets with the same ports share a slice.
/// - `addresses` become endpoints with `ready: true`, `notReadyAddresses` with `ready: false`;
///   `serving` and `terminating` are left unset upstream, so they take the model's defaults.
///   `nodeName`, `hostname` and `targetRef` are copied. An address listed twice keeps its first (ready) entry.
/// - Slices are named `<endpoints-name>-mirror-<n>`, `n` counting groups in order of first
///   appearance (upstream uses a random `generateName` suffix). Their Service is the Endpoints'
///   name. The trigger-time annotation is not copied, as upstream does not copy it.
/// - Endpoints labelled `endpointslice.kubernetes.io/skip-mirror: "true"`, leader-election
///   Endpoints, and Endpoints carrying the labels kube-proxy filters on give no slices.
///
/// Unlike upstream, which skips invalid addresses with an event, an invalid address or port is
/// an error, as the API server would have rejected it.
pub fn endpoints(ep: &k8s::Endpoints) -> Result<Vec<EndpointSlice>, InvalidObject> {
    let object = namespaced_ref("Endpoints", &ep.metadata)?;
    let skip = ep
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(LABEL_SKIP_MIRROR));
    let leader = ep
        .metadata
        .annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(ANNOTATION_LEADER));
    if skip.map(String::as_str) == Some("true") || leader || ignored_by_labels(&ep.metadata) {
        return Ok(Vec::new());
    }

    let namespace: Arc<str> = object.namespace.clone();
    let mut groups: Vec<Group> = Vec::new();
    let mut skipped = 0usize;
    for (i, subset) in ep.subsets.iter().flatten().enumerate() {
        let ports = subset_ports(subset, &object, i)?;
        let mut key = ports.clone();
        key.sort();
        let mut added = 0usize;
        let lists = [
            ("addresses", subset.addresses.as_deref(), true),
            (
                "notReadyAddresses",
                subset.not_ready_addresses.as_deref(),
                false,
            ),
        ];
        for (list, addresses, ready) in lists {
            for (j, a) in addresses.unwrap_or_default().iter().enumerate() {
                let address = ip(&a.ip, &object, &format!("subsets[{i}].{list}[{j}].ip"))?;
                if added >= MAX_ENDPOINTS_PER_SUBSET {
                    skipped += 1;
                    continue;
                }
                added += 1;
                let family = IpFamily::of(&address);
                let group = match groups
                    .iter()
                    .position(|g| g.family == family && g.key == key)
                {
                    Some(g) => &mut groups[g],
                    None => {
                        groups.push(Group {
                            family,
                            key: key.clone(),
                            ports: ports.clone(),
                            endpoints: Vec::new(),
                        });
                        let last = groups.len() - 1;
                        &mut groups[last]
                    }
                };
                if group.endpoints.len() >= MAX_ENDPOINTS_PER_SUBSET {
                    skipped += 1;
                } else if group.endpoints.iter().all(|e| e.address != address) {
                    group.endpoints.push(Endpoint {
                        address,
                        conditions: EndpointConditions {
                            ready,
                            ..EndpointConditions::default()
                        },
                        location: EndpointLocation::on_node(non_empty(a.node_name.as_deref())),
                        target: target(a.hostname.as_deref(), a.target_ref.as_ref(), &namespace),
                    });
                }
            }
        }
    }
    if skipped > 0 {
        tracing::warn!(
            object = %object,
            skipped,
            "at most {MAX_ENDPOINTS_PER_SUBSET} addresses per Endpoints subset are mirrored to \
             EndpointSlices; the rest are dropped, as upstream drops them"
        );
    }
    Ok(groups
        .into_iter()
        .enumerate()
        .map(|(n, g)| {
            let mut slice = EndpointSlice {
                namespace: namespace.clone(),
                name: format!("{}-mirror-{n}", object.name).into(),
                service: ServiceName::new(&object.namespace, &object.name),
                family: g.family,
                ports: g.ports,
                endpoints: g.endpoints,
                trigger_time: None,
            };
            // One shared location per node, as for EndpointSlices.
            Interner::default().intern_slice(&mut slice);
            slice
        })
        .collect())
}

/// `subsets[i].ports`, with the API server's defaults (protocol TCP, name `""`).
fn subset_ports(
    subset: &k8s::EndpointSubset,
    object: &ObjectRef,
    i: usize,
) -> Result<Vec<EndpointPort>, InvalidObject> {
    let mut names = BTreeMap::new();
    let mut ports = Vec::new();
    for (k, p) in subset.ports.iter().flatten().enumerate() {
        let name = p.name.clone().unwrap_or_default();
        if let Some(first) = names.insert(name.clone(), k) {
            return Err(InvalidObject::new(
                object,
                format!("subsets[{i}].ports[{k}].name"),
                format!("duplicate port name {name:?} (also subsets[{i}].ports[{first}].name)"),
            ));
        }
        ports.push(EndpointPort {
            name,
            port: port(p.port, object, &format!("subsets[{i}].ports[{k}].port"))?,
            protocol: protocol(
                p.protocol.as_deref(),
                object,
                &format!("subsets[{i}].ports[{k}].protocol"),
            )?,
        });
    }
    Ok(ports)
}
