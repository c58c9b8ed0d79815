//! Long-running processes inside a namespace (`ip netns exec <ns> <program> <args…>`), with
//! stdout and stderr appended to a log file, stopped (SIGTERM, then SIGKILL) on drop.

use std::ffi::{OsStr, OsString};
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use crate::netns;

/// How long [`LabProcess::stop`] waits after SIGTERM before sending SIGKILL, by default.
pub const DEFAULT_STOP_TIMEOUT: Duration = Duration::from_secs(3);

/// Errors from managing a lab process. Messages name the process, its namespace and command.
#[derive(Debug, thiserror::Error)]
pub enum ProcessError {
    /// The log file could not be created or written.
    #[error("log file {path} of process {name}: {source}")]
    Log {
        /// Process name.
        name: String,
        /// Log file path.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The process could not be started.
    #[error("cannot start process {name} in network namespace {ns} (`{cmd}`): {source}")]
    Spawn {
        /// Process name.
        name: String,
        /// Namespace.
        ns: String,
        /// Command line.
        cmd: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// Waiting for or signalling the process failed.
    #[error("process {name} (pid {pid}) in network namespace {ns}: {op}: {source}")]
    Control {
        /// Process name.
        name: String,
        /// Its pid.
        pid: u32,
        /// Namespace.
        ns: String,
        /// What was being done.
        op: &'static str,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

/// A process running in a lab namespace. Its output goes to [`LabProcess::log_path`]. Dropping
/// it stops it (SIGTERM, then SIGKILL after the stop timeout); [`LabProcess::restart`] starts
/// the same command again, appending to the same log.
#[derive(Debug)]
pub struct LabProcess {
    name: String,
    ns: String,
    program: OsString,
    args: Vec<OsString>,
    log_path: PathBuf,
    child: Option<Child>,
    stop_timeout: Duration,
    /// Entered with `nsenter --net` (this process's mount namespace) instead of `ip netns
    /// exec` (a private one): see [`LabProcess::spawn_sharing_mounts`].
    share_mounts: bool,
}

impl LabProcess {
    /// Starts `ip netns exec <ns> <program> <args…>`, output appended to `log_path` (created if
    /// missing). `name` is used in messages and log markers.
    pub fn spawn<I, S>(
        name: &str,
        ns: &str,
        program: impl AsRef<OsStr>,
        args: I,
        log_path: &Path,
    ) -> Result<Self, ProcessError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        Self::launch(name, ns, program.as_ref(), args, log_path, false)
    }

    /// Like [`LabProcess::spawn`], but the process enters only the network namespace
    /// (`nsenter --net=/run/netns/<ns>`), keeping this process's mount namespace: `ip netns
    /// exec` gives its command a private one, where a namespace it creates with `ip netns add`
    /// is seen by nobody else. For processes that build lab hosts themselves (the kubelet
    /// stand-in wires its Pods).
    pub fn spawn_sharing_mounts<I, S>(
        name: &str,
        ns: &str,
        program: impl AsRef<OsStr>,
        args: I,
        log_path: &Path,
    ) -> Result<Self, ProcessError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        Self::launch(name, ns, program.as_ref(), args, log_path, true)
    }

    fn launch<I, S>(
        name: &str,
        ns: &str,
        program: &OsStr,
        args: I,
        log_path: &Path,
        share_mounts: bool,
    ) -> Result<Self, ProcessError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut p = LabProcess {
            name: name.to_string(),
            ns: ns.to_string(),
            program: program.to_os_string(),
            args: args
                .into_iter()
                .map(|a| a.as_ref().to_os_string())
                .collect(),
            log_path: log_path.to_path_buf(),
            child: None,
            stop_timeout: DEFAULT_STOP_TIMEOUT,
            share_mounts,
        };
        p.start()?;
        Ok(p)
    }

    fn log_err(&self, source: io::Error) -> ProcessError {
        ProcessError::Log {
            name: self.name.clone(),
            path: self.log_path.clone(),
            source,
        }
    }

    fn control_err(&self, pid: u32, op: &'static str, source: io::Error) -> ProcessError {
        ProcessError::Control {
            name: self.name.clone(),
            pid,
            ns: self.ns.clone(),
            op,
            source,
        }
    }

    fn start(&mut self) -> Result<(), ProcessError> {
        let mut cmd = if self.share_mounts {
            let mut cmd = Command::new("nsenter");
            cmd.arg(format!("--net={}", netns::path(&self.ns).display()))
                .arg("--")
                .arg(&self.program)
                .args(&self.args);
            cmd
        } else {
            netns::exec_command(&self.ns, &self.program, &self.args)
        };
        let shown = netns::display_command(&cmd);
        let mut log: File = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_path)
            .map_err(|e| self.log_err(e))?;
        writeln!(log, "=== ferry-lab: starting {}: {shown}", self.name)
            .map_err(|e| self.log_err(e))?;
        let stderr = log.try_clone().map_err(|e| self.log_err(e))?;
        tracing::debug!(name = %self.name, cmd = %shown, "spawn");
        let child = cmd
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(stderr)
            .spawn()
            .map_err(|source| ProcessError::Spawn {
                name: self.name.clone(),
                ns: self.ns.clone(),
                cmd: shown,
                source,
            })?;
        self.child = Some(child);
        Ok(())
    }

