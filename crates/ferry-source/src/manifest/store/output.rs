//! What the source reports for each key, and what an update changed in it.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use ferry_model::{Object, ObjectKey, ObjectRef};

use super::{Before, Entry, Found, Id, Position, Store};
use crate::{InvalidObject, SourceEvent};

/// One identity's claim on a key: where it is written and its objects.
type Claim<'a> = (&'a Id, Option<&'a Position>, Option<&'a Arc<[Object]>>);

impl Store {
    /// The identities that may give `key`: the one named like it, and those giving it as a
    /// foreign object.
    fn claimants(&self, key: &ObjectKey) -> Vec<Claim<'_>> {
        let natural = self.entries.get_key_value(&key.object_ref());
        let foreign = self
            .foreign
            .get(key)
            .into_iter()
            .flatten()
            .filter_map(|id| self.entries.get_key_value(id));
        natural.into_iter().chain(foreign).map(claim).collect()
    }

    /// The identity reporting `key` now, and its object: the first written of those giving it.
    pub(super) fn owner(&self, key: &ObjectKey) -> Option<(&Id, &Object)> {
        first(self.claimants(key), key)
    }

    /// The same, as it was before the update that touched `touched`; `was_foreign` holds the
    /// foreign keys the touched identities gave before it.
    fn owner_before<'a>(
        &'a self,
        key: &ObjectKey,
        touched: &'a BTreeMap<Id, Before>,
        was_foreign: &BTreeMap<ObjectKey, Vec<Id>>,
    ) -> Option<(&'a Id, &'a Object)> {
        let untouched = self
            .claimants(key)
            .into_iter()
            .filter(|(id, _, _)| !touched.contains_key(*id));
        let natural = touched.get_key_value(&key.object_ref());
        let foreign = was_foreign
            .get(key)
            .into_iter()
            .flatten()
            .filter_map(|id| touched.get_key_value(id));
        let was = natural
            .into_iter()
            .chain(foreign)
            .map(|(id, b)| (id, b.position(), b.good()));
        first(untouched.chain(was), key)
    }

    /// The events that bring a consumer from the state before the update to now, and the
    /// errors of touched identities whose objects another identity holds.
    pub(super) fn diff(
        &self,
        touched: &BTreeMap<Id, Before>,
        was_foreign: &BTreeMap<ObjectKey, Vec<Id>>,
        found: &mut Found,
    ) -> Vec<SourceEvent> {
        let mut keys: BTreeSet<ObjectKey> = BTreeSet::new();
        for (id, before) in touched {
            let now = self.entries.get(id).and_then(Entry::gives);
            for good in before.good().into_iter().chain(now) {
                keys.extend(good.iter().map(Object::key));
            }
        }
        let mut events = Vec::new();
        for key in keys {
            let now = self.owner(&key);
            let before = self.owner_before(&key, touched, was_foreign);
            match (before, now) {
                (before, Some((_, object))) if before.map(|(_, o)| o) != Some(object) => {
                    events.push(SourceEvent::Apply(object.clone()));
                }
                (Some(_), None) => events.push(SourceEvent::Delete(key.clone())),
                _ => {}
            }
            self.check_key(&key, now.map(|(id, _)| id), touched.keys(), found);
        }
        events
    }

    /// Reports every identity among `ids` that gives an object another identity holds.
    pub(super) fn check_claims<'a>(&self, ids: impl Iterator<Item = &'a Id>, found: &mut Found) {
        for id in ids {
            let Some(good) = self.entries.get(id).and_then(Entry::gives).cloned() else {
                continue;
            };
            for key in good.iter().map(Object::key) {
                let owner = self.owner(&key).map(|(id, _)| id);
                self.check_key(&key, owner, std::iter::once(id), found);
            }
        }
    }

    /// Reports each of `ids` that gives `key` without owning it.
    fn check_key<'a>(
        &self,
        key: &ObjectKey,
        owner: Option<&Id>,
        ids: impl Iterator<Item = &'a Id>,
        found: &mut Found,
    ) {
        for id in ids.filter(|id| Some(*id) != owner) {
            let Some(entry) = self.entries.get(id) else {
                continue;
            };
            let gives = entry
                .gives()
                .is_some_and(|g| g.iter().any(|o| has_key(o, key)));
            let Some((position, _)) = entry.winner().filter(|_| gives) else {
                continue;
            };
            let target = key.object_ref();
            let error = InvalidObject::new(
                id,
                "metadata.name",
                format!("{target} is already defined by another object; this one is skipped"),
            )
            .in_file(&position.file);
            found.push((Some(position.clone()), error));
        }
    }

    /// Updates the index of foreign objects for the identities an update touched.
    pub(super) fn reindex_foreign(&mut self, touched: &BTreeMap<Id, Before>) {
        for (id, before) in touched {
            let now = self.entries.get(id).and_then(Entry::gives).cloned();
            let unchanged = match (before.good(), &now) {
                (Some(a), Some(b)) => Arc::ptr_eq(a, b),
                (None, None) => true,
                _ => false,
            };
            if unchanged {
                continue;
            }
            for key in foreign_keys(id, before.good().map(|g| &**g)) {
                if let Some(ids) = self.foreign.get_mut(&key) {
                    ids.retain(|i| i != id);
                    if ids.is_empty() {
                        self.foreign.remove(&key);
                    }
                }
            }
            for key in foreign_keys(id, now.as_deref()) {
                self.foreign.entry(key).or_default().push(id.clone());
            }
        }
    }
}

