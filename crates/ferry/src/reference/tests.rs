//! The committed reference pages are what the code generates (`FERRY_BLESS=1` rewrites them),
//! and the generators' own inputs agree with the code.

use std::path::PathBuf;

use serde_json::{json, Value};

use super::config::{self, Use, FIELDS};
use crate::config::derive::not_used;
use crate::config::kube_proxy::KubeProxyConfiguration;

fn book_src() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../docs/src")
}

#[test]
fn committed_reference_pages_are_what_the_code_generates() {
    let bless = std::env::var_os("FERRY_BLESS").is_some();
    let mut stale = Vec::new();
    for (page, text) in super::pages() {
        let path = book_src().join(page);
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        if committed == text {
            continue;
        }
        if bless {
            std::fs::write(&path, &text).expect("write the page");
        } else {
            stale.push(page);
        }
    }
    assert!(
        stale.is_empty(),
        "docs/src/{stale:?} differ from what the code generates; run \
         `FERRY_BLESS=1 cargo test -p ferry --bin ferry reference` and review the diff"
    );
}

#[test]
fn every_configuration_field_has_one_entry_and_no_entry_is_stale() {
    let paths = config::leaf_paths();
    for path in &paths {
        let n = FIELDS.iter().filter(|(p, _, _)| p == path).count();
        assert_eq!(n, 1, "{path}: {n} entries in reference/config/fields.rs");
    }
    for (p, _, _) in FIELDS {
        assert!(
            paths.iter().any(|path| path == p),
            "{p}: in reference/config/fields.rs but not a KubeProxyConfiguration field"
        );
    }
}

/// Whether setting `path` to something else than its default gets a `not used` warning.
fn warns_when_set(path: &str) -> bool {
    let defaults = config::defaults_json();
    let current = config::lookup(&defaults, path)
        .cloned()
        .unwrap_or(Value::Null);
    for candidate in changed_values(&current) {
        let mut v = defaults.clone();
        set(&mut v, path, candidate);
        if let Ok(kp) = serde_json::from_value::<KubeProxyConfiguration>(v) {
            return !not_used(&kp, "file").is_empty();
        }
    }
    panic!("{path}: found no other value the configuration accepts");
}

/// Values other than `current`, the likeliest first.
fn changed_values(current: &Value) -> Vec<Value> {
    let mut out = match current {
        Value::Bool(b) => vec![json!(!b)],
        Value::Number(n) => vec![n
            .as_i64()
            .map_or_else(|| json!(n.as_f64().unwrap_or(0.0) + 1.0), |i| json!(i + 1))],
        Value::String(s) if crate::config::parse_duration(s).is_ok() => {
            vec![json!(if s == "7s" { "8s" } else { "7s" })]
        }
        Value::String(s) => vec![json!(format!("{s}x"))],
        _ => Vec::new(),
    };
    out.extend([
        json!(true),
        json!(1),
        json!("7s"),
        json!(["x"]),
        json!([{}]),
        json!({"x": true}),
    ]);
    out
}

fn set(root: &mut Value, path: &str, value: Value) {
    let mut here = root;
    let keys: Vec<&str> = path.split('.').collect();
    let (last, parents) = keys.split_last().expect("a path");
    for key in parents {
        here = here
            .as_object_mut()
            .expect("an object")
            .entry(*key)
            .or_insert_with(|| json!({}));
    }
    here.as_object_mut()
        .expect("an object")
        .insert((*last).to_owned(), value);
}

#[test]
fn the_fields_said_to_warn_are_those_ferry_warns_about() {
    for (path, usage, _) in FIELDS {
        assert_eq!(
            warns_when_set(path),
            *usage == Use::Warns,
            "{path}: reference/config/fields.rs says {usage:?}, config::derive::not_used {}",
            if *usage == Use::Warns {
                "does not warn"
            } else {
                "warns"
            }
        );
    }
}

#[test]
fn every_metric_family_has_a_type_help_and_samples() {
    let families = super::metrics::parse(&super::metrics::exercised().encode());
    assert!(families.len() > 10, "{families:?}");
    for (name, f) in &families {
        assert!(!f.kind.is_empty() && !f.help.is_empty(), "{name}: {f:?}");
        assert!(
            f.samples > 0,
            "{name} has no sample: call its recording method in reference/metrics.rs \
             (exercised), so the page shows its labels"
        );
    }
}

#[test]
fn metric_labels_are_parsed_with_quoted_values() {
    let text = "# TYPE a histogram\n# HELP a A.\na_bucket{ip_family=\"IPv4\",le=\"0.5\"} 1\n\
                # TYPE b gauge\n# HELP b B.\nb{x=\"a,b=\\\"c\\\"\",y=\"\"} 1\n# EOF\n";
    let f = super::metrics::parse(text);
    assert_eq!(f["a"].labels.iter().collect::<Vec<_>>(), ["ip_family"]);
    assert_eq!(f["b"].labels.iter().collect::<Vec<_>>(), ["x", "y"]);
}
