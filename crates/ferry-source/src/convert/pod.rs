//! `v1 Pod` → [`ferry_model::Pod`] (standalone mode: the Pods the manifests say exist).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use ferry_model::{Container, ContainerPort, IpFamily, Labels, ObjectRef, Pod, PodPhase};
use k8s_openapi::api::core::v1 as k8s;

use super::{ip, namespaced_ref, non_empty, port, port_name, protocol};
use crate::InvalidObject;

/// Converts a Pod, checked as the API server checks what Ferry reads of it: at least one
/// container, unique container names and port names, valid ports and probes, at most one IP
/// per family in `status.podIPs` (which starts with `status.podIP` when both are set).
///
/// The status is taken as written: standalone mode has no kubelet, so the manifests say where a
/// Pod runs (`spec.nodeName`), its IPs, its phase and its `Ready` condition; Ferry's own
/// readiness probes then take over for the containers that have an `httpGet`, `tcpSocket` or
/// `grpc` readiness probe.
pub fn pod(pod: &k8s::Pod) -> Result<Pod, InvalidObject> {
    let object = namespaced_ref("Pod", &pod.metadata)?;
    let Some(spec) = pod.spec.as_ref() else {
        return Err(InvalidObject::new(&object, "spec", "must be set"));
    };
    let default_status = k8s::PodStatus::default();
    let status = pod.status.as_ref().unwrap_or(&default_status);
    let containers = containers(spec, status, &object)?;
    Ok(Pod {
        namespace: object.namespace.clone(),
        name: object.name.clone(),
        labels: Labels::new(pod.metadata.labels.iter().flatten()),
        node_name: non_empty(spec.node_name.as_deref()).map(Arc::from),
        hostname: non_empty(spec.hostname.as_deref()).map(Box::from),
        subdomain: non_empty(spec.subdomain.as_deref()).map(Box::from),
        ips: pod_ips(status, &object)?,
        phase: phase(status.phase.as_deref(), &object)?,
        ready: status
            .conditions
            .iter()
            .flatten()
            .any(|c| c.type_ == "Ready" && c.status == "True"),
        deletion_timestamp: pod
            .metadata
            .deletion_timestamp
            .as_ref()
            .map(|t| t.0.to_string()),
        containers,
    })
}

/// `status.phase`.
fn phase(value: Option<&str>, object: &ObjectRef) -> Result<PodPhase, InvalidObject> {
    Ok(match non_empty(value) {
        None | Some("Unknown") => PodPhase::Unknown,
        Some("Pending") => PodPhase::Pending,
        Some("Running") => PodPhase::Running,
        Some("Succeeded") => PodPhase::Succeeded,
        Some("Failed") => PodPhase::Failed,
        Some(other) => {
            return Err(InvalidObject::new(
                object,
                "status.phase",
                format!(
                    "unsupported value {other:?} (want Pending, Running, Succeeded, Failed or \
                     Unknown)"
                ),
            ))
        }
    })
}

/// `status.podIPs`, or `status.podIP` alone.
fn pod_ips(status: &k8s::PodStatus, object: &ObjectRef) -> Result<Vec<IpAddr>, InvalidObject> {
    let list = status.pod_ips.as_deref().unwrap_or_default();
    let mut ips: Vec<IpAddr> = Vec::with_capacity(list.len().max(1));
    for (i, entry) in list.iter().enumerate() {
        let field = format!("status.podIPs[{i}].ip");
        let addr = ip(&entry.ip, object, &field)?;
        if let Some(other) = ips.iter().find(|o| IpFamily::of(o) == IpFamily::of(&addr)) {
            return Err(InvalidObject::new(
                object,
                field,
                format!("must be of another IP family than {other}: a Pod has at most one IP per family"),
            ));
        }
        ips.push(addr);
    }
    if let Some(single) = non_empty(status.pod_ip.as_deref()) {
        let addr = ip(single, object, "status.podIP")?;
        match ips.first() {
            None => ips.push(addr),
            Some(first) if *first == addr => {}
            Some(first) => {
                return Err(InvalidObject::new(
                    object,
                    "status.podIP",
                    format!("must equal status.podIPs[0] ({first}), got {single}"),
                ))
            }
        }
    }
    Ok(ips)
}

