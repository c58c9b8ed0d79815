//! The IPVS guest: runs a command (usually the calling test binary itself) inside a qemu VM that
//! boots Debian's stock kernel, for the tests that need kernel parts this machine may lack
//! (IP_VS, the `dummy` link type).
//!
//! The work is done by `vm/ipvs-vm` next to this crate (a shell script: it installs qemu when
//! missing, `apt-get download`s the kernel and the guest's tools into `target/ipvs-vm/`, builds
//! an initramfs and boots it). The repository is shared with the guest over virtio-9p at the
//! same path, so a cargo test binary runs there as it is, and finds its sources and fixtures.
//!
//! A test binary re-executes itself in the guest with [`GUEST_ENV`] set:
//!
//! ```no_run
//! #[test]
//! #[ignore = "needs root: qemu IPVS guest"]
//! fn in_the_ipvs_guest() {
//!     ferry_lab::vm::run_guest_tests("guest::");
//! }
//!
//! mod guest {
//!     #[test]
//!     #[ignore = "needs root: qemu IPVS guest"]
//!     fn ipvsadm_works() {
//!         if !ferry_lab::vm::in_guest() {
//!             return; // run by `in_the_ipvs_guest`, inside the VM
//!         }
//!         // … real IPVS here …
//!     }
//! }
//! ```

use std::ffi::OsString;
use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Set (to `1`) in the guest for the command run there.
pub const GUEST_ENV: &str = "FERRY_IPVS_GUEST";

/// True inside the IPVS guest.
pub fn in_guest() -> bool {
    std::env::var_os(GUEST_ENV).is_some()
}

/// The runner script.
pub fn runner() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("vm/ipvs-vm")
}

/// The workspace root (shared with the guest).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .expect("crates/ferry-lab lies two levels below the workspace root")
        .to_path_buf()
}

/// Why the guest could not run a command.
#[derive(Debug, thiserror::Error)]
pub enum VmError {
    /// The runner could not be started.
    #[error("cannot run {runner}: {source}")]
    Spawn {
        /// The script.
        runner: PathBuf,
        /// The underlying error.
        #[source]
        source: io::Error,
    },
}

/// A command for the guest.
#[derive(Debug, Clone, Default)]
pub struct GuestCommand {
    /// Program and arguments.
    pub argv: Vec<OsString>,
    /// Directories mounted at the same path in the guest (the workspace root is always one).
    pub shares: Vec<PathBuf>,
    /// Environment for the command (besides [`GUEST_ENV`]).
    pub env: Vec<(String, String)>,
    /// Whole-VM time limit in seconds.
    pub timeout_secs: u32,
}

/// What a guest run gave.
#[derive(Debug, Clone)]
pub struct GuestRun {
    /// The command's exit status; `None` when the guest gave no result (timeout, crash) or the
    /// runner failed (its messages are in `log`).
    pub status: Option<i32>,
    /// The guest's console: the kernel's messages and the command's output.
    pub console: String,
    /// The runner's own messages (downloads, boot, timing).
    pub log: String,
}

impl GuestRun {
    /// True when the command ran and exited 0.
    pub fn success(&self) -> bool {
        self.status == Some(0)
    }
}

/// Factor by which the lab stretches its waits in the guest ([`crate::time_scale`]).
pub const GUEST_TIME_SCALE: &str = "6";

/// Narrows the tests [`run_guest_tests`] runs in the guest (a test name filter), to run one
/// by hand: `FERRY_GUEST_FILTER=seed_curl_table cargo test -p ferry --test lab_ipvs …`.
pub const GUEST_FILTER_ENV: &str = "FERRY_GUEST_FILTER";

/// The runner's "no result" exit status.
const NO_RESULT: i32 = 125;

/// Boots the guest, runs `cmd` in it and powers it off.
pub fn run(cmd: &GuestCommand) -> Result<GuestRun, VmError> {
    let runner = runner();
    let mut c = Command::new(&runner);
    let mut shares = vec![workspace_root()];
    for s in &cmd.shares {
        if !shares.iter().any(|root| s.starts_with(root)) {
            shares.push(s.clone());
        }
    }
    for s in &shares {
        c.arg("--share").arg(s);
    }
    c.arg("--env").arg(format!("{GUEST_ENV}=1"));
    for (k, v) in &cmd.env {
        c.arg("--env").arg(format!("{k}={v}"));
    }
    let timeout = if cmd.timeout_secs == 0 {
        900
    } else {
        cmd.timeout_secs
    };
    c.arg("--timeout").arg(timeout.to_string()).arg("--");
    c.args(&cmd.argv);
    let out = c.output().map_err(|source| VmError::Spawn {
        runner: runner.clone(),
        source,
    })?;
    Ok(GuestRun {
        status: out.status.code().filter(|&rc| rc != NO_RESULT),
        console: String::from_utf8_lossy(&out.stdout).into_owned(),
        log: String::from_utf8_lossy(&out.stderr).into_owned(),
    })
}

/// Runs the calling test binary's tests matching `filter` in the guest (one VM for all of
/// them, one test at a time, ignored tests included) and panics unless they all pass. The
/// guest's console is printed (cargo shows it for a failing test, or with `--nocapture`).
/// Skips (returns) when not root.
pub fn run_guest_tests(filter: &str) {
    if in_guest() {
        return;
    }
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: the IPVS guest needs root");
        return;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let filter = std::env::var(GUEST_FILTER_ENV).unwrap_or_else(|_| filter.to_owned());
    let cmd = GuestCommand {
        argv: vec![
            exe.clone().into(),
            filter.into(),
            "--include-ignored".into(),
            "--test-threads=1".into(),
            // The console is only shown when the outer test fails or runs with --nocapture.
            "--nocapture".into(),
        ],
        // The profile's folder (`target/debug`), not only the test binary's (`deps/`): the
        // tests run the crate's binaries (`ferry`) from there, and a CARGO_TARGET_DIR outside
        // the workspace is not otherwise shared.
        shares: exe
            .parent()
            .and_then(Path::parent)
            .map(Path::to_path_buf)
            .into_iter()
            .collect(),
        env: vec![
            ("RUST_BACKTRACE".into(), "1".into()),
            // The guest runs about six times slower than the host (software emulation).
            (crate::TIME_SCALE_ENV.into(), GUEST_TIME_SCALE.into()),
        ],
        timeout_secs: 900,
    };
    let run = run(&cmd).expect("the IPVS guest runner");
    println!("{}\n{}", run.log, run.console);
    assert!(
        run.success(),
        "the tests in the IPVS guest failed (status {:?}); console above, runner log:\n{}",
        run.status,
        run.log
    );
}
