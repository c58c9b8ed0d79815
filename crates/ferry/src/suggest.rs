//! "Did you mean …?": the known name closest to a misspelt one, and unknown fields of a YAML or
//! JSON object against the field names its type has.

use serde_json::Value;

/// The candidate `name` was most likely meant to be: one that differs only in case
/// (`clusterCidr` → `clusterCIDR`), else the closest by edit distance, if close enough to be a
/// typo (at most a third of the name's length, and at most 3 edits).
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let lower = name.to_lowercase();
    let mut best: Option<(usize, &str)> = None;
    for c in candidates {
        if c.to_lowercase() == lower {
            return Some(c);
        }
        let d = strsim::damerau_levenshtein(&lower, &c.to_lowercase());
        if best.is_none_or(|(b, _)| d < b) {
            best = Some((d, c));
        }
    }
    let limit = (name.chars().count() / 3).clamp(1, 3);
    best.filter(|(d, _)| *d <= limit).map(|(_, c)| c)
}

/// A field the type does not have.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownField {
    /// Its path (`iptables.masqueradeBits`, `ports[0].nodeport`).
    pub path: String,
    /// The known field it most likely meant.
    pub suggestion: Option<String>,
}

impl std::fmt::Display for UnknownField {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.suggestion {
            Some(s) => write!(f, "{}: unknown field (did you mean {s:?}?)", self.path),
            None => write!(f, "{}: unknown field", self.path),
        }
    }
}

/// Every field of `value` that `known` does not have, recursively. `known` is an example of
/// the type with every field present: an object lists the fields (an empty object is a map with
/// free keys), an array's first element is the shape of every element, anything else is a leaf.
pub fn unknown_fields(value: &Value, known: &Value) -> Vec<UnknownField> {
    let mut out = Vec::new();
    walk(value, known, "", &mut out);
    out
}

fn walk(value: &Value, known: &Value, path: &str, out: &mut Vec<UnknownField>) {
    match (value, known) {
        (Value::Object(fields), Value::Object(shape)) if !shape.is_empty() => {
            for (key, v) in fields {
                let here = if path.is_empty() {
                    key.clone()
                } else {
                    format!("{path}.{key}")
                };
                match shape.get(key) {
                    Some(k) => walk(v, k, &here, out),
                    None => out.push(UnknownField {
                        path: here,
                        suggestion: closest(key, shape.keys().map(String::as_str))
                            .map(str::to_owned),
                    }),
                }
            }
        }
        (Value::Array(items), Value::Array(shape)) => {
            if let Some(k) = shape.first() {
                for (i, v) in items.iter().enumerate() {
                    walk(v, k, &format!("{path}[{i}]"), out);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn suggests_case_fixes_and_close_typos_only() {
        let known = ["clusterCIDR", "masqueradeBit", "nodePort", "port"];
        assert_eq!(closest("clusterCidr", known), Some("clusterCIDR"));
        assert_eq!(closest("masqueradeBits", known), Some("masqueradeBit"));
        assert_eq!(closest("nodeport", known), Some("nodePort"));
        assert_eq!(closest("targetPort", known), None);
        assert_eq!(closest("x", known), None);
    }

    #[test]
    fn finds_unknown_fields_at_every_depth_with_their_path() {
        let known = json!({"a": {"b": 1, "c": 2}, "list": [{"name": ""}], "gates": {}});
        let value = json!({"a": {"b": 1, "cc": 2}, "list": [{"name": "x"}, {"nmae": "y"}],
                           "gates": {"Anything": true}, "zzz": 1});
        let found: Vec<String> = unknown_fields(&value, &known)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            found,
            [
                "a.cc: unknown field (did you mean \"c\"?)",
                "list[1].nmae: unknown field (did you mean \"name\"?)",
                "zzz: unknown field",
            ]
        );
    }
}
