//! Addresses and ports written twice: of two Services claiming one ClusterIP, one node port,
//! or one external or load-balancer IP with the same protocol and port, the first (in path,
//! then document order) keeps it, a later one is refused whole and named. The API server
//! allocates each ClusterIP and each node port once; manifests are not checked by it, and two
//! Services on one address and port would leave which one the kernel serves to chance (drill
//! 5 found it for ClusterIPs).
//!
//! What a Service claims ([`Key`]):
//! - each ClusterIP, whole: two Services may not share one, whatever their ports;
//! - each node port *number*, whatever its protocol: the API server's allocator hands a number
//!   out once, to one Service, which may use it for TCP and UDP on two of its own ports;
//!   `spec.healthCheckNodePort` comes from the same allocator (only a LoadBalancer Service
//!   with `externalTrafficPolicy: Local` gets one);
//! - each external IP and load-balancer IP with each of its ports' protocol and port: Services
//!   sharing an external IP on different ports are legal and common;
//! - each ClusterIP with each of its ports' protocol and port, too: another Service's external
//!   or load-balancer IP on that address and port would take the same frontend (the
//!   ClusterIP-interception case of CVE-2020-8554, which the API server does not check either).
//!
//! A Service never conflicts with itself (one address in `spec.externalIPs` and in its
//! load-balancer ingress, one node port for TCP and UDP).
//!
//! The store keeps an index key → the Services claiming it, so a change re-decides only the
//! Services sharing a key with what it touched, and those after them whose verdict follows (a
//! refused Service holds none of its keys, so the next claimant of its other keys may take
//! them).

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use ferry_model::{Object, Protocol, Service};

use super::{Before, Entry, Found, Id, Position, Store};
use crate::InvalidObject;

/// One thing a Service claims for itself alone (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Key {
    /// A ClusterIP, every port on it.
    ClusterIp(IpAddr),
    /// A node port number, every protocol.
    NodePort(u16),
    /// An external or load-balancer IP with one protocol and port.
    Frontend(IpAddr, Protocol, u16),
}

/// What one Service claims (its last good version's keys, each once, in the order of the
/// fields they come from), and where it is written, which orders it among the claimants.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Claim {
    position: Position,
    keys: Box<[Key]>,
}

/// The claim index (see the module documentation).
#[derive(Debug, Default)]
pub(super) struct Claims {
    /// Every claimed key, with its claimants in position order (a sorted `Vec`: nearly every
    /// key has one claimant, and a set's node would cost ten times its room).
    by_key: BTreeMap<Key, Vec<(Position, Id)>>,
    /// Each claiming Service's claim.
    by_service: BTreeMap<Id, Claim>,
}

/// The work left: Services to re-decide, in position order (an earlier one's verdict decides
/// the later ones').
type Work = BTreeSet<(Position, Id)>;

impl Claims {
    /// See [`ferry_model::btree`].
    pub(super) fn repack(&mut self) {
        ferry_model::btree::repack(&mut self.by_key);
        ferry_model::btree::repack(&mut self.by_service);
    }

    /// Replaces `id`'s claim; queues it and the later claimants of every key it held or
    /// takes. Nothing is queued when the claim is unchanged.
    fn set(&mut self, id: &Id, claim: Option<Claim>, work: &mut Work) {
        let old = self.by_service.get(id);
        if old == claim.as_ref() {
            return;
        }
        if let Some(old) = self.by_service.remove(id) {
            self.queue_after(&old, work);
            let entry = (old.position.clone(), id.clone());
            for key in old.keys.iter() {
                if let Some(set) = self.by_key.get_mut(key) {
                    if let Ok(at) = set.binary_search(&entry) {
                        set.remove(at);
                    }
                    if set.is_empty() {
                        self.by_key.remove(key);
                    }
                }
            }
        }
        if let Some(new) = claim {
            let entry = (new.position.clone(), id.clone());
            for key in new.keys.iter() {
                let set = self.by_key.entry(*key).or_default();
                if let Err(at) = set.binary_search(&entry) {
                    set.reserve_exact(1);
                    set.insert(at, entry.clone());
                }
            }
            work.insert(entry);
            self.queue_after(&new, work);
            self.by_service.insert(id.clone(), new);
        }
    }

    /// Queues the claimants written after `claim` of each of its keys.
    fn queue_after(&self, claim: &Claim, work: &mut Work) {
        for key in claim.keys.iter() {
            let later = self.by_key.get(key).into_iter().flat_map(|set| {
                set.iter()
                    .skip_while(|(p, _)| *p <= claim.position)
                    .cloned()
            });
            work.extend(later);
        }
    }
}

impl Store {
    /// Brings the claim index up to date for the touched identities and re-decides every
    /// Service whose verdict may have changed, touching those whose verdict did. A refused
    /// Service is reported every time it is re-decided.
    pub(super) fn settle_claims(&mut self, touched: &mut BTreeMap<Id, Before>, found: &mut Found) {
        let mut work = Work::new();
        let services: Vec<Id> = touched
            .keys()
            .filter(|id| &*id.kind == "Service")
            .cloned()
            .collect();
        for id in services {
            let claim = self.entries.get(&id).and_then(claim_of);
            // A touched Service is re-decided (and, if refused, named) even when its claim
            // is the same.
            match &claim {
                Some(c) => _ = work.insert((c.position.clone(), id.clone())),
                // Claiming nothing, it holds back nothing of its own.
                None => {
                    if let Some(entry) = self.entries.get_mut(&id) {
                        entry.refused = false;
                    }
                }
            }
            self.claims.set(&id, claim, &mut work);
        }
        while let Some((position, id)) = work.pop_first() {
            // Queued before its own claim moved: it is queued at its new place too.
            let current = self.claims.by_service.get(&id).map(|c| &c.position);
            if current != Some(&position) {
                continue;
            }
            let refusal = self.refusal(&id, &position);
            let Some(entry) = self.entries.get(&id) else {
                continue;
            };
            if entry.refused != refusal.is_some() {
                self.touch(&id, touched);
                if let Some(entry) = self.entries.get_mut(&id) {
                    entry.refused = refusal.is_some();
                }
                if let Some(claim) = self.claims.by_service.get(&id) {
                    self.claims.queue_after(claim, &mut work);
                }
            }
            if let Some(error) = refusal {
                found.push((Some(position), error));
            }
        }
    }

