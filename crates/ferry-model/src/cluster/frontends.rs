//! External and load-balancer IPs claimed twice with one protocol and port. The API server
//! does not prevent it (nothing allocates `spec.externalIPs`, and a load-balancer controller
//! may report one address for two Services), but a destination can lead to one Service only:
//! the first claimant in name order (`namespace/name`) serves it, on every node, in every mode,
//! whatever order the Services came in; the others are programmed without it. (Standalone
//! mode refuses the later Service whole before it reaches the state.)
//!
//! The index frontend → claimants lets a change touch the Services sharing a frontend with
//! the changed one, so an incremental sync re-decides them too.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use crate::{Protocol, Service, ServiceName};

/// An external or load-balancer IP with one protocol and port.
pub(super) type Frontend = (IpAddr, Protocol, u16);

/// See the module documentation.
#[derive(Debug, Clone, Default)]
pub(super) struct Frontends {
    /// Every claimed frontend, with its claimants sorted by name (a sorted `Vec`: nearly every
    /// frontend has one claimant).
    by_key: BTreeMap<Frontend, Vec<ServiceName>>,
}

impl Frontends {
    /// Replaces `name`'s frontends (those of `old` by those of `new`); adds to `touched` the
    /// other claimants of every frontend it gave up or took, which may have changed hands.
    pub fn update(
        &mut self,
        name: &ServiceName,
        old: Option<&Service>,
        new: Option<&Service>,
        touched: &mut BTreeSet<ServiceName>,
    ) {
        let old = old.map(frontends).unwrap_or_default();
        let new = new.map(frontends).unwrap_or_default();
        if old == new {
            return;
        }
        for key in old.difference(&new) {
            if let Some(names) = self.by_key.get_mut(key) {
                names.retain(|n| n != name);
                touched.extend(names.iter().cloned());
                if names.is_empty() {
                    self.by_key.remove(key);
                }
            }
        }
        for key in new.difference(&old) {
            let names = self.by_key.entry(*key).or_default();
            touched.extend(names.iter().cloned());
            if let Err(at) = names.binary_search(name) {
                names.reserve_exact(1);
                names.insert(at, name.clone());
            }
        }
    }

    /// The Service serving a frontend: its first claimant in name order.
    pub fn holder(&self, key: &Frontend) -> Option<&ServiceName> {
        self.by_key.get(key).and_then(|names| names.first())
    }
}

/// A Service's external and load-balancer frontends.
fn frontends(svc: &Service) -> BTreeSet<Frontend> {
    let ips = svc.external_ips.iter().chain(&svc.load_balancer_ips);
    ips.flat_map(|ip| svc.ports.iter().map(|p| (*ip, p.protocol, p.port)))
        .collect()
}
