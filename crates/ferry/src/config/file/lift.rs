//! v1alpha2's fields, moved to their v1alpha1 places before the typed read: kube-proxy's newer
//! `kubeproxy.config.k8s.io/v1alpha2` keeps the sync periods at the top level, Linux settings
//! under `linux`, the cluster CIDRs under `detectLocal.clusterCIDRs` and the servers as address
//! lists plus a port. In a v1alpha1 file these fields are not kube-proxy's (it ignores them);
//! Ferry reads them too and says so.

use std::net::IpAddr;

use ipnet::IpNet;
use serde_json::{Map, Value};

/// Moves every v1alpha2 field of `obj` to its v1alpha1 place (never over a value the v1alpha1
/// place already has). In a v1alpha1 file each moved field is a warning.
pub fn lift(obj: &mut Map<String, Value>, v1alpha2: bool, name: &str, warnings: &mut Vec<String>) {
    let mut moved = Vec::new();
    for key in ["syncPeriod", "minSyncPeriod"] {
        if let Some(v) = obj.remove(key) {
            for section in ["iptables", "nftables", "ipvs"] {
                set_default(obj, &[section, key], v.clone());
            }
            moved.push(key.to_owned());
        }
    }
    if let Some(v) = obj.remove("masqueradeAll") {
        masquerade_all(obj, v);
        moved.push("masqueradeAll".to_owned());
    }
    if let Some(Value::Object(mut linux)) = obj.remove("linux") {
        if let Some(v) = linux.remove("masqueradeAll") {
            masquerade_all(obj, v);
        }
        for (from, to) in [("oomScoreAdj", "oomScoreAdj"), ("conntrack", "conntrack")] {
            if let Some(v) = linux.remove(from) {
                set_default(obj, &[to], v);
            }
        }
        // What is left is unknown: keep it where the unknown-field check will see it.
        if !linux.is_empty() {
            obj.insert("linux".to_owned(), Value::Object(linux));
        }
        moved.push("linux".to_owned());
    }
    if let Some(cidrs) = take(obj, &["detectLocal", "clusterCIDRs"]) {
        let joined: Vec<&str> = cidrs
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        if !joined.is_empty() {
            set_default(obj, &["clusterCIDR"], Value::String(joined.join(",")));
        }
        moved.push("detectLocal.clusterCIDRs".to_owned());
    }
    if let Some(v) = take(obj, &["windows", "runAsService"]) {
        set_default(obj, &["windowsRunAsService"], v);
        if obj
            .get("windows")
            .and_then(Value::as_object)
            .is_some_and(Map::is_empty)
        {
            obj.remove("windows");
        }
        moved.push("windows.runAsService".to_owned());
    }
    if let Some(v) = obj.remove("nodeIPOverride") {
        if let Some(first) = v.as_array().and_then(|a| a.first()).cloned() {
            set_default(obj, &["bindAddress"], first);
        }
        moved.push("nodeIPOverride".to_owned());
    }
    for (server, any) in [("healthz", "0.0.0.0"), ("metrics", "127.0.0.1")] {
        let list = obj.remove(&format!("{server}BindAddresses"));
        let port = obj.remove(&format!("{server}BindPort"));
        if list.is_none() && port.is_none() {
            continue;
        }
        if let Some(addr) = bind_address(list.as_ref(), port.as_ref(), any) {
            set_default(obj, &[&format!("{server}BindAddress")], Value::String(addr));
        }
        moved.push(format!("{server}BindAddresses / {server}BindPort"));
    }
    if let Some(v) = take(obj, &["ipvs", "masqueradeBit"]) {
        set_default(obj, &["iptables", "masqueradeBit"], v);
        moved.push("ipvs.masqueradeBit".to_owned());
    }
    // v1alpha2 only: whether a config file change is fatal (kube-proxy exits on any change;
    // Ferry reads its file once, at start).
    if obj.remove("configHardFail").is_some() {
        moved.push("configHardFail".to_owned());
    }
    if !v1alpha2 {
        for field in moved {
            warnings.push(format!(
                "{name}: {field}: a v1alpha2 field in a v1alpha1 file (kube-proxy ignores it); \
                 Ferry reads it"
            ));
        }
    }
}

fn masquerade_all(obj: &mut Map<String, Value>, v: Value) {
    for section in ["iptables", "nftables"] {
        set_default(obj, &[section, "masqueradeAll"], v.clone());
    }
}

/// Removes `path` from `obj` (and returns it).
fn take(obj: &mut Map<String, Value>, path: &[&str]) -> Option<Value> {
    let (last, parents) = path.split_last()?;
    let mut here = obj;
    for p in parents {
        here = here.get_mut(*p)?.as_object_mut()?;
    }
    here.remove(*last)
}

/// Sets `path` to `v` unless it already holds a non-zero value (`0s`, `""`, `0`, `false` and
/// null count as unset, as in upstream's defaulting).
fn set_default(obj: &mut Map<String, Value>, path: &[&str], v: Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut here = obj;
    for p in parents {
        let entry = here
            .entry((*p).to_owned())
            .or_insert_with(|| Value::Object(Map::new()));
        if !entry.is_object() {
            return;
        }
        let Some(next) = entry.as_object_mut() else {
            return;
        };
        here = next;
    }
    let unset = match here.get(*last) {
        None | Some(Value::Null) | Some(Value::Bool(false)) => true,
        Some(Value::String(s)) => s.is_empty() || s == "0s" || s == "0",
        Some(Value::Number(n)) => n.as_f64() == Some(0.0),
        Some(_) => false,
    };
    if unset {
        here.insert((*last).to_owned(), v);
    }
}

/// `IP:PORT` for a v1alpha2 address list (CIDRs) and port: the first CIDR's address when it is
/// a single host, loopback for a loopback range, otherwise the family's any-address; without a
/// list, `default` (the server's usual address).
fn bind_address(list: Option<&Value>, port: Option<&Value>, default: &str) -> Option<String> {
    let port = port.and_then(Value::as_u64).filter(|p| *p > 0);
    let first = list
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .and_then(Value::as_str)
        .and_then(|s| s.parse::<IpNet>().ok());
    let ip = match first {
        Some(net) if net.prefix_len() == net.max_prefix_len() => net.addr(),
        Some(IpNet::V4(n)) if n.addr().is_loopback() => IpAddr::from([127, 0, 0, 1]),
        Some(IpNet::V6(n)) if n.addr().is_loopback() => IpAddr::from(std::net::Ipv6Addr::LOCALHOST),
        Some(IpNet::V4(_)) => IpAddr::from([0, 0, 0, 0]),
        Some(IpNet::V6(_)) => IpAddr::from(std::net::Ipv6Addr::UNSPECIFIED),
        None => return port.map(|p| format!("{default}:{p}")),
    };
    let host = match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => format!("[{v6}]"),
    };
    Some(match port {
        Some(p) => format!("{host}:{p}"),
        None => host,
    })
}
