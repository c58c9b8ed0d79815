//! The namespaces this process created with [`super::add`] and has not deleted yet: what a
//! signal handler ([`crate::interrupt`]) must delete when destructors will not run.
//!
//! Creating and deleting hold the lock while `ip` runs, so a namespace is either in the set
//! or does not exist; the handler keeps the lock until the process exits, so nothing is
//! created behind its back.

use std::collections::BTreeSet;
use std::sync::{Mutex, MutexGuard, PoisonError};

static CREATED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// The set, locked. A panic elsewhere while it was held leaves it usable: the set itself is
/// only ever extended or shrunk by whole names.
pub(crate) fn lock() -> MutexGuard<'static, BTreeSet<String>> {
    CREATED.lock().unwrap_or_else(PoisonError::into_inner)
}
