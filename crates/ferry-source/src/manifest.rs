//! Manifests on disk → model objects: load once ([`load`]), or keep watching
//! ([`ManifestSource`]).
//!
//! This is the standalone mode: point Ferry at the folder you would `kubectl apply`. PATH is a
//! file or a directory read recursively. What is read:
//! - files ending in `.yaml`, `.yml` or `.json` (a file named as PATH itself is read whatever its
//!   name), in sorted path order, so every scan is deterministic;
//! - entries whose name starts with `.` are skipped: editors' swap files, `.git`, and the
//!   `..data`/`..<timestamp>` folders of a mounted ConfigMap (whose visible files are symlinks
//!   into them, so reading both would duplicate every object);
//! - YAML files may hold many documents (`---`); JSON files hold one. A document of
//!   `kind: List` (or `ServiceList`, `NodeList`, … as `kubectl get -o yaml` writes them) stands
//!   for its `items`;
//! - `v1 Service`, `discovery.k8s.io/v1 EndpointSlice`, `v1 Endpoints` (mirrored into slices),
//!   `v1 Node` and `v1 Pod` are converted with [`crate::convert`]; every other kind (Deployment,
//!   ConfigMap, …) is ignored, with a debug log. Pods are turned into EndpointSlices later, by
//!   [`crate::pods`].
//!
//! Checks across objects, after each file's objects are converted:
//! - the same kind, namespace and name twice: the first (in path, then document order) wins and
//!   the second is reported;
//! - an EndpointSlice (or Endpoints) whose Service is not among the manifests is reported and
//!   skipped (a Service written there counts even if it is invalid or ignored, e.g. headless);
//! - a ClusterIP, a node port (whatever its protocol), or an external or load-balancer IP with
//!   one protocol and port written in two Services: the first Service (in path, then document
//!   order) keeps it, the second is reported and skipped, with no last-good fallback (that
//!   version claimed the same). The API server allocates each ClusterIP and node port once;
//!   manifests are not checked by it.
//!
//! A file that cannot be read or parsed contributes no objects and one error naming the file
//! (with line and column). [`ManifestSource`] keeps the last good version of the objects it held,
//! file by file: a change re-reads only the files it touched and reports only the objects
//! whose version changed (the store's rules are in `store`).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use ferry_model::Object;

use crate::InvalidObject;

mod documents;
mod load;
mod store;
mod walk;
mod watch;
pub mod yaml;

pub use documents::{for_each_document, Document};
pub use watch::WatchError;

/// The outcome of reading manifests once.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scan {
    /// Every valid object, sorted by [`ferry_model::ObjectKey`].
    pub objects: Vec<Object>,
    /// Every problem found, in path then document order (directories that cannot be read,
    /// files that cannot be read or parsed, and bad objects).
    pub errors: Vec<InvalidObject>,
}

/// Reads PATH (a file, or a directory read recursively) once, on every core. Nothing is
/// remembered: an invalid object is simply absent from [`Scan::objects`].
pub fn load(path: &Path) -> Scan {
    let (objects, errors) = ManifestSource::new(path).scan();
    Scan { objects, errors }
}

/// A manifest source: scans PATH, remembering the last good version of every object.
///
/// - When an object becomes invalid, or its file becomes unreadable or unparseable, its last good
///   version stays in the result (so the proxy keeps programming it) and the error is reported
///   on every scan until it is fixed.
/// - When an object is deleted from disk (its file removed, or its document removed from a file
///   that still parses) it disappears.
/// - A newly added invalid object is simply absent.
/// - If PATH itself is missing or unreadable, that is reported and everything is kept: a
///   vanished mount is far more likely than the wish to remove every Service at once.
///
/// ```no_run
/// use ferry_source::manifest::ManifestSource;
/// use ferry_source::SourceEvent;
///
/// # async fn example() {
/// let (tx, mut rx) = tokio::sync::mpsc::channel(16);
/// let source = ManifestSource::new("examples/seed");
/// tokio::spawn(source.run(tx, |error| tracing::debug!(%error, "counted")));
/// while let Some(event) = rx.recv().await {
///     if let SourceEvent::Resync(objects) = event {
///         println!("{} objects", objects.len());
///     }
/// }
/// # }
/// ```
#[derive(Debug)]
pub struct ManifestSource {
    path: PathBuf,
    store: store::Store,
    /// Names and endpoint locations shared by the objects read (see `load::compact_slice`),
    /// kept from one read to the next: a file read again shares them with the rest instead of
    /// holding copies of its own (10 000 Services changed once each: ~12 MiB of copies).
    names: ferry_model::Interner,
    /// Where the last look at the files spent its time.
    phases: Phases,
}

