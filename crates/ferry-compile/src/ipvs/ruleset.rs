//! The whole desired IPVS-mode state of one family, kept per service so an incremental sync
//! re-renders only the services that changed.

use crate::local::LocalTraffic;
use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use ferry_model::{IpFamily, ServiceName};

use super::model::{VirtualAddress, VirtualService};
use super::sets::{IpSets, SetEntry, SetKind, IPVS_IPS};
use crate::config::CompileConfig;
use crate::plan::Plan;

/// What one Service contributes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ServiceIpvs {
    /// Its virtual servers (with real servers).
    pub virtual_services: BTreeMap<VirtualAddress, VirtualService>,
    /// Its ipset entries.
    pub entries: Vec<(SetKind, SetEntry)>,
    /// Its addresses on kube-ipvs0.
    pub bind: BTreeSet<IpAddr>,
    /// Load-balancer frontends with source ranges that do not allow the node itself: the node's
    /// own connections to them are dropped (`KUBE-IPVS-OUT-FILTER`).
    pub no_node_access: Vec<VirtualAddress>,
}

/// Node-level settings the iptables rules of IPVS mode need.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeSettings {
    /// The masquerade mark.
    pub masquerade_mark: u32,
    /// `masqueradeAll`.
    pub masquerade_all: bool,
    /// The local-traffic detector.
    pub local: LocalTraffic,
}

/// The desired state of one family.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ruleset {
    /// The family.
    pub family: IpFamily,
    /// Node-level settings.
    pub node: NodeSettings,
    /// Per-service state.
    pub services: BTreeMap<ServiceName, ServiceIpvs>,
}

impl Ruleset {
    /// The ruleset without services.
    pub fn base(plan: &Plan, cfg: &CompileConfig) -> Self {
        Self {
            family: plan.family,
            node: NodeSettings {
                masquerade_mark: plan.masquerade_mark,
                masquerade_all: cfg.masquerade_all,
                local: plan.local.clone(),
            },
            services: BTreeMap::new(),
        }
    }

    /// True when everything but the services is equal (an incremental sync is possible).
    pub fn same_base(&self, other: &Ruleset) -> bool {
        self.family == other.family && self.node == other.node
    }

    /// Replaces (or removes, with `None`) one service's state.
    pub fn set_service(&mut self, name: ServiceName, svc: Option<ServiceIpvs>) {
        match svc {
            Some(s) => {
                self.services.insert(name, s);
            }
            None => {
                self.services.remove(&name);
            }
        }
    }

    /// Every virtual server. When two services claim the same address, port and protocol, the
    /// first service (by name) keeps it.
    pub fn virtual_services(&self) -> BTreeMap<VirtualAddress, &VirtualService> {
        let mut out = BTreeMap::new();
        for svc in self.services.values() {
            for (addr, vs) in &svc.virtual_services {
                out.entry(*addr).or_insert(vs);
            }
        }
        out
    }

    /// Every ipset with its entries; `KUBE-IPVS-IPS` holds the kube-ipvs0 addresses.
    pub fn sets(&self) -> IpSets {
        let mut sets = IpSets::new(self.family);
        for svc in self.services.values() {
            for (kind, entry) in &svc.entries {
                sets.add(*kind, entry.clone());
            }
        }
        for ip in self.bind_addresses() {
            sets.add(IPVS_IPS, SetEntry::Ip(ip));
        }
        sets
    }

    /// The addresses kube-ipvs0 must hold (as /32 or /128).
    pub fn bind_addresses(&self) -> BTreeSet<IpAddr> {
        self.services
            .values()
            .flat_map(|s| s.bind.iter().copied())
            .collect()
    }

    /// Load-balancer frontends the node itself may not reach.
    pub fn no_node_access(&self) -> BTreeSet<VirtualAddress> {
        self.services
            .values()
            .flat_map(|s| s.no_node_access.iter().copied())
            .collect()
    }

    /// Real servers in all virtual servers.
    pub fn real_server_count(&self) -> usize {
        self.virtual_services()
            .values()
            .map(|v| v.real_servers.len())
            .sum()
    }
}
