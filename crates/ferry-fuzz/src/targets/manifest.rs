//! The manifest source's file → objects path, without the disk: the input is one or more
//! manifest files (split at lines that read `#file`; a file whose text starts with `{` is a
//! `.json` file, any other a `.yaml` stream), applied to a [`ManifestSource`] as a first scan,
//! then as the first file's removal and its return (the watcher's incremental path, with
//! events, last-good versions and the cross-file checks). The events must say exactly how the
//! source's objects changed, and with no error in the first scan the objects afterwards must be
//! the objects before.

use std::collections::BTreeMap;
use std::path::PathBuf;

use ferry_model::{Object, ObjectKey};
use ferry_source::manifest::ManifestSource;
use ferry_source::SourceEvent;

use super::{shape, signature};

/// The line that separates files in an input.
const SEPARATOR: &[u8] = b"#file\n";

/// Runs the manifest source on `input`.
pub fn run(input: &[u8]) -> u64 {
    let files = split(input);
    let mut source = ManifestSource::new("/fuzz");
    let everything = files
        .iter()
        .map(|(p, b)| (p.clone(), Some(b.clone())))
        .collect();
    let (_, errors) = source.apply_bytes(everything, false);
    let before = source.objects();
    let first = before.len();
    let mut sig: Vec<String> = errors.iter().map(|e| shape(&e.to_string())).collect();
    let Some((path, bytes)) = files.into_iter().next() else {
        return signature((first, sig));
    };
    // What a consumer holds after the events must be what the source holds.
    let mut mirror: BTreeMap<ObjectKey, Object> =
        before.iter().map(|o| (o.key(), o.clone())).collect();
    let (gone, _) = source.apply_bytes(vec![(path.clone(), None)], true);
    follow(&mut mirror, &gone);
    assert!(
        mirror.values().eq(source.objects().iter()),
        "the events of a file's removal do not say what changed"
    );
    let (back, errors) = source.apply_bytes(vec![(path, Some(bytes))], true);
    follow(&mut mirror, &back);
    assert!(
        mirror.values().eq(source.objects().iter()),
        "the events of a file's return do not say what changed"
    );
    // Removing a file and putting it back leaves the objects as they were, when nothing was
    // invalid (an invalid object may legitimately come back as its last good version, seen
    // meanwhile: a duplicate in another file, say).
    assert!(
        !sig.is_empty() || source.objects() == before,
        "a file removed and put back changed the objects"
    );
    sig.extend(errors.iter().map(|e| shape(&e.to_string())));
    signature((first, gone.len(), back.len(), sig))
}

/// Applies `events` to `held`, as the cluster state does.
fn follow(held: &mut BTreeMap<ObjectKey, Object>, events: &[SourceEvent]) {
    for e in events {
        match e {
            SourceEvent::Apply(o) => {
                held.insert(o.key(), o.clone());
            }
            SourceEvent::Delete(k) => {
                held.remove(k);
            }
            SourceEvent::Resync(all) => {
                *held = all.iter().map(|o| (o.key(), o.clone())).collect();
            }
            SourceEvent::Batch(inner) => follow(held, inner),
        }
    }
}

/// The files of an input, named `/fuzz/<i>.yaml` or `/fuzz/<i>.json`.
fn split(input: &[u8]) -> Vec<(PathBuf, Vec<u8>)> {
    let mut files = Vec::new();
    let mut rest = input;
    loop {
        let (file, next) = match find(rest, SEPARATOR) {
            Some(at) => (&rest[..at], Some(&rest[at + SEPARATOR.len()..])),
            None => (rest, None),
        };
        let json = file.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
        let ext = if json { "json" } else { "yaml" };
        let name = PathBuf::from(format!("/fuzz/{}.{ext}", files.len()));
        files.push((name, file.to_vec()));
        match next {
            Some(next) => rest = next,
            None => return files,
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}
