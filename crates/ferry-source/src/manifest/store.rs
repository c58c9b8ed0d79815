//! The manifest source's memory, updated file by file: every file's documents, the last good
//! version of every object written there, and the checks across objects (duplicates, slices
//! without a Service, two objects claiming one key), so that a change to one file costs what
//! that file holds, not what the directory holds.
//!
//! An object is known by its *identity*, `Kind namespace/name` as written (an Endpoints
//! object's identity stands for every slice mirrored from it). For each identity the store
//! keeps every document written with it (its *sources*, in path then document order) and its
//! last good model objects, the only copy of them the source holds. What the source reports
//! for an identity is always its last good version:
//! - the first readable source decides: valid (and, for a slice, its Service is among the
//!   manifests) makes it the new last good version; invalid keeps the old one, with an error;
//!   later sources are duplicates, reported and ignored;
//! - sources in files that cannot be read right now keep the identity's last good version;
//! - an identity without sources (its documents removed) is gone, and so are its objects;
//! - of two identities giving objects the same key (a slice named like one mirrored from an
//!   Endpoints object), the first written wins and the other is reported;
//! - of two Services claiming one ClusterIP, one node port, or one external or load-balancer
//!   IP with the same protocol and port, the first written keeps it and the other is refused
//!   whole and reported, until it is free (`claims`, with its index key → Services).

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ferry_model::{Object, ObjectKey, ObjectRef, ServiceName};

use super::load::{Doc, FileRead};
use crate::{InvalidObject, SourceEvent};
use file::FilePath;

mod claims;
mod file;
mod output;
mod resolve;

/// An identity, shared by the store's indexes.
pub(super) type Id = Arc<ObjectRef>;

/// Where a document is written: its file, and its place among the file's documents.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Position {
    file: FilePath,
    index: usize,
}

/// What one source (document) of an identity says.
#[derive(Debug)]
enum Outcome {
    /// Valid: these are its model objects (shared with `Entry::good` when they are in use).
    Valid(Arc<[Object]>),
    /// Invalid, and why.
    Invalid(Box<InvalidObject>),
    /// In a file that cannot be read right now: what it says is unknown.
    Unread,
}

/// One identity.
#[derive(Debug)]
struct Entry {
    /// Every document written with this identity, in position order.
    sources: Vec<(Position, Outcome)>,
    /// Its last good model objects: what it contributes (`None`: never valid, contributes
    /// nothing; empty: valid but ignored by the proxy, e.g. a headless Service).
    good: Option<Arc<[Object]>>,
    /// The Services the first valid source's slices belong to (its pairs in `Store::refs`).
    refs: Box<[ServiceName]>,
    /// A Service refused because a Service written before it holds one of its ClusterIPs,
    /// node ports or external frontends: it contributes nothing (see `claims`).
    refused: bool,
}

impl Entry {
    /// The source that decides: the first readable one, else the first.
    fn winner(&self) -> Option<&(Position, Outcome)> {
        self.sources
            .iter()
            .find(|(_, o)| !matches!(o, Outcome::Unread))
            .or_else(|| self.sources.first())
    }

    /// What it contributes now: its last good objects, unless it is refused.
    fn gives(&self) -> Option<&Arc<[Object]>> {
        self.good.as_ref().filter(|_| !self.refused)
    }

    /// Whether a Service with this identity is "in the manifests": written in a file read now,
    /// or kept from a file that cannot be read.
    fn counts(&self) -> bool {
        let read = self
            .sources
            .iter()
            .any(|(_, o)| !matches!(o, Outcome::Unread));
        // Without sources it is about to be forgotten.
        read || (self.good.is_some() && !self.sources.is_empty())
    }
}

/// An identity's state before an update, to tell what the update changed: `None` when the
/// store did not know it, as for every identity of a first read (8 bytes an identity in the
/// update's map instead of 48: 20 000 identities took 2.6 MB of B-tree nodes there).
#[derive(Debug)]
struct Before(Option<Box<Known>>);

/// What a known identity was.
#[derive(Debug)]
struct Known {
    /// What it contributed ([`Entry::gives`]).
    good: Option<Arc<[Object]>>,
    position: Option<Position>,
    /// For a Service: whether it was in the manifests.
    counted: bool,
}

impl Before {
    fn of(entry: Option<&Entry>) -> Self {
        Self(entry.map(|entry| {
            Box::new(Known {
                good: entry.gives().cloned(),
                position: entry.winner().map(|(p, _)| p.clone()),
                counted: entry.counts(),
            })
        }))
    }

