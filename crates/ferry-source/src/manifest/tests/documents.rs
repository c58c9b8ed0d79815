//! `for_each_document`: every document with its place, in read order, one file at a time.

use super::{service_yaml, slice_yaml, temp_dir, texts, write};
use crate::manifest::for_each_document;

#[test]
fn documents_come_in_read_order_with_their_place_and_bad_files_are_returned() {
    let dir = temp_dir();
    let two = format!(
        "{}---\n{}",
        service_yaml("dev", "a", "10.96.0.10", 80),
        slice_yaml("dev", "a-1", "a", "10.0.0.1")
    );
    write(dir.path(), "a.yaml", &two);
    write(dir.path(), "b.yaml", "kind: [");
    write(
        dir.path(),
        "c.yaml",
        "apiVersion: v1\nkind: List\nitems:\n- kind: Service\n  metadata:\n    name: c\n",
    );
    let mut seen = Vec::new();
    let errors = for_each_document(dir.path(), |d| {
        let name = d.file.file_name().map(|f| f.to_string_lossy().into_owned());
        seen.push(format!(
            "{} {} {}",
            name.unwrap_or_default(),
            d.position,
            d.type_meta().1
        ));
    });
    assert_eq!(
        seen,
        [
            "a.yaml document 1 Service",
            "a.yaml document 2 EndpointSlice",
            "c.yaml document 1, item 1 Service",
        ]
    );
    let [error] = &texts(&errors)[..] else {
        panic!("one error expected: {errors:?}")
    };
    assert!(error.contains("b.yaml"), "{error}");
}

/// The regression: `ferry check` held every parsed document of a directory at once (314 MiB
/// at 10 000 files). A file is read only after the documents of the one before were handed
/// out, so the caller decides what it keeps.
#[test]
fn a_file_is_read_only_after_the_previous_files_documents_were_handed_out() {
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
    let mut names = Vec::new();
    let errors = for_each_document(dir.path(), |d| {
        if d.file.ends_with("a.yaml") {
            write(
                dir.path(),
                "b.yaml",
                &service_yaml("dev", "later", "10.96.0.11", 80),
            );
        }
        let name = d.value.pointer("/metadata/name").and_then(|n| n.as_str());
        names.push(name.unwrap_or_default().to_owned());
    });
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(names, ["a", "later"]);
}
