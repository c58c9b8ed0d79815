//! `ClusterState`: every Service, EndpointSlice, Node and ServiceCIDR the sources have
//! delivered.
//!
//! Owned and updated by a single task (the sync loop), in event order; everyone else gets
//! snapshots (node views, rulesets), never a reference into it.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::Arc;

use crate::intern::Interner;
use crate::{EndpointSlice, Node, Protocol, Service, ServiceCidr, ServiceName};

mod frontends;
mod object;

pub use object::{Object, ObjectKey};

/// What one change touched: the Services whose rules may differ, a Node, or the service
/// CIDRs.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Touched {
    /// Services whose Service object or slices changed.
    pub services: BTreeSet<ServiceName>,
    /// Nodes that changed (a change to this node's own object affects every service).
    pub nodes: BTreeSet<String>,
    /// A ServiceCIDR changed: node-level rules (nftables mode's `cluster-ips-check`) may differ.
    pub service_cidrs: bool,
}

impl Touched {
    /// True when nothing changed.
    pub fn is_empty(&self) -> bool {
        self.services.is_empty() && self.nodes.is_empty() && !self.service_cidrs
    }

    /// Adds another change.
    pub fn merge(&mut self, other: Touched) {
        self.services.extend(other.services);
        self.nodes.extend(other.nodes);
        self.service_cidrs |= other.service_cidrs;
    }
}

/// `namespace`, `name` of a stored slice (the slice's own shared strings).
type SliceKey = (Arc<str>, Arc<str>);

/// The cluster as the sources last described it.
#[derive(Debug, Clone, Default)]
pub struct ClusterState {
    // Values behind a pointer: a B-tree node holds 11 entries and is often half full, so
    // inline values (~150 bytes each) would leave more slack than a pointer does. Shared
    // (`Arc`) with the source that delivered them when it keeps them too (the manifest
    // source's last good copies): one copy of each object in the process.
    services: BTreeMap<ServiceName, Arc<Service>>,
    slices: BTreeMap<SliceKey, Arc<EndpointSlice>>,
    /// `(service, slice)` pairs: one flat set rather than a set per service, which would cost a
    /// B-tree node (~400 bytes) for each service's single slice.
    slices_by_service: BTreeSet<(ServiceName, SliceKey)>,
    nodes: BTreeMap<String, Node>,
    /// ServiceCIDRs by name (a handful per cluster).
    service_cidrs: BTreeMap<String, Arc<ServiceCidr>>,
    /// Namespaces and endpoint locations (node, zone, hints), one shared copy each.
    names: Interner,
    /// External and load-balancer frontends with the Services claiming each, and every
    /// Service's ClusterIPs.
    frontends: frontends::Frontends,
}

impl ClusterState {
    /// An empty state.
    pub fn new() -> Self {
        Self::default()
    }

    /// Packs the state's indexes after a bulk load (a resync): the same content in about
    /// half the room ([`crate::btree`]).
    pub fn repack(&mut self) {
        crate::btree::repack(&mut self.services);
        crate::btree::repack(&mut self.slices);
        crate::btree::repack_set(&mut self.slices_by_service);
        crate::btree::repack(&mut self.nodes);
        self.frontends.repack();
    }

    /// Stores (adds or replaces) an object; returns what changed. Storing an object equal to the
    /// stored one changes nothing. Pods are not stored (see [`Object::Pod`]): nothing changes.
    pub fn apply(&mut self, object: Object) -> Touched {
        let mut touched = Touched::default();
        match object {
            Object::Service(mut svc) => {
                // Names are shared with the state's own strings only when the state is the
                // object's one owner; a source's copy stays as the source made it.
                if let Some(owned) = Arc::get_mut(&mut svc) {
                    self.share_service_name(&mut owned.name);
                }
                if self.services.get(&svc.name) != Some(&svc) {
                    touched.services.insert(svc.name.clone());
                    let old = self.services.insert(svc.name.clone(), svc.clone());
                    self.frontends.update(
                        &svc.name,
                        old.as_deref(),
                        Some(&svc),
                        &mut touched.services,
                    );
                }
            }
            Object::EndpointSlice(mut slice) => {
                if let Some(owned) = Arc::get_mut(&mut slice) {
                    self.compact(owned);
                }
                let key = (slice.namespace.clone(), slice.name.clone());
                if self.slices.get(&key) == Some(&slice) {
                    return touched;
                }
                if let Some(old) = self.slices.remove(&key) {
                    self.unindex(&old.service, &key);
                    touched.services.insert(old.service.clone());
                }
                touched.services.insert(slice.service.clone());
                self.slices_by_service
                    .insert((slice.service.clone(), key.clone()));
                self.slices.insert(key, slice);
            }
            Object::Node(node) => {
                let node = Arc::unwrap_or_clone(node);
                if self.nodes.get(&node.name) != Some(&node) {
                    touched.nodes.insert(node.name.clone());
                    self.nodes.insert(node.name.clone(), node);
                }
            }
            Object::Pod(_) => {}
            Object::ServiceCidr(cidr) => {
                if self.service_cidrs.get(&cidr.name) != Some(&cidr) {
                    touched.service_cidrs = true;
                    self.service_cidrs.insert(cidr.name.clone(), cidr);
                }
            }
        }
        touched
    }