/// The foreign keys the touched identities gave before the update.
pub(super) fn foreign_before(touched: &BTreeMap<Id, Before>) -> BTreeMap<ObjectKey, Vec<Id>> {
    let mut was: BTreeMap<ObjectKey, Vec<Id>> = BTreeMap::new();
    for (id, before) in touched {
        for key in foreign_keys(id, before.good().map(|g| &**g)) {
            was.entry(key).or_default().push(id.clone());
        }
    }
    was
}

fn claim<'a>((id, entry): (&'a Id, &'a Entry)) -> Claim<'a> {
    (id, entry.winner().map(|(p, _)| p), entry.gives())
}

/// Of `claims`, the first written that gives `key`, with its object.
fn first<'a>(
    claims: impl IntoIterator<Item = Claim<'a>>,
    key: &ObjectKey,
) -> Option<(&'a Id, &'a Object)> {
    claims
        .into_iter()
        .filter_map(|(id, position, good)| {
            let object = good?.iter().find(|o| has_key(o, key))?;
            Some((position, id, object))
        })
        .min_by(|a, b| (a.0.is_none(), a.0).cmp(&(b.0.is_none(), b.0)))
        .map(|(_, id, object)| (id, object))
}

/// Keys of `objects` that are not `id`'s own.
fn foreign_keys(id: &ObjectRef, objects: Option<&[Object]>) -> Vec<ObjectKey> {
    objects
        .into_iter()
        .flatten()
        .map(Object::key)
        .filter(|key| key.object_ref() != *id)
        .collect()
}

/// True when `object`'s key is `key` (without building the key).
fn has_key(object: &Object, key: &ObjectKey) -> bool {
    match (object, key) {
        (Object::Service(s), ObjectKey::Service(name)) => s.name == *name,
        (Object::EndpointSlice(s), ObjectKey::EndpointSlice { namespace, name }) => {
            *s.namespace == **namespace && *s.name == **name
        }
        (Object::Node(n), ObjectKey::Node(name)) => n.name == *name,
        (Object::ServiceCidr(c), ObjectKey::ServiceCidr(name)) => c.name == *name,
        (Object::Pod(p), ObjectKey::Pod { namespace, name }) => {
            *p.namespace == **namespace && *p.name == **name
        }
        _ => false,
    }
}
