//! `ferry check`'s checks across objects: conflicts the API server would have refused (two
//! Services with one ClusterIP, one node port, or one external or load-balancer IP with the
//! same protocol and port), an external or load-balancer IP on another Service's ClusterIP
//! and port (which the API server lets through), and slice port names no port of their
//! Service has, which leave endpoints unused. The manifest source refuses the same conflicts
//! when it runs (the first Service written keeps what it claims; its claim index is
//! `ferry-source`'s `manifest/store/claims.rs`, kept in step with this one).

use std::collections::BTreeMap;
use std::net::IpAddr;

use ferry_model::{Object, Protocol, Service};
use ferry_source::manifest::Document;
use serde_json::Value;

use super::manifests::Checked;
use super::{Finding, Severity};

/// Where a finding about one document goes.
#[derive(Debug, Clone)]
struct Place {
    file: String,
    position: String,
    /// `Kind namespace/name`.
    object: String,
}

impl Place {
    fn of(doc: &Document, checked: &Checked) -> Self {
        Place {
            file: doc.file.display().to_string(),
            position: doc.position.clone(),
            object: checked.object.clone(),
        }
    }

    fn finding(&self, severity: Severity, field: String, message: String) -> Finding {
        Finding {
            severity,
            file: self.file.clone(),
            position: self.position.clone(),
            object: self.object.clone(),
            field,
            message,
        }
    }
}

/// What a Service claims for itself alone: its ClusterIPs, node ports (the number, whatever
/// the protocol: the API server's allocator hands a number out once) and external frontends
/// (an external or load-balancer IP with one protocol and port); and its port names.
#[derive(Debug)]
struct Claims {
    place: Place,
    claims: Vec<(Key, At)>,
    /// `namespace/name`.
    service: String,
    port_names: Vec<String>,
}

/// One thing a Service claims.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Key {
    ClusterIp(IpAddr),
    NodePort(u16),
    Frontend(IpAddr, Protocol, u16),
}

/// Where in its Service a claim is written (indexes into its lists; the port's last).
#[derive(Debug, Clone, Copy)]
enum At {
    ClusterIp(usize),
    /// A ClusterIP with one of the Service's ports: `spec.clusterIPs[i]`, `spec.ports[j]`.
    ClusterIpPort(usize, usize),
    NodePort(usize),
    HealthCheckNodePort,
    ExternalIp(usize, usize),
    /// `status.loadBalancer.ingress[i]`, when found in the document.
    Ingress(Option<usize>, usize),
}

impl At {
    fn field(self) -> String {
        match self {
            At::ClusterIp(i) | At::ClusterIpPort(i, _) => format!("spec.clusterIPs[{i}]"),
            At::NodePort(i) => format!("spec.ports[{i}].nodePort"),
            At::HealthCheckNodePort => "spec.healthCheckNodePort".to_owned(),
            At::ExternalIp(i, _) => format!("spec.externalIPs[{i}]"),
            At::Ingress(Some(i), _) => format!("status.loadBalancer.ingress[{i}].ip"),
            At::Ingress(None, _) => "status.loadBalancer.ingress".to_owned(),
        }
    }

    /// What is taken, said of `key` whose first claimant is `first`.
    fn message(self, key: Key, first: &str) -> String {
        match (key, self) {
            (Key::ClusterIp(ip), _) => format!("{ip} is already the ClusterIP of {first}"),
            (Key::NodePort(np), _) => format!("{np} is already a NodePort of {first}"),
            (
                Key::Frontend(ip, proto, port),
                At::ExternalIp(_, j) | At::Ingress(_, j) | At::ClusterIpPort(_, j),
            ) => format!(
                "{ip} with port {port}/{} (spec.ports[{j}]) is already a ClusterIP, external \
                 or load-balancer IP and port of {first}",
                proto.as_str().to_uppercase()
            ),
            (Key::Frontend(ip, ..), _) => format!("{ip} is already taken by {first}"),
        }
    }
}

/// A Service's claims, in field order.
fn claims_of(svc: &Service, doc: &Document) -> Vec<(Key, At)> {
    let mut claims: Vec<(Key, At)> = svc
        .cluster_ips
        .iter()
        .enumerate()
        .map(|(i, ip)| (Key::ClusterIp(*ip), At::ClusterIp(i)))
        .collect();
    // Each ClusterIP with each port is a frontend too: another Service's external or
    // load-balancer IP there would take it.
    for (i, ip) in svc.cluster_ips.iter().enumerate() {
        for (j, p) in svc.ports.iter().enumerate() {
            claims.push((
                Key::Frontend(*ip, p.protocol, p.port),
                At::ClusterIpPort(i, j),
            ));
        }
    }
    for (i, p) in svc.ports.iter().enumerate() {
        claims.extend(p.node_port.map(|np| (Key::NodePort(np), At::NodePort(i))));
    }
    if let Some(np) = svc
        .health_check_node_port
        .filter(|_| svc.needs_health_check())
    {
        claims.push((Key::NodePort(np), At::HealthCheckNodePort));
    }
    let ingress = doc
        .value
        .pointer("/status/loadBalancer/ingress")
        .and_then(Value::as_array);
    let ingress_index = |ip: &IpAddr| {
        ingress?.iter().position(|e| {
            e.get("ip")
                .and_then(Value::as_str)
                .and_then(|s| s.parse().ok())
                == Some(*ip)
        })
    };
    let ips = (svc.external_ips.iter().enumerate())
        .map(|(i, ip)| (ip, Some(i), None))
        .chain(
            svc.load_balancer_ips
                .iter()
                .map(|ip| (ip, None, ingress_index(ip))),
        );
    for (ip, external, ingress) in ips {
        for (j, p) in svc.ports.iter().enumerate() {
            let at = match external {
                Some(i) => At::ExternalIp(i, j),
                None => At::Ingress(ingress, j),
            };
            claims.push((Key::Frontend(*ip, p.protocol, p.port), at));
        }
    }
    claims
}