    /// What it contributed.
    fn good(&self) -> Option<&Arc<[Object]>> {
        self.0.as_ref().and_then(|k| k.good.as_ref())
    }

    /// Where its deciding source was.
    fn position(&self) -> Option<&Position> {
        self.0.as_ref().and_then(|k| k.position.as_ref())
    }

    /// For a Service: whether it was in the manifests.
    fn counted(&self) -> bool {
        self.0.as_ref().is_some_and(|k| k.counted)
    }
}

/// What one update changed.
#[derive(Debug, Default)]
pub(super) struct Update {
    /// `Apply`/`Delete` of every object whose reported version changed, by key. One update's
    /// events belong together (see [`SourceEvent::Batch`]).
    pub events: Vec<SourceEvent>,
    /// Every problem found in the files read and the identities re-checked, in file then
    /// document order.
    pub errors: Vec<InvalidObject>,
}

/// See the module documentation.
#[derive(Debug, Default)]
pub(super) struct Store {
    /// The identities written in each known file, in document order.
    files: BTreeMap<FilePath, Vec<Id>>,
    entries: BTreeMap<Id, Entry>,
    /// `(Service, slice identity)` for every identity whose first valid source holds a slice
    /// of that Service: re-checked when the Service comes or goes.
    refs: BTreeSet<(ServiceName, Id)>,
    /// Keys of objects that are not their identity's own key (slices mirrored from Endpoints),
    /// with the identities giving them.
    foreign: BTreeMap<ObjectKey, Vec<Id>>,
    /// The Services' ClusterIPs, node ports and external frontends, with the Services
    /// claiming each.
    claims: claims::Claims,
}

/// Errors tagged with where they were found, for sorting.
type Found = Vec<(Option<Position>, InvalidObject)>;

impl Store {
    /// Packs the indexes after a first read of many files (see [`ferry_model::btree`]).
    pub fn repack(&mut self) {
        ferry_model::btree::repack(&mut self.files);
        ferry_model::btree::repack(&mut self.entries);
        ferry_model::btree::repack_set(&mut self.refs);
        ferry_model::btree::repack(&mut self.foreign);
        self.claims.repack();
    }

    /// The known files (read at least once and not gone) that are `path` or lie under it.
    pub fn files_under(&self, path: &Path) -> Vec<PathBuf> {
        self.files
            .range((Bound::Included(FilePath::new(path)), Bound::Unbounded))
            .map(|(f, _)| f)
            .take_while(|f| f.starts_with(path))
            .map(|f| f.to_path_buf())
            .collect()
    }

    /// Applies what was read: each file's new documents (or that it is broken or gone), plus
    /// errors found while listing directories. With `emit`, works out the events; without,
    /// only the state (the first scan reports everything at once with [`Store::objects`]).
    pub fn update(
        &mut self,
        reads: Vec<(PathBuf, FileRead)>,
        listing_errors: Vec<InvalidObject>,
        emit: bool,
    ) -> Update {
        let mut found: Found = listing_errors.into_iter().map(|e| (None, e)).collect();
        let mut touched: BTreeMap<Id, Before> = BTreeMap::new();
        for (path, read) in reads {
            self.replace_file(&path, read, &mut touched, &mut found);
        }
        self.recheck_slices(&mut touched);
        for id in touched.keys() {
            self.resolve(id, &mut found);
        }
        self.settle_claims(&mut touched, &mut found);
        let was_foreign = output::foreign_before(&touched);
        self.reindex_foreign(&touched);
        let events = if emit {
            self.diff(&touched, &was_foreign, &mut found)
        } else {
            self.check_claims(touched.keys(), &mut found);
            Vec::new()
        };
        // In file then document order; errors of directories (no position) by their path.
        found.sort_by_cached_key(|(position, error)| {
            let file = position.as_ref().map(|p| p.file.to_path_buf());
            (
                file.or_else(|| error.file.clone()),
                position.as_ref().map(|p| p.index),
            )
        });
        Update {
            events,
            errors: found.into_iter().map(|(_, e)| e).collect(),
        }
    }

    /// Records an identity's state the first time an update touches it.
    fn touch(&self, id: &Id, touched: &mut BTreeMap<Id, Before>) {
        if touched.contains_key(id) {
            return;
        }
        touched.insert(id.clone(), Before::of(self.entries.get(id)));
    }