/// Where one look at the files spent its time (for the log line of the first read).
#[derive(Debug, Clone, Copy, Default)]
struct Phases {
    /// Listing directories.
    listing: std::time::Duration,
    /// Reading, parsing and converting the files (on every core).
    reading: std::time::Duration,
    /// Bringing the store up to date (one thread).
    indexing: std::time::Duration,
}

impl ManifestSource {
    /// A source reading PATH; nothing is read until [`ManifestSource::scan`] or
    /// [`ManifestSource::run`].
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            store: store::Store::default(),
            names: ferry_model::Interner::default(),
            phases: Phases::default(),
        }
    }

    /// The file or directory this source reads.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads PATH now (every file, on every core): the current object set (last good versions
    /// included, sorted by key) and every problem found in this scan.
    pub fn scan(&mut self) -> (Vec<Object>, Vec<InvalidObject>) {
        let everything = BTreeSet::from([self.path.clone()]);
        let update = self.refresh(&everything, false);
        self.store.repack();
        (self.store.objects(), update.errors)
    }

    /// Applies files given as bytes, as if each had just been read from disk (`None`: the file
    /// is gone), without touching the disk: the events a watcher would send (with `emit`) and
    /// every problem found. For fuzzing and tests of the store's rules; the files need not
    /// exist. Bytes that are not UTF-8 make the file unreadable, as on disk.
    pub fn apply_bytes(
        &mut self,
        files: Vec<(PathBuf, Option<Vec<u8>>)>,
        emit: bool,
    ) -> (Vec<crate::SourceEvent>, Vec<InvalidObject>) {
        let names = &mut self.names;
        let reads = files
            .into_iter()
            .map(|(file, bytes)| {
                let read = match bytes.map(String::from_utf8) {
                    None => load::FileRead::Gone,
                    Some(Ok(text)) => load::read_text(&file, &text, names),
                    Some(Err(e)) => load::FileRead::Broken(Some(Box::new(InvalidObject::file(
                        &file,
                        format!("cannot read: not valid UTF-8: {}", e.utf8_error()),
                    )))),
                };
                (file, read)
            })
            .collect();
        let update = self.store.update(reads, Vec::new(), emit);
        (update.events, update.errors)
    }

    /// The current object set (last good versions included, sorted by key), as
    /// [`ManifestSource::scan`] returns it, without reading anything.
    pub fn objects(&self) -> Vec<Object> {
        self.store.objects()
    }

    /// Looks again at `paths` (files or directories under PATH, or PATH itself) as they are on
    /// disk now, and updates the store; with `emit`, works out the events that tell a consumer
    /// what changed.
    fn refresh(&mut self, paths: &BTreeSet<PathBuf>, emit: bool) -> store::Update {
        let mut files = Vec::new();
        let mut reads = Vec::new();
        let mut errors = Vec::new();
        let mut done: Vec<&Path> = Vec::new();
        let started = std::time::Instant::now();
        // Sorted, so a directory comes before what lies under it.
        for under in paths {
            if done.iter().any(|d| under.starts_with(d)) {
                continue;
            }
            done.push(under);
            let root = *under == self.path;
            let survey = walk::survey(under, root, self.store.files_under(under));
            files.extend(survey.files);
            reads.extend(survey.missing);
            errors.extend(survey.errors);
        }
        let listed = std::time::Instant::now();
        reads.extend(walk::read_all(files, &mut self.names));
        let read = std::time::Instant::now();
        let update = self.store.update(reads, errors, emit);
        self.phases = Phases {
            listing: listed - started,
            reading: read - listed,
            indexing: read.elapsed(),
        };
        update
    }
}

#[cfg(test)]
mod tests;
