//! Every drill in its short mode (`ferry-drills --quick`), as CI runs them: a broken promise
//! fails the test with the drill's table. And a drill interrupted by SIGTERM leaves nothing
//! behind.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;

use ferry_lab::netns;

/// The `ferry` binary next to `ferry-drills`, built (or brought up to date) first: cargo
/// builds only this package's binaries for its tests.
fn ferry() -> PathBuf {
    let drills = PathBuf::from(env!("CARGO_BIN_EXE_ferry-drills"));
    let profile_dir = drills.parent().expect("the binary's directory");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let mut build = Command::new(cargo);
    build.args(["build", "--quiet", "-p", "ferry", "--bin", "ferry"]);
    if profile_dir.file_name().is_some_and(|p| p == "release") {
        build.arg("--release");
    }
    if let Some(target) = profile_dir.parent() {
        build.env("CARGO_TARGET_DIR", target);
    }
    let status = build.status().expect("running cargo build -p ferry");
    assert!(status.success(), "cargo build -p ferry failed");
    profile_dir.join("ferry")
}

#[test]
#[ignore = "needs root: network namespaces"]
fn every_drill_keeps_its_promises_in_the_short_mode() {
    let ferry = ferry();
    let out = Command::new(env!("CARGO_BIN_EXE_ferry-drills"))
        .arg("--quick")
        .arg("--ferry")
        .arg(&ferry)
        .output()
        .expect("running ferry-drills");
    let table = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "ferry-drills --quick: {}\n{table}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    // The table is the drills' figures: `--nocapture` shows it when they pass.
    println!("{table}");
}

/// Generous: the first sync of 100 Services takes well under a second.
const DEADLINE: Duration = Duration::from_secs(120);

/// Polls `done` every 50 ms until it holds; panics with `what` after [`DEADLINE`].
fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(
            start.elapsed() < DEADLINE,
            "{what}: not within {DEADLINE:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The namespaces of drills process `pid` (`fdrill-<pid>-…`).
fn namespaces_of(pid: u32) -> Vec<String> {
    let own = format!("{}{pid}-", ferry_drills::lab::PREFIX);
    netns::list()
        .expect("listing namespaces")
        .into_iter()
        .filter(|n| n.starts_with(&own))
        .collect()
}

/// Waits for `child` to exit, up to [`DEADLINE`].
fn exit_of(child: &mut Child) -> ExitStatus {
    let mut status = None;
    wait_for("ferry-drills exiting after SIGTERM", || {
        status = child.try_wait().expect("waiting for ferry-drills");
        status.is_some()
    });
    status.expect("an exit status")
}

fn is_gone(pid: i32) -> bool {
    // Gone, or a zombie waiting for init to reap it.
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |s| {
        s.rsplit_once(')')
            .is_some_and(|(_, r)| r.trim_start().starts_with('Z'))
    })
}

#[test]
#[ignore = "needs root: network namespaces"]
fn a_drill_stopped_by_sigterm_deletes_its_namespaces_and_stops_ferry() {
    let ferry = ferry();
    // The drill's work directories land here: they must be removed too.
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut child = Command::new(env!("CARGO_BIN_EXE_ferry-drills"))
        .args([
            "soak",
            "--quick",
            "-n",
            "100",
            "--seconds",
            "600",
            "--modes",
            "nftables",
        ])
        .arg("--ferry")
        .arg(&ferry)
        .env("TMPDIR", tmp.path())
        .spawn()
        .expect("starting ferry-drills");
    let pid = child.id();
    let node = format!("{}{pid}-soak-nftables-node", ferry_drills::lab::PREFIX);
    // `ferry run` is up in the node namespace, and the listeners in the pods namespace.
    let mut inside = Vec::new();
    wait_for("ferry run in the drill's node namespace", || {
        inside = namespaces_of(pid)
            .iter()
            .flat_map(|n| netns::pids(n).expect("pids"))
            .collect();
        !netns::pids(&node).expect("pids").is_empty()
    });
    assert_eq!(namespaces_of(pid).len(), 3, "{:?}", namespaces_of(pid));

    kill(Pid::from_raw(pid as i32), Signal::SIGTERM).expect("SIGTERM");
    let status = exit_of(&mut child);

    assert_eq!(status.code(), Some(128 + 15), "{status}");
    assert_eq!(namespaces_of(pid), Vec::<String>::new());
    wait_for("the processes of the drill's namespaces ending", || {
        inside.iter().all(|&p| is_gone(p))
    });
    assert_eq!(entries(tmp.path()), Vec::<PathBuf>::new());
}

fn entries(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .expect("reading the temporary directory")
        .map(|e| e.expect("entry").path())
        .collect()
}
