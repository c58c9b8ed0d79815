//! The `ferry run` under test: started inside the node namespace with its JSON log in a file,
//! stopped with SIGTERM or killed with SIGKILL, its syncs and memory read back from the log
//! and `/proc`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::LabProcess;
use anyhow::Context as _;
use nix::sys::signal::Signal;
use serde_json::Value;

/// A running `ferry run`; stopped (SIGTERM) when dropped.
pub struct Ferry {
    process: LabProcess,
    /// Log bytes written before this process started (the log is appended to across runs).
    from: u64,
}

/// One `synced rules` line.
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
    /// Starts `binary run --log-format json <args…>` in namespace `ns`, appending to `log`.
    pub fn start(binary: &Path, ns: &str, args: &[String], log: &Path) -> anyhow::Result<Ferry> {
        let from = std::fs::metadata(log).map_or(0, |m| m.len());
        let mut all: Vec<String> = vec!["run".into(), "--log-format".into(), "json".into()];
        all.extend(args.iter().cloned());
        let process = LabProcess::spawn("ferry", ns, binary, &all, log)
            .with_context(|| format!("starting {}", binary.display()))?;
        Ok(Ferry { process, from })
    }

    /// The process id (`ip netns exec` execs Ferry itself).
    pub fn pid(&self) -> anyhow::Result<u32> {
        self.process.pid().context("ferry is not running")
    }

    /// A `/proc/<pid>/status` figure in MiB: `VmHWM:` (peak RSS) or `VmRSS:`.
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

    /// This process's part of the log.
    pub fn log(&self) -> String {
        let all = std::fs::read(self.process.log_path()).unwrap_or_default();
        let from = (self.from as usize).min(all.len());
        String::from_utf8_lossy(&all[from..]).into_owned()
    }

    /// Where the log is.
    pub fn log_path(&self) -> PathBuf {
        self.process.log_path().to_path_buf()
    }

    /// This process's JSON log lines whose message is `message`.
    pub fn lines(&self, message: &str) -> Vec<Value> {
        self.log()
            .lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|v| v["fields"]["message"] == message)
            .collect()
    }

    /// Every `synced rules` line so far, in order.
    pub fn syncs(&self) -> Vec<SyncLine> {
        self.lines("synced rules")
            .iter()
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

    /// Waits until at least `count` syncs were logged; the time waited, or an error naming the
    /// last log lines after `timeout` (or when the process exits).
    pub fn wait_syncs(&mut self, count: usize, timeout: Duration) -> anyhow::Result<Duration> {
        let start = Instant::now();
        while self.syncs().len() < count {
            anyhow::ensure!(
                self.is_running(),
                "ferry exited before sync {count}:\n{}",
                self.tail(20)
            );
            anyhow::ensure!(
                start.elapsed() < timeout,
                "no sync {count} within {timeout:?}:\n{}",
                self.tail(20)
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(start.elapsed())
    }

    /// The last `n` lines of this process's log.
    pub fn tail(&self, n: usize) -> String {
        let log = self.log();
        let lines: Vec<&str> = log.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    /// `kill -9`: the process ends wherever it is (its rules stay in the kernel as they are).
    pub fn kill(mut self) -> anyhow::Result<()> {
        self.process.signal(Signal::SIGKILL)?;
        self.process.stop()?;
        Ok(())
    }

    /// SIGTERM, as an orderly restart or upgrade does.
    pub fn stop(mut self) -> anyhow::Result<()> {
        self.process.stop()?;
        Ok(())
    }
}
