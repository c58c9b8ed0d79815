//! A lab that outlives the process that built it (`ferry lab up` / `curl` / `down`): which
//! namespace each host lives in, saved as a small text file.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

use crate::lab::{Host, Lab};

/// Where a persisted lab's hosts live.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabState {
    /// The namespace-name prefix (what [`Lab::cleanup_stale`] takes).
    pub prefix: String,
    /// The directory holding the lab's process logs.
    pub dir: Option<PathBuf>,
    /// `(kind, name)` → namespace, kind being `node`, `pod` or `client`.
    pub hosts: BTreeMap<(String, String), String>,
}

impl Lab {
    /// The state to save before [`Lab::persist`].
    pub fn state(&self) -> LabState {
        let mut hosts = BTreeMap::new();
        for n in self.nodes() {
            hosts.insert(("node".to_owned(), n.name.clone()), n.netns.clone());
        }
        for p in self.pods() {
            hosts.insert(("pod".to_owned(), p.name.clone()), p.netns.clone());
        }
        for c in self.clients() {
            hosts.insert(("client".to_owned(), c.name.clone()), c.netns.clone());
        }
        LabState {
            prefix: self.prefix().to_owned(),
            dir: Some(self.dir().to_path_buf()),
            hosts,
        }
    }
}

impl LabState {
    /// The namespace of a host given by name: a client, a node or a pod (in that order).
    pub fn netns_of(&self, name: &str) -> Option<&str> {
        ["client", "node", "pod"]
            .iter()
            .find_map(|kind| self.hosts.get(&((*kind).to_owned(), name.to_owned())))
            .map(String::as_str)
    }

    /// The namespace of a [`Host`].
    pub fn netns_of_host(&self, host: &Host) -> Option<&str> {
        let (kind, name) = match host {
            Host::Node(n) => ("node", n),
            Host::Pod(n) => ("pod", n),
            Host::Client(n) => ("client", n),
        };
        self.hosts
            .get(&(kind.to_owned(), name.clone()))
            .map(String::as_str)
    }

    /// Writes the state file.
    pub fn save(&self, path: &Path) -> io::Result<()> {
        let mut out = format!("prefix {}\n", self.prefix);
        if let Some(dir) = &self.dir {
            let _ = writeln!(out, "dir {}", dir.display());
        }
        for ((kind, name), ns) in &self.hosts {
            let _ = writeln!(out, "{kind} {name} {ns}");
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(path, out)
    }

    /// Reads a state file.
    pub fn load(path: &Path) -> io::Result<LabState> {
        let text = std::fs::read_to_string(path)?;
        let bad = |line: &str| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{}: bad line {line:?}", path.display()),
            )
        };
        let mut state = LabState::default();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let parts: Vec<&str> = line.split_whitespace().collect();
            match parts.as_slice() {
                ["prefix", p] => state.prefix = (*p).to_owned(),
                ["dir", d] => state.dir = Some(PathBuf::from(d)),
                [kind @ ("node" | "pod" | "client"), name, ns] => {
                    state
                        .hosts
                        .insert(((*kind).to_owned(), (*name).to_owned()), (*ns).to_owned());
                }
                _ => return Err(bad(line)),
            }
        }
        if state.prefix.is_empty() {
            return Err(bad("(no prefix line)"));
        }
        Ok(state)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_round_trips_through_its_file() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("lab.state");
        let mut s = LabState {
            prefix: "ferrylab".into(),
            dir: Some("/tmp/x".into()),
            ..Default::default()
        };
        s.hosts
            .insert(("node".into(), "k8s-node1".into()), "ferrylab-n1".into());
        s.hosts
            .insert(("pod".into(), "web-1".into()), "ferrylab-p0".into());
        s.save(&path).expect("save");
        let back = LabState::load(&path).expect("load");
        assert_eq!(back, s);
        assert_eq!(back.netns_of("web-1"), Some("ferrylab-p0"));
        assert_eq!(
            back.netns_of_host(&Host::node("k8s-node1")),
            Some("ferrylab-n1")
        );
    }
}
