//! `v1 Service` → [`ferry_model::Service`].

use std::net::IpAddr;

use ferry_model::{
    IpFamily, Labels, ObjectRef, Selector, Service, ServiceName, ServiceType, SessionAffinity,
    TrafficDistribution, TrafficPolicy,
};
use k8s_openapi::api::core::v1 as k8s;

use super::{cidr, collect_exact, ignored_by_labels, ip, namespaced_ref, non_empty, port};
use crate::InvalidObject;

mod ports;

use ports::ports;

/// Default `sessionAffinityConfig.clientIP.timeoutSeconds` (3 hours), as the API server sets it.
pub const DEFAULT_AFFINITY_TIMEOUT_SECONDS: u32 = 10_800;
/// Largest accepted `sessionAffinityConfig.clientIP.timeoutSeconds` (one day).
pub const MAX_AFFINITY_TIMEOUT_SECONDS: u32 = 86_400;

/// Converts a Service. `Ok(None)` for the Services upstream kube-proxy ignores: headless
/// (`clusterIP: None`), `type: ExternalName`, and Services labelled
/// `service.kubernetes.io/service-proxy-name` or `service.kubernetes.io/headless` (any value).
///
/// Beyond the API server's rules, a Service must carry what an allocator would normally fill in,
/// since in standalone mode nothing allocates: a ClusterIP (`spec.clusterIP`), and a `nodePort`
/// on every port of a NodePort Service. A LoadBalancer port without a `nodePort` has no
/// NodePort, as upstream.
pub fn service(svc: &k8s::Service) -> Result<Option<Service>, InvalidObject> {
    let object = namespaced_ref("Service", &svc.metadata)?;
    if ignored_by_labels(&svc.metadata) {
        return Ok(None);
    }
    let default_spec = k8s::ServiceSpec::default();
    let spec = svc.spec.as_ref().unwrap_or(&default_spec);

    let service_type = match non_empty(spec.type_.as_deref()) {
        None | Some("ClusterIP") => ServiceType::ClusterIp,
        Some("NodePort") => ServiceType::NodePort,
        Some("LoadBalancer") => ServiceType::LoadBalancer,
        Some("ExternalName") => return Ok(None),
        Some(other) => {
            return Err(InvalidObject::new(
                &object,
                "spec.type",
                format!(
                    "unsupported value {other:?} (want ClusterIP, NodePort, LoadBalancer or \
                     ExternalName)"
                ),
            ))
        }
    };
    let Some(cluster_ips) = cluster_ips(spec, &object)? else {
        return Ok(None);
    };
    super::family::check(spec, &cluster_ips, &object)?;
    let ports = ports(spec, service_type, &object)?;
    let external_traffic_policy = traffic_policy(
        spec.external_traffic_policy.as_deref(),
        &object,
        "spec.externalTrafficPolicy",
    )?;
    let internal_traffic_policy = traffic_policy(
        spec.internal_traffic_policy.as_deref(),
        &object,
        "spec.internalTrafficPolicy",
    )?;
    let session_affinity = session_affinity(spec, &object)?;
    let external_ips = collect_exact(
        spec.external_ips
            .as_deref()
            .unwrap_or_default()
            .iter()
            .enumerate()
            .map(|(i, s)| ip(s, &object, &format!("spec.externalIPs[{i}]"))),
    )?;
    let load_balancer_source_ranges = collect_exact(
        spec.load_balancer_source_ranges
            .as_deref()
            .unwrap_or_default()
            .iter()
            .enumerate()
            .map(|(i, s)| cidr(s, &object, &format!("spec.loadBalancerSourceRanges[{i}]"))),
    )?;
    let health_check_node_port = match spec.health_check_node_port {
        None | Some(0) => None,
        Some(p) => Some(port(p, &object, "spec.healthCheckNodePort")?),
    };
    let load_balancer_ips = load_balancer_ips(svc.status.as_ref(), &object)?;

    Ok(Some(Service {
        name: ServiceName::new(&object.namespace, &object.name),
        service_type,
        cluster_ips,
        ports,
        external_ips,
        load_balancer_ips,
        load_balancer_source_ranges,
        external_traffic_policy,
        internal_traffic_policy,
        session_affinity,
        health_check_node_port,
        traffic_distribution: traffic_distribution(spec.traffic_distribution.as_deref()),
        selector: spec
            .selector
            .as_ref()
            .and_then(|s| Selector::new(Labels::new(s))),
        publish_not_ready_addresses: spec.publish_not_ready_addresses == Some(true),
    }))
}

/// `spec.trafficDistribution`. Unknown values give `None` rather than an error: kube-proxy never
/// reads the field (the EndpointSlice controller turns it into hints, which Ferry follows), so
/// a value from a newer API server must not cost the Service its rules.
fn traffic_distribution(value: Option<&str>) -> Option<TrafficDistribution> {
    match non_empty(value)? {
        "PreferClose" => Some(TrafficDistribution::PreferClose),
        "PreferSameZone" => Some(TrafficDistribution::PreferSameZone),
        "PreferSameNode" => Some(TrafficDistribution::PreferSameNode),
        _ => None,
    }
}

