//! `SourceEvent`: what every source (manifests now, the Kubernetes API later) emits.

use ferry_model::{Object, ObjectKey};

/// One change reported by a source, applied in order by the cluster-state owner.
///
/// The kube watcher's `Init`/`InitApply`/`InitDone` map onto [`SourceEvent::Resync`], and so does
/// the first scan of the manifest directory, so both sources look the same to the rest of Ferry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SourceEvent {
    /// One object added or changed.
    Apply(Object),
    /// One object removed.
    Delete(ObjectKey),
    /// The complete current set of this source's objects: the consumer applies each and deletes
    /// every stored key that is not in the set. Sources emit this first.
    Resync(Vec<Object>),
    /// Changes that belong together, `Apply` and `Delete` events in order: the consumer applies
    /// them all before it syncs. The manifest source sends one file's changed objects so (a new
    /// Service with its EndpointSlice never syncs half), the Pod stage a Service with the
    /// slices it derived for it.
    Batch(Vec<SourceEvent>),
}

impl SourceEvent {
    /// `events` as one event: `None` for none, the event itself for one, a
    /// [`SourceEvent::Batch`] for more.
    pub fn batch(mut events: Vec<SourceEvent>) -> Option<SourceEvent> {
        match events.len() {
            0 => None,
            1 => events.pop(),
            _ => Some(SourceEvent::Batch(events)),
        }
    }
}
