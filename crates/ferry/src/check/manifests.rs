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

/// The kinds Ferry reads, with their apiVersion.
const KINDS: [(&str, &str); 5] = [
    ("v1", "Service"),
    ("discovery.k8s.io/v1", "EndpointSlice"),
    ("v1", "Endpoints"),
    ("v1", "Node"),
    ("v1", "Pod"),
];

/// Why a document Ferry skips was most likely meant to be read: a kind Ferry reads under an
/// apiVersion it does not (`apiVersion: v2`), or a misspelt kind (`Servce`). `None` for other
/// kinds (a Deployment beside the Services is not Ferry's to read).
/// Returns the field at fault (`apiVersion`, `kind`) and the message.
pub fn skipped_why(api_version: &str, kind: &str) -> Option<(&'static str, String)> {
    if KINDS.contains(&(api_version, kind)) || kind.ends_with("List") {
        return None;
    }
    if let Some((want, _)) = KINDS.iter().find(|(_, k)| *k == kind) {
        return Some((
            "apiVersion",
            format!("skipped: Ferry reads {kind} of apiVersion {want}, not {api_version:?}"),
        ));
    }
    let closest = crate::suggest::closest(kind, KINDS.iter().map(|(_, k)| *k))?;
    Some((
        "kind",
        format!("skipped: {kind:?} is not a kind Ferry reads (did you mean {closest}?)"),
    ))
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
    if let Some((field, why)) = skipped_why(api_version, kind) {
        out.push(finding(Severity::Warning, field.to_owned(), why));
    }
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
    let mut placed = Vec::new();
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
                // The same field again is the removal's doing ("must be set"): not news. A
                // stand-in lets the check go on to the other fields (a bad nodePort must not
                // hide a bad protocol in the next port).
                if seen.contains(&field) {
                    let stand_in = placeholder(&field).filter(|_| !placed.contains(&field));
                    match stand_in {
                        Some(v) if set_path(&mut value, &field, v.clone()) => {
                            placed.push(field);
                            continue;
                        }
                        _ => {
                            return Checked {
                                objects: Vec::new(),
                                object,
                            }
                        }
                    }
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
    edit_path(value, path, |here, last| match here {
        Value::Object(m) => m.remove(last).is_some(),
        Value::Array(a) => match last.parse::<usize>() {
            Ok(i) if i < a.len() => {
                a[i] = Value::Null;
                true
            }
            _ => false,
        },
        _ => false,
    })
}

/// A stand-in for a field whose removal the conversion refuses ("must be set"), so that the
/// object's other fields are still checked: a NodePort in the default range, distinct per
/// port (`spec.ports[k].nodePort`: 30000 + k). `None` for any other field.
fn placeholder(path: &str) -> Option<Value> {
    let rest = path.strip_prefix("spec.ports[")?;
    let (index, field) = rest.split_once("].")?;
    let k: u64 = index.parse().ok()?;
    (field == "nodePort").then(|| Value::from(30000 + k))
}

/// Sets the field at `path` to `new`.
fn set_path(value: &mut Value, path: &str, new: Value) -> bool {
    edit_path(value, path, |here, last| match here {
        Value::Object(m) => {
            m.insert(last.to_owned(), new);
            true
        }
        _ => false,
    })
}

/// Finds the parent of the field at `path` and hands it, with the field's last step, to
/// `edit`; false when the path leads nowhere.
fn edit_path(value: &mut Value, path: &str, edit: impl FnOnce(&mut Value, &str) -> bool) -> bool {
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
    edit(here, last)
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