/// The first Service claiming each key: its object and where it is written.
#[derive(Default)]
struct Taken(BTreeMap<Key, (String, String)>);

impl Taken {
    /// Where the first claimant of `key` is written, when it is another Service; else `key`
    /// is now `place`'s (written `here`). A Service never conflicts with itself (one node
    /// port for TCP and UDP, one address as external and load-balancer IP).
    fn claim(&mut self, key: Key, place: &Place, here: &str) -> Option<&str> {
        let (object, first) = self
            .0
            .entry(key)
            .or_insert_with(|| (place.object.clone(), here.to_owned()));
        (*object != place.object).then_some(first.as_str())
    }
}

/// A slice's port names as written (`""` where none), and its Service's `namespace/name`.
#[derive(Debug)]
struct SlicePorts {
    place: Place,
    service: String,
    names: Vec<String>,
}

/// What the checks across objects need of each document, kept when the document itself is
/// dropped: a directory of 10 000 files is never held as documents at once.
#[derive(Debug, Default)]
pub struct Across {
    services: Vec<Claims>,
    slices: Vec<SlicePorts>,
}

impl Across {
    /// Takes what the checks need of one checked document (in read order).
    pub fn note(&mut self, doc: &Document, checked: &Checked) {
        for obj in &checked.objects {
            let Object::Service(svc) = obj else { continue };
            self.services.push(Claims {
                place: Place::of(doc, checked),
                claims: claims_of(svc, doc),
                service: format!("{}/{}", svc.name.namespace, svc.name.name),
                port_names: svc.ports.iter().map(|p| p.name.to_string()).collect(),
            });
        }
        if doc.type_meta().1 != "EndpointSlice" {
            return;
        }
        let text = |pointer: &str| doc.value.pointer(pointer).and_then(Value::as_str);
        let ns = text("/metadata/namespace").unwrap_or("default");
        let Some(service) = text("/metadata/labels/kubernetes.io~1service-name") else {
            return;
        };
        let ports = doc.value.get("ports").and_then(Value::as_array);
        self.slices.push(SlicePorts {
            place: Place::of(doc, checked),
            service: format!("{ns}/{service}"),
            names: ports
                .into_iter()
                .flatten()
                .map(|p| {
                    p.get("name")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned()
                })
                .collect(),
        });
    }

    /// Conflicts across Services and slices: a ClusterIP, node port or external frontend
    /// claimed twice, slice port names no port of their Service has.
    pub fn check(&self, out: &mut Vec<Finding>) {
        let mut taken = Taken::default();
        let mut port_names: BTreeMap<&str, &[String]> = BTreeMap::new();
        for c in &self.services {
            let place = &c.place;
            let here = format!("{} ({}: {})", place.object, place.file, place.position);
            // A ClusterIP taken already is one problem: its ports with it are not another.
            let mut taken_ips = Vec::new();
            for &(key, at) in &c.claims {
                if let (Key::Frontend(ip, ..), At::ClusterIpPort(..)) = (key, at) {
                    if taken_ips.contains(&ip) {
                        continue;
                    }
                }
                if let Some(first) = taken.claim(key, place, &here) {
                    if let Key::ClusterIp(ip) = key {
                        taken_ips.push(ip);
                    }
                    out.push(place.finding(Severity::Error, at.field(), at.message(key, first)));
                }
            }
            port_names.insert(&c.service, &c.port_names);
        }
        for slice in &self.slices {
            let Some(names) = port_names.get(slice.service.as_str()) else {
                continue;
            };
            for (i, name) in slice.names.iter().enumerate() {
                if !names.iter().any(|n| n == name) {
                    out.push(slice.place.finding(
                        Severity::Warning,
                        format!("ports[{i}].name"),
                        format!(
                            "{name:?} is not the name of a port of Service {} (its ports: {}); \
                             these endpoints get no traffic",
                            slice.service,
                            names.iter().map(|n| format!("{n:?}")).collect::<Vec<_>>().join(", ")
                        ),
                    ));
                }
            }
        }
    }
}
