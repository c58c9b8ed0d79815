//! What the Kubernetes API source remembers: the last good model object of every watched object,
//! per kind, and whether every watch has listed once. Pure: watcher events in, [`SourceEvent`]s
//! out.

use std::collections::BTreeMap;

use ferry_model::{Object, ObjectKey};

use crate::{InvalidObject, SourceEvent};

/// The kinds of object the source watches; one watch each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    /// `v1 Service`.
    Service,
    /// `discovery.k8s.io/v1 EndpointSlice`.
    EndpointSlice,
    /// `v1 Node` (only this node's own object).
    Node,
    /// `networking.k8s.io/v1 ServiceCIDR`: optional (see [`Kind::required`]).
    ServiceCidr,
}

impl Kind {
    /// Every kind, in the order their watches start.
    pub const ALL: [Kind; 4] = [
        Kind::Service,
        Kind::EndpointSlice,
        Kind::Node,
        Kind::ServiceCidr,
    ];

    fn index(self) -> usize {
        match self {
            Kind::Service => 0,
            Kind::EndpointSlice => 1,
            Kind::Node => 2,
            Kind::ServiceCidr => 3,
        }
    }

    /// Whether the first sync waits for this kind's first list. ServiceCIDRs are not waited
    /// for, as upstream's proxier does not wait for its ServiceCIDR informer (it syncs once
    /// Services and EndpointSlices are in): an API server without them (before 1.33: `404`),
    /// or a ClusterRole without them (`403`), must not keep Ferry from programming Services.
    pub fn required(self) -> bool {
        self != Kind::ServiceCidr
    }
}

/// One object as the API server sent it, already converted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Converted {
    /// Where the object is stored, from its metadata alone (known even when it is invalid).
    pub key: ObjectKey,
    /// The model object, `Ok(None)` when kube-proxy ignores it (headless, ExternalName, FQDN
    /// slices), or why it is invalid.
    pub result: Result<Option<Object>, InvalidObject>,
}

/// A kube-rs watcher event of one kind, with its objects converted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Change {
    /// Added or modified (`watcher::Event::Apply`).
    Apply(Converted),
    /// Deleted (`watcher::Event::Delete`).
    Delete(ObjectKey),
    /// A (re)list starts (`watcher::Event::Init`).
    Init,
    /// One listed object (`watcher::Event::InitApply`).
    InitApply(Converted),
    /// The list is complete (`watcher::Event::InitDone`).
    InitDone,
}

#[derive(Debug, Default)]
struct KindState {
    /// Last good version of every object of this kind.
    objects: BTreeMap<ObjectKey, Object>,
    /// The list being received, between `Init` and `InitDone`.
    listing: Option<BTreeMap<ObjectKey, Object>>,
    /// Listed completely at least once, or (an optional kind) refused by the API server.
    settled: bool,
}

/// The source's memory across watch restarts.
///
/// - Before every [required](Kind::required) kind has listed once, nothing is emitted; the
///   first event is one [`SourceEvent::Resync`] with every kind's objects (so the first sync
///   sees a whole node). A ServiceCIDR list that ends later sends only what it changed (an
///   `Apply` or `Delete`, or a [`SourceEvent::Batch`] of them).
/// - After that, `Apply`/`Delete` pass through as [`SourceEvent::Apply`]/[`SourceEvent::Delete`],
///   and each relist of a kind (after a `410 Gone`, or a watcher restart) ends with a
///   `Resync` of every kind's objects: objects deleted while the watch was away are gone from
///   it, and the consumer removes them.
/// - An invalid object is reported and its last good version kept (also across relists); an
///   object that becomes ignored (e.g. turned headless) is deleted.
#[derive(Debug, Default)]
pub struct State {
    kinds: [KindState; 4],
    ready: bool,
    /// The first `Resync` also waits for the optional kinds' first list (or refusal).
    wait_optional: bool,
}

impl State {
    /// A state whose first `Resync` waits for every kind, optional ones included, to list
    /// once or be refused: what a one-shot read (`ferry explain`) wants, where the agent
    /// does not wait.
    pub fn waiting_for_optional() -> Self {
        Self {
            wait_optional: true,
            ..Self::default()
        }
    }

