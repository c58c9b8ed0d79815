//! File events → what to look at again, and when: at once for a file that is complete (renamed
//! into place, closed after writing, removed), after a quiet time for one still being written.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use notify::event::{AccessKind, AccessMode, CreateKind, ModifyKind, RenameMode};
use notify::{Event, EventKind, EventKindMask};
use tokio::time::Instant;

/// Quiet time after which a file that was created or written, but not closed, is read anyway
/// (a writer that keeps it open, or writes through a memory map).
pub(super) const DEBOUNCE: Duration = Duration::from_millis(100);
/// Longest a file written continuously waits before it is read.
pub(super) const MAX_DELAY: Duration = Duration::from_secs(2);

/// The events asked of the watcher: everything but reads. Opening a file is not one of them:
/// notify's inotify backend otherwise watches `IN_OPEN`, and the kernel then queues an event
/// and wakes the watcher's thread for every file Ferry itself opens (10 000 of them during a
/// first read of 10 000 files: ~55 ms of its ~450 ms on two cores).
pub(super) const WATCHED: EventKindMask = EventKindMask::CORE.union(EventKindMask::ACCESS_CLOSE);

/// What the watcher follows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Scope<'a> {
    /// PATH.
    pub root: &'a Path,
    /// For a file (or missing) PATH: its name in the watched parent directory, the only entry
    /// whose events matter.
    pub only: Option<&'a OsString>,
}

/// When to look at a path again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum When {
    /// Now: it is complete (or gone).
    Now(PathBuf),
    /// After [`DEBOUNCE`] of quiet: it is being written.
    Later(PathBuf),
    /// Read everything again (the watcher lost events, or PATH itself changed).
    Everything,
}

/// Whether an event may ask for anything ([`classify`] decides what): a read never does, nor
/// the combined half of a rename (its halves come on their own). Asked on the watcher's
/// thread, so that what cannot matter is not queued (opens are not asked for at all, see
/// [`WATCHED`]).
pub(super) fn may_matter(event: &notify::Result<Event>) -> bool {
    let Ok(event) = event else {
        return true;
    };
    if event.need_rescan() {
        return true;
    }
    match event.kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        EventKind::Modify(ModifyKind::Name(RenameMode::Both)) => false,
        _ => true,
    }
}

/// What one file event asks for (nothing, for reads and for entries that are never read).
pub(super) fn classify(event: &notify::Result<Event>, scope: &Scope<'_>) -> Vec<When> {
    let event = match event {
        Ok(event) if !event.need_rescan() => event,
        Ok(_) => return vec![When::Everything],
        Err(e) => {
            tracing::warn!(error = %e, "file watcher error; reading everything again");
            return vec![When::Everything];
        }
    };
    let now = match event.kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => return Vec::new(),
        // Its `From` and `To` halves come as events of their own.
        EventKind::Modify(ModifyKind::Name(RenameMode::Both)) => return Vec::new(),
        EventKind::Modify(ModifyKind::Name(_)) | EventKind::Remove(_) => true,
        EventKind::Create(_) | EventKind::Modify(_) => false,
        EventKind::Any | EventKind::Other => return vec![When::Everything],
    };
    let mut out = Vec::new();
    for path in &event.paths {
        let Some(path) = relevant_path(path, event, scope) else {
            continue;
        };
        if path == scope.root {
            out.push(if now {
                When::Everything
            } else {
                When::Later(path)
            });
            continue;
        }
        if now {
            out.push(When::Now(path.clone()));
        }
        // A new directory is watched only once the watcher has seen it: whatever was written
        // into it before then is found by looking again after the quiet time.
        if !now || event.kind == EventKind::Create(CreateKind::Folder) {
            out.push(When::Later(path));
        }
    }
    out
}

/// The path to look at for an event on `path`: itself, PATH for events outside the watched
/// tree, its parent for a ConfigMap's `..data` swap, or `None` when it does not matter.
fn relevant_path(path: &Path, event: &Event, scope: &Scope<'_>) -> Option<PathBuf> {
    if let Some(name) = scope.only {
        return (path.file_name() == Some(name.as_os_str())).then(|| scope.root.to_path_buf());
    }
    let Ok(inside) = path.strip_prefix(scope.root) else {
        return Some(scope.root.to_path_buf());
    };
    let mut at = scope.root.to_path_buf();
    for part in inside.components() {
        let Component::Normal(name) = part else {
            return Some(scope.root.to_path_buf());
        };
        if name.to_string_lossy().starts_with('.') {
            // Hidden entries are never read, but a mounted ConfigMap is updated by renaming a
            // new `..data` symlink into place: its directory's visible files change then.
            let swap = name.to_string_lossy().starts_with("..")
                && matches!(event.kind, EventKind::Modify(ModifyKind::Name(_)));
            return swap.then_some(at);
        }
        at.push(name);
    }
    Some(at)
}

