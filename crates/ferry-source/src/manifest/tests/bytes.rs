//! `ManifestSource::apply_bytes`: files given as bytes take the path files read from disk take
//! (what the fuzz target drives).

use std::path::PathBuf;

use crate::manifest::ManifestSource;

const SERVICE: &str = "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: dev\n\
spec:\n  clusterIP: 10.96.0.10\n  ports:\n  - port: 80\n";

#[test]
fn bytes_are_read_like_files_and_a_file_gone_takes_its_objects() {
    let mut source = ManifestSource::new("/m");
    let file = PathBuf::from("/m/web.yaml");
    let (_, errors) = source.apply_bytes(vec![(file.clone(), Some(SERVICE.into()))], false);
    assert!(errors.is_empty(), "{errors:?}");
    assert_eq!(source.objects().len(), 1);
    let (events, _) = source.apply_bytes(vec![(file, None)], true);
    assert_eq!(events.len(), 1, "{events:?}");
    assert!(source.objects().is_empty());
}

#[test]
fn bytes_that_are_not_utf8_make_the_file_unreadable_and_keep_its_last_good_objects() {
    let mut source = ManifestSource::new("/m");
    let file = PathBuf::from("/m/web.yaml");
    source.apply_bytes(vec![(file.clone(), Some(SERVICE.into()))], false);
    let mut bad = SERVICE.as_bytes().to_vec();
    bad.extend_from_slice(b"  selector: {app: \"\xff\"}\n");
    let (_, errors) = source.apply_bytes(vec![(file.clone(), Some(bad))], true);
    assert_eq!(errors.len(), 1);
    let text = errors[0].to_string();
    assert!(
        text.contains("web.yaml") && text.contains("not valid UTF-8"),
        "{text}"
    );
    assert_eq!(source.objects().len(), 1, "the last good version stays");
}
