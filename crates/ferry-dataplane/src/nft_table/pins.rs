//! Session affinity pins the kernel wrote (`affinity`, `nodeport-affinity`): reading them back
//! and removing those that point at an endpoint the service no longer has.
//!
//! A pin is `frontend . client : endpoint`; it is valid while the ruleset has the record element
//! `frontend . endpoint` (in `affinity-service-ips` / `affinity-nodeports`), i.e. while the
//! frontend has session affinity and the endpoint is in a set its traffic may use. Upstream
//! deletes an endpoint's affinity set with its chain; Ferry's pins are elements of one map, so
//! the applier deletes the stale ones when endpoints go.

use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};

use serde_json::Value as Json;

use ferry_compile::nft::{Key, Ruleset, ServiceRules, TABLE};
use ferry_model::{IpFamily, Protocol, ServiceName};

use super::cli::NftRunner;

/// The maps holding pins, each with the map of record elements that validate them.
pub(crate) const PIN_MAPS: [(&str, &str); 2] = [
    ("affinity", "affinity-service-ips"),
    ("nodeport-affinity", "affinity-nodeports"),
];

/// One pin read from the kernel.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Pin {
    /// `affinity` or `nodeport-affinity`.
    pub(crate) map: &'static str,
    /// `frontend . client`.
    pub(crate) key: Key,
    /// The endpoint the client is pinned to.
    pub(crate) endpoint: SocketAddr,
}

impl Pin {
    /// The record element that keeps this pin valid.
    fn record_key(&self) -> Option<Key> {
        match self.key {
            Key::FrontendClient(a, p, port, _) => {
                Some(Key::FrontendEndpoint(a, p, port, self.endpoint))
            }
            Key::NodePortClient(p, port, _) => Some(Key::NodePortEndpoint(p, port, self.endpoint)),
            _ => None,
        }
    }
}

fn protocol(v: &Json) -> Option<Protocol> {
    match v.as_str()? {
        "tcp" => Some(Protocol::Tcp),
        "udp" => Some(Protocol::Udp),
        "sctp" => Some(Protocol::Sctp),
        _ => None,
    }
}

fn addr(v: &Json) -> Option<IpAddr> {
    v.as_str()?.parse().ok()
}

fn port(v: &Json) -> Option<u16> {
    u16::try_from(v.as_u64()?).ok()
}

/// The pins in `nft -j list map ip ferry <map>` output. Elements that do not parse (another
/// table layout) are skipped.
pub(crate) fn parse(map: &'static str, json: &str) -> Vec<Pin> {
    let Ok(doc) = serde_json::from_str::<Json>(json) else {
        return Vec::new();
    };
    let objects = doc["nftables"].as_array().cloned().unwrap_or_default();
    let elems = objects
        .iter()
        .filter_map(|o| o["map"]["elem"].as_array())
        .flatten();
    let mut pins = Vec::new();
    for pair in elems {
        let (Some(k), Some(v)) = (pair.get(0), pair.get(1)) else {
            continue;
        };
        // A key with a timeout is wrapped: {"elem": {"val": {"concat": […]}, "timeout": …}}.
        let key = k["elem"]["val"]["concat"]
            .as_array()
            .or_else(|| k["concat"].as_array());
        let val = v["concat"].as_array();
        let (Some(key), Some(val)) = (key, val) else {
            continue;
        };
        let endpoint = match (val.first().and_then(addr), val.get(1).and_then(port)) {
            (Some(ip), Some(p)) => SocketAddr::new(ip, p),
            _ => continue,
        };
        let key = match (map, key.as_slice()) {
            ("affinity", [a, p, n, c]) => (|| {
                Some(Key::FrontendClient(
                    addr(a)?,
                    protocol(p)?,
                    port(n)?,
                    addr(c)?,
                ))
            })(),
            ("nodeport-affinity", [p, n, c]) => {
                (|| Some(Key::NodePortClient(protocol(p)?, port(n)?, addr(c)?)))()
            }
            _ => None,
        };
        if let Some(key) = key {
            pins.push(Pin { map, key, endpoint });
        }
    }
    pins
}

/// The record elements (`frontend . endpoint`) of a ruleset: what keeps pins valid.
pub(crate) fn record_keys(ruleset: &Ruleset) -> HashSet<Key> {
    ruleset
        .services
        .values()
        .flat_map(service_record_keys)
        .collect()
}

pub(crate) fn service_record_keys(rules: &ServiceRules) -> impl Iterator<Item = Key> + '_ {
    rules
        .elements
        .iter()
        .filter(|e| PIN_MAPS.iter().any(|(_, record)| *record == e.set))
        .map(|e| e.key.clone())
}

