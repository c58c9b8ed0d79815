//! What a batch of source events touched (one event, or a resync's whole list), gathered once
//! for every family.
//!
//! Noting each object of a resync into each family's sets as it was applied grew them one
//! entry at a time: ascending inserts leave a B-tree's nodes about half full, and at 10 000
//! Services the sets of two families held 3.8 MB during the first sync, on the thread that then
//! compiles (heaptrack). Gathered in lists, sorted once and built into empty sets whole, each
//! set has full nodes; only the primary family keeps the names the pending-change metrics
//! count.

use std::collections::BTreeSet;

use ferry_model::{ObjectKey, ServiceName, Touched};

/// What the objects of one batch touched.
#[derive(Debug, Default)]
pub(super) struct Notes {
    /// Services whose Service object changed.
    pub services: Vec<ServiceName>,
    /// Services whose slices changed.
    pub endpoints: Vec<ServiceName>,
    /// Every Service touched.
    pub dirty: Vec<ServiceName>,
    /// Nodes touched.
    pub nodes: BTreeSet<String>,
    /// A ServiceCIDR changed (node-level rules: a mode whose rules use them finds its base
    /// changed, and that sync is full).
    pub service_cidrs: bool,
    /// Trigger times of the changed slices that have one.
    pub trigger_times: Vec<String>,
    /// Changed Service objects.
    pub services_total: u64,
    /// Changed slices.
    pub slices_total: u64,
}

impl Notes {
    /// Notes what storing or deleting one object (`key`) touched.
    pub fn add(&mut self, key: &ObjectKey, touched: Touched, trigger_time: Option<String>) {
        if touched.is_empty() {
            return;
        }
        match key {
            ObjectKey::Service(name) => {
                self.services.push(name.clone());
                self.services_total += 1;
            }
            ObjectKey::EndpointSlice { .. } => {
                self.endpoints.extend(touched.services.iter().cloned());
                self.slices_total += 1;
                self.trigger_times.extend(trigger_time);
            }
            ObjectKey::Node(_) | ObjectKey::Pod { .. } | ObjectKey::ServiceCidr(_) => {}
        }
        self.dirty.extend(touched.services);
        self.nodes.extend(touched.nodes);
        self.service_cidrs |= touched.service_cidrs;
    }

    /// Sorts and deduplicates the lists (once, after the last [`add`](Self::add)).
    pub fn finish(&mut self) {
        for list in [&mut self.services, &mut self.endpoints, &mut self.dirty] {
            list.sort_unstable();
            list.dedup();
        }
    }
}

/// Adds the sorted, deduplicated `names` to `set`; an empty set is built whole.
pub(super) fn extend_sorted(set: &mut BTreeSet<ServiceName>, names: &[ServiceName]) {
    if set.is_empty() {
        *set = names.iter().cloned().collect();
    } else {
        set.extend(names.iter().cloned());
    }
}
