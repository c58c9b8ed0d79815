//! Named network namespaces (`/run/netns/<name>`, as `ip netns` manages them): create and delete
//! them, run `ip` batches and commands inside them, run Rust code inside them from a short-lived
//! thread, write their sysctls, and find and kill the processes living in them.
//!
//! Everything here works on namespace *names*; the lab decides the names.

use std::ffi::OsStr;
use std::fs::File;
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use nix::sched::{setns, CloneFlags};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

mod batch;
pub(crate) mod created;

pub use batch::{run_batches, IpBatch};

/// Directory where `ip netns` keeps the bind mounts of named namespaces.
pub const NETNS_DIR: &str = "/run/netns";

/// Errors from namespace operations. Every message names the namespace or the command involved.
#[derive(Debug, thiserror::Error)]
pub enum NetnsError {
    /// A command could not be started at all (binary missing, ...).
    #[error("cannot start `{cmd}`: {source}")]
    Spawn {
        /// The command line.
        cmd: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// A command ran and exited unsuccessfully.
    #[error("`{cmd}` failed ({status}): {stderr}")]
    Command {
        /// The command line (for `ip` batches, with the failing batch line when known).
        cmd: String,
        /// How it exited.
        status: String,
        /// What it printed on stderr (trimmed).
        stderr: String,
    },
    /// `/run/netns/<ns>` could not be opened.
    #[error("cannot open network namespace {ns} ({path}): {source}")]
    Open {
        /// The namespace name.
        ns: String,
        /// The path that was opened.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// `setns(2)` into the namespace failed.
    #[error("setns into network namespace {ns} failed: {source}")]
    Setns {
        /// The namespace name.
        ns: String,
        /// The underlying error.
        #[source]
        source: nix::Error,
    },
    /// Writing a sysctl inside the namespace failed.
    #[error("sysctl {key}={value} in network namespace {ns} failed: {source}")]
    Sysctl {
        /// The namespace name.
        ns: String,
        /// The sysctl key, dotted (`net.ipv4.ip_forward`).
        key: String,
        /// The value written.
        value: String,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
    /// The helper thread that entered the namespace panicked.
    #[error("helper thread in network namespace {ns} panicked")]
    ThreadPanicked {
        /// The namespace name.
        ns: String,
    },
    /// Listing `/run/netns` or scanning `/proc` failed.
    #[error("cannot read {path}: {source}")]
    Scan {
        /// The directory or file being read.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

/// The path of a named namespace's bind mount.
pub fn path(ns: &str) -> PathBuf {
    PathBuf::from(NETNS_DIR).join(ns)
}

/// Renders a command line for error messages and logs.
pub fn display_command(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// Builds `ip netns exec <ns> <program> <args…>` (not started).
pub fn exec_command<I, S>(ns: &str, program: impl AsRef<OsStr>, args: I) -> Command
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", ns]).arg(program).args(args);
    cmd
}

/// Runs a command to completion, capturing its output; a non-zero exit is an error carrying
/// stderr.
pub fn run(cmd: &mut Command) -> Result<Output, NetnsError> {
    let out = run_unchecked(cmd)?;
    if out.status.success() {
        Ok(out)
    } else {
        Err(NetnsError::Command {
            cmd: display_command(cmd),
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        })
    }
}

/// Runs a command to completion, capturing its output, whatever its exit status.
pub fn run_unchecked(cmd: &mut Command) -> Result<Output, NetnsError> {
    tracing::debug!(cmd = %display_command(cmd), "run");
    cmd.stdin(Stdio::null())
        .output()
        .map_err(|source| NetnsError::Spawn {
            cmd: display_command(cmd),
            source,
        })
}

/// Creates named namespaces (one `ip -batch` for all of them). They are remembered until
/// deleted, for [`crate::interrupt`] to delete on SIGINT/SIGTERM.
pub fn add(names: &[String]) -> Result<(), NetnsError> {
    let mut created = created::lock();
    // Remembered before `ip` runs: a batch failing half-way may have created some of them.
    created.extend(names.iter().cloned());
    let mut b = IpBatch::new(None);
    for n in names {
        b.line(format!("netns add {n}"));
    }
    b.run()
}

/// Deletes named namespaces that exist (missing ones are skipped). Processes still inside keep
/// the namespace alive (unnamed) until they exit: kill them first, see [`kill_all`].
pub fn delete(names: &[String]) -> Result<(), NetnsError> {
    let mut created = created::lock();
    let result = delete_unlocked(names);
    for n in names.iter().filter(|n| !path(n).exists()) {
        created.remove(n.as_str());
    }
    result
}

/// [`delete`], for a caller already holding [`created::lock`].
pub(crate) fn delete_unlocked(names: &[String]) -> Result<(), NetnsError> {
    let mut b = IpBatch::new(None);
    b.force = true;
    for n in names.iter().filter(|n| path(n).exists()) {
        b.line(format!("netns del {n}"));
    }
    if b.lines.is_empty() {
        return Ok(());
    }
    b.run()
}

/// Names of all named namespaces (`ip netns list`), sorted.
pub fn list() -> Result<Vec<String>, NetnsError> {
    let dir = match std::fs::read_dir(NETNS_DIR) {
        Ok(d) => d,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(NetnsError::Scan {
                path: NETNS_DIR.into(),
                source,
            })
        }
    };
    let mut names: Vec<String> = dir
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    Ok(names)
}

/// Runs `f` on a fresh thread that has entered namespace `ns` (`setns(CLONE_NEWNET)`) and
/// returns its result. Sockets created by `f` stay in `ns` after the thread ends, so this is
/// how to get a [`std::net::TcpStream`] that lives in a namespace.
pub fn run_in<F, R>(ns: &str, f: F) -> Result<R, NetnsError>
where
    F: FnOnce() -> R + Send,
    R: Send,
{
    let p = path(ns);
    let file = File::open(&p).map_err(|source| NetnsError::Open {
        ns: ns.to_string(),
        path: p.clone(),
        source,
    })?;
    std::thread::scope(|s| {
        s.spawn(move || {
            setns(&file, CloneFlags::CLONE_NEWNET).map_err(|source| NetnsError::Setns {
                ns: ns.to_string(),
                source,
            })?;
            drop(file);
            Ok(f())
        })
        .join()
        .map_err(|_| NetnsError::ThreadPanicked { ns: ns.to_string() })?
    })
}

/// Runs `f` on a fresh thread in a new, unnamed network namespace (`unshare(CLONE_NEWNET)`),
/// which disappears with the thread, also when `f` panics (the panic is passed on). For
/// kernel tests: they are `#[ignore = "needs root: network namespaces"]`, and run without
/// root (with `--include-ignored`) they fail here with a message saying so.
pub fn in_private_netns(f: impl FnOnce() + Send + 'static) {
    assert!(
        nix::unistd::geteuid().is_root(),
        "needs root (network namespaces): run the ignored tests as root, as CI does"
    );
    std::thread::spawn(move || {
        nix::sched::unshare(CloneFlags::CLONE_NEWNET).expect("unshare");
        f();
    })
    .join()
    .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
}

/// `nft ARGS` in the calling thread's network namespace; its output. Panics when nft fails
/// (a test helper, beside [`in_private_netns`]).
pub fn nft(args: &[&str]) -> String {
    let out = Command::new("nft").args(args).output().expect("nft");
    assert!(
        out.status.success(),
        "nft {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Writes sysctls inside namespace `ns`, e.g. `("net.ipv4.ip_forward", "1")`. Keys are dotted
/// as for `sysctl(8)` (so interface names containing dots are not supported). `/proc/sys/net`
/// shows the namespace of the thread that opens it, so this runs on a [`run_in`] thread.
pub fn sysctl(ns: &str, settings: &[(&str, &str)]) -> Result<(), NetnsError> {
    run_in(ns, || {
        for (key, value) in settings {
            let file = PathBuf::from("/proc/sys").join(key.replace('.', "/"));
            std::fs::write(&file, value).map_err(|source| NetnsError::Sysctl {
                ns: ns.to_string(),
                key: key.to_string(),
                value: value.to_string(),
                source,
            })?;
        }
        Ok(())
    })?
}

/// Process ids whose network namespace is `ns` (like `ip netns pids`), found by comparing
/// `/proc/<pid>/ns/net` with `/run/netns/<ns>`. Empty if the namespace does not exist.
pub fn pids(ns: &str) -> Result<Vec<i32>, NetnsError> {
    let target = match std::fs::metadata(path(ns)) {
        Ok(m) => (m.dev(), m.ino()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(NetnsError::Open {
                ns: ns.to_string(),
                path: path(ns),
                source,
            })
        }
    };
    let proc = std::fs::read_dir("/proc").map_err(|source| NetnsError::Scan {
        path: "/proc".into(),
        source,
    })?;
    let mut found = Vec::new();
    for entry in proc.filter_map(|e| e.ok()) {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        // Processes vanish while we scan: ignore errors.
        if let Ok(m) = std::fs::metadata(entry.path().join("ns/net")) {
            if (m.dev(), m.ino()) == target {
                found.push(pid);
            }
        }
    }
    found.sort_unstable();
    Ok(found)
}

/// Sends SIGKILL to every process in namespace `ns` (never to the calling process) and returns
/// their pids.
pub fn kill_all(ns: &str) -> Result<Vec<i32>, NetnsError> {
    let me = std::process::id() as i32;
    let victims: Vec<i32> = pids(ns)?.into_iter().filter(|&p| p != me).collect();
    for &pid in &victims {
        // ESRCH: already gone.
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
    }
    Ok(victims)
}

/// Kills what runs in each namespace, then deletes the namespaces. Used for teardown and stale
/// cleanup.
pub fn destroy(names: &[String]) -> Result<(), NetnsError> {
    destroy_by(names, delete)
}

/// [`destroy`], deleting with `delete` ([`delete_unlocked`] under [`created::lock`]).
pub(crate) fn destroy_by(
    names: &[String],
    delete: fn(&[String]) -> Result<(), NetnsError>,
) -> Result<(), NetnsError> {
    let mut first_err = None;
    for n in names {
        match kill_all(n) {
            Ok(v) if !v.is_empty() => tracing::debug!(ns = %n, pids = ?v, "killed"),
            Ok(_) => {}
            Err(e) => {
                first_err.get_or_insert(e);
            }
        }
    }
    if let Err(e) = delete(names) {
        first_err.get_or_insert(e);
    }
    first_err.map_or(Ok(()), Err)
}
