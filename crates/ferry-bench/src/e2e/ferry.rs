//! The `ferry run` process under test: started inside the node namespace, its JSON log kept in
//! a file, its memory read from `/proc`.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use ferry_lab::LabProcess;
use serde_json::Value;

/// A running `ferry run`; stopped (SIGTERM) when dropped.
pub struct Ferry {
    process: LabProcess,
}

/// One "synced rules" log line.
#[derive(Debug, Clone, PartialEq)]
pub struct SyncLine {
    /// `Full` or `Partial`.
    pub kind: String,
    /// How long the sync took, as Ferry measured it.
    pub duration_ms: f64,
    /// Services changed since the previous sync.
    pub services_changed: u64,
}

impl Ferry {
    /// Starts `binary run <args…> --log-format json` in namespace `ns`, logging to `log`.
    pub fn start(binary: &Path, ns: &str, args: &[String], log: &Path) -> anyhow::Result<Ferry> {
        let mut all: Vec<String> = vec!["run".into(), "--log-format".into(), "json".into()];
        all.extend(args.iter().cloned());
        let process = LabProcess::spawn("ferry", ns, binary, &all, log)
            .with_context(|| format!("starting {}", binary.display()))?;
        Ok(Ferry { process })
    }

    /// The process id (`ip netns exec` execs Ferry itself).
    pub fn pid(&self) -> anyhow::Result<u32> {
        self.process.pid().context("ferry is not running")
    }

    /// A `/proc/<pid>/status` figure in MiB: `VmHWM` (peak RSS) or `VmRSS`.
    pub fn memory_mib(&self, key: &str) -> anyhow::Result<f64> {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()?))?;
        let kib: f64 = status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .with_context(|| format!("no {key} in /proc status"))?;
        Ok(kib / 1024.0)
    }

    /// True while the process runs.
    pub fn is_running(&mut self) -> bool {
        self.process.is_running()
    }

    /// The log so far.
    pub fn log(&self) -> String {
        self.process.log()
    }

    /// Where the log is.
    pub fn log_path(&self) -> PathBuf {
        self.process.log_path().to_path_buf()
    }

    /// Every "synced rules" line so far, in order.
    pub fn syncs(&self) -> Vec<SyncLine> {
        self.log()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["fields"]["message"] == "synced rules")
            .map(|v| SyncLine {
                kind: v["fields"]["kind"].as_str().unwrap_or_default().to_owned(),
                duration_ms: v["fields"]["duration_ms"].as_f64().unwrap_or(f64::NAN),
                services_changed: v["fields"]["services_changed"].as_u64().unwrap_or(0),
            })
            .collect()
    }

    /// Warnings and errors logged so far (a few, for the report when something went wrong).
    pub fn problems(&self, at_most: usize) -> Vec<String> {
        self.log()
            .lines()
            .filter(|l| l.contains("\"level\":\"ERROR\"") || l.contains("\"level\":\"WARN\""))
            .take(at_most)
            .map(str::to_owned)
            .collect()
    }

    /// Stops the process (SIGTERM, then SIGKILL after a timeout).
    pub fn stop(mut self) -> anyhow::Result<()> {
        self.process.stop()?;
        Ok(())
    }
}
