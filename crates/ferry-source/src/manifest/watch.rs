//! Watching PATH: read what changed when it changes, emit what that changed.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use ferry_model::Object;
use notify::{Event, RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tokio::time::{sleep_until, Instant};

use super::store::Update;
use super::ManifestSource;
use crate::{InvalidObject, SourceEvent};

mod classify;

use classify::{classify, Pending, Scope, When};

/// Why [`ManifestSource::run`] stopped before its receiver was dropped.
#[derive(Debug, thiserror::Error)]
pub enum WatchError {
    /// The file watcher could not be created or could not watch PATH (or its parent directory).
    #[error("cannot watch {}", path.display())]
    Watch {
        /// The path that could not be watched.
        path: PathBuf,
        /// What the watcher reported.
        #[source]
        source: notify::Error,
    },
    /// The file watcher stopped delivering events.
    #[error("the file watcher for {} stopped", path.display())]
    WatcherStopped {
        /// The watched path.
        path: PathBuf,
    },
    /// A scan panicked, or was cancelled because the runtime stopped.
    #[error("a manifest scan panicked")]
    ScanPanicked(#[source] tokio::task::JoinError),
}

impl ManifestSource {
    /// Watches PATH and sends its objects to `tx` until the receiver is dropped.
    ///
    /// Sends one [`SourceEvent::Resync`] after the initial scan (every file, read on every
    /// core), then watches PATH with `notify` (recursively for a directory; for a single file,
    /// its parent directory, filtered to that file's name, so editors that save by rename are
    /// followed; a missing PATH is watched for in its parent, and followed once it appears).
    ///
    /// A change is read at once when the file is complete: renamed into place, closed after
    /// writing, or removed. Only that file is read again (a directory: only what lies under
    /// it), and [`SourceEvent::Apply`]/[`SourceEvent::Delete`] are sent for the objects whose
    /// reported version changed, as one [`SourceEvent::Batch`] when there are several: a file is
    /// one atomic change (a new Service with its EndpointSlice never syncs half). A file created
    /// or written but not closed yet is read after
    /// 100 ms of quiet (at most 2 s after its first event), so a writer that keeps it open is
    /// followed too; writing a temporary file and renaming it into place, as most editors and
    /// `kubectl`-style tools do, is never caught half-way. When the watcher loses events (its
    /// queue overflowed) everything is read again.
    ///
    /// Every error found is logged with `tracing::warn!` and passed to `errors` (for metrics):
    /// those of the files read and of the objects checked again, so an unfixed error repeats
    /// when its file (or a file it depends on, such as its Service's) changes, next to the
    /// change that did not fix it.
    ///
    /// Reading runs on tokio's blocking pool. Returns `Ok(())` when the receiver is dropped.
    pub async fn run(
        self,
        tx: mpsc::Sender<SourceEvent>,
        errors: impl Fn(&InvalidObject) + Send,
    ) -> Result<(), WatchError> {
        let (events_tx, mut events) = mpsc::unbounded_channel();
        let mut target = Target::of(&self.path);
        let mut watcher = notify::RecommendedWatcher::new(
            move |event| {
                if classify::may_matter(&event) {
                    // The receiver is gone only when `run` has returned.
                    let _ = events_tx.send(event);
                }
            },
            notify::Config::default().with_event_kinds(classify::WATCHED),
        )
        .map_err(|source| target.error(source))?;
        watcher
            .watch(&target.dir, target.mode)
            .map_err(|source| target.error(source))?;
        tracing::info!(path = %self.path.display(), "watching manifests");

        // The watcher is set up before the scan, so no change can fall between them.
        let root = self.path.clone();
        let (mut source, objects) = first_scan(self, &errors).await?;
        if tx.send(SourceEvent::Resync(objects)).await.is_err() {
            return Ok(());
        }
        let mut pending = Pending::default();
        let mut now_paths: BTreeSet<PathBuf> = BTreeSet::new();
        loop {
            // PATH may have turned from missing into a directory (a late mount), or back: watch
            // what it is now, and read everything again in case something changed meanwhile.
            let now = Target::of(&root);
            if now != target {
                // The old directory may be gone, and with it the watch: nothing to undo then.
                let _ = watcher.unwatch(&target.dir);
                watcher
                    .watch(&now.dir, now.mode)
                    .map_err(|source| now.error(source))?;
                target = now;
                now_paths.insert(root.clone());
            }
            if now_paths.is_empty() {
                let deadline = pending.deadline();
                tokio::select! {
                    () = tx.closed() => return Ok(()),
                    event = events.recv() => {
                        let Some(event) = event else {
                            return Err(WatchError::WatcherStopped { path: target.dir });
                        };
                        note(&event, &target, &root, &mut now_paths, &mut pending);
                    }
                    () = sleep_until(deadline.unwrap_or_else(Instant::now)), if deadline.is_some() => {}
                }
            }
            // Everything that has already arrived goes into the same batch.
            while let Ok(event) = events.try_recv() {
                note(&event, &target, &root, &mut now_paths, &mut pending);
            }
            now_paths.extend(pending.take_due(Instant::now()));
            if now_paths.is_empty() {
                continue;
            }
            let paths = std::mem::take(&mut now_paths);
            let update;
            (source, update) = refresh_blocking(source, paths, &errors).await?;
            let Some(event) = SourceEvent::batch(update.events) else {
                continue;
            };
            if tx.send(event).await.is_err() {
                return Ok(());
            }
        }
    }
}

/// Adds what one file event asks for to the paths to read now or later.
fn note(
    event: &notify::Result<Event>,
    target: &Target,
    root: &Path,
    now_paths: &mut BTreeSet<PathBuf>,
    pending: &mut Pending,
) {
    let scope = Scope {
        root,
        only: target.only.as_ref(),
    };
    for when in classify(event, &scope) {
        match when {
            When::Now(path) => {
                pending.forget(&path);
                now_paths.insert(path);
            }
            When::Later(path) => pending.touch(path, Instant::now()),
            When::Everything => {
                now_paths.insert(root.to_path_buf());
            }
        }
    }
}

/// What is watched for PATH.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Target {
    /// PATH itself when it is a directory, else its parent directory.
    dir: PathBuf,
    /// Recursive for a directory PATH.
    mode: RecursiveMode,
    /// For a file (or missing) PATH: its name, the only entry of `dir` whose events matter.
    /// Watching the parent rather than the file follows editors that save by renaming a new
    /// file over the old one.
    only: Option<OsString>,
}

impl Target {
    fn of(path: &Path) -> Self {
        if path.is_dir() {
            return Self {
                dir: path.to_path_buf(),
                mode: RecursiveMode::Recursive,
                only: None,
            };
        }
        let dir = match path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        };
        Self {
            dir,
            mode: RecursiveMode::NonRecursive,
            only: path.file_name().map(ToOwned::to_owned),
        }
    }

    fn error(&self, source: notify::Error) -> WatchError {
        WatchError::Watch {
            path: self.dir.clone(),
            source,
        }
    }
}

