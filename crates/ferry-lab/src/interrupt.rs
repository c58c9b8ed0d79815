//! Cleaning up on SIGINT/SIGTERM: a long-running lab program (`ferry-drills`,
//! `ferry-bench-e2e`) interrupted with Ctrl-C or `kill` would otherwise exit without running
//! its destructors, leaving its namespaces and the processes in them (`ferry run`, listeners)
//! behind.
//!
//! [`clean_up_on_signal`] starts a thread that waits for either signal, then stops this
//! process's child processes (and theirs), kills what runs in the namespaces this process
//! created through [`crate::netns::add`] and deletes exactly those namespaces, removes the
//! work directories registered with [`remove_on_signal`], and exits with
//! `128 + signal` (130 for SIGINT, 143 for SIGTERM), as a shell reports a process killed by
//! it. Nothing else is touched: no other process's namespaces, no process that is not a
//! descendant of this one or inside its namespaces. SIGKILL cannot be caught; what it leaves
//! behind is for the next run's stale-namespace reaping.

use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

use crate::netns;

/// Installs the handler for SIGINT and SIGTERM (see the module documentation). Call it once,
/// early in `main`; from then on these signals no longer end the process at once, the handler
/// does, after cleaning up.
pub fn clean_up_on_signal() -> io::Result<()> {
    let mut signals = Signals::new([SIGINT, SIGTERM])?;
    std::thread::Builder::new()
        .name("clean-up-on-signal".to_owned())
        .spawn(move || {
            if let Some(sig) = signals.forever().next() {
                clean_up_and_exit(sig);
            }
        })?;
    Ok(())
}

/// Work directories to remove on SIGINT/SIGTERM (temporary directories: their `Drop` will not
/// run either).
static DIRECTORIES: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Removes `dir` (with what it holds) if the handler of [`clean_up_on_signal`] runs; a
/// directory already gone by then is skipped.
pub fn remove_on_signal(dir: &Path) {
    let mut dirs = DIRECTORIES.lock().unwrap_or_else(PoisonError::into_inner);
    // Gone ones are forgotten: a long run registers one per drill.
    dirs.retain(|d| d.exists());
    dirs.push(dir.to_path_buf());
}

fn clean_up_and_exit(sig: i32) -> ! {
    let name = Signal::try_from(sig).map_or("a signal", Signal::as_str);
    eprintln!("{name}: stopping child processes and deleting this run's network namespaces");
    // Held until the process exits: no namespace can be created or forgotten meanwhile.
    let created = netns::created::lock();
    kill_descendants();
    let names: Vec<String> = created.iter().cloned().collect();
    if let Err(e) = netns::destroy_by(&names, netns::delete_unlocked) {
        eprintln!("warning: deleting network namespaces {names:?}: {e}");
    }
    // A child the main thread started while the first pass ran.
    kill_descendants();
    let dirs = DIRECTORIES.lock().unwrap_or_else(PoisonError::into_inner);
    for dir in dirs.iter().filter(|d| d.exists()) {
        if let Err(e) = std::fs::remove_dir_all(dir) {
            eprintln!("warning: removing {}: {e}", dir.display());
        }
    }
    std::process::exit(128 + sig)
}

/// Sends SIGKILL to every descendant of this process (children, their children, …).
fn kill_descendants() {
    let me = std::process::id();
    for pid in descendants(me, &parents()) {
        // ESRCH: already gone. The pid cannot be reused meanwhile: our children stay zombies
        // until we reap them, and a grandchild's pid is only reused after its parent reaped it.
        let _ = kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
    }
}

/// Every process's parent, from `/proc/<pid>/stat`; processes that vanish while scanning are
/// left out.
fn parents() -> BTreeMap<u32, u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return BTreeMap::new();
    };
    dir.filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            Some((pid, parent_in_stat(&stat)?))
        })
        .collect()
}

/// The parent pid in a `/proc/<pid>/stat` line: the second field after the command name,
/// which is in parentheses and may itself hold spaces and parentheses.
fn parent_in_stat(stat: &str) -> Option<u32> {
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// The descendants of `root` given every process's parent, parents before their children.
fn descendants(root: u32, parents: &BTreeMap<u32, u32>) -> Vec<u32> {
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(
            parents
                .iter()
                .filter(|&(_, &p)| p == parent)
                .map(|(&pid, _)| pid),
        );
        i += 1;
    }
    found.remove(0);
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parent_is_read_past_a_command_name_with_spaces_and_parentheses() {
        let stat = "4242 (a (b) c) S 17 4242 4242 0 -1 4194560";
        assert_eq!(parent_in_stat(stat), Some(17));
        assert_eq!(parent_in_stat("garbage"), None);
    }

    #[test]
    fn descendants_are_children_and_their_children_only() {
        let parents = BTreeMap::from([(10, 1), (11, 10), (12, 11), (13, 10), (20, 1), (21, 20)]);
        assert_eq!(descendants(10, &parents), vec![11, 13, 12]);
        assert_eq!(descendants(12, &parents), Vec::<u32>::new());
    }
}
