//! A Service's `spec.ports`: names, numbers, protocols, node ports and target ports, checked
//! as the API server checks them.

use std::collections::BTreeMap;

use ferry_model::{ObjectRef, ServicePort, ServiceType};
use k8s_openapi::api::core::v1 as k8s;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::super::{non_empty, port, port_ref, protocol};
use crate::InvalidObject;

/// `spec.ports`, checked as the API server checks them.
pub(super) fn ports(
    spec: &k8s::ServiceSpec,
    service_type: ServiceType,
    object: &ObjectRef,
) -> Result<Vec<ServicePort>, InvalidObject> {
    let raw = spec.ports.as_deref().unwrap_or_default();
    if raw.is_empty() {
        return Err(InvalidObject::new(
            object,
            "spec.ports",
            "must have at least one port",
        ));
    }
    let mut names: BTreeMap<&str, usize> = BTreeMap::new();
    let mut ports: Vec<ServicePort> = Vec::with_capacity(raw.len());
    for (i, p) in raw.iter().enumerate() {
        let at = |field: &str| format!("spec.ports[{i}].{field}");
        let name = non_empty(p.name.as_deref()).unwrap_or("");
        port_name(name, i, raw.len(), &mut names)
            .map_err(|reason| InvalidObject::new(object, at("name"), reason))?;
        let number = port(p.port, object, &at("port"))?;
        let proto = protocol(p.protocol.as_deref(), object, &at("protocol"))?;
        if let Some(j) = ports
            .iter()
            .position(|q| q.port == number && q.protocol == proto)
        {
            return Err(InvalidObject::new(
                object,
                at("port"),
                format!(
                    "duplicate port {number}/{} (also spec.ports[{j}])",
                    proto_name(proto)
                ),
            ));
        }
        let node_port = node_port(p.node_port, proto, service_type, &ports, object, &at)?;
        // The API server defaults an unset (or zero, or empty) targetPort to the port.
        let target_port = match &p.target_port {
            None | Some(IntOrString::Int(0)) => ferry_model::PortRef::Number(number),
            Some(IntOrString::String(s)) if s.is_empty() => ferry_model::PortRef::Number(number),
            Some(target) => port_ref(target, object, &at("targetPort"))?,
        };
        ports.push(ServicePort {
            name: name.to_owned(),
            protocol: proto,
            port: number,
            node_port,
            target_port,
        });
    }
    Ok(ports)
}

/// Checks port `i`'s `name` (of `count` ports) as the API server does; `names`: the names
/// of the ports before it, with their places.
fn port_name<'a>(
    name: &'a str,
    i: usize,
    count: usize,
    names: &mut BTreeMap<&'a str, usize>,
) -> Result<(), String> {
    if name.is_empty() {
        return match count {
            1 => Ok(()),
            _ => Err("must be set when the Service has more than one port".to_owned()),
        };
    }
    if !is_dns1123_label(name) {
        return Err(format!(
            "must be a DNS-1123 label (lower-case letters, digits and '-', starting and ending \
             with a letter or digit, at most 63 characters), got {name:?}"
        ));
    }
    match names.insert(name, i) {
        Some(first) => Err(format!(
            "duplicate port name {name:?} (also spec.ports[{first}].name)"
        )),
        None => Ok(()),
    }
}

/// `spec.ports[i].nodePort` (`at` names a field of that port), given the ports before it.
/// One Service may use a node port for two protocols (TCP and UDP on one number), not twice
/// for one protocol, as the API server checks.
fn node_port(
    value: Option<i32>,
    proto: ferry_model::Protocol,
    service_type: ServiceType,
    before: &[ServicePort],
    object: &ObjectRef,
    at: &dyn Fn(&str) -> String,
) -> Result<Option<u16>, InvalidObject> {
    let node_port = match value {
        None | Some(0) => None,
        Some(np) => Some(port(np, object, &at("nodePort"))?),
    };
    let fail = |reason: String| Err(InvalidObject::new(object, at("nodePort"), reason));
    match (service_type, node_port) {
        (ServiceType::ClusterIp, Some(_)) => {
            fail("may not be used when type is 'ClusterIP'".to_owned())
        }
        // A LoadBalancer port without a nodePort is programmed without one (its ClusterIP and
        // load-balancer IPs still work), as kube-proxy does: the API server accepts it
        // (`allocateLoadBalancerNodePorts: false`, or a manifest written before allocation).
        (ServiceType::NodePort, None) => {
            fail("must be set: in standalone mode nothing allocates a node port".to_owned())
        }
        (_, Some(np)) => match before
            .iter()
            .position(|q| q.node_port == Some(np) && q.protocol == proto)
        {
            Some(j) => fail(format!(
                "duplicate nodePort {np}/{} (also spec.ports[{j}].nodePort)",
                proto_name(proto)
            )),
            None => Ok(node_port),
        },
        (_, None) => Ok(None),
    }
}

/// Kubernetes' spelling of a protocol, for messages.
fn proto_name(p: ferry_model::Protocol) -> &'static str {
    match p {
        ferry_model::Protocol::Tcp => "TCP",
        ferry_model::Protocol::Udp => "UDP",
        ferry_model::Protocol::Sctp => "SCTP",
    }
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63 characters: what the API server requires of
/// Service port names.
fn is_dns1123_label(s: &str) -> bool {
    let bytes = s.as_bytes();
    let alnum = |b: &u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    !bytes.is_empty()
        && bytes.len() <= 63
        && bytes.iter().all(|b| alnum(b) || *b == b'-')
        && bytes.first().is_some_and(alnum)
        && bytes.last().is_some_and(alnum)
}