/// The first scan, off the async threads: the objects, with every error logged and reported.
async fn first_scan(
    mut source: ManifestSource,
    errors: &(impl Fn(&InvalidObject) + Send),
) -> Result<(ManifestSource, Vec<Object>), WatchError> {
    let started = std::time::Instant::now();
    let (source, (objects, found)) = tokio::task::spawn_blocking(move || {
        let result = source.scan();
        (source, result)
    })
    .await
    .map_err(WatchError::ScanPanicked)?;
    report(&found, errors);
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    tracing::info!(
        objects = objects.len(),
        errors = found.len(),
        duration_ms = ms(started.elapsed()),
        listing_ms = ms(source.phases.listing),
        reading_ms = ms(source.phases.reading),
        indexing_ms = ms(source.phases.indexing),
        "read manifests"
    );
    Ok((source, objects))
}

/// Reads `paths` again off the async threads; logs and reports the errors found.
async fn refresh_blocking(
    mut source: ManifestSource,
    paths: BTreeSet<PathBuf>,
    errors: &(impl Fn(&InvalidObject) + Send),
) -> Result<(ManifestSource, Update), WatchError> {
    let (source, update) = tokio::task::spawn_blocking(move || {
        let update = source.refresh(&paths, true);
        tracing::debug!(
            paths = paths.len(),
            events = update.events.len(),
            errors = update.errors.len(),
            "manifests changed"
        );
        (source, update)
    })
    .await
    .map_err(WatchError::ScanPanicked)?;
    report(&update.errors, errors);
    Ok((source, update))
}

fn report(found: &[InvalidObject], errors: &(impl Fn(&InvalidObject) + Send)) {
    for error in found {
        tracing::warn!(error = %error, "invalid manifest");
        errors(error);
    }
}