/// `spec.clusterIPs` (or `spec.clusterIP`); `None` for a headless Service.
fn cluster_ips(
    spec: &k8s::ServiceSpec,
    object: &ObjectRef,
) -> Result<Option<Vec<IpAddr>>, InvalidObject> {
    let single = non_empty(spec.cluster_ip.as_deref());
    let list = spec.cluster_ips.as_deref().unwrap_or_default();
    if single == Some("None") || list.first().map(String::as_str) == Some("None") {
        return Ok(None);
    }
    if list.is_empty() {
        let Some(single) = single else {
            return Err(InvalidObject::new(
                object,
                "spec.clusterIP",
                "must be set: in standalone mode nothing allocates a ClusterIP (set an address, \
                 or `None` for a headless Service)",
            ));
        };
        return Ok(Some(vec![ip(single, object, "spec.clusterIP")?]));
    }
    if list.len() > 2 {
        return Err(InvalidObject::new(
            object,
            "spec.clusterIPs",
            format!(
                "must hold at most two addresses, one per IP family, got {}",
                list.len()
            ),
        ));
    }
    let ips = collect_exact(
        list.iter()
            .enumerate()
            .map(|(i, s)| ip(s, object, &format!("spec.clusterIPs[{i}]"))),
    )?;
    if let [first, second] = ips[..] {
        if IpFamily::of(&first) == IpFamily::of(&second) {
            return Err(InvalidObject::new(
                object,
                "spec.clusterIPs[1]",
                format!("must be of the other IP family than spec.clusterIPs[0] ({first}), got {second}"),
            ));
        }
    }
    if let Some(single) = single {
        if ip(single, object, "spec.clusterIP")? != ips[0] {
            return Err(InvalidObject::new(
                object,
                "spec.clusterIP",
                format!("must equal spec.clusterIPs[0] ({}), got {single}", ips[0]),
            ));
        }
    }
    Ok(Some(ips))
}

/// `externalTrafficPolicy` / `internalTrafficPolicy`: `Cluster` (the default) or `Local`, spelled
/// exactly so (the API server rejects any other spelling).
fn traffic_policy(
    value: Option<&str>,
    object: &ObjectRef,
    field: &str,
) -> Result<TrafficPolicy, InvalidObject> {
    match non_empty(value) {
        None | Some("Cluster") => Ok(TrafficPolicy::Cluster),
        Some("Local") => Ok(TrafficPolicy::Local),
        Some(other) => Err(InvalidObject::new(
            object,
            field,
            format!("unsupported value {other:?} (want Cluster or Local)"),
        )),
    }
}

/// `sessionAffinity` with `sessionAffinityConfig.clientIP.timeoutSeconds`.
fn session_affinity(
    spec: &k8s::ServiceSpec,
    object: &ObjectRef,
) -> Result<SessionAffinity, InvalidObject> {
    match non_empty(spec.session_affinity.as_deref()) {
        None | Some("None") => Ok(SessionAffinity::None),
        Some("ClientIP") => {
            let timeout = spec
                .session_affinity_config
                .as_ref()
                .and_then(|c| c.client_ip.as_ref())
                .and_then(|c| c.timeout_seconds);
            let timeout_seconds = match timeout {
                None => DEFAULT_AFFINITY_TIMEOUT_SECONDS,
                Some(t) => u32::try_from(t)
                    .ok()
                    .filter(|t| (1..=MAX_AFFINITY_TIMEOUT_SECONDS).contains(t))
                    .ok_or_else(|| {
                        InvalidObject::new(
                            object,
                            "spec.sessionAffinityConfig.clientIP.timeoutSeconds",
                            format!(
                                "must be between 1 and {MAX_AFFINITY_TIMEOUT_SECONDS}, got {t}"
                            ),
                        )
                    })?,
            };
            Ok(SessionAffinity::ClientIp { timeout_seconds })
        }
        Some(other) => Err(InvalidObject::new(
            object,
            "spec.sessionAffinity",
            format!("unsupported value {other:?} (want None or ClientIP)"),
        )),
    }
}

/// `status.loadBalancer.ingress[].ip`, skipping hostname-only entries and `ipMode: Proxy` ones
/// (the load balancer proxies those itself, so kube-proxy must not short-circuit them; KEP-1860).
fn load_balancer_ips(
    status: Option<&k8s::ServiceStatus>,
    object: &ObjectRef,
) -> Result<Vec<IpAddr>, InvalidObject> {
    let ingress = status
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.as_deref())
        .unwrap_or_default();
    let mut ips = Vec::new();
    for (i, entry) in ingress.iter().enumerate() {
        match non_empty(entry.ip_mode.as_deref()) {
            None | Some("VIP") => {}
            Some("Proxy") => continue,
            Some(other) => {
                return Err(InvalidObject::new(
                    object,
                    format!("status.loadBalancer.ingress[{i}].ipMode"),
                    format!("unsupported value {other:?} (want VIP or Proxy)"),
                ))
            }
        }
        if let Some(s) = non_empty(entry.ip.as_deref()) {
            ips.push(ip(
                s,
                object,
                &format!("status.loadBalancer.ingress[{i}].ip"),
            )?);
        }
    }
    Ok(ips)
}
