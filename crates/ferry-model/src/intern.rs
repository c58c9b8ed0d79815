//! Shared copies of the names many endpoints repeat (node names, zones, hint names).

use std::collections::HashSet;
use std::sync::Arc;

use crate::EndpointSlice;

/// A set of shared names: [`Interner::intern`] returns the stored `Arc<str>` equal to a name,
/// so every endpoint on a node points at one allocation instead of its own `String`.
///
/// Names nobody else holds any more are dropped when the set has doubled since the last sweep,
/// so a cluster whose nodes come and go does not grow it without bound.
#[derive(Debug, Clone, Default)]
pub struct Interner {
    names: HashSet<Arc<str>>,
    swept_at: usize,
}

impl Interner {
    /// The shared copy of `name` (stored on first use).
    pub fn intern(&mut self, name: &Arc<str>) -> Arc<str> {
        if let Some(shared) = self.names.get(name) {
            return Arc::clone(shared);
        }
        if self.names.len() >= 2 * self.swept_at.max(32) {
            self.names.retain(|n| Arc::strong_count(n) > 1);
            self.swept_at = self.names.len();
        }
        self.names.insert(Arc::clone(name));
        Arc::clone(name)
    }

    /// Replaces every name of `slice`'s endpoints by its shared copy.
    pub fn intern_slice(&mut self, slice: &mut EndpointSlice) {
        for ep in slice.endpoints.iter_mut() {
            for name in [&mut ep.node_name, &mut ep.zone].into_iter().flatten() {
                *name = self.intern(name);
            }
            for list in [&mut ep.zone_hints, &mut ep.node_hints]
                .into_iter()
                .flatten()
            {
                for name in list.iter_mut() {
                    *name = self.intern(name);
                }
            }
        }
    }

    /// Number of names stored.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    /// True when no name is stored.
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{mk_endpoint, mk_slice};

    #[test]
    fn endpoints_on_one_node_share_one_name() {
        let mut slice = mk_slice(
            "default",
            "web",
            8080,
            vec![
                mk_endpoint("192.168.0.2", "node-a"),
                mk_endpoint("192.168.0.3", "node-a"),
                mk_endpoint("192.168.0.4", "node-b"),
            ],
        );
        let mut interner = Interner::default();
        interner.intern_slice(&mut slice);
        let names: Vec<&Arc<str>> = slice
            .endpoints
            .iter()
            .map(|e| e.node_name.as_ref().expect("a node name"))
            .collect();
        assert!(Arc::ptr_eq(names[0], names[1]));
        assert!(!Arc::ptr_eq(names[0], names[2]));
        assert_eq!(&**names[2], "node-b");
        assert_eq!(interner.len(), 2);
    }

    #[test]
    fn names_nobody_holds_are_swept_once_the_set_doubles() {
        let mut interner = Interner::default();
        for i in 0..64 {
            interner.intern(&Arc::from(format!("gone-{i}")));
        }
        assert_eq!(interner.len(), 64);
        let kept: Arc<str> = interner.intern(&Arc::from("kept"));
        // The 65th name triggered a sweep: only the one still held (and the new one) remain.
        assert_eq!(interner.len(), 1);
        let again = interner.intern(&Arc::from("kept"));
        assert!(Arc::ptr_eq(&kept, &again));
    }
}
