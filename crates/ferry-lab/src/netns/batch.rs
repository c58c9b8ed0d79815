//! `ip -batch` runs: many `ip` commands in one process per namespace, several namespaces at
//! once.

use std::io::Write;
use std::process::{Child, Command, Stdio};

use super::{display_command, NetnsError};

/// One `ip -batch` to run: in namespace `ns` (`None`: the caller's namespace), these lines.
#[derive(Debug, Clone)]
pub struct IpBatch {
    /// Namespace to run `ip` in (`ip -n <ns>`), or `None` for the current one.
    pub ns: Option<String>,
    /// The batch lines, e.g. `link set lo up`.
    pub lines: Vec<String>,
    /// Keep going after a failing line (`ip -force`).
    pub force: bool,
}

impl IpBatch {
    /// A batch run in namespace `ns` (or the current namespace), stopping at the first error.
    pub fn new(ns: Option<&str>) -> Self {
        IpBatch {
            ns: ns.map(str::to_string),
            lines: Vec::new(),
            force: false,
        }
    }

    /// Appends a line.
    pub fn line(&mut self, line: impl Into<String>) -> &mut Self {
        self.lines.push(line.into());
        self
    }

    fn command(&self) -> Command {
        let mut cmd = Command::new("ip");
        if let Some(ns) = &self.ns {
            cmd.args(["-n", ns]);
        }
        if self.force {
            cmd.arg("-force");
        }
        cmd.args(["-batch", "-"]);
        cmd
    }

    fn spawn(&self) -> Result<(Command, Child), NetnsError> {
        let mut cmd = self.command();
        tracing::debug!(cmd = %display_command(&cmd), lines = ?self.lines, "ip batch");
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| NetnsError::Spawn {
                cmd: display_command(&cmd),
                source,
            })?;
        let mut input = self.lines.join("\n");
        input.push('\n');
        if let Some(mut stdin) = child.stdin.take() {
            // A write error means `ip` exited early; its exit status tells why.
            let _ = stdin.write_all(input.as_bytes());
        }
        Ok((cmd, child))
    }

    fn finish(&self, cmd: &Command, child: Child) -> Result<(), NetnsError> {
        let out = child
            .wait_with_output()
            .map_err(|source| NetnsError::Spawn {
                cmd: display_command(cmd),
                source,
            })?;
        if out.status.success() {
            return Ok(());
        }
        let stderr = String::from_utf8_lossy(&out.stderr).trim().to_string();
        let mut shown = display_command(cmd);
        // `ip` reports "Command failed -:N": name the line.
        const MARK: &str = "Command failed -:";
        if let Some(n) = stderr
            .rfind(MARK)
            .and_then(|i| stderr[i + MARK.len()..].split_whitespace().next())
            .and_then(|t| t.parse::<usize>().ok())
        {
            if let Some(line) = self.lines.get(n.wrapping_sub(1)) {
                shown = format!("{shown} (batch line {n}: `{line}`)");
            }
        }
        Err(NetnsError::Command {
            cmd: shown,
            status: out.status.to_string(),
            stderr,
        })
    }

    /// Runs this batch.
    pub fn run(&self) -> Result<(), NetnsError> {
        let (cmd, child) = self.spawn()?;
        self.finish(&cmd, child)
    }
}

/// Runs several `ip` batches concurrently (one `ip` process each) and waits for all of them.
/// Returns the first error, after every batch has finished.
pub fn run_batches(batches: &[IpBatch]) -> Result<(), NetnsError> {
    let mut started = Vec::new();
    let mut first_err = None;
    for b in batches.iter().filter(|b| !b.lines.is_empty()) {
        match b.spawn() {
            Ok((cmd, child)) => started.push((b, cmd, child)),
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    for (b, cmd, child) in started {
        if let Err(e) = b.finish(&cmd, child) {
            first_err.get_or_insert(e);
        }
    }
    first_err.map_or(Ok(()), Err)
}