    /// Removes an object; returns what changed (nothing if it was absent).
    pub fn delete(&mut self, key: &ObjectKey) -> Touched {
        let mut touched = Touched::default();
        match key {
            ObjectKey::Service(name) => {
                if let Some(old) = self.services.remove(name) {
                    touched.services.insert(name.clone());
                    self.frontends
                        .update(name, Some(&old), None, &mut touched.services);
                }
            }
            ObjectKey::EndpointSlice { namespace, name } => {
                let key: SliceKey = (namespace.as_str().into(), name.as_str().into());
                if let Some(old) = self.slices.remove(&key) {
                    self.unindex(&old.service, &key);
                    touched.services.insert(old.service.clone());
                }
            }
            ObjectKey::Node(name) => {
                if self.nodes.remove(name).is_some() {
                    touched.nodes.insert(name.clone());
                }
            }
            ObjectKey::Pod { .. } => {}
            ObjectKey::ServiceCidr(name) => {
                touched.service_cidrs = self.service_cidrs.remove(name).is_some();
            }
        }
        touched
    }

    /// Shares a slice's namespace, service name and endpoint locations with the state's own,
    /// and drops its spare capacity.
    fn compact(&mut self, slice: &mut EndpointSlice) {
        self.names.intern_slice(slice);
        slice.endpoints.shrink_to_fit();
        slice.ports.shrink_to_fit();
        self.share_service_name(&mut slice.service);
        slice.namespace = self.names.intern(&slice.namespace);
    }

    fn unindex(&mut self, service: &ServiceName, key: &SliceKey) {
        self.slices_by_service
            .remove(&(service.clone(), key.clone()));
    }

    /// Points `name` at the strings the state already holds for it (its namespace interned,
    /// the pair shared with the stored Service or its slices), so each name is stored once.
    fn share_service_name(&mut self, name: &mut ServiceName) {
        name.namespace = self.names.intern(&name.namespace);
        if let Some((stored, _)) = self.services.get_key_value(name) {
            *name = stored.clone();
        } else if let Some((stored, _)) = self.index_of(name).next() {
            let stored = stored.clone();
            *name = stored;
        }
    }

    /// The index entries of one Service's slices, in slice order.
    fn index_of(&self, name: &ServiceName) -> impl Iterator<Item = &(ServiceName, SliceKey)> {
        let first: SliceKey = (Arc::from(""), Arc::from(""));
        let name = name.clone();
        self.slices_by_service
            .range((name.clone(), first)..)
            .take_while(move |(service, _)| *service == name)
    }

    /// Every stored key, sorted (used to compute deletions when a source resyncs).
    pub fn keys(&self) -> Vec<ObjectKey> {
        let services = self.services.keys().cloned().map(ObjectKey::Service);
        let slices = self
            .slices
            .keys()
            .map(|(namespace, name)| ObjectKey::EndpointSlice {
                namespace: namespace.to_string(),
                name: name.to_string(),
            });
        let nodes = self.nodes.keys().cloned().map(ObjectKey::Node);
        let cidrs = self
            .service_cidrs
            .keys()
            .cloned()
            .map(ObjectKey::ServiceCidr);
        services.chain(slices).chain(nodes).chain(cidrs).collect()
    }

    /// All Services, sorted by name.
    pub fn services(&self) -> impl Iterator<Item = &Service> {
        self.services.values().map(|s| &**s)
    }

    /// One Service.
    pub fn service(&self, name: &ServiceName) -> Option<&Service> {
        self.services.get(name).map(|s| &**s)
    }

    /// Whether Service `name` serves `ip` with `protocol` and `port` as an external or
    /// load-balancer IP: it is no other Service's ClusterIP with that protocol and port, and
    /// no Service before it in name order claims it too (see `cluster/frontends.rs`).
    pub fn serves_frontend(
        &self,
        name: &ServiceName,
        ip: IpAddr,
        protocol: Protocol,
        port: u16,
    ) -> bool {
        self.frontend_holder(name, ip, protocol, port).is_none()
    }

    /// The other Service that serves `ip` with `protocol` and `port` in place of Service
    /// `name`, which claims it as an external or load-balancer IP, and whether it is that
    /// Service's ClusterIP; `None` when `name` serves it (see [`Self::serves_frontend`]).
    pub fn frontend_holder(
        &self,
        name: &ServiceName,
        ip: IpAddr,
        protocol: Protocol,
        port: u16,
    ) -> Option<(&ServiceName, bool)> {
        let a_cluster_ip = |other: &&ServiceName| {
            *other != name
                && self.services.get(*other).is_some_and(|s| {
                    (s.ports.iter()).any(|p| p.protocol == protocol && p.port == port)
                })
        };
        if let Some(holder) = self.frontends.cluster_ip_holders(ip).find(a_cluster_ip) {
            return Some((holder, true));
        }
        let holder = self.frontends.holder(&(ip, protocol, port))?;
        (holder != name).then_some((holder, false))
    }

    /// The slices of one Service, sorted by slice name.
    pub fn slices_of<'a>(&'a self, name: &ServiceName) -> impl Iterator<Item = &'a EndpointSlice> {
        self.index_of(name)
            .filter_map(move |(_, key)| self.slices.get(key).map(|s| &**s))
    }

    /// All slices.
    pub fn slices(&self) -> impl Iterator<Item = &EndpointSlice> {
        self.slices.values().map(|s| &**s)
    }

    /// One Node.
    pub fn node(&self, name: &str) -> Option<&Node> {
        self.nodes.get(name)
    }

    /// All Nodes.
    pub fn nodes(&self) -> impl Iterator<Item = &Node> {
        self.nodes.values()
    }

    /// All ServiceCIDRs, sorted by name.
    pub fn service_cidrs(&self) -> impl Iterator<Item = &ServiceCidr> {
        self.service_cidrs.values().map(|c| &**c)
    }
}

#[cfg(test)]
mod tests;