    /// Why Service `id` (written at `position`) is refused: the first of its keys that a
    /// Service written before it holds.
    fn refusal(&self, id: &Id, position: &Position) -> Option<InvalidObject> {
        let claim = self.claims.by_service.get(id)?;
        let (key, at, holder) = claim.keys.iter().find_map(|key| {
            let (at, holder) = self
                .claims
                .by_key
                .get(key)?
                .iter()
                .take_while(|(p, _)| p < position)
                .find(|(_, other)| self.entries.get(other).is_some_and(|e| !e.refused))?;
            Some((key, at, holder))
        })?;
        let service = self.entries.get(id).and_then(service_of)?;
        let (field, what) = describe(service, key);
        let reason = format!(
            "{what} is already Service {}/{}'s (in {}); this one is skipped",
            holder.namespace,
            holder.name,
            at.file.display()
        );
        Some(InvalidObject::new(id, field, reason).in_file(&position.file))
    }
}

/// An identity's last good Service.
fn service_of(entry: &Entry) -> Option<&Service> {
    entry
        .good
        .iter()
        .flat_map(|g| g.iter())
        .find_map(|o| match o {
            Object::Service(s) => Some(&**s),
            _ => None,
        })
}

/// The claim of an identity's last good Service, if it claims anything.
fn claim_of(entry: &Entry) -> Option<Claim> {
    let keys = keys_of(service_of(entry)?);
    if keys.is_empty() {
        return None;
    }
    let (position, _) = entry.winner()?;
    Some(Claim {
        position: position.clone(),
        keys: keys.into_boxed_slice(),
    })
}

/// A Service's keys, each once, in field order (the first conflicting one is the one named).
fn keys_of(service: &Service) -> Vec<Key> {
    let mut keys: Vec<Key> = service
        .cluster_ips
        .iter()
        .map(|ip| Key::ClusterIp(*ip))
        .collect();
    // Its ClusterIPs with each port, as frontends: an external or load-balancer IP of another
    // Service on one of them would take the same address, protocol and port.
    for ip in &service.cluster_ips {
        keys.extend(
            service
                .ports
                .iter()
                .map(|p| Key::Frontend(*ip, p.protocol, p.port)),
        );
    }
    keys.extend(
        service
            .ports
            .iter()
            .filter_map(|p| p.node_port.map(Key::NodePort)),
    );
    if service.needs_health_check() {
        keys.extend(service.health_check_node_port.map(Key::NodePort));
    }
    for ip in service
        .external_ips
        .iter()
        .chain(&service.load_balancer_ips)
    {
        keys.extend(
            service
                .ports
                .iter()
                .map(|p| Key::Frontend(*ip, p.protocol, p.port)),
        );
    }
    if keys.len() > 1 {
        let mut seen = BTreeSet::new();
        keys.retain(|k| seen.insert(*k));
    }
    keys
}

/// The field a key of `service` comes from (the first, when several give it), and what it
/// is, for the message.
fn describe(service: &Service, key: &Key) -> (String, String) {
    match *key {
        Key::ClusterIp(ip) => {
            let i = service.cluster_ips.iter().position(|c| *c == ip);
            let field = match i {
                None | Some(0) => "spec.clusterIP".to_owned(),
                Some(i) => format!("spec.clusterIPs[{i}]"),
            };
            (field, format!("ClusterIP {ip}"))
        }
        Key::NodePort(np) => {
            let field = match service.ports.iter().position(|p| p.node_port == Some(np)) {
                Some(i) => format!("spec.ports[{i}].nodePort"),
                None => "spec.healthCheckNodePort".to_owned(),
            };
            (field, format!("NodePort {np}"))
        }
        Key::Frontend(ip, protocol, port) => {
            let j = service
                .ports
                .iter()
                .position(|p| p.protocol == protocol && p.port == port)
                .unwrap_or_default();
            let with = format!(
                "{ip} with port {port}/{} (spec.ports[{j}])",
                protocol.as_str().to_uppercase()
            );
            if let Some(i) = service.cluster_ips.iter().position(|c| *c == ip) {
                let field = match i {
                    0 => "spec.clusterIP".to_owned(),
                    i => format!("spec.clusterIPs[{i}]"),
                };
                return (field, format!("ClusterIP {with}"));
            }
            match service.external_ips.iter().position(|e| *e == ip) {
                Some(i) => (
                    format!("spec.externalIPs[{i}]"),
                    format!("external IP {with}"),
                ),
                // The model keeps no index into the ingress list (entries without an IP, or
                // proxied by the load balancer, are left out): the message names the address.
                None => (
                    "status.loadBalancer.ingress".to_owned(),
                    format!("load-balancer IP {with}"),
                ),
            }
        }
    }
}
