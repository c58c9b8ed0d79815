//! The controller's hand-written slices (and slices mirrored from Endpoints), and what it has
//! handed on for the Services that use them.
//!
//! A Service whose endpoints do not come from Pods hands on its hand-written slices as they
//! are, so nothing is kept for it beyond those slices: what was handed on for it *is* its
//! hand-written slices, except within one input that changes them, when `handed_before`
//! holds how they were (taken at the first change, emptied by the refresh).

use std::collections::BTreeSet;
use std::sync::Arc;

use ferry_model::{EndpointSlice, ServiceName};

use super::{EndpointController, SliceKey, Slices};

impl EndpointController {
    pub(super) fn add_handwritten(&mut self, key: SliceKey, slice: Arc<EndpointSlice>) {
        self.handwritten_of
            .insert((slice.service.clone(), key.clone()));
        self.handwritten.insert(key, slice);
    }

    /// Forgets a hand-written slice; returns its Service (none when it was not known).
    pub(super) fn remove_handwritten(&mut self, key: &SliceKey) -> BTreeSet<ServiceName> {
        let Some(service) = self.handwritten.get(key).map(|s| s.service.clone()) else {
            return BTreeSet::new();
        };
        self.note_handed(&service);
        self.handwritten.remove(key);
        self.handwritten_of.remove(&(service.clone(), key.clone()));
        BTreeSet::from([service])
    }

    /// Before a change to `service`'s hand-written slices: what was handed on for it, when
    /// that was those slices.
    pub(super) fn note_handed(&mut self, service: &ServiceName) {
        if self.derived.contains_key(service) || self.handed_before.contains_key(service) {
            return;
        }
        let slices = self.handwritten_slices(service);
        self.handed_before.insert(service.clone(), slices);
    }

    /// `service`'s hand-written slices, by key.
    pub(super) fn handwritten_of_service<'a>(
        &'a self,
        service: &'a ServiceName,
    ) -> impl Iterator<Item = (&'a SliceKey, &'a Arc<EndpointSlice>)> + 'a {
        let first: SliceKey = (Arc::from(""), Arc::from(""));
        self.handwritten_of
            .range((service.clone(), first)..)
            .take_while(move |(s, _)| s == service)
            .filter_map(|(_, key)| self.handwritten.get_key_value(key))
    }

    /// `service`'s hand-written slices, sorted by key.
    pub(super) fn handwritten_slices(&self, service: &ServiceName) -> Slices {
        self.handwritten_of_service(service)
            .map(|(k, s)| (k.clone(), Arc::clone(s)))
            .collect()
    }

    /// Every slice handed on now, by Service then key.
    pub(super) fn handed_on(&self) -> impl Iterator<Item = Arc<EndpointSlice>> + '_ {
        let handwritten = self
            .handwritten_of
            .iter()
            .filter(|(service, _)| !self.derived.contains_key(service))
            .filter_map(|(service, key)| Some((service, key, self.handwritten.get(key)?)));
        let derived = self
            .derived
            .iter()
            .flat_map(|(service, slices)| slices.iter().map(move |(k, s)| (service, k, s)));
        let mut all: Vec<_> = handwritten.chain(derived).collect();
        all.sort_by(|a, b| (a.0, a.1).cmp(&(b.0, b.1)));
        all.into_iter().map(|(_, _, s)| Arc::clone(s))
    }
}
