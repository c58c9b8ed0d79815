//! What `ferry check` finds in manifests, per object: every conversion error (not only the
//! first: the field at fault is set aside and the object converted again) and fields the kind
//! does not have. The checks across objects are in `across`.

use std::collections::BTreeMap;

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
