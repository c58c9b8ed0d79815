//! What `ferry check` finds in manifests, per object: every conversion error (not only the
//! first: the field at fault is set aside and the object converted again), fields the kind does
//! not have, and conflicts across objects the API server would have refused (two Services with
//! one ClusterIP or one NodePort) or that leave endpoints unused (a slice port name no Service
//! port has).

use std::collections::BTreeMap;
use std::net::IpAddr;

use ferry_model::Object;
use ferry_source::manifest::Document;
use k8s_openapi::api::core::v1::{Endpoints, Node, Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::Value;

use super::fields;
use super::{Finding, Severity};
use crate::suggest::unknown_fields;

/// At most this many conversion errors are looked for per object.
const MAX_ERRORS_PER_OBJECT: usize = 10;

/// One document, checked.
pub struct Checked {
    /// Its objects, when it converts.
    pub objects: Vec<Object>,
    /// `Kind namespace/name`.
    pub object: String,
}

/// `Kind namespace/name` as written (namespace `default` when unset, none for Nodes).
pub fn object_name(doc: &Document) -> String {
    let (_, kind) = doc.type_meta();
    let meta = |k: &str| {
        doc.value
            .pointer(&format!("/metadata/{k}"))
            .and_then(Value::as_str)
    };
    let name = meta("name").unwrap_or("(unnamed)");
    match (kind, meta("namespace")) {
        ("Node", _) => format!("Node {name}"),
        (kind, ns) => format!("{kind} {}/{name}", ns.unwrap_or("default")),
    }
}

fn known_tree(api_version: &str, kind: &str) -> Option<Value> {
    match (api_version, kind) {
        ("v1", "Service") => fields::tree::<Service>(),
        ("discovery.k8s.io/v1", "EndpointSlice") => fields::tree::<EndpointSlice>(),
        ("v1", "Endpoints") => fields::tree::<Endpoints>(),
        ("v1", "Node") => fields::tree::<Node>(),
        ("v1", "Pod") => fields::tree::<Pod>(),
        _ => None,
    }
}

/// Checks one document: unknown fields and every conversion error.
pub fn check_document(
    doc: &Document,
    trees: &mut BTreeMap<String, Option<Value>>,
    out: &mut Vec<Finding>,
) -> Checked {
    let (api_version, kind) = doc.type_meta();
    let object = object_name(doc);
    let finding = |severity, field: String, message: String| Finding {
        severity,
        file: doc.file.display().to_string(),
        position: doc.position.clone(),
        object: object.clone(),
        field,
        message,
    };
    let tree = trees
        .entry(format!("{api_version} {kind}"))
        .or_insert_with(|| known_tree(api_version, kind));
    if let Some(tree) = tree {
        for f in unknown_fields(&doc.value, tree) {
            let message = match &f.suggestion {
                Some(s) => format!("unknown field of {kind} (did you mean {s:?}?)"),
                None => format!("unknown field of {kind}"),
            };
            out.push(finding(Severity::Error, f.path, message));
        }
    }
    let mut value = doc.value.clone();
    let mut seen = Vec::new();
    loop {
        let retry = Document {
            value: value.clone(),
            ..doc.clone()
        };
        match retry.convert() {
            Ok(objects) => {
                return Checked {
                    objects: if seen.is_empty() { objects } else { Vec::new() },
                    object,
                }
            }
            Err(e) => {
                let field = e.field.clone();
                // The same field again is the removal's doing ("must be set"): not news.
                if seen.contains(&field) {
                    return Checked {
                        objects: Vec::new(),
                        object,
                    };
                }
                out.push(finding(Severity::Error, field.clone(), e.reason.clone()));
                seen.push(field.clone());
                if field.is_empty()
                    || seen.len() >= MAX_ERRORS_PER_OBJECT
                    || !remove_path(&mut value, &field)
                {
                    return Checked {
                        objects: Vec::new(),
                        object,
                    };
                }
            }
        }
    }
}

/// Removes the field at `path` (`spec.ports[0].port`, `metadata.labels[kubernetes.io/x]`).
fn remove_path(value: &mut Value, path: &str) -> bool {
    let mut steps: Vec<String> = Vec::new();
    let mut current = String::new();
    let mut in_brackets = false;
    for c in path.chars() {
        match c {
            '[' if !in_brackets => {
                in_brackets = true;
                if !current.is_empty() {
                    steps.push(std::mem::take(&mut current));
                }
            }
            ']' if in_brackets => {
                in_brackets = false;
                steps.push(std::mem::take(&mut current));
            }
            '.' if !in_brackets => {
                if !current.is_empty() {
                    steps.push(std::mem::take(&mut current));
                }
            }
            c => current.push(c),
        }
    }
    if !current.is_empty() {
        steps.push(current);
    }
    let Some((last, parents)) = steps.split_last() else {
        return false;
    };
    let mut here = value;
    for step in parents {
        here = match here {
            Value::Object(m) => match m.get_mut(step) {
                Some(v) => v,
                None => return false,
            },
            Value::Array(a) => match step.parse::<usize>().ok().and_then(|i| a.get_mut(i)) {
                Some(v) => v,
                None => return false,
            },
            _ => return false,
        };
    }
    match here {
        Value::Object(m) => m.remove(last).is_some(),
        Value::Array(a) => match last.parse::<usize>() {
            Ok(i) if i < a.len() => {
                a[i] = Value::Null;
                true
            }
            _ => false,
        },
        _ => false,
    }
}

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

/// What a Service claims: its ClusterIPs, NodePorts (with their port's index) and port names.
#[derive(Debug)]
struct Claims {
    place: Place,
    cluster_ips: Vec<IpAddr>,
    node_ports: Vec<(usize, u16)>,
    /// `namespace/name`.
    service: String,
    port_names: Vec<String>,
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
                cluster_ips: svc.cluster_ips.to_vec(),
                node_ports: svc
                    .ports
                    .iter()
                    .enumerate()
                    .filter_map(|(i, p)| Some((i, p.node_port?)))
                    .collect(),
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

    /// Conflicts across Services and slices: one ClusterIP or NodePort claimed twice, slice
    /// port names no port of their Service has.
    pub fn check(&self, out: &mut Vec<Finding>) {
        let mut cluster_ips: BTreeMap<IpAddr, String> = BTreeMap::new();
        let mut node_ports: BTreeMap<u16, String> = BTreeMap::new();
        let mut port_names: BTreeMap<&str, &[String]> = BTreeMap::new();
        for c in &self.services {
            let place = &c.place;
            let here = format!("{} ({}: {})", place.object, place.file, place.position);
            for (i, ip) in c.cluster_ips.iter().enumerate() {
                if let Some(first) = cluster_ips.get(ip) {
                    out.push(place.finding(
                        Severity::Error,
                        format!("spec.clusterIPs[{i}]"),
                        format!("{ip} is already the ClusterIP of {first}"),
                    ));
                } else {
                    cluster_ips.insert(*ip, here.clone());
                }
            }
            for &(i, np) in &c.node_ports {
                match node_ports.get(&np) {
                    Some(first) if !first.starts_with(&place.object) => {
                        out.push(place.finding(
                            Severity::Error,
                            format!("spec.ports[{i}].nodePort"),
                            format!("{np} is already a NodePort of {first}"),
                        ));
                    }
                    Some(_) => {}
                    None => {
                        node_ports.insert(np, here.clone());
                    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn removes_nested_fields_and_label_keys() {
        let mut v = serde_json::json!({"spec": {"ports": [{"port": 1, "name": "a"}]},
                                       "metadata": {"labels": {"kubernetes.io/service-name": "x"}}});
        assert!(remove_path(&mut v, "spec.ports[0].port"));
        assert!(remove_path(
            &mut v,
            "metadata.labels[kubernetes.io/service-name]"
        ));
        assert_eq!(
            v,
            serde_json::json!({"spec": {"ports": [{"name": "a"}]}, "metadata": {"labels": {}}})
        );
        assert!(!remove_path(&mut v, "spec.nothing.here"));
    }
}