/// `spec.containers`, then the sidecars of `spec.initContainers`, with their status.
fn containers(
    spec: &k8s::PodSpec,
    status: &k8s::PodStatus,
    object: &ObjectRef,
) -> Result<Vec<Container>, InvalidObject> {
    if spec.containers.is_empty() {
        return Err(InvalidObject::new(
            object,
            "spec.containers",
            "must have at least one container",
        ));
    }
    let sidecars = spec
        .init_containers
        .iter()
        .flatten()
        .enumerate()
        .filter(|(_, c)| c.restart_policy.as_deref() == Some("Always"))
        .map(|(i, c)| (format!("spec.initContainers[{i}]"), c, true));
    let regular = spec
        .containers
        .iter()
        .enumerate()
        .map(|(i, c)| (format!("spec.containers[{i}]"), c, false));
    let statuses: BTreeMap<&str, &k8s::ContainerStatus> = status
        .container_statuses
        .iter()
        .flatten()
        .chain(status.init_container_statuses.iter().flatten())
        .map(|s| (s.name.as_str(), s))
        .collect();
    let mut names = Names::default();
    let mut out = Vec::with_capacity(spec.containers.len());
    for (at, c, sidecar) in regular.chain(sidecars) {
        if c.name.is_empty() {
            return Err(InvalidObject::new(
                object,
                format!("{at}.name"),
                "must be set",
            ));
        }
        names.container(&c.name, &at, object)?;
        let state = statuses.get(c.name.as_str());
        out.push(Container {
            name: c.name.as_str().into(),
            sidecar,
            ports: container_ports(c, &at, &mut names, object)?,
            readiness_probe: c
                .readiness_probe
                .as_ref()
                .map(|p| super::probe::probe(p, object, &format!("{at}.readinessProbe")))
                .transpose()?,
            ready: state.map(|s| s.ready),
            started_at: state
                .and_then(|s| s.state.as_ref())
                .and_then(|s| s.running.as_ref())
                .and_then(|r| r.started_at.as_ref())
                .map(|t| t.0.as_second()),
        });
    }
    Ok(out)
}

/// Container names and port names seen so far: both must be unique within the Pod.
#[derive(Default)]
struct Names {
    containers: BTreeMap<String, String>,
    ports: BTreeMap<String, String>,
}

impl Names {
    fn container(&mut self, name: &str, at: &str, object: &ObjectRef) -> Result<(), InvalidObject> {
        Self::unique(&mut self.containers, name, &format!("{at}.name"), object)
    }

    fn port(&mut self, name: &str, field: &str, object: &ObjectRef) -> Result<(), InvalidObject> {
        Self::unique(&mut self.ports, name, field, object)
    }

    fn unique(
        seen: &mut BTreeMap<String, String>,
        name: &str,
        field: &str,
        object: &ObjectRef,
    ) -> Result<(), InvalidObject> {
        if let Some(first) = seen.get(name) {
            return Err(InvalidObject::new(
                object,
                field,
                format!("duplicate name {name:?} (also {first})"),
            ));
        }
        seen.insert(name.to_owned(), field.to_owned());
        Ok(())
    }
}

/// One container's `ports`.
fn container_ports(
    c: &k8s::Container,
    at: &str,
    names: &mut Names,
    object: &ObjectRef,
) -> Result<Vec<ContainerPort>, InvalidObject> {
    let mut ports = Vec::new();
    for (j, p) in c.ports.iter().flatten().enumerate() {
        let field = |f: &str| format!("{at}.ports[{j}].{f}");
        let name = non_empty(p.name.as_deref()).unwrap_or("");
        if !name.is_empty() {
            port_name(name, object, &field("name"))?;
            names.port(name, &field("name"), object)?;
        }
        ports.push(ContainerPort {
            name: name.into(),
            port: port(p.container_port, object, &field("containerPort"))?,
            protocol: protocol(p.protocol.as_deref(), object, &field("protocol"))?,
        });
    }
    Ok(ports)
}
