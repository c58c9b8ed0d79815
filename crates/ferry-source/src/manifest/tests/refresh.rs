//! `ManifestSource::refresh`: only the paths looked at are read.

use std::collections::BTreeSet;

use super::{service_yaml, temp_dir, write};
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
