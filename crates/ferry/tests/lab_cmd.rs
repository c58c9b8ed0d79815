//! `ferry lab up / curl / down`, and an interrupted `up`, leave nothing behind. Needs root.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

const FERRY: &str = env!("CARGO_BIN_EXE_ferry");

fn ferry(args: &[&str]) -> Output {
    Command::new(FERRY).args(args).output().expect("run ferry")
}

/// A copy of examples/`name`, so this test's processes can be told apart by their arguments.
fn seed_copy(dir: &Path) -> String {
    example_copy(dir, "seed")
}

fn example_copy(dir: &Path, name: &str) -> String {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name);
    let dst = dir.join("manifests");
    std::fs::create_dir_all(&dst).expect("mkdir");
    for e in std::fs::read_dir(src).expect("read examples/seed") {
        let e = e.expect("entry");
        std::fs::copy(e.path(), dst.join(e.file_name())).expect("copy manifest");
    }
    dst.display().to_string()
}

fn namespaces(prefix: &str) -> Vec<String> {
    let out = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .expect("ip netns list");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&format!("{prefix}-")))
        .map(str::to_owned)
        .collect()
}

fn processes_mentioning(needle: &str) -> usize {
    std::fs::read_dir("/proc")
        .expect("proc")
        .filter_map(|e| std::fs::read(e.ok()?.path().join("cmdline")).ok())
        .filter(|c| String::from_utf8_lossy(c).contains(needle))
        .count()
}

#[test]
#[ignore = "needs root: network namespaces"]
fn lab_up_curl_down_reproduces_the_seed_and_leaves_nothing() {
    let dir = tempfile::tempdir().expect("tempdir");
    let manifests = seed_copy(dir.path());
    let state = dir.path().join("state").display().to_string();
    let prefix = format!("fl{}", std::process::id());
    let up = ferry(&[
        "lab",
        "up",
        "--manifests",
        &manifests,
        "--prefix",
        &prefix,
        "--state-dir",
        &state,
    ]);
    assert!(
        up.status.success(),
        "{}",
        String::from_utf8_lossy(&up.stderr)
    );
    let curl = ferry(&[
        "lab",
        "curl",
        "--state-dir",
        &state,
        "--from",
        "client",
        "http://10.1.1.17:32223/hello",
    ]);
    let body = String::from_utf8_lossy(&curl.stdout).into_owned();
    let down = ferry(&["lab", "down", "--state-dir", &state]);
    assert!(
        down.status.success(),
        "{}",
        String::from_utf8_lossy(&down.stderr)
    );
    assert!(
        body.starts_with("ClientIp : 10.1.1.17, ServerName : url-analysis-169-16"),
        "{body}"
    );
    assert!(namespaces(&prefix).is_empty(), "{:?}", namespaces(&prefix));
    assert_eq!(processes_mentioning(&manifests), 0);
}

/// `ferry lab up --control-plane` with examples/seed-pods: the Pods run by the kubelet
/// stand-ins, their slice written by the real EndpointSlice controller, the NodePort answered
/// once their probes pass; `ferry lab kubectl` reaches the API; `down` leaves nothing.
#[test]
#[ignore = "needs root: network namespaces"]
fn lab_up_with_a_control_plane_serves_the_seed_pods_and_leaves_nothing() {
    let test = "lab_up_with_a_control_plane_serves_the_seed_pods_and_leaves_nothing";
    if ferry_kube_lab::Assets::for_test(test).is_none() {
        return;
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let manifests = example_copy(dir.path(), "seed-pods");
    let state = dir.path().join("state").display().to_string();
    let prefix = format!("fk{}", std::process::id());
    let up = ferry(&[
        "lab",
        "up",
        "--control-plane",
        "--manifests",
        &manifests,
        "--prefix",
        &prefix,
        "--state-dir",
        &state,
    ]);
    let down = || ferry(&["lab", "down", "--state-dir", &state]);
    if !up.status.success() {
        down();
        panic!("{}", String::from_utf8_lossy(&up.stderr));
    }
    let slices = ferry(&[
        "lab",
        "kubectl",
        "--state-dir",
        &state,
        "-n",
        "dev",
        "get",
        "endpointslices",
        "-o",
        "jsonpath={.items[*].endpoints[*].addresses[0]}",
    ]);
    // The Pods' readinessProbe starts after 15 s (initialDelaySeconds).
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let body = loop {
        let curl = ferry(&[
            "lab",
            "curl",
            "--state-dir",
            &state,
            "--from",
            "client",
            "http://10.1.1.17:32223/hello",
        ]);
        let body = String::from_utf8_lossy(&curl.stdout).into_owned();
        if curl.status.success() || std::time::Instant::now() > deadline {
            break body;
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    let removed = down();
    assert!(
        removed.status.success(),
        "{}",
        String::from_utf8_lossy(&removed.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&slices.stdout),
        "192.168.169.166 192.168.169.168",
        "{}",
        String::from_utf8_lossy(&slices.stderr)
    );
    assert!(
        body.starts_with("ClientIp : 10.1.1.17, ServerName : url-analysis-deployment-"),
        "{body}"
    );
    assert!(namespaces(&prefix).is_empty(), "{:?}", namespaces(&prefix));
    assert_eq!(processes_mentioning(&manifests), 0);
    // etcd, kube-apiserver, kube-controller-manager and the stand-ins name files there.
    assert_eq!(processes_mentioning(&state), 0);
    assert!(!Path::new(&state).join("control-plane").exists());
}

#[test]
#[ignore = "needs root: network namespaces"]
fn an_interrupted_lab_up_removes_what_it_built() {
    // Interrupt at several points of the build (namespaces, pods, agents, waiting for syncs).
    for delay_ms in [20, 80, 200, 400] {
        interrupt_after(Duration::from_millis(delay_ms));
    }
}

fn interrupt_after(delay: Duration) {
    let dir = tempfile::tempdir().expect("tempdir");
    let manifests = seed_copy(dir.path());
    let state = dir.path().join("state").display().to_string();
    let prefix = format!("fi{}", std::process::id());
    let mut child = Command::new(FERRY)
        .args([
            "lab",
            "up",
            "--manifests",
            &manifests,
            "--prefix",
            &prefix,
            "--state-dir",
            &state,
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn lab up");
    std::thread::sleep(delay);
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).expect("pid"));
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT);
    let status = child.wait().expect("wait");
    if status.success() {
        // The whole lab was up before the signal arrived: `down` must still clean it.
        assert!(ferry(&["lab", "down", "--state-dir", &state])
            .status
            .success());
    }
    assert!(
        namespaces(&prefix).is_empty(),
        "after {delay:?}: {:?}",
        namespaces(&prefix)
    );
    assert_eq!(processes_mentioning(&manifests), 0, "after {delay:?}");
}