/// Paths waiting for their writer to finish.
#[derive(Debug, Default)]
pub(super) struct Pending {
    /// First and last event of each path.
    paths: BTreeMap<PathBuf, (Instant, Instant)>,
}

impl Pending {
    /// Notes an event on `path` at `now`.
    pub fn touch(&mut self, path: PathBuf, now: Instant) {
        self.paths
            .entry(path)
            .and_modify(|(_, last)| *last = now)
            .or_insert((now, now));
    }

    /// Forgets `path` (it is read now anyway).
    pub fn forget(&mut self, path: &Path) {
        self.paths.remove(path);
    }

    /// When the next path is due.
    pub fn deadline(&self) -> Option<Instant> {
        self.paths.values().map(|&t| due(t)).min()
    }

    /// Takes the paths due at `now`.
    pub fn take_due(&mut self, now: Instant) -> BTreeSet<PathBuf> {
        let due_now: BTreeSet<PathBuf> = self
            .paths
            .iter()
            .filter(|(_, &t)| due(t) <= now)
            .map(|(p, _)| p.clone())
            .collect();
        for path in &due_now {
            self.paths.remove(path);
        }
        due_now
    }
}

fn due((first, last): (Instant, Instant)) -> Instant {
    (last + DEBOUNCE).min(first + MAX_DELAY)
}

#[cfg(test)]
mod tests {
    use notify::event::{Flag, RemoveKind};

    use super::*;

    #[test]
    fn what_cannot_matter_is_what_classify_ignores() {
        let root = Path::new("/m");
        let scope = Scope { root, only: None };
        let file = PathBuf::from("/m/a.yaml");
        let kinds = [
            EventKind::Access(AccessKind::Open(AccessMode::Any)),
            EventKind::Access(AccessKind::Read),
            EventKind::Access(AccessKind::Close(AccessMode::Read)),
            EventKind::Access(AccessKind::Close(AccessMode::Write)),
            EventKind::Create(CreateKind::File),
            EventKind::Modify(ModifyKind::Any),
            EventKind::Modify(ModifyKind::Name(RenameMode::To)),
            EventKind::Modify(ModifyKind::Name(RenameMode::Both)),
            EventKind::Remove(RemoveKind::File),
            EventKind::Other,
        ];
        for kind in kinds {
            let event = Ok(Event::new(kind).add_path(file.clone()));
            let asks = !classify(&event, &scope).is_empty();
            assert_eq!(may_matter(&event), asks, "{kind:?}");
        }
        // An open the kernel could not report in full asks for everything.
        let lost =
            Event::new(EventKind::Access(AccessKind::Open(AccessMode::Any))).set_flag(Flag::Rescan);
        assert!(may_matter(&Ok(lost)));
    }

    /// The kernel's own events through notify: reading a watched file (open, read, close)
    /// reports nothing; writing one reports its close after writing.
    #[test]
    fn a_watcher_asking_for_what_is_watched_does_not_see_files_read() {
        use notify::Watcher as _;
        let dir = tempfile::tempdir().expect("a temporary directory");
        let read = dir.path().join("read.yaml");
        let written = dir.path().join("written.yaml");
        std::fs::write(&read, "kind: Service\n").expect("written");
        let (tx, rx) = std::sync::mpsc::channel();
        let mut watcher = notify::RecommendedWatcher::new(
            tx,
            notify::Config::default().with_event_kinds(WATCHED),
        )
        .expect("a watcher");
        watcher
            .watch(dir.path(), notify::RecursiveMode::Recursive)
            .expect("watching");
        for _ in 0..3 {
            assert_eq!(
                std::fs::read_to_string(&read).expect("read"),
                "kind: Service\n"
            );
        }
        std::fs::write(&written, "kind: Service\n").expect("written");
        let mut events = Vec::new();
        loop {
            let event = rx
                .recv_timeout(Duration::from_secs(10))
                .expect("the write is reported")
                .expect("an event, not an error");
            let closed = event.kind == EventKind::Access(AccessKind::Close(AccessMode::Write));
            events.push(event);
            if closed {
                break;
            }
        }
        // Everything up to the write's close is about the written file.
        assert!(
            events.iter().all(|e| e.paths == [written.clone()]),
            "{events:?}"
        );
    }
}
