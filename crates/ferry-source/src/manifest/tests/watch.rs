//! `ManifestSource::run`: file changes → events.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ferry_model::{Object, ObjectKey};
use tokio::sync::mpsc;
use tokio::time::timeout;

use super::{names, service_port, service_yaml, temp_dir};
use crate::manifest::ManifestSource;
use crate::SourceEvent;

/// Generous: file events can be slow on a loaded CI machine; a passing test never waits this.
pub(super) const WAIT: Duration = Duration::from_secs(30);

/// Writes `root/rel` atomically (a hidden temporary file renamed into place), so no scan can
/// see it half-written and the tests stay deterministic.
pub(super) fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    let dir = path.parent().unwrap_or(root);
    fs::create_dir_all(dir).unwrap_or_else(|e| panic!("mkdir {}: {e}", dir.display()));
    let tmp = dir.join(".incoming.tmp");
    fs::write(&tmp, text).unwrap_or_else(|e| panic!("write {}: {e}", tmp.display()));
    fs::rename(&tmp, &path).unwrap_or_else(|e| panic!("rename to {}: {e}", path.display()));
}

/// What a consumer holds after applying every event received so far.
#[derive(Default)]
pub(super) struct View {
    pub objects: BTreeMap<ObjectKey, Object>,
    /// Every event received, in order.
    pub events: Vec<SourceEvent>,
}

impl View {
    /// Applies `event`; panics on a `Resync` after the first event (the manifest source sends
    /// one, after its first scan) and on a `Batch` holding anything but `Apply`/`Delete`.
    fn apply(&mut self, event: SourceEvent) {
        match &event {
            SourceEvent::Resync(objects) => {
                assert!(self.events.is_empty(), "a Resync after the first scan");
                self.objects = objects.iter().map(|o| (o.key(), o.clone())).collect();
            }
            SourceEvent::Batch(events) => {
                assert!(events.len() > 1, "a Batch of fewer than two: {events:?}");
                for event in events {
                    self.change(event);
                }
            }
            event => self.change(event),
        }
        self.events.push(event);
    }

    fn change(&mut self, event: &SourceEvent) {
        match event {
            SourceEvent::Apply(object) => {
                self.objects.insert(object.key(), object.clone());
            }
            SourceEvent::Delete(key) => {
                self.objects.remove(key);
            }
            other => panic!("only Apply and Delete after the first scan: {other:?}"),
        }
    }

    fn list(&self) -> Vec<Object> {
        self.objects.values().cloned().collect()
    }
}

/// Applies events until the consumer's objects satisfy `done`; panics after [`WAIT`].
pub(super) async fn view_until(
    rx: &mut mpsc::Receiver<SourceEvent>,
    view: &mut View,
    what: &str,
    done: impl Fn(&[Object]) -> bool,
) -> Vec<Object> {
    let wait = async {
        loop {
            match rx.recv().await {
                Some(event) => {
                    view.apply(event);
                    let objects = view.list();
                    if done(&objects) {
                        return objects;
                    }
                }
                None => panic!("source stopped while waiting for {what}"),
            }
        }
    };
    timeout(WAIT, wait)
        .await
        .unwrap_or_else(|_| panic!("no events giving {what} within {WAIT:?}"))
}

pub(super) fn start(
    path: &Path,
) -> (
    mpsc::Receiver<SourceEvent>,
    tokio::task::JoinHandle<Result<(), crate::manifest::WatchError>>,
    Arc<AtomicUsize>,
) {
    let (tx, rx) = mpsc::channel(16);
    let errors = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&errors);
    let source = ManifestSource::new(path);
    let task = tokio::spawn(source.run(tx, move |_| {
        counter.fetch_add(1, Ordering::SeqCst);
    }));
    (rx, task, errors)
}

#[tokio::test]
async fn edits_additions_and_deletions_each_reach_the_consumer() {
    let dir = temp_dir();
    write(
        dir.path(),
        "a.yaml",
        &service_yaml("dev", "a", "10.96.0.10", 80),
    );
    let (mut rx, task, _) = start(dir.path());
    let mut view = View::default();
    view_until(&mut rx, &mut view, "the initial set", |o| {
        names(o) == ["Service dev/a"]
    })
    .await;

    write(
        dir.path(),
        "a.yaml",
        &service_yaml("dev", "a", "10.96.0.10", 81),
    );
    view_until(&mut rx, &mut view, "the edit", |o| {
        service_port(o, "a") == Some(81)
    })
    .await;

    write(
        dir.path(),
        "sub/b.yaml",
        &service_yaml("dev", "b", "10.96.0.11", 80),
    );
    view_until(&mut rx, &mut view, "the new file", |o| {
        names(o) == ["Service dev/a", "Service dev/b"]
    })
    .await;

    fs::remove_file(dir.path().join("a.yaml")).unwrap_or_else(|e| panic!("rm: {e}"));
    view_until(&mut rx, &mut view, "the deletion", |o| {
        names(o) == ["Service dev/b"]
    })
    .await;

    drop(rx);
    let result = timeout(WAIT, task)
        .await
        .unwrap_or_else(|_| panic!("run did not return"));
    assert!(matches!(result, Ok(Ok(()))), "{result:?}");
}