    /// True once every required kind has listed once (the first `Resync` has been emitted).
    pub fn is_ready(&self) -> bool {
        self.ready
    }

    /// The API server refused an optional kind's watch (`404`, `403`): the first `Resync` no
    /// longer waits for it; returns that `Resync` when it was the last one waited for.
    pub fn refused(&mut self, kind: Kind) -> Option<SourceEvent> {
        if kind.required() {
            return None;
        }
        self.kinds[kind.index()].settled = true;
        self.settle()
    }

    /// Becomes ready when every kind waited for is settled: the first `Resync`.
    fn settle(&mut self) -> Option<SourceEvent> {
        if self.ready {
            return None;
        }
        self.ready = Kind::ALL.iter().all(|k| {
            let waited = k.required() || self.wait_optional;
            !waited || self.kinds[k.index()].settled
        });
        self.ready.then(|| SourceEvent::Resync(self.objects()))
    }

    /// Applies one watcher event; returns what to tell the consumer, if anything. `invalid` is
    /// called with each invalid object.
    pub fn handle(
        &mut self,
        kind: Kind,
        change: Change,
        invalid: &mut impl FnMut(&InvalidObject),
    ) -> Option<SourceEvent> {
        let ready = self.ready;
        let k = &mut self.kinds[kind.index()];
        match change {
            Change::Apply(c) => match c.result {
                Ok(Some(object)) => {
                    if k.objects.get(&c.key) == Some(&object) {
                        return None;
                    }
                    k.objects.insert(c.key, object.clone());
                    ready.then_some(SourceEvent::Apply(object))
                }
                Ok(None) => {
                    let was = k.objects.remove(&c.key).is_some();
                    (ready && was).then_some(SourceEvent::Delete(c.key))
                }
                Err(e) => {
                    invalid(&e);
                    None
                }
            },
            Change::Delete(key) => {
                let was = k.objects.remove(&key).is_some();
                (ready && was).then_some(SourceEvent::Delete(key))
            }
            Change::Init => {
                k.listing = Some(BTreeMap::new());
                None
            }
            Change::InitApply(c) => {
                let listing = k.listing.get_or_insert_with(BTreeMap::new);
                match c.result {
                    Ok(Some(object)) => {
                        listing.insert(c.key, object);
                    }
                    Ok(None) => {}
                    Err(e) => {
                        invalid(&e);
                        if let Some(old) = k.objects.get(&c.key) {
                            listing.insert(c.key, old.clone());
                        }
                    }
                }
                None
            }
            Change::InitDone => {
                let listed = k.listing.take().unwrap_or_default();
                k.settled = true;
                if ready && !kind.required() {
                    // An optional kind (re)listed after the first Resync: only what changed,
                    // not every kind's objects again (its first list usually ends just after
                    // the others', and finds nothing new).
                    let changes = delta(&k.objects, &listed);
                    k.objects = listed;
                    return SourceEvent::batch(changes);
                }
                k.objects = listed;
                if ready {
                    return Some(SourceEvent::Resync(self.objects()));
                }
                self.settle()
            }
        }
    }

    /// Every object of every kind, sorted by key.
    pub fn objects(&self) -> Vec<Object> {
        let mut all: Vec<(&ObjectKey, &Object)> =
            self.kinds.iter().flat_map(|k| k.objects.iter()).collect();
        all.sort_by(|a, b| a.0.cmp(b.0));
        all.into_iter().map(|(_, o)| o.clone()).collect()
    }
}

/// The events that turn `old` into `new`: deletions, then additions and changes.
fn delta(old: &BTreeMap<ObjectKey, Object>, new: &BTreeMap<ObjectKey, Object>) -> Vec<SourceEvent> {
    let deleted = old
        .keys()
        .filter(|key| !new.contains_key(*key))
        .map(|key| SourceEvent::Delete(key.clone()));
    let applied = new
        .iter()
        .filter(|(key, object)| old.get(*key) != Some(*object))
        .map(|(_, object)| SourceEvent::Apply(object.clone()));
    deleted.chain(applied).collect()
}
