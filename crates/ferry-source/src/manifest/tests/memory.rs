//! `ManifestSource::scan`: last good versions across scans.

use std::fs;

use super::{names, service_port, service_yaml, slice_yaml, temp_dir, texts, write, write_service};
use crate::manifest::ManifestSource;

#[test]
fn an_object_that_becomes_invalid_keeps_its_last_good_version() {
    let dir = temp_dir();
    write_service(dir.path(), "svc.yaml", "web", "10.96.0.10", 80);
    let mut source = ManifestSource::new(dir.path());
    let (objects, errors) = source.scan();
    assert_eq!((service_port(&objects, "web"), errors.len()), (Some(80), 0));

    write_service(dir.path(), "svc.yaml", "web", "10.96.0.10", 70000);
    for _ in 0..2 {
        let (objects, errors) = source.scan();
        assert_eq!(
            service_port(&objects, "web"),
            Some(80),
            "last good version kept"
        );
        assert_eq!(errors.len(), 1, "error reported on every scan");
        assert_eq!(errors[0].field, "spec.ports[0].port");
    }

    write_service(dir.path(), "svc.yaml", "web", "10.96.0.10", 81);
    let (objects, errors) = source.scan();
    assert_eq!((service_port(&objects, "web"), errors.len()), (Some(81), 0));
}

#[test]
fn an_unparseable_file_keeps_its_objects() {
    let dir = temp_dir();
    let text = format!(
        "{}---\n{}",
        service_yaml("dev", "web", "10.96.0.10", 80),
        slice_yaml("dev", "web-abc", "web", "10.0.0.1")
    );
    write(dir.path(), "web.yaml", &text);
    write(
        dir.path(),
        "other.yaml",
        &slice_yaml("dev", "web-def", "web", "10.0.0.2"),
    );
    let mut source = ManifestSource::new(dir.path());
    let (before, _) = source.scan();

    write(dir.path(), "web.yaml", "kind: [unclosed\n");
    for _ in 0..2 {
        let (objects, errors) = source.scan();
        assert_eq!(
            objects, before,
            "the broken file's objects are kept, and so is the slice of its Service"
        );
        assert_eq!(errors.len(), 1, "{:?}", texts(&errors));
        assert!(errors[0].is_file_error());
    }
}

#[test]
fn objects_deleted_from_disk_disappear() {
    let dir = temp_dir();
    let two = format!(
        "{}---\n{}",
        service_yaml("dev", "a", "10.96.0.10", 80),
        service_yaml("dev", "b", "10.96.0.11", 80)
    );
    write(dir.path(), "ab.yaml", &two);
    write_service(dir.path(), "c.yaml", "c", "10.96.0.12", 80);
    let mut source = ManifestSource::new(dir.path());
    assert_eq!(
        names(&source.scan().0),
        ["Service dev/a", "Service dev/b", "Service dev/c"]
    );

    // A document removed from a file that still parses.
    write_service(dir.path(), "ab.yaml", "a", "10.96.0.10", 80);
    assert_eq!(names(&source.scan().0), ["Service dev/a", "Service dev/c"]);

    // A file removed.
    fs::remove_file(dir.path().join("c.yaml")).unwrap_or_else(|e| panic!("rm: {e}"));
    assert_eq!(names(&source.scan().0), ["Service dev/a"]);
}

#[test]
fn an_invalid_object_that_was_never_valid_is_absent() {
    let dir = temp_dir();
    write_service(dir.path(), "a.yaml", "a", "10.96.0.10", 80);
    let mut source = ManifestSource::new(dir.path());
    source.scan();
    write_service(dir.path(), "b.yaml", "b", "10.96.0.11", 0);
    let (objects, errors) = source.scan();
    assert_eq!(names(&objects), ["Service dev/a"]);
    assert_eq!(errors.len(), 1);
}

#[test]
fn a_kept_service_still_owns_its_slices() {
    let dir = temp_dir();
    write_service(dir.path(), "svc.yaml", "web", "10.96.0.10", 80);
    write(
        dir.path(),
        "slice.yaml",
        &slice_yaml("dev", "web-abc", "web", "10.0.0.1"),
    );
    let mut source = ManifestSource::new(dir.path());
    source.scan();
    write_service(dir.path(), "svc.yaml", "web", "not-an-ip", 80);
    write(
        dir.path(),
        "slice.yaml",
        &slice_yaml("dev", "web-abc", "web", "10.0.0.2"),
    );
    let (objects, errors) = source.scan();
    assert_eq!(
        names(&objects),
        ["Service dev/web", "EndpointSlice dev/web-abc"]
    );
    assert_eq!(errors.len(), 1, "{:?}", texts(&errors));
    let updated = objects.iter().any(|o| {
        matches!(o, ferry_model::Object::EndpointSlice(s)
        if s.endpoints[0].address == ferry_model::fixtures::ip("10.0.0.2"))
    });
    assert!(updated, "the valid slice edit is applied");
}

#[test]
fn a_missing_root_keeps_everything() {
    let dir = temp_dir();
    let root = dir.path().join("manifests");
    write_service(&root, "svc.yaml", "web", "10.96.0.10", 80);
    let mut source = ManifestSource::new(&root);
    let (before, _) = source.scan();
    fs::remove_dir_all(&root).unwrap_or_else(|e| panic!("rm: {e}"));
    let (after, errors) = source.scan();
    assert_eq!(after, before);
    assert_eq!(errors.len(), 1);
}
