//! The installed ipset entries and kube-ipvs0 addresses with how many services hold each, so
//! an incremental sync finds what comes and goes from the changed services alone instead of
//! recomputing every set (O(changed), not O(cluster): at 1 000 services it was most of a
//! one-endpoint sync). Two services may share an entry (an external IP, a pod behind two
//! services' ports): it goes only when the last one lets it go.

use std::collections::BTreeMap;
use std::net::IpAddr;

use ferry_compile::ipvs::sets::{self, IpSets, SetEntry, SetKind, ALL};
use ferry_compile::ipvs::{Ruleset, ServiceIpvs};

/// Entries (and addresses) that changed membership.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SetDelta {
    /// Entries to add, per set.
    pub add: Vec<(SetKind, SetEntry)>,
    /// Entries to delete.
    pub del: Vec<(SetKind, SetEntry)>,
    /// kube-ipvs0 addresses to add.
    pub bind: Vec<IpAddr>,
    /// kube-ipvs0 addresses to remove.
    pub unbind: Vec<IpAddr>,
}

/// The installed sets with reference counts.
#[derive(Debug, Clone)]
pub struct SetCounts {
    /// A B-tree, as nftables mode's shared counts: a hash table near its load factor doubles
    /// once under endpoint churn and keeps the size.
    counts: BTreeMap<(&'static str, SetEntry), u32>,
    sets: IpSets,
}

impl SetCounts {
    /// The counts of a whole ruleset (its [`Ruleset::sets`], counted).
    pub fn of(rs: &Ruleset) -> Self {
        let mut me = Self {
            counts: BTreeMap::new(),
            sets: IpSets::new(rs.family),
        };
        let mut ignored = SetDelta::default();
        for svc in rs.services.values() {
            me.count(svc, 1, &mut ignored);
        }
        me
    }

    /// The sets as installed.
    pub fn sets(&self) -> &IpSets {
        &self.sets
    }

    /// Replaces one service's contribution `old` by `new`; returns what changed membership.
    pub fn replace(&mut self, old: &ServiceIpvs, new: &ServiceIpvs, delta: &mut SetDelta) {
        // New first: an entry both hold never drops to zero on the way.
        self.count(new, 1, delta);
        self.count(old, -1, delta);
    }

    fn count(&mut self, svc: &ServiceIpvs, by: i32, delta: &mut SetDelta) {
        let bound = svc
            .bind
            .iter()
            .map(|ip| (sets::IPVS_IPS, SetEntry::Ip(*ip)));
        for (kind, entry) in svc.entries.iter().cloned().chain(bound) {
            self.step(kind, entry, by, delta);
        }
    }

    fn step(&mut self, kind: SetKind, entry: SetEntry, by: i32, delta: &mut SetDelta) {
        let key = (kind.name, entry);
        let n = self.counts.get(&key).copied().unwrap_or(0);
        let now = n.saturating_add_signed(by);
        let (_, entry) = &key;
        match (n, now) {
            (0, 1..) => {
                self.sets.add(kind, entry.clone());
                record(kind, entry, &mut delta.add, &mut delta.bind, &mut delta.del);
            }
            (1.., 0) => {
                self.sets.remove(kind, entry);
                record(
                    kind,
                    entry,
                    &mut delta.del,
                    &mut delta.unbind,
                    &mut delta.add,
                );
            }
            _ => {}
        }
        if now == 0 {
            self.counts.remove(&key);
        } else {
            self.counts.insert(key, now);
        }
    }
}

/// Records an entry that came (or went): cancels its opposite from the same delta (it went and
/// came back), else adds it to `to`, and kube-ipvs0 addresses to `addresses` too.
fn record(
    kind: SetKind,
    entry: &SetEntry,
    to: &mut Vec<(SetKind, SetEntry)>,
    addresses: &mut Vec<IpAddr>,
    opposite: &mut Vec<(SetKind, SetEntry)>,
) {
    if let Some(i) = opposite
        .iter()
        .position(|(k, e)| k.name == kind.name && e == entry)
    {
        opposite.swap_remove(i);
        return;
    }
    to.push((kind, entry.clone()));
    if let (true, SetEntry::Ip(ip)) = (kind.name == sets::IPVS_IPS.name, entry) {
        addresses.push(*ip);
    }
}

impl SetDelta {
    /// The `ipset restore -exist` input that applies it (the sets exist already).
    pub fn restore_input(&self, family: ferry_model::IpFamily) -> String {
        let name = |k: &SetKind| {
            ALL.iter()
                .find(|a| a.name == k.name)
                .map_or_else(|| k.name.to_owned(), |a| a.name_in(family))
        };
        let mut text = String::new();
        for (k, e) in &self.del {
            text.push_str(&format!("del {} {e}\n", name(k)));
        }
        for (k, e) in &self.add {
            text.push_str(&format!("add {} {e}\n", name(k)));
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use std::collections::{BTreeMap, BTreeSet};

    use ferry_compile::ipvs::NodeSettings;
    use ferry_model::{IpFamily, Protocol, ServiceName};

    use super::*;

    fn svc(ips: &[&str], cluster_ip: &str) -> ServiceIpvs {
        let ip = |s: &str| s.parse::<IpAddr>().expect("ip");
        ServiceIpvs {
            entries: ips
                .iter()
                .map(|e| {
                    (
                        sets::EXTERNAL_IP,
                        SetEntry::IpPort(ip(e), Protocol::Tcp, 80),
                    )
                })
                .collect(),
            bind: BTreeSet::from([ip(cluster_ip)]),
            ..ServiceIpvs::default()
        }
    }

    #[test]
    fn shared_entries_go_with_the_last_service_holding_them() {
        let rs = Ruleset {
            family: IpFamily::V4,
            node: NodeSettings {
                masquerade_mark: 0x4000,
                masquerade_all: false,
                local: ferry_compile::local::LocalTraffic::None,
            },
            services: BTreeMap::from([
                (
                    ServiceName::new("a", "x"),
                    svc(&["203.0.113.1"], "10.96.0.1"),
                ),
                (
                    ServiceName::new("a", "y"),
                    svc(&["203.0.113.1"], "10.96.0.2"),
                ),
            ]),
        };
        let mut counts = SetCounts::of(&rs);
        assert_eq!(counts.sets(), &rs.sets());
        let mut delta = SetDelta::default();
        counts.replace(
            &rs.services[&ServiceName::new("a", "x")],
            &ServiceIpvs::default(),
            &mut delta,
        );
        // y still holds the external IP; x's ClusterIP goes from kube-ipvs0.
        assert_eq!(
            delta.unbind,
            vec!["10.96.0.1".parse::<IpAddr>().expect("ip")]
        );
        assert_eq!(delta.del.len(), 1);
        assert!(delta.add.is_empty() && delta.bind.is_empty());
        assert_eq!(
            delta.restore_input(IpFamily::V4),
            "del KUBE-IPVS-IPS 10.96.0.1\n"
        );
        let mut delta = SetDelta::default();
        let y = rs.services[&ServiceName::new("a", "y")].clone();
        counts.replace(&y, &svc(&["203.0.113.9"], "10.96.0.2"), &mut delta);
        assert_eq!(
            delta.restore_input(IpFamily::V4),
            "del KUBE-EXTERNAL-IP 203.0.113.1,tcp:80\nadd KUBE-EXTERNAL-IP 203.0.113.9,tcp:80\n"
        );
        assert!(
            delta.bind.is_empty() && delta.unbind.is_empty(),
            "10.96.0.2 stays"
        );
    }
}
