//! One node of the seed cluster (k8s-node2, 10.1.1.9) in a network namespace of its own, for
//! the agent's end-to-end tests: `ferry run` always runs in there, never in this machine's
//! namespace. Dropping it kills what runs there and deletes it, also after a panic.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use ferry_lab::netns;
use ferry_lab::LabProcess;

pub const FERRY: &str = env!("CARGO_BIN_EXE_ferry");
pub const NODE: &str = "k8s-node2";

/// The seed's manifests.
pub fn seed() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/seed")
}

/// A copy of the seed's manifests in `dir/name`.
pub fn seed_copy(dir: &Path, name: &str) -> PathBuf {
    let to = dir.join(name);
    std::fs::create_dir_all(&to).expect("mkdir");
    for entry in std::fs::read_dir(seed()).expect("seed") {
        let entry = entry.expect("entry");
        std::fs::copy(entry.path(), to.join(entry.file_name())).expect("copy");
    }
    to
}

/// The node's namespace.
pub struct NodeNs {
    pub name: String,
    pub dir: tempfile::TempDir,
}

impl NodeNs {
    /// A new namespace (`tag` tells the tests apart): loopback up, and a veth pair holding the
    /// node's address.
    pub fn new(tag: &str) -> NodeNs {
        assert!(
            nix::unistd::geteuid().is_root(),
            "needs root (network namespaces): run the ignored tests as root, as CI does"
        );
        let name = format!("fs{}{tag}", std::process::id());
        netns::add(std::slice::from_ref(&name)).expect("ip netns add");
        let ns = NodeNs {
            name,
            dir: tempfile::tempdir().expect("tempdir"),
        };
        for cmd in [
            "link set lo up",
            "link add v0 type veth peer name v1",
            "addr add 10.1.1.9/24 dev v0",
            "link set v0 up",
            "link set v1 up",
        ] {
            let out = Command::new("ip")
                .args(["-n", &ns.name])
                .args(cmd.split(' '))
                .output()
                .expect("ip");
            assert!(out.status.success(), "ip {cmd}: {out:?}");
        }
        ns
    }

    /// `program args…` in the namespace, to completion.
    pub fn run(&self, program: &str, args: &[&str]) -> Output {
        netns::exec_command(&self.name, program, args)
            .output()
            .expect("ip netns exec")
    }

    /// `ferry args…` in the namespace, to completion: (exit code, stdout, stderr).
    pub fn ferry(&self, args: &[&str]) -> (i32, String, String) {
        let out = self.run(FERRY, args);
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// Starts `ferry run` for the node on `manifests` with `extra` flags; `path` replaces its
    /// `PATH` (where it finds nft and iptables), `prefix` goes before it (`setpriv …`).
    pub fn spawn_ferry(
        &self,
        manifests: &Path,
        extra: &[&str],
        path: Option<&Path>,
        prefix: &[&str],
    ) -> LabProcess {
        let mut args: Vec<String> = Vec::new();
        if let Some(p) = path {
            args.push(format!("PATH={}", p.display()));
        }
        args.extend(prefix.iter().map(|s| (*s).to_owned()));
        args.push(FERRY.to_owned());
        args.extend(
            [
                "run",
                "--manifests",
                &manifests.display().to_string(),
                "--hostname-override",
                NODE,
                "--cluster-cidr",
                "192.168.0.0/16",
            ]
            .map(str::to_owned),
        );
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        // One log per run: two runs in one namespace must not read each other's lines.
        static RUNS: AtomicUsize = AtomicUsize::new(0);
        let run = RUNS.fetch_add(1, Ordering::Relaxed);
        let log = self.dir.path().join(format!("ferry-{run}.log"));
        LabProcess::spawn("ferry", &self.name, "env", &args, &log).expect("spawn ferry")
    }
}

impl Drop for NodeNs {
    fn drop(&mut self) {
        let _ = netns::destroy(std::slice::from_ref(&self.name));
    }
}

/// Waits until `ferry`'s log contains `needle` `times` times; panics with the log after 30 s.
pub fn wait_log(ferry: &LabProcess, needle: &str, times: usize) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let log = ferry.log();
        if log.matches(needle).count() >= times {
            return log;
        }
        assert!(
            Instant::now() < deadline,
            "no {needle:?} (×{times}) within 30 s; log:\n{log}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits for `ferry` to exit; its exit code (panics with the log after 30 s).
pub fn wait_exit(ferry: &mut LabProcess) -> i32 {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(status) = ferry.try_wait().expect("wait") {
            return status.code().unwrap_or(-1);
        }
        assert!(
            Instant::now() < deadline,
            "ferry did not exit within 30 s; log:\n{}",
            ferry.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A directory holding links to the given tools only (a `PATH` without the others).
pub fn tools_dir(dir: &Path, tools: &[&str]) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).expect("mkdir bin");
    for tool in tools {
        let real = which(tool);
        std::os::unix::fs::symlink(real, bin.join(tool)).expect("symlink");
    }
    bin
}

/// Where `tool` is on this `PATH`.
pub fn which(tool: &str) -> PathBuf {
    std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join(tool))
        .find(|p| p.exists())
        .unwrap_or_else(|| panic!("{tool} is not installed"))
}
