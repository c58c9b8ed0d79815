//! The configuration reference (`docs/src/reference/configuration.md`): every field of
//! `KubeProxyConfiguration` (from [`KubeProxyConfiguration::field_tree`]), its default (from
//! kube-proxy's defaulting as Ferry applies it), whether Ferry acts on it, and its meaning
//! ([`fields::FIELDS`]; a test checks that every field has exactly one entry and that the
//! fields said to warn are the ones [`crate::config::derive::not_used`] warns about).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::Value;

use super::table::{code, Table};
use crate::config::kube_proxy::{defaults, KubeProxyConfiguration};

mod fields;

pub use fields::{Use, FIELDS};

/// The page.
pub fn page() -> String {
    let mut out = super::generated_header(
        "Configuration reference",
        "the typed `KubeProxyConfiguration` (crates/ferry/src/config/kube_proxy.rs)",
    );
    out.push_str(INTRO);
    let defaults = defaults_json();
    // Top-level fields first, then one table per section (paths are in alphabetical order).
    let mut sections: BTreeMap<&str, Table> = BTreeMap::new();
    let paths = leaf_paths();
    for path in &paths {
        let section = path.split_once('.').map_or("", |(s, _)| s);
        let (usage, meaning) = entry(path);
        // Under its section's heading a field is named without the section (tables stay narrow).
        let name = path.strip_prefix(&format!("{section}.")).unwrap_or(path);
        sections
            .entry(section)
            .or_insert_with(|| Table::new(&["Field", "Ferry", "Meaning"]))
            .row(vec![
                format!(
                    "{}<br>default {}",
                    code(name),
                    show_default(lookup(&defaults, path))
                ),
                usage.label().to_owned(),
                meaning.to_owned(),
            ]);
    }
    for (section, table) in sections {
        let title = if section.is_empty() {
            "Top-level fields".to_owned()
        } else {
            format!("`{section}`")
        };
        let _ = writeln!(out, "## {title}\n");
        out.push_str(&table.render());
    }
    out
}

const INTRO: &str = "\
`--config FILE` takes a `kubeproxy.config.k8s.io/v1alpha1` `KubeProxyConfiguration`, or the \
ConfigMap that carries one (`kubectl -n kube-system get cm kube-proxy -o yaml`: Ferry reads its \
`config.conf`). v1alpha2's fields (`syncPeriod`, `linux.*`, `detectLocal.clusterCIDRs`, \
`*BindAddresses` / `*BindPort`, …) are read into their v1alpha1 places. As for kube-proxy, a \
zero or empty value means the default, so kubeadm's ConfigMap loads as is. An unknown field is \
one warning naming the file, the field's path and the field it most likely meant; a value of \
the wrong type or out of range is an error naming file and field (exit 64). Flags given next to \
`--config` override the file. `ferry run --write-config-to FILE` writes the effective \
configuration; `/configz` on the metrics server serves it.

**Ferry**: *acts* — Ferry uses the field; *warns* — set to anything but its default, the field \
is named in one warning at start (`set, but not used by Ferry`) and otherwise ignored; *kept* — \
read, checked and shown in `/configz`, used by no mode on this version (the reason is in the \
meaning).

Under each field, its **default**: the value after kube-proxy's defaulting, as \
`--write-config-to` shows it with no file and no flag. In a section's table a field is named \
without its section (`burst` under `clientConnection` is `clientConnection.burst`).

";

/// The entry of `path` in [`FIELDS`].
fn entry(path: &str) -> (Use, &'static str) {
    FIELDS
        .iter()
        .find(|(p, _, _)| *p == path)
        .map(|(_, u, m)| (*u, *m))
        .unwrap_or_else(|| panic!("{path}: no entry in reference/config/fields.rs"))
}

/// Every field a file may say, as dotted paths (a list or a map is one field), sorted.
pub fn leaf_paths() -> Vec<String> {
    let mut out = Vec::new();
    collect(&KubeProxyConfiguration::field_tree(), "", &mut out);
    out
}

fn collect(value: &Value, prefix: &str, out: &mut Vec<String>) {
    match value {
        Value::Object(map) if !map.is_empty() && prefix != "featureGates" => {
            for (key, v) in map {
                let path = if prefix.is_empty() {
                    key.clone()
                } else {
                    format!("{prefix}.{key}")
                };
                collect(v, &path, out);
            }
        }
        _ => out.push(prefix.to_owned()),
    }
}

/// The configuration with every default filled in, as JSON.
pub fn defaults_json() -> Value {
    let mut kp = KubeProxyConfiguration::empty();
    defaults::apply(&mut kp);
    serde_json::to_value(kp).expect("the configuration serialises")
}

/// The value at a dotted path (`None`: not there, e.g. a field only written when set).
pub fn lookup<'a>(value: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.').try_fold(value, |v, key| v.get(key))
}

fn show_default(value: Option<&Value>) -> String {
    match value {
        None | Some(Value::Null) => "unset".to_owned(),
        Some(Value::String(s)) if s.is_empty() => "empty".to_owned(),
        Some(Value::String(s)) => code(s),
        Some(v) => code(&v.to_string()),
    }
}
