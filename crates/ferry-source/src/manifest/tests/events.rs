//! `ManifestSource::run`, one test per kind of file event: what is read, and what is sent.

use std::fs;
use std::io::Write as _;
use std::path::Path;

use ferry_model::{Object, ObjectKey};

use super::watch::{start, view_until, write, View};
use super::{names, service_port, service_yaml, slice_yaml, temp_dir};
use crate::SourceEvent;

/// The endpoint address of the slice named `name`.
fn endpoint_of(objects: &[Object], name: &str) -> Option<String> {
    objects.iter().find_map(|o| match o {
        Object::EndpointSlice(s) if &*s.name == name => {
            s.endpoints.first().map(|e| e.address.to_string())
        }
        _ => None,
    })
}

/// A Service `dev/<name>` and its slice `<name>-abc` with one endpoint `addr`, in one file.
fn service_file(name: &str, ip: &str, addr: &str) -> String {
    format!(
        "{}---\n{}",
        service_yaml("dev", name, ip, 80),
        slice_yaml("dev", &format!("{name}-abc"), name, addr)
    )
}

/// `a.yaml` and `b.yaml`: Services `a` and `b`, each with its slice.
fn two_service_files(dir: &Path) {
    write(dir, "a.yaml", &service_file("a", "10.96.0.10", "10.0.0.1"));
    write(dir, "b.yaml", &service_file("b", "10.96.0.11", "10.0.0.2"));
}

/// Starts watching `path`; returns once the consumer's initial objects satisfy `initial`.
async fn watching(
    path: &Path,
    initial: impl Fn(&[Object]) -> bool,
) -> (tokio::sync::mpsc::Receiver<SourceEvent>, View) {
    let (mut rx, _task, _) = start(path);
    let mut view = View::default();
    view_until(&mut rx, &mut view, "the initial set", initial).await;
    (rx, view)
}

/// Events received after the initial `Resync`.
fn after_resync(view: &View) -> &[SourceEvent] {
    assert!(matches!(view.events.first(), Some(SourceEvent::Resync(_))));
    &view.events[1..]
}

#[tokio::test]
async fn a_file_staged_elsewhere_and_renamed_in_sends_only_what_changed() {
    let dir = temp_dir();
    let staging = temp_dir();
    two_service_files(dir.path());
    let (mut rx, mut view) = watching(dir.path(), |o| o.len() == 4).await;

    let staged = staging.path().join("a.yaml");
    fs::write(&staged, service_file("a", "10.96.0.10", "10.0.0.9"))
        .unwrap_or_else(|e| panic!("{e}"));
    fs::rename(&staged, dir.path().join("a.yaml")).unwrap_or_else(|e| panic!("mv: {e}"));
    let objects = view_until(&mut rx, &mut view, "the new endpoint", |o| {
        endpoint_of(o, "a-abc").as_deref() == Some("10.0.0.9")
    })
    .await;
    let [SourceEvent::Apply(Object::EndpointSlice(slice))] = after_resync(&view) else {
        panic!(
            "one Apply of the changed slice expected: {:?}",
            after_resync(&view)
        );
    };
    assert_eq!(&*slice.name, "a-abc");
    assert_eq!(objects.len(), 4);
}

#[tokio::test]
async fn a_file_written_in_place_is_read_when_it_is_closed() {
    let dir = temp_dir();
    write(
        dir.path(),
        "a.yaml",
        &service_file("a", "10.96.0.10", "10.0.0.1"),
    );
    let (mut rx, mut view) = watching(dir.path(), |o| o.len() == 2).await;

    // Truncated, written and closed in place, as `kubectl get -o yaml > file` does.
    let path = dir.path().join("a.yaml");
    fs::write(&path, service_file("a", "10.96.0.10", "10.0.0.7")).unwrap_or_else(|e| panic!("{e}"));
    view_until(&mut rx, &mut view, "the rewritten file", |o| {
        endpoint_of(o, "a-abc").as_deref() == Some("10.0.0.7")
    })
    .await;
}

#[tokio::test]
async fn a_file_still_open_for_writing_is_read_after_a_quiet_time() {
    let dir = temp_dir();
    let (mut rx, mut view) = watching(dir.path(), |o| o.is_empty()).await;

    let path = dir.path().join("a.yaml");
    let mut file = fs::File::create(&path).unwrap_or_else(|e| panic!("create: {e}"));
    file.write_all(service_yaml("dev", "a", "10.96.0.10", 80).as_bytes())
        .unwrap_or_else(|e| panic!("write: {e}"));
    file.flush().unwrap_or_else(|e| panic!("flush: {e}"));
    // Never closed before the object arrives: only the quiet time can have let it through.
    view_until(&mut rx, &mut view, "the open file's object", |o| {
        names(o) == ["Service dev/a"]
    })
    .await;
    drop(file);
}

#[tokio::test]
async fn a_removed_file_deletes_its_objects_at_once_and_keeps_the_others() {
    let dir = temp_dir();
    two_service_files(dir.path());
    let (mut rx, mut view) = watching(dir.path(), |o| o.len() == 4).await;

    fs::remove_file(dir.path().join("a.yaml")).unwrap_or_else(|e| panic!("rm: {e}"));
    view_until(&mut rx, &mut view, "the deletion", |o| o.len() == 2).await;
    // The file held two objects: they go in one event, so no sync falls between them.
    assert_eq!(
        one_batch(&view),
        ["Delete Service dev/a", "Delete EndpointSlice dev/a-abc"]
    );
}

