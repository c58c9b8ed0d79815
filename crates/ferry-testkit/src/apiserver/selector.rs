//! `labelSelector` and `fieldSelector` query parameters, the equality-based subset.

use serde_json::Value;

/// One requirement of a selector.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Term {
    /// `key` (label) — present.
    Has(String),
    /// `!key` (label) — absent.
    HasNot(String),
    /// `key=value` / `key==value`.
    Equals(String, String),
    /// `key!=value` (also true when the key is absent).
    NotEquals(String, String),
}

/// A parsed selector: every term must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selector {
    labels: Vec<Term>,
    fields: Vec<Term>,
}

impl Selector {
    /// Parses the two query parameters. Set-based label terms (`in`, `notin`) and fields other
    /// than `metadata.name` / `metadata.namespace` are refused, as the server would refuse
    /// fields it does not index.
    pub fn parse(labels: Option<&str>, fields: Option<&str>) -> Result<Selector, String> {
        let mut out = Selector::default();
        for term in split(labels) {
            if term.contains(" in ") || term.contains(" notin ") || term.contains('(') {
                return Err(format!("unsupported label selector term {term:?}"));
            }
            out.labels.push(parse_term(term, true)?);
        }
        for term in split(fields) {
            let t = parse_term(term, false)?;
            match &t {
                Term::Equals(k, _) | Term::NotEquals(k, _)
                    if k == "metadata.name" || k == "metadata.namespace" => {}
                _ => return Err(format!("field label not supported: {term:?}")),
            }
            out.fields.push(t);
        }
        Ok(out)
    }

    /// True when `object` satisfies every term.
    pub fn matches(&self, object: &Value) -> bool {
        let labels = object.pointer("/metadata/labels");
        let label = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        let field = |k: &str| match k {
            "metadata.name" => object.pointer("/metadata/name").and_then(Value::as_str),
            "metadata.namespace" => object
                .pointer("/metadata/namespace")
                .and_then(Value::as_str),
            _ => None,
        };
        self.labels.iter().all(|t| holds(t, label)) && self.fields.iter().all(|t| holds(t, field))
    }
}

fn split(s: Option<&str>) -> impl Iterator<Item = &str> {
    s.unwrap_or_default()
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
}

fn parse_term(term: &str, label: bool) -> Result<Term, String> {
    if let Some((k, v)) = term.split_once("!=") {
        return Ok(Term::NotEquals(k.trim().into(), v.trim().into()));
    }
    if let Some((k, v)) = term.split_once("==").or_else(|| term.split_once('=')) {
        return Ok(Term::Equals(k.trim().into(), v.trim().into()));
    }
    if !label {
        return Err(format!("invalid field selector term {term:?}"));
    }
    match term.strip_prefix('!') {
        Some(k) => Ok(Term::HasNot(k.trim().into())),
        None => Ok(Term::Has(term.into())),
    }
}

fn holds<'a>(term: &Term, get: impl Fn(&str) -> Option<&'a str>) -> bool {
    match term {
        Term::Has(k) => get(k).is_some(),
        Term::HasNot(k) => get(k).is_none(),
        Term::Equals(k, v) => get(k) == Some(v.as_str()),
        Term::NotEquals(k, v) => get(k) != Some(v.as_str()),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::Selector;

    #[test]
    fn kube_proxy_label_selector_and_node_field_selector() {
        let s = Selector::parse(
            Some("!service.kubernetes.io/headless,!service.kubernetes.io/service-proxy-name"),
            None,
        )
        .expect("parse");
        assert!(s.matches(&json!({"metadata": {"name": "a"}})));
        assert!(
            !s.matches(&json!({"metadata": {"labels": {"service.kubernetes.io/headless": ""}}}))
        );
        let n = Selector::parse(None, Some("metadata.name=k8s-node2")).expect("parse");
        assert!(n.matches(&json!({"metadata": {"name": "k8s-node2"}})));
        assert!(!n.matches(&json!({"metadata": {"name": "k8s-node1"}})));
        assert!(Selector::parse(None, Some("spec.unschedulable=true")).is_err());
        assert!(Selector::parse(Some("app in (a,b)"), None).is_err());
    }
}
