//! External and load-balancer IPs claimed twice with one protocol and port. The API server
//! does not prevent it (nothing allocates `spec.externalIPs`, and a load-balancer controller
//! may report one address for two Services), but a destination can lead to one Service only:
//! the first claimant in name order (`namespace/name`) serves it, on every node, in every mode,
//! whatever order the Services came in; the others are programmed without it. (Standalone
//! mode refuses the later Service whole before it reaches the state.)
//!
//! An external or load-balancer IP on another Service's ClusterIP with the same protocol and
//! port is never served: the ClusterIP, which the API server allocated to that Service, keeps
//! its destination whatever the names (the interception of CVE-2020-8554, which the API server
//! lets through unless its `DenyServiceExternalIPs` admission plugin is on).
//!
//! The index frontend → claimants (and ClusterIP → Services) lets a change touch the Services
//! sharing a frontend with the changed one, so an incremental sync re-decides them too.

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
    /// Every Service's ClusterIPs (one entry each: an address's Services are a range).
    cluster_ips: BTreeSet<(IpAddr, ServiceName)>,
}

impl Frontends {
    /// See [`crate::btree`].
    pub fn repack(&mut self) {
        crate::btree::repack(&mut self.by_key);
        crate::btree::repack_set(&mut self.cluster_ips);
    }

    /// Replaces `name`'s frontends (those of `old` by those of `new`); adds to `touched` the
    /// other claimants of every frontend it gave up or took, which may have changed hands.
    pub fn update(
        &mut self,
        name: &ServiceName,
        old: Option<&Service>,
        new: Option<&Service>,
        touched: &mut BTreeSet<ServiceName>,
    ) {
        self.update_cluster_ips(name, old, new, touched);
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

    /// Replaces `name`'s ClusterIPs; adds to `touched` the external claimants of every
    /// ClusterIP frontend (address, protocol, port) it gave up or took: they lose or regain it.
    fn update_cluster_ips(
        &mut self,
        name: &ServiceName,
        old: Option<&Service>,
        new: Option<&Service>,
        touched: &mut BTreeSet<ServiceName>,
    ) {
        let old_ips: &[IpAddr] = old.map_or(&[], |s| &s.cluster_ips);
        let new_ips: &[IpAddr] = new.map_or(&[], |s| &s.cluster_ips);
        if old_ips == new_ips && old.map(|s| &s.ports) == new.map(|s| &s.ports) {
            return;
        }
        for ip in old_ips.iter().filter(|ip| !new_ips.contains(ip)) {
            self.cluster_ips.remove(&(*ip, name.clone()));
        }
        for ip in new_ips {
            self.cluster_ips.insert((*ip, name.clone()));
        }
        let old = old.map(cluster_frontends).unwrap_or_default();
        let new = new.map(cluster_frontends).unwrap_or_default();
        for key in old.symmetric_difference(&new) {
            let claimants = self.by_key.get(key).into_iter().flatten();
            touched.extend(claimants.filter(|n| *n != name).cloned());
        }
    }

    /// The Service serving a frontend: its first claimant in name order.
    pub fn holder(&self, key: &Frontend) -> Option<&ServiceName> {
        self.by_key.get(key).and_then(|names| names.first())
    }

    /// The Services whose ClusterIP is `ip`, in name order.
    pub fn cluster_ip_holders(&self, ip: IpAddr) -> impl Iterator<Item = &ServiceName> {
        let from = (ip, ServiceName::new("", ""));
        self.cluster_ips
            .range(from..)
            .take_while(move |(at, _)| *at == ip)
            .map(|(_, name)| name)
    }
}

/// A Service's ClusterIPs, each with each of its ports' protocol and port.
fn cluster_frontends(svc: &Service) -> BTreeSet<Frontend> {
    let ports = || svc.ports.iter();
    svc.cluster_ips
        .iter()
        .flat_map(|ip| ports().map(|p| (*ip, p.protocol, p.port)))
        .collect()
}

/// A Service's external and load-balancer frontends.
fn frontends(svc: &Service) -> BTreeSet<Frontend> {
    let ips = svc.external_ips.iter().chain(&svc.load_balancer_ips);
    ips.flat_map(|ip| svc.ports.iter().map(|p| (*ip, p.protocol, p.port)))
        .collect()
}
