//! The store on its own: files' documents in, events and errors out.

use std::path::PathBuf;

use ferry_model::fixtures::{mk_endpoint, mk_service, mk_slice};
use ferry_model::{Object, ObjectKey, ObjectRef, ServiceName};

use super::{Store, Update};

mod cluster_ips;
mod ports;
use crate::manifest::load::{Doc, FileRead};
use crate::{InvalidObject, SourceEvent};

/// Service `dev/name`, on a ClusterIP of its own (derived from its name).
fn service(name: &str, port: u16) -> Object {
    let n: usize = name.bytes().map(usize::from).sum();
    let ip = format!("10.96.{}.{}", n / 250, n % 250 + 1);
    Object::from(mk_service("dev", name, &ip, port))
}

/// Slice `<svc>-abc` of Service `svc`, one endpoint `addr`.
fn slice(svc: &str, addr: &str) -> Object {
    Object::from(mk_slice("dev", svc, 8080, vec![mk_endpoint(addr, "n1")]))
}

/// A slice of Service `svc` named `name`.
fn named_slice(svc: &str, name: &str, addr: &str) -> Object {
    let Object::EndpointSlice(mut s) = slice(svc, addr) else {
        unreachable!()
    };
    std::sync::Arc::make_mut(&mut s).name = name.into();
    Object::from(s)
}

/// The identity an object is written with.
fn id_of(object: &Object) -> ObjectRef {
    object.key().object_ref()
}

/// A valid document holding `object`.
fn doc(index: usize, object: Object) -> Doc {
    Doc {
        index,
        id: Some(id_of(&object)),
        outcome: Ok(vec![object].into()),
    }
}

/// A file of valid documents.
fn file(name: &str, objects: Vec<Object>) -> (PathBuf, FileRead) {
    let docs = objects
        .into_iter()
        .enumerate()
        .map(|(i, o)| doc(i, o))
        .collect();
    (PathBuf::from(name), FileRead::Docs(docs))
}

fn gone(name: &str) -> (PathBuf, FileRead) {
    (PathBuf::from(name), FileRead::Gone)
}

fn update(store: &mut Store, reads: Vec<(PathBuf, FileRead)>) -> Update {
    store.update(reads, Vec::new(), true)
}

fn texts(errors: &[InvalidObject]) -> Vec<String> {
    errors.iter().map(ToString::to_string).collect()
}

fn apply(object: &Object) -> SourceEvent {
    SourceEvent::Apply(object.clone())
}

fn service_key(name: &str) -> ObjectKey {
    ObjectKey::Service(ServiceName::new("dev", name))
}

#[test]
fn a_changed_file_reports_only_its_changed_objects() {
    let mut store = Store::default();
    let first = update(
        &mut store,
        vec![
            file("/m/a.yaml", vec![service("a", 80), slice("a", "10.0.0.1")]),
            file("/m/b.yaml", vec![service("b", 80)]),
        ],
    );
    assert_eq!(first.events.len(), 3, "{:?}", first.events);

    let change = update(
        &mut store,
        vec![file(
            "/m/a.yaml",
            vec![service("a", 80), slice("a", "10.0.0.2")],
        )],
    );
    assert_eq!(change.events, [SourceEvent::Apply(slice("a", "10.0.0.2"))]);
    assert!(change.errors.is_empty());
    assert_eq!(store.objects().len(), 3);
}

#[test]
fn a_file_that_is_gone_deletes_its_objects() {
    let mut store = Store::default();
    update(
        &mut store,
        vec![file(
            "/m/a.yaml",
            vec![service("a", 80), slice("a", "10.0.0.1")],
        )],
    );
    let change = update(&mut store, vec![gone("/m/a.yaml")]);
    let slice_key = slice("a", "10.0.0.1").key();
    assert_eq!(
        change.events,
        [
            SourceEvent::Delete(service_key("a")),
            SourceEvent::Delete(slice_key)
        ]
    );
    assert!(store.objects().is_empty());
    assert!(store.files_under(std::path::Path::new("/m")).is_empty());
}

#[test]
fn an_unreadable_file_keeps_its_objects_until_it_is_gone() {
    let mut store = Store::default();
    update(&mut store, vec![file("/m/a.yaml", vec![service("a", 80)])]);
    let broken = InvalidObject::file(std::path::Path::new("/m/a.yaml"), "not valid YAML");
    let change = update(
        &mut store,
        vec![(
            PathBuf::from("/m/a.yaml"),
            FileRead::Broken(Some(Box::new(broken))),
        )],
    );
    assert!(change.events.is_empty(), "{:?}", change.events);
    assert_eq!(texts(&change.errors), ["/m/a.yaml: not valid YAML"]);
    assert_eq!(store.objects(), [service("a", 80)]);

    let change = update(&mut store, vec![gone("/m/a.yaml")]);
    assert_eq!(change.events, [SourceEvent::Delete(service_key("a"))]);
}

#[test]
fn an_invalid_edit_keeps_the_last_good_version_and_says_why() {
    let mut store = Store::default();
    update(&mut store, vec![file("/m/a.yaml", vec![service("a", 80)])]);
    let id = id_of(&service("a", 80));
    let bad = Doc {
        index: 0,
        id: Some(id.clone()),
        outcome: Err(Box::new(InvalidObject::new(
            &id,
            "spec.ports[0].port",
            "must be between 1 and 65535",
        ))),
    };
    let change = update(
        &mut store,
        vec![(PathBuf::from("/m/a.yaml"), FileRead::Docs(vec![bad]))],
    );
    assert!(change.events.is_empty(), "{:?}", change.events);
    assert_eq!(
        texts(&change.errors),
        ["/m/a.yaml: Service dev/a: spec.ports[0].port: must be between 1 and 65535"]
    );
    assert_eq!(store.objects(), [service("a", 80)]);
}

