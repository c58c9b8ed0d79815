//! Reading Ferry's table back from the kernel (`nft -j list table`), for `ferry explain --live`.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

use serde_json::Value;

use ferry_compile::nft::TABLE;
use ferry_model::IpFamily;

use crate::Error;

/// What the kernel holds in Ferry's table: chain names, and set/map elements written the way
/// Ferry's rulesets write them (`10.96.0.1 . tcp . 80`, `goto chain`, `10.0.0.1 . 8080`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LiveTable {
    /// Chain names.
    pub chains: BTreeSet<String>,
    /// Set or map name → key → value (`None` for set elements).
    pub elements: BTreeMap<String, BTreeMap<String, Option<String>>>,
}

/// Reads Ferry's table of `family` in the current network namespace; `Ok(None)` when there is
/// no such table.
pub fn read_back(family: IpFamily) -> Result<Option<LiveTable>, Error> {
    let fam = ferry_compile::family::nft_family(family);
    let out = Command::new("nft")
        .args(["-j", "list", "table", fam, TABLE])
        .output()
        .map_err(|source| Error::Spawn {
            program: "nft".into(),
            source,
        })?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_owned();
        if stderr.contains("No such file or directory") {
            return Ok(None);
        }
        return Err(Error::Rejected {
            program: "nft".into(),
            status: out.status.to_string(),
            stderr,
        });
    }
    let json: Value = serde_json::from_slice(&out.stdout).map_err(|e| Error::Rejected {
        program: "nft -j".into(),
        status: "unparsable output".into(),
        stderr: e.to_string(),
    })?;
    Ok(Some(parse(&json)))
}

/// Parses `nft -j list table` output.
pub fn parse(json: &Value) -> LiveTable {
    let mut live = LiveTable::default();
    let objects = json
        .get("nftables")
        .and_then(Value::as_array)
        .into_iter()
        .flatten();
    for obj in objects {
        if let Some(chain) = obj.get("chain") {
            if let Some(name) = chain.get("name").and_then(Value::as_str) {
                live.chains.insert(name.to_owned());
            }
        }
        for kind in ["set", "map"] {
            let Some(set) = obj.get(kind) else { continue };
            let Some(name) = set.get("name").and_then(Value::as_str) else {
                continue;
            };
            let entry = live.elements.entry(name.to_owned()).or_default();
            for elem in set
                .get("elem")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                match elem.as_array().map(Vec::as_slice) {
                    Some([key, value]) => {
                        entry.insert(text(key), Some(text(value)));
                    }
                    _ => {
                        entry.insert(text(elem), None);
                    }
                }
            }
        }
    }
    live
}

/// One JSON expression in Ferry's element syntax.
fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Object(o) => {
            if let Some(c) = o.get("concat").and_then(Value::as_array) {
                c.iter().map(text).collect::<Vec<_>>().join(" . ")
            } else if let Some(e) = o.get("elem") {
                e.get("val").map(text).unwrap_or_default()
            } else if let Some(p) = o.get("prefix") {
                format!(
                    "{}/{}",
                    p.get("addr").map(text).unwrap_or_default(),
                    p.get("len").map(text).unwrap_or_default()
                )
            } else if let Some(g) = o.get("goto") {
                format!("goto {}", g.get("target").map(text).unwrap_or_default())
            } else if let Some(j) = o.get("jump") {
                format!("jump {}", j.get("target").map(text).unwrap_or_default())
            } else if o.contains_key("drop") {
                "drop".to_owned()
            } else {
                Value::Object(o.clone()).to_string()
            }
        }
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_elements_the_way_ferry_writes_them() {
        let json: Value = serde_json::from_str(r#"{"nftables": [
            {"chain": {"family": "ip", "table": "ferry", "name": "cluster-ip-cluster-2"}},
            {"map": {"name": "service-ips", "elem": [[{"elem": {"val": {"concat": ["10.96.198.86", "tcp", 8080]}, "comment": "dev/x:http"}}, {"goto": {"target": "cluster-ip-cluster-2"}}]]}},
            {"map": {"name": "cluster-endpoints", "elem": [[{"concat": ["10.96.198.86", "tcp", 8080, 0]}, {"concat": ["192.168.169.166", 56010]}]]}},
            {"map": {"name": "no-endpoint-nodeports", "elem": [[{"concat": ["tcp", 32223]}, {"drop": null}]]}},
            {"set": {"name": "nodeport-ips", "elem": [{"prefix": {"addr": "10.1.1.0", "len": 24}}, "10.1.1.9"]}}
        ]}"#).expect("json");
        let live = parse(&json);
        assert!(live.chains.contains("cluster-ip-cluster-2"));
        let get = |set: &str, key: &str| live.elements[set].get(key).cloned();
        assert_eq!(
            get("service-ips", "10.96.198.86 . tcp . 8080"),
            Some(Some("goto cluster-ip-cluster-2".into()))
        );
        assert_eq!(
            get("cluster-endpoints", "10.96.198.86 . tcp . 8080 . 0"),
            Some(Some("192.168.169.166 . 56010".into()))
        );
        assert_eq!(
            get("no-endpoint-nodeports", "tcp . 32223"),
            Some(Some("drop".into()))
        );
        assert_eq!(get("nodeport-ips", "10.1.1.0/24"), Some(None));
        assert_eq!(get("nodeport-ips", "10.1.1.9"), Some(None));
    }
}