    /// Replaces one file's sources with what was read from it.
    fn replace_file(
        &mut self,
        path: &Path,
        read: FileRead,
        touched: &mut BTreeMap<Id, Before>,
        found: &mut Found,
    ) {
        let file = FilePath::new(path);
        let (file, old_ids) = match self.files.remove_entry(&file) {
            Some((file, ids)) => (file, ids),
            None => (file, Vec::new()),
        };
        // Detach the file's old sources, keeping them aside in case the file is now unreadable.
        let mut old = Vec::new();
        for id in &old_ids {
            self.touch(id, touched);
            if let Some(entry) = self.entries.get_mut(id) {
                let (mine, rest) = std::mem::take(&mut entry.sources)
                    .into_iter()
                    .partition(|(p, _)| p.file == file);
                entry.sources = rest;
                old.extend(mine.into_iter().map(|(p, _)| (p, id.clone())));
            }
        }
        let ids = match read {
            FileRead::Docs(docs) => self.attach(&file, docs, touched, found),
            FileRead::Broken(error) => {
                found.extend(error.map(|e| (None, *e)));
                for (position, id) in old {
                    self.add_source(&id, position, Outcome::Unread);
                }
                old_ids
            }
            FileRead::Gone => Vec::new(),
        };
        if !ids.is_empty() {
            let mut ids = ids;
            ids.shrink_to_fit();
            self.files.insert(file, ids);
        }
    }

    /// Attaches a file's documents; returns their identities.
    fn attach(
        &mut self,
        file: &FilePath,
        docs: Vec<Doc>,
        touched: &mut BTreeMap<Id, Before>,
        found: &mut Found,
    ) -> Vec<Id> {
        let mut ids = Vec::new();
        for doc in docs {
            let position = Position {
                file: file.clone(),
                index: doc.index,
            };
            let Some(id) = doc.id else {
                // Not an object, or unnamed: an error, and nothing to remember.
                if let Err(e) = doc.outcome {
                    found.push((Some(position), e.in_file(file)));
                }
                continue;
            };
            let id = match self.entries.get_key_value(&id) {
                Some((shared, _)) => shared.clone(),
                None => Arc::new(id),
            };
            self.touch(&id, touched);
            let outcome = match doc.outcome {
                Ok(objects) => Outcome::Valid(objects),
                Err(mut e) => {
                    e.file = Some(file.to_path_buf());
                    Outcome::Invalid(e)
                }
            };
            self.add_source(&id, position, outcome);
            ids.push(id);
        }
        ids
    }

    fn add_source(&mut self, id: &Id, position: Position, outcome: Outcome) {
        let entry = self.entries.entry(id.clone()).or_insert_with(|| Entry {
            sources: Vec::new(),
            good: None,
            refs: Box::default(),
            refused: false,
        });
        let at = entry.sources.partition_point(|(p, _)| *p < position);
        // Nearly every identity is written once: no room for four.
        entry.sources.reserve_exact(1);
        entry.sources.insert(at, (position, outcome));
    }

    /// Touches the slices of every Service that came or went, so they are checked again.
    fn recheck_slices(&self, touched: &mut BTreeMap<Id, Before>) {
        let flipped: Vec<ServiceName> = touched
            .iter()
            .filter(|(id, _)| &*id.kind == "Service")
            .filter(|(id, before)| {
                before.counted() != self.entries.get(*id).is_some_and(Entry::counts)
            })
            .map(|(id, _)| ServiceName::new(&id.namespace, &id.name))
            .collect();
        for service in flipped {
            for id in self.slices_of(&service) {
                self.touch(&id, touched);
            }
        }
    }

    /// The identities whose slices belong to `service`.
    fn slices_of(&self, service: &ServiceName) -> Vec<Id> {
        let first = (service.clone(), Arc::new(ObjectRef::new("", "", "")));
        self.refs
            .range(first..)
            .take_while(|(s, _)| s == service)
            .map(|(_, id)| id.clone())
            .collect()
    }

    /// True when a Service `service` is in the manifests.
    fn has_service(&self, service: &ServiceName) -> bool {
        let id = ObjectRef::new("Service", &service.namespace, &service.name);
        self.entries.get(&id).is_some_and(Entry::counts)
    }

    /// Every object reported now, sorted by key.
    pub fn objects(&self) -> Vec<Object> {
        let mut all: BTreeMap<ObjectKey, Object> = BTreeMap::new();
        for (id, entry) in &self.entries {
            for object in entry.gives().iter().flat_map(|g| g.iter()) {
                let key = object.key();
                if self.owner(&key).is_some_and(|(owner, _)| owner == id) {
                    all.insert(key, object.clone());
                }
            }
        }
        all.into_values().collect()
    }
}

#[cfg(test)]
mod tests;