/// True when `after` lacks a record element `before` had: some pins may have become stale
/// (an endpoint went, or a frontend lost its affinity).
pub(crate) fn may_go_stale<'a>(
    before: impl IntoIterator<Item = &'a ServiceRules>,
    after: impl IntoIterator<Item = &'a ServiceRules>,
) -> bool {
    let kept: HashSet<Key> = after.into_iter().flat_map(service_record_keys).collect();
    before
        .into_iter()
        .flat_map(service_record_keys)
        .any(|k| !kept.contains(&k))
}

/// The pins not backed by a record element of `valid`.
pub(crate) fn stale(pins: Vec<Pin>, valid: &HashSet<Key>) -> Vec<Pin> {
    pins.into_iter()
        .filter(|p| p.record_key().is_none_or(|k| !valid.contains(&k)))
        .collect()
}

/// The `nft -f` text deleting `pins`. Each is first added (with its own value, a no-op when it
/// is still there) so that the deletion cannot fail on a pin that expired in the meantime.
pub(crate) fn delete_script(family: IpFamily, pins: &[Pin]) -> String {
    let family = ferry_compile::family::nft_family(family);
    let mut out = String::new();
    for verb in ["add", "delete"] {
        for p in pins {
            let value = if verb == "add" {
                format!(" : {} . {}", p.endpoint.ip(), p.endpoint.port())
            } else {
                String::new()
            };
            let _ = writeln!(
                out,
                "{verb} element {family} {TABLE} {} {{ {}{value} }}",
                p.map, p.key
            );
        }
    }
    out
}

/// Deletes the session affinity pins `desired` does not back (their endpoint went, or their
/// frontend lost its affinity). Best effort: a pin left behind is retried at the next sweep.
pub(crate) fn sweep(runner: &mut impl NftRunner, family: IpFamily, valid: &HashSet<Key>) {
    for attempt in 0..2 {
        let mut gone = Vec::new();
        for (map, _) in PIN_MAPS {
            match runner.list_map(family, map) {
                Ok(json) => gone.extend(stale(parse(map, &json), valid)),
                Err(e) => tracing::debug!(error = %e, map, "cannot read affinity pins"),
            }
        }
        if gone.is_empty() {
            return;
        }
        match runner.run(&delete_script(family, &gone)) {
            Ok(()) => {
                tracing::debug!(pins = gone.len(), "deleted stale affinity pins");
                return;
            }
            // A pin re-created with another endpoint since it was read: read again.
            Err(e) if attempt == 0 => tracing::debug!(error = %e, "retrying the pin sweep"),
            Err(e) => tracing::warn!(error = %e, "could not delete stale affinity pins"),
        }
    }
}

#[cfg(test)]
mod tests;

/// The pin bookkeeping of an incremental sync: which record elements back pins once it is
/// applied, and which pins to sweep around it.
#[derive(Debug)]
pub(crate) struct Update {
    /// The record elements of the table after the change; `None` when unknown.
    pub(crate) backing: Option<HashSet<Key>>,
    /// When the change removes a record element: the pins still valid, swept before the
    /// change (a pinned client must not be sent to a removed endpoint) and after it (pins
    /// recorded meanwhile).
    sweep: Option<HashSet<Key>>,
}

impl Update {
    /// Plans the pin work of replacing `changes`' services in `installed`, whose record
    /// elements were `backing` (if known).
    pub(crate) fn plan(
        installed: &Ruleset,
        mut backing: Option<HashSet<Key>>,
        changes: &BTreeMap<ServiceName, Option<ServiceRules>>,
    ) -> Self {
        let old = || changes.keys().filter_map(|n| installed.services.get(n));
        let new = || changes.values().flatten();
        if let Some(b) = backing.as_mut() {
            for key in old().flat_map(service_record_keys) {
                b.remove(&key);
            }
            b.extend(new().flat_map(service_record_keys));
        }
        let sweep = may_go_stale(old(), new()).then(|| {
            let mut valid = record_keys(installed);
            for e in old().flat_map(|rules| &rules.elements) {
                valid.remove(&e.key);
            }
            valid.extend(new().flat_map(|r| r.elements.iter().map(|e| e.key.clone())));
            valid
        });
        Self { backing, sweep }
    }

    /// Sweeps the pins made stale, when the change removes any.
    pub(crate) fn sweep(&self, runner: &mut impl NftRunner, family: IpFamily) {
        if let Some(valid) = &self.sweep {
            sweep(runner, family, valid);
        }
    }
}
