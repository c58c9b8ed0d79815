//! Reading a `KubeProxyConfiguration` file as kube-proxy does: the file itself, or the ConfigMap
//! that carries it (`kubectl -n kube-system get cm kube-proxy -o yaml` output: its
//! `config.conf`). Every field upstream knows is read; an unknown one is one warning naming the
//! file, the field's path and the field it most likely meant (kube-proxy's lenient decoding
//! also ignores it). A value of the wrong type is an error naming file and path.

use std::path::Path;

use serde_json::{Map, Value};

use super::kube_proxy::{KubeProxyConfiguration, API_VERSION, KIND};
use super::ConfigError;
use crate::suggest::unknown_fields;

mod lift;

/// Text of the warning for a field KubeProxyConfiguration does not have.
pub const UNKNOWN_FIELD: &str = "unknown field";

/// The key of kubeadm's kube-proxy ConfigMap that holds the configuration.
pub const CONFIG_MAP_KEY: &str = "config.conf";

/// A configuration file, read.
#[derive(Debug, Clone, PartialEq)]
pub struct FileConfig {
    /// What it says (zero values still unset: defaults are applied later).
    pub config: KubeProxyConfiguration,
    /// How messages name it: the path, plus `data[config.conf]` for a ConfigMap.
    pub name: String,
    /// Unknown fields, and fields read from another version's place.
    pub warnings: Vec<String>,
}

impl FileConfig {
    /// Reads and parses `path`.
    pub fn load(path: &Path) -> Result<FileConfig, ConfigError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|e| ConfigError::new("--config", format!("cannot read {shown}: {e}")))?;
        Self::parse(&shown, &text)
    }

    /// Parses the file's text. `file` names it in messages.
    pub fn parse(file: &str, text: &str) -> Result<FileConfig, ConfigError> {
        let value = yaml(file, text)?;
        let (name, value) = match kind(&value) {
            Some("ConfigMap") => from_config_map(file, &value)?,
            _ => (file.to_owned(), value),
        };
        let Value::Object(mut obj) = value else {
            return Err(ConfigError::new(
                &name,
                format!("must be a {KIND} object, got {}", describe(&value)),
            ));
        };
        check_type(&name, &obj)?;
        let mut warnings = Vec::new();
        let v1alpha2 = obj.get("apiVersion").and_then(Value::as_str) != Some(API_VERSION);
        lift::lift(&mut obj, v1alpha2, &name, &mut warnings);
        let value = Value::Object(obj);
        for field in unknown_fields(&value, &KubeProxyConfiguration::field_tree()) {
            let hint = field
                .suggestion
                .map(|s| format!(" (did you mean {s:?}?)"))
                .unwrap_or_default();
            warnings.push(format!(
                "{name}: {}: {UNKNOWN_FIELD} of {KIND}, ignored{hint}",
                field.path
            ));
        }
        let config: KubeProxyConfiguration =
            serde_path_to_error::deserialize(value).map_err(|e| {
                ConfigError::new(format!("{name}: {}", e.path()), e.inner().to_string())
            })?;
        Ok(FileConfig {
            config,
            name,
            warnings,
        })
    }
}

fn yaml(name: &str, text: &str) -> Result<Value, ConfigError> {
    if text.trim().is_empty() {
        return Err(ConfigError::new(name, format!("is empty (want a {KIND})")));
    }
    serde_saphyr::from_str(text).map_err(|e| ConfigError::new(name, format!("not valid YAML: {e}")))
}

fn kind(value: &Value) -> Option<&str> {
    value.get("kind").and_then(Value::as_str)
}

/// A value as a message shows it: `"ConfigMap"`, `a number`, `nothing` (never Rust's debug
/// text).
fn describe(value: &Value) -> String {
    match value {
        Value::Null => "nothing".to_owned(),
        Value::String(s) => format!("{s:?}"),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::Array(_) => "a list".to_owned(),
        Value::Object(_) => "an object".to_owned(),
    }
}

/// The KubeProxyConfiguration a ConfigMap carries: its `config.conf` (kubeadm's key), or else
/// its only value that is one.
fn from_config_map(file: &str, cm: &Value) -> Result<(String, Value), ConfigError> {
    let data = cm.get("data").and_then(Value::as_object);
    let entries: Vec<(&String, &str)> = data
        .into_iter()
        .flatten()
        .filter_map(|(k, v)| Some((k, v.as_str()?)))
        .collect();
    let chosen = entries
        .iter()
        .find(|(k, _)| k.as_str() == CONFIG_MAP_KEY)
        .or_else(|| {
            let mut found = entries
                .iter()
                .filter(|(_, text)| text.contains(&format!("kind: {KIND}")));
            let first = found.next();
            first.filter(|_| found.next().is_none())
        });
    let Some((key, text)) = chosen else {
        let keys: Vec<&str> = entries.iter().map(|(k, _)| k.as_str()).collect();
        return Err(ConfigError::new(
            format!("{file}: data"),
            format!(
                "this ConfigMap has no {CONFIG_MAP_KEY} holding a {KIND} (its keys: {})",
                if keys.is_empty() {
                    "none".to_owned()
                } else {
                    keys.join(", ")
                }
            ),
        ));
    };
    let name = format!("{file}: data[{key}]");
    let value = yaml(&name, text)?;
    Ok((name, value))
}

fn check_type(name: &str, obj: &Map<String, Value>) -> Result<(), ConfigError> {
    let field = |f: &str| obj.get(f).unwrap_or(&Value::Null);
    if kind_is(field("kind"), KIND).is_err() {
        return Err(ConfigError::new(
            format!("{name}: kind"),
            format!("must be {KIND}, got {}", describe(field("kind"))),
        ));
    }
    match field("apiVersion").as_str() {
        Some(API_VERSION | "kubeproxy.config.k8s.io/v1alpha2") => Ok(()),
        _ => Err(ConfigError::new(
            format!("{name}: apiVersion"),
            format!(
                "must be {API_VERSION} (or v1alpha2), got {}",
                describe(field("apiVersion"))
            ),
        )),
    }
}

fn kind_is(value: &Value, want: &str) -> Result<(), ()> {
    (value.as_str() == Some(want)).then_some(()).ok_or(())
}