#[tokio::test]
async fn a_single_file_replaced_by_rename_is_followed() {
    let dir = temp_dir();
    let path = dir.path().join("svc.yaml");
    write(
        dir.path(),
        "svc.yaml",
        &service_yaml("dev", "a", "10.96.0.10", 80),
    );
    write(
        dir.path(),
        "other.yaml",
        &service_yaml("dev", "other", "10.96.0.11", 80),
    );
    let (mut rx, _task, _) = start(&path);
    let mut view = View::default();
    view_until(&mut rx, &mut view, "the initial set", |o| {
        names(o) == ["Service dev/a"]
    })
    .await;

    // What editors do on save: write a new file, rename it over the old one.
    write(
        dir.path(),
        "svc.yaml",
        &service_yaml("dev", "a", "10.96.0.10", 82),
    );
    view_until(&mut rx, &mut view, "the replaced file", |o| {
        service_port(o, "a") == Some(82)
    })
    .await;
}

#[tokio::test]
async fn errors_are_reported_and_unchanged_objects_are_not_resent() {
    let dir = temp_dir();
    write(
        dir.path(),
        "a.yaml",
        &service_yaml("dev", "a", "10.96.0.10", 80),
    );
    let (mut rx, _task, errors) = start(dir.path());
    let mut view = View::default();
    let initial = view_until(&mut rx, &mut view, "the initial set", |_| true).await;

    // An invalid edit keeps the last good version: no event, but the error is reported.
    write(
        dir.path(),
        "a.yaml",
        &service_yaml("dev", "a", "10.96.0.10", 0),
    );
    // Then a valid new file: the consumer must then hold exactly the old set plus it.
    write(
        dir.path(),
        "b.yaml",
        &service_yaml("dev", "b", "10.96.0.11", 80),
    );
    let next = view_until(&mut rx, &mut view, "the new file", |o| o.len() == 2).await;
    assert_eq!(
        next[0], initial[0],
        "the invalid edit did not replace the last good version"
    );
    assert_eq!(
        view.events.len(),
        2,
        "the initial Resync and the new file's Apply, nothing for the invalid edit: {:?}",
        view.events
    );
    assert!(
        errors.load(Ordering::SeqCst) >= 1,
        "the invalid edit was reported"
    );
}

#[tokio::test]
async fn run_returns_when_the_receiver_is_dropped() {
    let dir = temp_dir();
    let (mut rx, task, _) = start(dir.path());
    let mut view = View::default();
    view_until(&mut rx, &mut view, "the initial set", |o| o.is_empty()).await;
    drop(rx);
    let result = timeout(WAIT, task)
        .await
        .unwrap_or_else(|_| panic!("run did not return"));
    assert!(matches!(result, Ok(Ok(()))), "{result:?}");
}

#[tokio::test]
async fn a_directory_that_appears_late_is_watched_recursively() {
    let dir = temp_dir();
    let root = dir.path().join("manifests");
    let (mut rx, _task, errors) = start(&root);
    let mut view = View::default();
    view_until(&mut rx, &mut view, "the initial empty set", |o| {
        o.is_empty()
    })
    .await;
    assert!(
        errors.load(Ordering::SeqCst) >= 1,
        "the missing PATH was reported"
    );

    // Created as a whole (like a volume being mounted), then edited inside.
    let staging = dir.path().join(".staging");
    write(
        &staging,
        "sub/a.yaml",
        &service_yaml("dev", "a", "10.96.0.10", 80),
    );
    fs::rename(&staging, &root).unwrap_or_else(|e| panic!("mv: {e}"));
    view_until(&mut rx, &mut view, "the new directory", |o| {
        names(o) == ["Service dev/a"]
    })
    .await;

    write(
        &root,
        "sub/a.yaml",
        &service_yaml("dev", "a", "10.96.0.10", 81),
    );
    view_until(&mut rx, &mut view, "an edit inside it", |o| {
        service_port(o, "a") == Some(81)
    })
    .await;
}