#[tokio::test]
async fn a_new_file_with_a_service_and_its_slice_arrives_as_one_batch() {
    let dir = temp_dir();
    two_service_files(dir.path());
    let (mut rx, mut view) = watching(dir.path(), |o| o.len() == 4).await;

    write(
        dir.path(),
        "c.yaml",
        &service_file("c", "10.96.0.12", "10.0.0.3"),
    );
    view_until(&mut rx, &mut view, "the new file", |o| o.len() == 6).await;
    assert_eq!(
        one_batch(&view),
        ["Apply Service dev/c", "Apply EndpointSlice dev/c-abc"]
    );
}

/// The events after the initial `Resync`, which must be one Batch: `Apply Kind ns/name` …
fn one_batch(view: &View) -> Vec<String> {
    let [SourceEvent::Batch(events)] = after_resync(view) else {
        panic!("one Batch expected: {:?}", view.events);
    };
    let name = |key: ObjectKey| key.object_ref().to_string();
    let describe = |e: &SourceEvent| match e {
        SourceEvent::Apply(object) => format!("Apply {}", name(object.key())),
        SourceEvent::Delete(key) => format!("Delete {}", name(key.clone())),
        other => panic!("an Apply or Delete expected: {other:?}"),
    };
    events.iter().map(describe).collect()
}

#[tokio::test]
async fn a_file_renamed_away_deletes_its_objects() {
    let dir = temp_dir();
    let elsewhere = temp_dir();
    write(
        dir.path(),
        "a.yaml",
        &service_file("a", "10.96.0.10", "10.0.0.1"),
    );
    let (mut rx, mut view) = watching(dir.path(), |o| o.len() == 2).await;

    fs::rename(dir.path().join("a.yaml"), elsewhere.path().join("a.yaml"))
        .unwrap_or_else(|e| panic!("mv: {e}"));
    view_until(&mut rx, &mut view, "the deletion", |o| o.is_empty()).await;
}

#[tokio::test]
async fn a_directory_moved_in_and_out_brings_and_takes_its_files() {
    let dir = temp_dir();
    let staging = temp_dir();
    let (mut rx, mut view) = watching(dir.path(), |o| o.is_empty()).await;

    write(
        staging.path(),
        "team/a.yaml",
        &service_file("a", "10.96.0.10", "10.0.0.1"),
    );
    write(
        staging.path(),
        "team/deeper/b.yaml",
        &service_file("b", "10.96.0.11", "10.0.0.2"),
    );
    fs::rename(staging.path().join("team"), dir.path().join("team"))
        .unwrap_or_else(|e| panic!("mv: {e}"));
    view_until(&mut rx, &mut view, "the directory's objects", |o| {
        o.len() == 4
    })
    .await;

    fs::rename(dir.path().join("team"), staging.path().join("team"))
        .unwrap_or_else(|e| panic!("mv: {e}"));
    view_until(&mut rx, &mut view, "their deletion", |o| o.is_empty()).await;
}

#[tokio::test]
async fn a_configmap_data_swap_is_followed() {
    let dir = temp_dir();
    let root = dir.path();
    // How the kubelet lays out a mounted ConfigMap: visible symlinks into `..data`, itself a
    // symlink to a timestamped directory, swapped by renaming a new symlink over it.
    write(
        root,
        "..v1/svc.yaml",
        &service_yaml("dev", "a", "10.96.0.10", 80),
    );
    symlink("..v1", &root.join("..data"));
    symlink("..data/svc.yaml", &root.join("svc.yaml"));
    let (mut rx, mut view) = watching(root, |o| service_port(o, "a") == Some(80)).await;

    write(
        root,
        "..v2/svc.yaml",
        &service_yaml("dev", "a", "10.96.0.10", 81),
    );
    symlink("..v2", &root.join("..data_tmp"));
    fs::rename(root.join("..data_tmp"), root.join("..data")).unwrap_or_else(|e| panic!("mv: {e}"));
    view_until(&mut rx, &mut view, "the swapped data", |o| {
        service_port(o, "a") == Some(81)
    })
    .await;
}

fn symlink(target: &str, link: &Path) {
    std::os::unix::fs::symlink(target, link)
        .unwrap_or_else(|e| panic!("ln -s {target} {}: {e}", link.display()));
}

#[tokio::test]
async fn a_service_refused_for_a_taken_clusterip_is_sent_once_its_holder_is_removed() {
    let dir = temp_dir();
    write(
        dir.path(),
        "a.yaml",
        &service_file("a", "10.96.0.10", "10.0.0.1"),
    );
    write(
        dir.path(),
        "b.yaml",
        &service_file("b", "10.96.0.10", "10.0.0.2"),
    );
    let (mut rx, _task, errors) = start(dir.path());
    let mut view = View::default();
    // a and both slices: b's slice has its Service in the manifests, refused or not.
    let objects = view_until(&mut rx, &mut view, "the initial set", |o| o.len() == 3).await;
    let mut names = names(&objects);
    names.sort();
    assert_eq!(
        names,
        [
            "EndpointSlice dev/a-abc",
            "EndpointSlice dev/b-abc",
            "Service dev/a"
        ]
    );
    assert_eq!(errors.load(std::sync::atomic::Ordering::SeqCst), 1);

    fs::remove_file(dir.path().join("a.yaml")).unwrap_or_else(|e| panic!("rm: {e}"));
    let b = ObjectKey::Service(ferry_model::ServiceName::new("dev", "b"));
    let objects = view_until(&mut rx, &mut view, "b taken in", |o| {
        o.len() == 2 && o.iter().any(|o| o.key() == b)
    })
    .await;
    assert_eq!(service_port(&objects, "b"), Some(80));
}