    /// The name given at spawn time.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The namespace the process runs in.
    pub fn netns(&self) -> &str {
        &self.ns
    }

    /// The pid (of the program itself: `ip netns exec` execs it), if started and not yet
    /// reaped.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Sets how long [`LabProcess::stop`] waits after SIGTERM before SIGKILL.
    pub fn set_stop_timeout(&mut self, timeout: Duration) {
        self.stop_timeout = timeout;
    }

    /// Whether the process has exited; `Some(status)` once it has (it is then reaped and
    /// forgotten, so later calls return `None` and [`LabProcess::is_running`] is false).
    pub fn try_wait(&mut self) -> Result<Option<ExitStatus>, ProcessError> {
        let Some(child) = self.child.as_mut() else {
            return Ok(None);
        };
        let pid = child.id();
        match child.try_wait() {
            Ok(Some(status)) => {
                self.child = None;
                Ok(Some(status))
            }
            Ok(None) => Ok(None),
            Err(e) => Err(self.control_err(pid, "wait", e)),
        }
    }

    /// True while the process runs.
    pub fn is_running(&mut self) -> bool {
        matches!(self.try_wait(), Ok(None)) && self.child.is_some()
    }

    /// Sends a signal (e.g. SIGHUP) to the process, if it runs.
    pub fn signal(&self, sig: Signal) -> Result<(), ProcessError> {
        if let Some(child) = &self.child {
            let pid = child.id();
            kill(Pid::from_raw(pid as i32), sig)
                .map_err(|e| self.control_err(pid, "kill", io::Error::from(e)))?;
        }
        Ok(())
    }

    /// Stops the process: SIGTERM, wait up to the stop timeout, then SIGKILL. Returns its exit
    /// status (`None` if it was not running).
    pub fn stop(&mut self) -> Result<Option<ExitStatus>, ProcessError> {
        let Some(mut child) = self.child.take() else {
            return Ok(None);
        };
        let pid = child.id();
        if let Some(status) = child
            .try_wait()
            .map_err(|e| self.control_err(pid, "wait", e))?
        {
            return Ok(Some(status));
        }
        let _ = kill(Pid::from_raw(pid as i32), Signal::SIGTERM);
        let deadline = Instant::now() + self.stop_timeout;
        while Instant::now() < deadline {
            if let Some(status) = child
                .try_wait()
                .map_err(|e| self.control_err(pid, "wait", e))?
            {
                return Ok(Some(status));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        tracing::warn!(name = %self.name, pid, "did not exit on SIGTERM; sending SIGKILL");
        let _ = child.kill();
        let status = child.wait().map_err(|e| self.control_err(pid, "wait", e))?;
        Ok(Some(status))
    }

    /// Stops the process (if running) and starts the same command again; the log is appended
    /// to, with a marker line.
    pub fn restart(&mut self) -> Result<(), ProcessError> {
        self.stop()?;
        self.start()
    }

    /// Path of the log file (stdout and stderr, appended across restarts).
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// The log's content so far (lossy UTF-8); an explanatory line if it cannot be read.
    pub fn log(&self) -> String {
        match std::fs::read(&self.log_path) {
            Ok(b) => String::from_utf8_lossy(&b).into_owned(),
            Err(e) => format!("<cannot read {}: {e}>", self.log_path.display()),
        }
    }

    /// Lets the process run on after this value is gone (it is neither stopped nor reaped) and
    /// returns its pid. Used when a lab is made persistent.
    pub fn detach(mut self) -> Option<u32> {
        self.child.take().map(|c| c.id())
    }
}

impl Drop for LabProcess {
    fn drop(&mut self) {
        if let Err(e) = self.stop() {
            tracing::warn!(error = %e, "stopping lab process");
        }
    }
}