#[test]
fn the_second_of_two_duplicates_takes_over_when_the_first_goes() {
    let mut store = Store::default();
    let first = update(
        &mut store,
        vec![
            file("/m/a.yaml", vec![service("x", 80)]),
            file("/m/b.yaml", vec![service("x", 81)]),
        ],
    );
    assert_eq!(
        texts(&first.errors),
        ["/m/b.yaml: Service dev/x: metadata.name: duplicate Service dev/x: the first one, in /m/a.yaml, is used"]
    );
    assert_eq!(store.objects(), [service("x", 80)]);

    let change = update(&mut store, vec![gone("/m/a.yaml")]);
    assert_eq!(change.events, [SourceEvent::Apply(service("x", 81))]);
    assert!(change.errors.is_empty(), "{:?}", texts(&change.errors));
}

#[test]
fn a_slice_waits_for_its_service() {
    let mut store = Store::default();
    let first = update(
        &mut store,
        vec![file("/m/s.yaml", vec![slice("a", "10.0.0.1")])],
    );
    assert!(first.events.is_empty());
    assert_eq!(first.errors.len(), 1, "{:?}", texts(&first.errors));

    let change = update(&mut store, vec![file("/m/a.yaml", vec![service("a", 80)])]);
    assert_eq!(
        change.events,
        [
            SourceEvent::Apply(service("a", 80)),
            SourceEvent::Apply(slice("a", "10.0.0.1"))
        ]
    );
    assert!(change.errors.is_empty(), "{:?}", texts(&change.errors));
}

#[test]
fn a_slice_whose_service_goes_is_reported_and_kept() {
    let mut store = Store::default();
    update(
        &mut store,
        vec![
            file("/m/a.yaml", vec![service("a", 80)]),
            file("/m/s.yaml", vec![slice("a", "10.0.0.1")]),
        ],
    );
    let change = update(&mut store, vec![gone("/m/a.yaml")]);
    assert_eq!(change.events, [SourceEvent::Delete(service_key("a"))]);
    assert_eq!(
        texts(&change.errors),
        ["/m/s.yaml: EndpointSlice dev/a-abc: metadata.labels[kubernetes.io/service-name]: Service dev/a is not in the manifests"]
    );
    assert_eq!(store.objects(), [slice("a", "10.0.0.1")]);
}

#[test]
fn a_slice_named_like_a_mirrored_one_waits_for_the_mirror_to_go() {
    let mut store = Store::default();
    let mirrored = named_slice("web", "web-mirror-0", "10.0.0.1");
    let endpoints = Doc {
        index: 0,
        id: Some(ObjectRef::new("Endpoints", "dev", "web")),
        outcome: Ok(vec![mirrored.clone()].into()),
    };
    let first = update(
        &mut store,
        vec![
            file("/m/a.yaml", vec![service("web", 80)]),
            (PathBuf::from("/m/b.yaml"), FileRead::Docs(vec![endpoints])),
            file(
                "/m/c.yaml",
                vec![named_slice("web", "web-mirror-0", "10.0.0.2")],
            ),
        ],
    );
    assert_eq!(
        texts(&first.errors),
        ["/m/c.yaml: EndpointSlice dev/web-mirror-0: metadata.name: EndpointSlice dev/web-mirror-0 is already defined by another object; this one is skipped"]
    );
    assert_eq!(store.objects(), [service("web", 80), mirrored]);

    let change = update(&mut store, vec![gone("/m/b.yaml")]);
    assert_eq!(
        change.events,
        [SourceEvent::Apply(named_slice(
            "web",
            "web-mirror-0",
            "10.0.0.2"
        ))]
    );
}

#[test]
fn the_first_scan_reports_no_events_but_holds_everything() {
    let mut store = Store::default();
    let first = store.update(
        vec![file(
            "/m/a.yaml",
            vec![service("a", 80), slice("a", "10.0.0.1")],
        )],
        Vec::new(),
        false,
    );
    assert!(first.events.is_empty());
    assert_eq!(store.objects(), [service("a", 80), slice("a", "10.0.0.1")]);
}

#[test]
fn an_update_lists_every_changed_object_of_its_files_and_only_those() {
    let mut store = Store::default();
    let first = update(
        &mut store,
        vec![file(
            "/m/a.yaml",
            vec![service("a", 80), slice("a", "10.0.0.1")],
        )],
    );
    assert_eq!(
        first.events,
        [
            SourceEvent::Apply(service("a", 80)),
            SourceEvent::Apply(slice("a", "10.0.0.1"))
        ],
        "a new file with a Service and its slice: both, for one Batch"
    );
    let one = update(
        &mut store,
        vec![file(
            "/m/a.yaml",
            vec![service("a", 80), slice("a", "10.0.0.2")],
        )],
    );
    assert_eq!(
        one.events,
        [SourceEvent::Apply(slice("a", "10.0.0.2"))],
        "only the slice changed"
    );
}

#[test]
fn pods_are_reported_and_removed_like_other_objects() {
    let mut store = Store::default();
    let pod = Object::from(ferry_model::fixtures::mk_pod(
        "dev", "web-1", "web", "10.0.0.7", "n1",
    ));
    let first = update(&mut store, vec![file("/m/pod.yaml", vec![pod.clone()])]);
    assert_eq!(first.events, vec![SourceEvent::Apply(pod.clone())]);
    let removed = update(&mut store, vec![gone("/m/pod.yaml")]);
    assert_eq!(removed.events, vec![SourceEvent::Delete(pod.key())]);
}
