//! The targets that run the `ferry` binary: configuration loading and the command line live
//! in the binary, and `ferry check` runs exactly what `ferry run` does with them before it
//! starts (it never touches the kernel or an API server). A crash is an exit by panic (101), by
//! a signal, or no exit within [`TIMEOUT`].

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt as _;
use std::os::unix::process::ExitStatusExt as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::{shape, signature};

/// How long one `ferry check` may take.
pub const TIMEOUT: Duration = Duration::from_secs(10);

/// Arguments a flags input may hold at most.
const MAX_ARGS: usize = 64;
/// Bytes an argument may hold at most: a command line holds flags, not documents (an unknown
/// flag of 75 KB takes clap's did-you-mean 1.8 s in a debug build: slow, not stuck).
const MAX_ARG: usize = 4096;

/// `ferry check --config FILE`, FILE holding `input`.
pub fn config(ferry: &Path, input: &[u8]) -> Result<u64, String> {
    let dir = tempfile::tempdir().map_err(|e| format!("a temporary directory: {e}"))?;
    let file = dir.path().join("config.yaml");
    std::fs::write(&file, input).map_err(|e| format!("writing {}: {e}", file.display()))?;
    let args = vec![OsString::from("--config"), file.into_os_string()];
    check(ferry, dir.path(), args)
}

/// `ferry check ARGS…`, one argument per line of `input` (bytes as they are, UTF-8 or not).
/// Arguments naming a path outside the working directory (holding `/` or `..`) are dropped:
/// the fuzzer must not send `ferry check --manifests` through the whole file system; so are
/// those holding a NUL byte, which no command line can carry.
pub fn flags(ferry: &Path, input: &[u8]) -> Result<u64, String> {
    let dir = tempfile::tempdir().map_err(|e| format!("a temporary directory: {e}"))?;
    let args = input
        .split(|&b| b == b'\n')
        // An argument cannot hold a NUL byte (C strings).
        .filter(|a| !a.contains(&b'/') && !a.contains(&0) && !a.windows(2).any(|w| w == b".."))
        .take(MAX_ARGS)
        .map(|a| OsString::from_vec(a[..a.len().min(MAX_ARG)].to_vec()))
        .collect();
    check(ferry, dir.path(), args)
}

/// Runs `ferry check ARGS` in `dir`: the outcome's signature, or the crash.
fn check(ferry: &Path, dir: &Path, args: Vec<OsString>) -> Result<u64, String> {
    let mut child = Command::new(ferry)
        .arg("check")
        .args(&args)
        .current_dir(dir)
        .env_remove("KUBECONFIG")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("starting {}: {e}", ferry.display()))?;
    let end = Instant::now() + TIMEOUT;
    while child.try_wait().map_err(|e| e.to_string())?.is_none() {
        if Instant::now() > end {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("no exit within {TIMEOUT:?}: ferry check {args:?}"));
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("reading ferry check's output: {e}"))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if let Some(signal) = out.status.signal() {
        return Err(format!("killed by signal {signal}: {}", last_line(&stderr)));
    }
    if out.status.code() == Some(101) || stderr.contains("panicked at") {
        return Err(format!("panicked: {}", first_panic_line(&stderr)));
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    // The temporary directory's name differs every run: it is no part of the outcome.
    let dir = dir.display().to_string();
    let lines: Vec<String> = stdout
        .lines()
        .chain(stderr.lines())
        .map(|l| shape(&l.replace(&dir, "DIR")))
        .collect();
    Ok(signature((out.status.code(), lines)))
}

fn last_line(text: &str) -> &str {
    text.lines().last().unwrap_or_default()
}

fn first_panic_line(text: &str) -> &str {
    text.lines()
        .find(|l| l.contains("panicked at"))
        .unwrap_or_else(|| last_line(text))
}
