//! B-tree maps and sets packed after a bulk load.
//!
//! Entries inserted one by one in ascending order (the first read of 10 000 manifests, a first
//! sync) leave every node but the last ones about half full: the standard library's B-tree
//! splits a full node of 11 entries into 6 and 5 when an insert overflows it, and an ascending
//! load never comes back to the left half. Merging two maps, on the other hand, builds the
//! result from the sorted entries with full nodes. [`repack`] does that to one map: split off
//! all but its first entry, merge them back. The entries move from the old nodes to the new
//! ones as they go (each old node is freed once passed), so there is never a second copy; the
//! map's content and order are unchanged, only its room shrinks (to about 55 % of it after an
//! ascending load).

use std::collections::{BTreeMap, BTreeSet};

/// Rebuilds `map` with full nodes (see the module documentation).
pub fn repack<K: Ord + Clone, V>(map: &mut BTreeMap<K, V>) {
    let Some(second) = map.keys().nth(1).cloned() else {
        return;
    };
    let mut rest = map.split_off(&second);
    map.append(&mut rest);
}

/// Rebuilds `set` with full nodes (see the module documentation).
pub fn repack_set<T: Ord + Clone>(set: &mut BTreeSet<T>) {
    let Some(second) = set.iter().nth(1).cloned() else {
        return;
    };
    let mut rest = set.split_off(&second);
    set.append(&mut rest);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repacked_map_and_set_keep_every_entry_in_order() {
        let mut map: BTreeMap<u32, String> = (0..1000).map(|i| (i * 3, i.to_string())).collect();
        map.retain(|k, _| k % 7 != 0);
        let before: Vec<(u32, String)> = map.clone().into_iter().collect();
        repack(&mut map);
        assert_eq!(map.into_iter().collect::<Vec<_>>(), before);

        let mut set: BTreeSet<u32> = (0..1000).rev().collect();
        let before: Vec<u32> = set.iter().copied().collect();
        repack_set(&mut set);
        assert_eq!(set.into_iter().collect::<Vec<_>>(), before);

        for n in 0..3 {
            let mut small: BTreeMap<u32, ()> = (0..n).map(|i| (i, ())).collect();
            repack(&mut small);
            assert_eq!(small.len(), n as usize);
        }
    }
}
