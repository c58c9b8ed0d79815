//! ClusterIPs written twice: the first Service (in path, then document order) keeps an
//! address, a later one claiming it is refused whole and named. The API server allocates each
//! ClusterIP once; manifests are not checked by it, and two Services on one address would
//! leave which one the kernel serves to chance (drill 5 found it).
//!
//! The store keeps an index address → the Services claiming it, so a change re-decides only
//! the Services sharing an address with what it touched, and those after them whose verdict
//! follows (a refused Service holds none of its addresses, so the next claimant of its other
//! addresses may take them).

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use ferry_model::Object;

use super::{Before, Entry, Found, Id, Position, Store};
use crate::InvalidObject;

/// The addresses one Service claims (its last good version's ClusterIPs), and where it is
/// written, which orders it among the claimants.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Claim {
    position: Position,
    ips: Box<[IpAddr]>,
}

/// The address index (see the module documentation).
#[derive(Debug, Default)]
pub(super) struct Addresses {
    /// Every claimed address, with its claimants in position order (a sorted `Vec`: nearly
    /// every address has one claimant, and a set's node would cost ten times its room).
    by_ip: BTreeMap<IpAddr, Vec<(Position, Id)>>,
    /// Each claiming Service's claim.
    claims: BTreeMap<Id, Claim>,
}

/// The work left: Services to re-decide, in position order (an earlier one's verdict decides
/// the later ones').
type Work = BTreeSet<(Position, Id)>;

impl Addresses {
    /// Replaces `id`'s claim; queues it and the later claimants of every address it held or
    /// takes. Nothing is queued when the claim is unchanged.
    fn set(&mut self, id: &Id, claim: Option<Claim>, work: &mut Work) {
        let old = self.claims.get(id);
        if old == claim.as_ref() {
            return;
        }
        if let Some(old) = self.claims.remove(id) {
            self.queue_after(&old, work);
            for ip in old.ips.iter() {
                let key = (old.position.clone(), id.clone());
                if let Some(set) = self.by_ip.get_mut(ip) {
                    if let Ok(at) = set.binary_search(&key) {
                        set.remove(at);
                    }
                    if set.is_empty() {
                        self.by_ip.remove(ip);
                    }
                }
            }
        }
        if let Some(new) = claim {
            for ip in new.ips.iter() {
                let key = (new.position.clone(), id.clone());
                let set = self.by_ip.entry(*ip).or_default();
                if let Err(at) = set.binary_search(&key) {
                    set.reserve_exact(1);
                    set.insert(at, key);
                }
            }
            work.insert((new.position.clone(), id.clone()));
            self.queue_after(&new, work);
            self.claims.insert(id.clone(), new);
        }
    }

    /// Queues the claimants written after `claim` of each of its addresses.
    fn queue_after(&self, claim: &Claim, work: &mut Work) {
        for ip in claim.ips.iter() {
            let later = self.by_ip.get(ip).into_iter().flat_map(|set| {
                set.iter()
                    .skip_while(|(p, _)| *p <= claim.position)
                    .cloned()
            });
            work.extend(later);
        }
    }
}

impl Store {
    /// Brings the address index up to date for the touched identities and re-decides every
    /// Service whose verdict may have changed, touching those whose verdict did. A refused
    /// Service is reported every time it is re-decided.
    pub(super) fn settle_addresses(
        &mut self,
        touched: &mut BTreeMap<Id, Before>,
        found: &mut Found,
    ) {
        let mut work = Work::new();
        let services: Vec<Id> = touched
            .keys()
            .filter(|id| id.kind == "Service")
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
            self.addresses.set(&id, claim, &mut work);
        }
        while let Some((position, id)) = work.pop_first() {
            // Queued before its own claim moved: it is queued at its new place too.
            let current = self.addresses.claims.get(&id).map(|c| &c.position);
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
                if let Some(claim) = self.addresses.claims.get(&id) {
                    self.addresses.queue_after(claim, &mut work);
                }
            }
            if let Some(error) = refusal {
                found.push((Some(position), error));
            }
        }
    }

    /// Why Service `id` (written at `position`) is refused: the first of its addresses that
    /// a Service written before it holds.
    fn refusal(&self, id: &Id, position: &Position) -> Option<InvalidObject> {
        let claim = self.addresses.claims.get(id)?;
        claim.ips.iter().enumerate().find_map(|(i, ip)| {
            let (at, holder) = self
                .addresses
                .by_ip
                .get(ip)?
                .iter()
                .take_while(|(p, _)| p < position)
                .find(|(_, other)| self.entries.get(other).is_some_and(|e| !e.refused))?;
            let field = if i == 0 {
                "spec.clusterIP".to_owned()
            } else {
                format!("spec.clusterIPs[{i}]")
            };
            let reason = format!(
                "ClusterIP {ip} is already Service {}/{}'s (in {}); this one is skipped",
                holder.namespace,
                holder.name,
                at.file.display()
            );
            Some(InvalidObject::new(id, field, reason).in_file(&position.file))
        })
    }
}

/// The claim of an identity's last good Service, if it has ClusterIPs.
fn claim_of(entry: &Entry) -> Option<Claim> {
    let service = entry
        .good
        .iter()
        .flat_map(|g| g.iter())
        .find_map(|o| match o {
            Object::Service(s) => Some(s),
            _ => None,
        })?;
    if service.cluster_ips.is_empty() {
        return None;
    }
    let (position, _) = entry.winner()?;
    Some(Claim {
        position: position.clone(),
        ips: service.cluster_ips.clone().into(),
    })
}
