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
    /// every stored key that is not in the set. Sources emit this first; the manifest source
    /// also when one file changed several objects, so that they land in one sync.
    Resync(Vec<Object>),
}
