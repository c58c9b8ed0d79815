//! One identity's verdict: which source decides, and what its last good version is now.

use std::sync::Arc;

use ferry_model::{Object, ObjectRef, ServiceName};

use super::{Found, Id, Outcome, Position, Store};
use crate::convert::LABEL_SERVICE_NAME;
use crate::InvalidObject;

impl Store {
    /// Decides identity `id` from its sources (see the module documentation); an identity
    /// without sources is forgotten.
    pub(super) fn resolve(&mut self, id: &Id, found: &mut Found) {
        let Some(entry) = self.entries.get(id) else {
            return;
        };
        if entry.sources.is_empty() {
            self.set_refs(id, Box::default());
            self.entries.remove(id);
            return;
        }
        let mut readable = entry
            .sources
            .iter()
            .filter(|(_, o)| !matches!(o, Outcome::Unread));
        // Only unreadable sources: the last good version stays, nothing new to say.
        let Some((first, outcome)) = readable.next() else {
            self.set_refs(id, Box::default());
            return;
        };
        for (position, _) in readable {
            found.push((Some(position.clone()), duplicate(id, first, position)));
        }
        let (good, refs) = match outcome {
            Outcome::Valid(objects) => {
                let refs = services_of(objects);
                match refs.iter().find(|s| !self.has_service(s)) {
                    Some(missing) => {
                        found.push((Some(first.clone()), dangling(id, first, missing)));
                        (None, refs)
                    }
                    None => (Some(objects.clone()), refs),
                }
            }
            Outcome::Invalid(error) => {
                found.push((Some(first.clone()), (**error).clone()));
                (None, Box::default())
            }
            Outcome::Unread => (None, Box::default()),
        };
        self.set_refs(id, refs);
        let (Some(good), Some(entry)) = (good, self.entries.get_mut(id)) else {
            return;
        };
        // One copy of the objects: the deciding source holds them too, and a document read
        // again unchanged (its file rewritten for another object) keeps the allocation the
        // source, the Pod stage and the cluster state already share; a new one would be a
        // second copy for as long as the object does not change.
        match &entry.good {
            Some(old) if !Arc::ptr_eq(old, &good) && old[..] == good[..] => {
                let old = Arc::clone(old);
                if let Some((_, Outcome::Valid(objects))) = entry
                    .sources
                    .iter_mut()
                    .find(|(_, o)| !matches!(o, Outcome::Unread))
                {
                    *objects = old;
                }
            }
            _ => entry.good = Some(good),
        }
    }

    /// Records which Services `id`'s slices belong to.
    fn set_refs(&mut self, id: &Id, refs: Box<[ServiceName]>) {
        let Some(entry) = self.entries.get_mut(id) else {
            return;
        };
        if entry.refs == refs {
            return;
        }
        let old = std::mem::replace(&mut entry.refs, refs.clone());
        for service in old.iter() {
            self.refs.remove(&(service.clone(), id.clone()));
        }
        for service in refs.iter() {
            self.refs.insert((service.clone(), id.clone()));
        }
    }
}

/// The Services of the slices among `objects`, each once.
fn services_of(objects: &[Object]) -> Box<[ServiceName]> {
    let mut services: Vec<ServiceName> = objects
        .iter()
        .filter_map(|o| match o {
            Object::EndpointSlice(slice) => Some(slice.service.clone()),
            _ => None,
        })
        .collect();
    services.sort();
    services.dedup();
    services.into()
}

/// A later document with the same identity.
fn duplicate(id: &ObjectRef, first: &Position, this: &Position) -> InvalidObject {
    InvalidObject::new(
        id,
        "metadata.name",
        format!(
            "duplicate {id}: the first one, in {}, is used",
            first.file.display()
        ),
    )
    .in_file(&this.file)
}

/// A slice (or a mirrored Endpoints) whose Service is not in the manifests.
fn dangling(id: &ObjectRef, at: &Position, service: &ServiceName) -> InvalidObject {
    // A mirrored Endpoints names its Service by its own name.
    let field = if &*id.kind == "Endpoints" {
        "metadata.name".to_owned()
    } else {
        format!("metadata.labels[{LABEL_SERVICE_NAME}]")
    };
    InvalidObject::new(
        id,
        field,
        format!("Service {service} is not in the manifests"),
    )
    .in_file(&at.file)
}
