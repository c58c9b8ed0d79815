//! `ManifestSource::refresh`: only the paths looked at are read.

use std::collections::BTreeSet;

use super::{service_yaml, slice_yaml, temp_dir, write};
use crate::manifest::ManifestSource;
use crate::SourceEvent;

#[test]
fn a_refresh_reads_only_the_paths_it_is_given() {
    let dir = temp_dir();
    write(
        dir.path(),
        "a.yaml",
        &service_yaml("dev", "a", "10.96.0.10", 80),
    );
    write(
        dir.path(),
        "b.yaml",
        &service_yaml("dev", "b", "10.96.0.11", 80),
    );
    let mut source = ManifestSource::new(dir.path());
    source.scan();

    // Both files change on disk; only a.yaml is looked at.
    write(
        dir.path(),
        "a.yaml",
        &service_yaml("dev", "a", "10.96.0.10", 81),
    );
    write(
        dir.path(),
        "b.yaml",
        &service_yaml("dev", "b", "10.96.0.11", 0),
    );
    let update = source.refresh(&BTreeSet::from([dir.path().join("a.yaml")]), true);
    assert!(
        update.errors.is_empty(),
        "b.yaml was not read: {:?}",
        update.errors
    );
    let [SourceEvent::Apply(ferry_model::Object::Service(svc))] = &update.events[..] else {
        panic!("one Apply expected: {:?}", update.events);
    };
    assert_eq!((&*svc.name.name, svc.ports[0].port), ("a", 81));
}

#[test]
fn many_files_are_read_in_path_order() {
    let dir = temp_dir();
    for i in 0..200 {
        let ip = format!("10.96.1.{i}");
        write(
            dir.path(),
            &format!("s{i:03}.yaml"),
            &service_yaml("dev", &format!("s{i:03}"), &ip, 80),
        );
    }
    // The same name twice: path order decides which is used, however the reads were spread.
    write(
        dir.path(),
        "s199b.yaml",
        &service_yaml("dev", "s000", "10.96.2.1", 80),
    );
    let scan = crate::manifest::load(dir.path());
    assert_eq!(scan.objects.len(), 200);
    assert_eq!(scan.errors.len(), 1, "{:?}", scan.errors);
    assert!(
        scan.errors[0].to_string().contains("s199b.yaml"),
        "{}",
        scan.errors[0]
    );
}

/// A file read again shares the names and endpoint locations of what was read before, as the
/// objects of one read share them: a churn that rewrites every Service's file once must not
/// leave every slice with copies of its own (it grew the RSS by ~12 MiB at 10 000 × 10).
#[test]
fn a_file_read_again_shares_names_and_locations_with_the_files_read_before() {
    use std::sync::Arc;
    let dir = temp_dir();
    let file = |svc: &str, ip: &str, addr: &str| {
        let slice = slice_yaml("dev", &format!("{svc}-x"), svc, addr) + "  nodeName: node-1\n";
        format!("{}---\n{slice}", service_yaml("dev", svc, ip, 80))
    };
    write(dir.path(), "a.yaml", &file("a", "10.96.0.10", "10.0.0.1"));
    write(dir.path(), "b.yaml", &file("b", "10.96.0.11", "10.0.0.2"));
    let mut source = ManifestSource::new(dir.path());
    source.scan();
    write(dir.path(), "b.yaml", &file("b", "10.96.0.11", "10.0.0.3"));
    let update = source.refresh(&BTreeSet::from([dir.path().join("b.yaml")]), true);
    assert_eq!(update.events.len(), 1, "{:?}", update.events);

    let slices: Vec<_> = source
        .objects()
        .into_iter()
        .filter_map(|o| match o {
            ferry_model::Object::EndpointSlice(s) => Some(s),
            _ => None,
        })
        .collect();
    let [a, b] = &slices[..] else {
        panic!("two slices expected: {slices:?}");
    };
    assert_eq!(b.endpoints[0].address.to_string(), "10.0.0.3");
    assert!(
        Arc::ptr_eq(&a.namespace, &b.namespace),
        "one namespace string"
    );
    let (la, lb) = (&a.endpoints[0].location, &b.endpoints[0].location);
    assert!(
        matches!((la, lb), (Some(x), Some(y)) if Arc::ptr_eq(x, y)),
        "one location for node-1: {la:?} {lb:?}"
    );
}

/// A document read again unchanged (its file rewritten for another document) keeps the
/// allocation its objects had, which the Pod stage and the cluster state share: a new one
/// would be a second copy of the Service for as long as it does not change.
#[test]
fn a_document_read_again_unchanged_keeps_its_objects() {
    use std::sync::Arc;
    let dir = temp_dir();
    let file = |addr: &str| {
        format!(
            "{}---\n{}",
            service_yaml("dev", "a", "10.96.0.10", 80),
            slice_yaml("dev", "a-x", "a", addr)
        )
    };
    let service = |objects: Vec<ferry_model::Object>| {
        objects.into_iter().find_map(|o| match o {
            ferry_model::Object::Service(s) => Some(s),
            _ => None,
        })
    };
    write(dir.path(), "a.yaml", &file("10.0.0.1"));
    let mut source = ManifestSource::new(dir.path());
    let before = service(source.scan().0).expect("the Service");
    write(dir.path(), "a.yaml", &file("10.0.0.2"));
    let update = source.refresh(&BTreeSet::from([dir.path().join("a.yaml")]), true);
    let [SourceEvent::Apply(ferry_model::Object::EndpointSlice(_))] = &update.events[..] else {
        panic!("the slice's Apply only: {:?}", update.events);
    };
    let after = service(source.objects()).expect("the Service");
    assert!(
        Arc::ptr_eq(&before, &after),
        "one allocation for the unchanged Service"
    );
}
