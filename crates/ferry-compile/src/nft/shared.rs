//! How many services contribute each element of a shared set, kept compactly.
//!
//! `cluster-ips` holds one element per ClusterIP and `hairpin` one per endpoint address
//! (`ip . ip`, the same address twice): 110 000 counts at 10 000 Services × 10 endpoints.
//! Kept as `(set name, key)` each count took about 140 bytes of B-tree (a 52-byte key); as
//! `(which set, address)`, an 18-byte key, about a third of that.

use std::collections::BTreeMap;
use std::net::IpAddr;

use super::element::Key;

/// Which shared set (in name order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Set {
    /// `cluster-ips`: `address`.
    ClusterIps,
    /// `hairpin`: `address . address`, the same address twice.
    Hairpin,
}

/// The counts (see the module documentation).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct SharedCounts {
    /// Every count whose key has the usual shape.
    addrs: BTreeMap<(Set, IpAddr), u32>,
    /// Any other shared key, as written (none from the compiler today).
    other: BTreeMap<(&'static str, Key), u32>,
}

fn compact(set: &'static str, key: &Key) -> Option<(Set, IpAddr)> {
    match (set, key) {
        ("cluster-ips", Key::Addr(a)) => Some((Set::ClusterIps, *a)),
        ("hairpin", Key::AddrPair(a, b)) if a == b => Some((Set::Hairpin, *a)),
        _ => None,
    }
}

fn expand((set, a): (Set, IpAddr)) -> (&'static str, Key) {
    match set {
        Set::ClusterIps => ("cluster-ips", Key::Addr(a)),
        Set::Hairpin => ("hairpin", Key::AddrPair(a, a)),
    }
}

impl SharedCounts {
    /// See [`ferry_model::btree`].
    pub(crate) fn repack(&mut self) {
        ferry_model::btree::repack(&mut self.addrs);
        ferry_model::btree::repack(&mut self.other);
    }

    /// One more service contributes `key` to `set`.
    pub(crate) fn add(&mut self, set: &'static str, key: Key) {
        match compact(set, &key) {
            Some(k) => *self.addrs.entry(k).or_default() += 1,
            None => *self.other.entry((set, key)).or_default() += 1,
        }
    }

    /// One service fewer contributes `key` to `set` (forgotten at none).
    pub(crate) fn remove(&mut self, set: &'static str, key: Key) {
        fn down<K: Ord>(map: &mut BTreeMap<K, u32>, k: K) {
            if let Some(n) = map.get_mut(&k) {
                *n -= 1;
                if *n == 0 {
                    map.remove(&k);
                }
            }
        }
        match compact(set, &key) {
            Some(k) => down(&mut self.addrs, k),
            None => down(&mut self.other, (set, key)),
        }
    }

    /// How many services contribute `key` to `set`.
    pub(crate) fn count(&self, set: &'static str, key: &Key) -> u32 {
        let n = match compact(set, key) {
            Some(k) => self.addrs.get(&k),
            None => self.other.get(&(set, key.clone())),
        };
        n.copied().unwrap_or(0)
    }

    /// Every counted `(set, key)`, sorted.
    pub(crate) fn keys(&self) -> Box<dyn Iterator<Item = (&'static str, Key)> + '_> {
        let addrs = self.addrs.keys().copied().map(expand);
        if self.other.is_empty() {
            return Box::new(addrs);
        }
        let mut all: Vec<_> = addrs.chain(self.other.keys().cloned()).collect();
        all.sort();
        Box::new(all.into_iter())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> IpAddr {
        s.parse().expect("address")
    }

    #[test]
    fn counts_go_up_and_down_and_keys_come_out_sorted_as_written() {
        let mut c = SharedCounts::default();
        let hairpin = Key::AddrPair(addr("10.0.0.2"), addr("10.0.0.2"));
        let odd = Key::AddrPair(addr("10.0.0.1"), addr("10.0.0.9"));
        c.add("hairpin", hairpin.clone());
        c.add("hairpin", hairpin.clone());
        c.add("cluster-ips", Key::Addr(addr("10.96.0.10")));
        c.add("hairpin", odd.clone());
        assert_eq!(c.count("hairpin", &hairpin), 2);
        assert_eq!(c.count("hairpin", &odd), 1);
        assert_eq!(
            c.keys().collect::<Vec<_>>(),
            vec![
                ("cluster-ips", Key::Addr(addr("10.96.0.10"))),
                ("hairpin", odd.clone()),
                ("hairpin", hairpin.clone()),
            ]
        );
        c.remove("hairpin", hairpin.clone());
        assert_eq!(c.count("hairpin", &hairpin), 1);
        c.remove("hairpin", hairpin.clone());
        c.remove("hairpin", odd);
        assert_eq!(c.count("hairpin", &hairpin), 0);
        assert_eq!(c.keys().count(), 1);
        assert_eq!(c, {
            let mut d = SharedCounts::default();
            d.add("cluster-ips", Key::Addr(addr("10.96.0.10")));
            d
        });
    }
}
