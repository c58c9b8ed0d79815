//! Tearing a lab down, keeping it, and removing leftovers of earlier runs.

use std::time::Duration;

use super::{build, Lab, LabError};
use crate::netns;

impl Lab {
    /// Removes namespaces named `<prefix>-…` (killing what runs in them), e.g. what a crashed
    /// `ferry lab up` or test left. Returns the names removed.
    pub fn cleanup_stale(prefix: &str) -> Result<Vec<String>, LabError> {
        let start = format!("{prefix}-");
        let stale: Vec<String> = netns::list()?
            .into_iter()
            .filter(|n| n.starts_with(&start))
            .collect();
        netns::destroy(&stale)?;
        Ok(stale)
    }

    /// Removes labs with automatic prefixes (`fy<pid>x<n>-…`) whose process no longer exists.
    /// Returns the names removed.
    pub fn cleanup_orphans() -> Result<Vec<String>, LabError> {
        let orphans: Vec<String> = netns::list()?
            .into_iter()
            .filter(|n| build::auto_prefix_pid(n).is_some_and(|pid| !build::pid_alive(pid)))
            .collect();
        netns::destroy(&orphans)?;
        Ok(orphans)
    }

    /// Stops everything and deletes the namespaces, reporting problems (dropping does the same
    /// but can only log them).
    pub fn teardown(mut self) -> Result<(), LabError> {
        self.teardown_inner()
    }

    /// Keeps the lab after this value is gone: namespaces, pod servers and the log directory
    /// stay. Returns the prefix, for [`Lab::cleanup_stale`].
    pub fn persist(mut self) -> String {
        self.armed = false;
        for s in self.servers.drain(..) {
            s.process.detach();
        }
        if let Some(d) = self.dir.take() {
            let _ = d.keep();
        }
        self.prefix.clone()
    }

    fn teardown_inner(&mut self) -> Result<(), LabError> {
        if !self.armed {
            return Ok(());
        }
        self.armed = false;
        for s in &mut self.servers {
            s.process.set_stop_timeout(Duration::from_millis(500));
        }
        self.servers.clear();
        let mut order = self.namespaces.clone();
        order.reverse();
        netns::destroy(&order)?;
        let left: Vec<String> = netns::list()?
            .into_iter()
            .filter(|n| self.namespaces.contains(n))
            .collect();
        if !left.is_empty() {
            return Err(LabError::Leftovers {
                prefix: self.prefix.clone(),
                left,
            });
        }
        Ok(())
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        if let Err(e) = self.teardown_inner() {
            eprintln!("ferry-lab: teardown of lab {} failed: {e}", self.prefix);
        }
    }
}
