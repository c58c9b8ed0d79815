//! Finding the manifest files under PATH, and reading many of them on every core.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use ferry_model::Interner;

use super::load::{read_file, FileRead};
use crate::InvalidObject;

/// Extensions of the files read from a directory.
const EXTENSIONS: [&str; 3] = ["yaml", "yml", "json"];

/// Files handed to a reading thread at a time: small enough to balance the cores, large enough
/// that taking work costs nothing next to parsing.
const CHUNK: usize = 16;

/// True for the file names read from a directory.
pub(super) fn is_manifest(path: &Path) -> bool {
    path.extension()
        .and_then(|e| e.to_str())
        .is_some_and(|e| EXTENSIONS.iter().any(|x| e.eq_ignore_ascii_case(x)))
}

/// True for names that are never read: editors' swap files, `.git`, and the
/// `..data`/`..<timestamp>` folders of a mounted ConfigMap (whose visible files are symlinks
/// into them, so reading both would duplicate every object).
pub(super) fn is_hidden(path: &Path) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with('.'))
}

/// The manifest files found under a path, and the directories that could not be listed.
#[derive(Debug, Default)]
pub(super) struct Walk {
    /// Files to read, sorted.
    pub files: Vec<PathBuf>,
    /// Paths that could not be read: whatever was known under them keeps its last good version.
    pub broken: Vec<PathBuf>,
    /// Why each of `broken` could not be read.
    pub errors: Vec<InvalidObject>,
}

impl Walk {
    fn broken(&mut self, path: &Path, reason: String) {
        self.broken.push(path.to_path_buf());
        self.errors.push(InvalidObject::file(path, reason));
    }
}

/// Lists `path`: PATH itself (`root`: a file is read whatever its name, and a missing PATH is
/// an error), or a file or directory inside it (a missing one is simply gone).
pub(super) fn walk(path: &Path, root: bool) -> Walk {
    let mut walk = Walk::default();
    match fs::metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !root => {}
        Err(e) => walk.broken(path, format!("cannot read: {e}")),
        Ok(meta) if meta.is_dir() => walk_dir(path, &mut BTreeSet::new(), &mut walk),
        Ok(_) if root || is_manifest(path) => walk.files.push(path.to_path_buf()),
        Ok(_) => {}
    }
    walk.files.sort();
    walk
}

/// Collects the manifest files under `dir`, following symlinks (each directory once).
fn walk_dir(dir: &Path, visited: &mut BTreeSet<PathBuf>, walk: &mut Walk) {
    if let Ok(real) = fs::canonicalize(dir) {
        if !visited.insert(real) {
            return;
        }
    }
    let entries = match fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) => return walk.broken(dir, format!("cannot read directory: {e}")),
    };
    let mut named = Vec::new();
    for entry in entries {
        match entry {
            Ok(entry) => named.push((entry.file_name(), entry.path(), entry.file_type().ok())),
            Err(e) => return walk.broken(dir, format!("cannot read directory: {e}")),
        }
    }
    // Siblings in path order are in name order (comparing names is cheaper than paths).
    named.sort_unstable_by(|(a, ..), (b, ..)| a.cmp(b));
    for (_, path, listed) in named {
        if is_hidden(&path) {
            continue;
        }
        // A regular file as listed needs no `stat` (a file removed meanwhile is found gone
        // when read); symlinks are followed.
        if listed.is_some_and(|t| t.is_file()) {
            if is_manifest(&path) {
                walk.files.push(path);
            }
            continue;
        }
        match fs::metadata(&path) {
            // A dangling symlink, or a file removed while we read: nothing to read.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => walk.broken(&path, format!("cannot read: {e}")),
            Ok(meta) if meta.is_dir() => walk_dir(&path, visited, walk),
            Ok(_) if is_manifest(&path) => walk.files.push(path),
            Ok(_) => {}
        }
    }
}

/// What to do to bring the store up to date with `under` (PATH itself when `root`, or a file
/// or directory inside it).
#[derive(Debug, Default)]
pub(super) struct Survey {
    /// Files to read.
    pub files: Vec<PathBuf>,
    /// Known files under `under` that are gone, or kept because their directory is unreadable.
    pub missing: Vec<(PathBuf, FileRead)>,
    /// Why directories could not be read.
    pub errors: Vec<InvalidObject>,
}

/// Lists `under` and compares it with the `known` files under it.
pub(super) fn survey(under: &Path, root: bool, known: Vec<PathBuf>) -> Survey {
    let walk = walk(under, root);
    // `walk.files` is sorted.
    let missing = known
        .into_iter()
        .filter(|f| walk.files.binary_search(f).is_err())
        .map(|f| {
            let kept = walk.broken.iter().any(|b| f.starts_with(b));
            let read = if kept {
                FileRead::Broken(None)
            } else {
                FileRead::Gone
            };
            (f, read)
        })
        .collect();
    Survey {
        files: walk.files,
        missing,
        errors: walk.errors,
    }
}

/// Reads `files`, on every core when there are more than a few; results in the order given.
/// What this thread reads shares names and endpoint locations through `names` (see
/// `load::compact_slice`); each other reading thread has an interner of its own.
pub(super) fn read_all(files: Vec<PathBuf>, names: &mut Interner) -> Vec<(PathBuf, FileRead)> {
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    let threads = cores.min(files.len().div_ceil(CHUNK));
    if threads <= 1 {
        return files
            .into_iter()
            .map(|f| {
                let read = read_file(&f, names);
                (f, read)
            })
            .collect();
    }
    let next = AtomicUsize::new(0);
    let done = Mutex::new(Vec::with_capacity(files.len()));
    // Each reader shares names between the objects it reads (see `load::compact_slice`).
    let reader = |names: &mut Interner| {
        loop {
            let start = next.fetch_add(CHUNK, Ordering::Relaxed);
            let Some(chunk) = files.get(start..files.len().min(start + CHUNK)) else {
                break;
            };
            if chunk.is_empty() {
                break;
            }
            let reads: Vec<(usize, FileRead)> = chunk
                .iter()
                .enumerate()
                .map(|(i, f)| (start + i, read_file(f, names)))
                .collect();
            // A poisoned lock means another reader panicked; the scope re-raises that.
            if let Ok(mut done) = done.lock() {
                done.extend(reads);
            }
        }
    };
    // This thread is one of the readers: every thread that allocates gets its own glibc
    // arena, which keeps its free memory (one thread fewer: a lower peak RSS).
    std::thread::scope(|scope| {
        for _ in 1..threads {
            scope.spawn(|| reader(&mut Interner::default()));
        }
        reader(names);
    });
    let mut done = done.into_inner().unwrap_or_else(|e| e.into_inner());
    done.sort_unstable_by_key(|(i, _)| *i);
    files
        .into_iter()
        .zip(done)
        .map(|(f, (_, read))| (f, read))
        .collect()
}
