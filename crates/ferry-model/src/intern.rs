//! Shared copies of the names many endpoints repeat (node names, zones, hint names).

use std::collections::HashSet;
use std::sync::Arc;

use crate::{EndpointLocation, EndpointSlice};

/// Shared copies of repeated values: [`Interner::intern`] returns the stored `Arc` equal to a
/// value (a namespace, an endpoint's location), so the objects that repeat it point at one
/// allocation instead of holding their own.
///
/// Values nobody else holds any more are dropped when a set has doubled since its last sweep,
/// so a cluster whose nodes and namespaces come and go does not grow it without bound.
#[derive(Debug, Clone, Default)]
pub struct Interner {
    names: Shared<str>,
    locations: Shared<EndpointLocation>,
}

/// One set of shared values.
#[derive(Debug)]
struct Shared<T: ?Sized> {
    values: HashSet<Arc<T>>,
    swept_at: usize,
}

impl<T: ?Sized> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Self {
            values: self.values.clone(),
            swept_at: self.swept_at,
        }
    }
}

impl<T: ?Sized> Default for Shared<T> {
    fn default() -> Self {
        Self {
            values: HashSet::new(),
            swept_at: 0,
        }
    }
}

impl<T: ?Sized + Eq + std::hash::Hash> Shared<T> {
    fn intern(&mut self, value: &Arc<T>) -> Arc<T> {
        if let Some(shared) = self.values.get(value) {
            return Arc::clone(shared);
        }
        if self.values.len() >= 2 * self.swept_at.max(32) {
            self.values.retain(|v| Arc::strong_count(v) > 1);
            self.swept_at = self.values.len();
        }
        self.values.insert(Arc::clone(value));
        Arc::clone(value)
    }
}

impl Interner {
    /// The shared copy of `name` (stored on first use).
    pub fn intern(&mut self, name: &Arc<str>) -> Arc<str> {
        self.names.intern(name)
    }

    /// The shared copy of the name `text` (stored on first use; no allocation when stored).
    pub fn name(&mut self, text: &str) -> Arc<str> {
        match self.names.values.get(text) {
            Some(shared) => Arc::clone(shared),
            None => self.names.intern(&Arc::from(text)),
        }
    }

    /// Points every endpoint of `slice` at the shared copy of its location.
    pub fn intern_slice(&mut self, slice: &mut EndpointSlice) {
        for ep in slice.endpoints.iter_mut() {
            if let Some(location) = &mut ep.location {
                *location = self.locations.intern(location);
            }
        }
    }

    /// Number of names and locations stored.
    pub fn len(&self) -> usize {
        self.names.values.len() + self.locations.values.len()
    }

    /// True when nothing is stored.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{mk_endpoint, mk_slice};

    #[test]
    fn endpoints_on_one_node_share_one_location() {
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
        let locations: Vec<&Arc<EndpointLocation>> = slice
            .endpoints
            .iter()
            .map(|e| e.location.as_ref().expect("a location"))
            .collect();
        assert!(Arc::ptr_eq(locations[0], locations[1]));
        assert!(!Arc::ptr_eq(locations[0], locations[2]));
        assert_eq!(slice.endpoints[2].node_name(), Some("node-b"));
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
