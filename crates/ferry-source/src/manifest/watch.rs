//! Watching PATH: rescan when files change, emit [`SourceEvent::Resync`] when the set changes.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::time::Duration;

use ferry_model::Object;
use notify::event::{AccessKind, AccessMode};
use notify::{Event, EventKind, RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tokio::time::{timeout, Instant};

use super::ManifestSource;
use crate::{InvalidObject, SourceEvent};

/// Quiet time that ends a burst of file events (an editor's save, a generator rewriting files).
const DEBOUNCE: Duration = Duration::from_millis(100);
/// Longest a rescan waits for a burst to end, so a file written continuously is still read.
const MAX_DELAY: Duration = Duration::from_secs(2);

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
    /// A scan panicked.
    #[error("a manifest scan panicked")]
    ScanPanicked(#[source] tokio::task::JoinError),
}

impl ManifestSource {
    /// Watches PATH and sends its objects to `tx` until the receiver is dropped.
    ///
    /// Sends one [`SourceEvent::Resync`] after the initial scan, then watches PATH with `notify`
    /// (recursively for a directory; for a single file, its parent directory, filtered to that
    /// file's name, so editors that save by rename are followed; a missing PATH is watched for
    /// in its parent, and followed once it appears). A burst of file events is debounced
    /// (100 ms of quiet, at most 2 s), then PATH is rescanned and a `Resync` is sent only when
    /// the object set changed. Writers that truncate and rewrite a file in place may still be
    /// caught half-way if they pause longer than the debounce; writing a temporary file and
    /// renaming it into place, as most editors do, never is.
    ///
    /// Every error of every scan is logged with `tracing::warn!` and passed to `errors` (for
    /// metrics): scans happen only at start and when files change, so an unfixed error repeats
    /// once per change, which keeps it visible next to the change that did not fix it.
    ///
    /// Scans run on tokio's blocking pool. Returns `Ok(())` when the receiver is dropped.
    pub async fn run(
        mut self,
        tx: mpsc::Sender<SourceEvent>,
        errors: impl Fn(&InvalidObject) + Send,
    ) -> Result<(), WatchError> {
        let (events_tx, mut events) = mpsc::unbounded_channel();
        let mut target = Target::of(&self.path);
        let mut watcher = notify::recommended_watcher(move |event| {
            // The receiver is gone only when `run` has returned.
            let _ = events_tx.send(event);
        })
        .map_err(|source| target.error(source))?;
        watcher
            .watch(&target.dir, target.mode)
            .map_err(|source| target.error(source))?;
        tracing::info!(path = %self.path.display(), "watching manifests");

        // The watcher is set up before each scan, so no change can fall between them.
        let mut current: Option<Vec<Object>> = None;
        loop {
            let (source, objects) = scan_blocking(self, &errors).await?;
            self = source;
            if current.as_ref() != Some(&objects) {
                if tx.send(SourceEvent::Resync(objects.clone())).await.is_err() {
                    return Ok(());
                }
                current = Some(objects);
            }
            // PATH may have turned from missing into a directory (a late mount), or back: watch
            // what it is now, and scan again at once in case something changed meanwhile.
            let now = Target::of(&self.path);
            if now != target {
                // The old directory may be gone, and with it the watch: nothing to undo then.
                let _ = watcher.unwatch(&target.dir);
                watcher
                    .watch(&now.dir, now.mode)
                    .map_err(|source| now.error(source))?;
                target = now;
                continue;
            }
            tokio::select! {
                () = tx.closed() => return Ok(()),
                more = next_burst(&mut events, target.only.as_deref()) => {
                    if !more {
                        return Err(WatchError::WatcherStopped { path: target.dir });
                    }
                }
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

/// Runs one scan off the async threads; logs and reports its errors.
async fn scan_blocking(
    mut source: ManifestSource,
    errors: &(impl Fn(&InvalidObject) + Send),
) -> Result<(ManifestSource, Vec<Object>), WatchError> {
    let (source, (objects, found)) = tokio::task::spawn_blocking(move || {
        let result = source.scan();
        (source, result)
    })
    .await
    .map_err(WatchError::ScanPanicked)?;
    for error in &found {
        tracing::warn!(error = %error, "invalid manifest");
        errors(error);
    }
    tracing::debug!(
        objects = objects.len(),
        errors = found.len(),
        "scanned manifests"
    );
    Ok((source, objects))
}

/// Waits for a relevant file event, then for the burst to end. False when the watcher stopped.
async fn next_burst(
    events: &mut mpsc::UnboundedReceiver<notify::Result<Event>>,
    only: Option<&OsStr>,
) -> bool {
    loop {
        match events.recv().await {
            None => return false,
            Some(event) if relevant(&event, only) => break,
            Some(_) => {}
        }
    }
    let deadline = Instant::now() + MAX_DELAY;
    while Instant::now() < deadline {
        match timeout(DEBOUNCE, events.recv()).await {
            Ok(Some(_)) => {}
            Ok(None) => return false,
            Err(_quiet) => break,
        }
    }
    true
}

/// True for events that may change what a scan reads. Opening and reading (our own scans do
/// that) is not; a write being closed is. Watcher errors (e.g. a lost event queue) are, since
/// only a rescan can tell what was missed.
fn relevant(event: &notify::Result<Event>, only: Option<&OsStr>) -> bool {
    let event = match event {
        Ok(event) => event,
        Err(e) => {
            tracing::warn!(error = %e, "file watcher error; rescanning");
            return true;
        }
    };
    let kind_matters = match event.kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        _ => true,
    };
    kind_matters
        && match only {
            None => true,
            Some(name) => event.paths.iter().any(|p| p.file_name() == Some(name)),
        }
}
