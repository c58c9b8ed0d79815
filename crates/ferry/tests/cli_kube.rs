//! `ferry run` without manifests: the Kubernetes API source's start-up errors exit 64 with one
//! clear message. (Running against a fake API server is the lab test `lab_kube.rs`.)

use std::process::Command;

const FERRY: &str = env!("CARGO_BIN_EXE_ferry");

/// Runs ferry outside any pod (no in-cluster service account environment). As root, in a
/// network namespace of its own (`unshare --net`): should the agent ever start (a kubeconfig
/// found on this machine, a flag accepted), it programs that throw-away namespace, never this
/// machine's.
fn ferry(args: &[&str]) -> (i32, String) {
    let mut cmd = if nix::unistd::geteuid().is_root() {
        let mut cmd = Command::new("unshare");
        cmd.args(["--net", "--", FERRY]);
        cmd
    } else {
        Command::new(FERRY)
    };
    let out = cmd
        .args(args)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .output()
        .expect("run ferry");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn run_without_manifests_or_an_api_server_exits_64_saying_what_to_pass() {
    let (code, stderr) = ferry(&["run", "--hostname-override", "k8s-node2"]);
    assert_eq!(code, 64, "{stderr}");
    assert!(
        stderr.contains("no Kubernetes API server")
            && stderr.contains("--kubeconfig")
            && stderr.contains("--manifests"),
        "{stderr}"
    );
}

#[test]
fn an_unreachable_master_exits_64_naming_its_url() {
    // A port that was free a moment ago: connection refused.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let (code, stderr) = ferry(&["run", "--master", &url, "--hostname-override", "n"]);
    assert_eq!(code, 64, "{stderr}");
    assert!(
        stderr.contains(&format!("cannot reach the Kubernetes API server at {url}")),
        "{stderr}"
    );
}

#[test]
fn bad_kubeconfig_master_or_source_combinations_exit_64_naming_the_flag() {
    for (args, needle) in [
        (
            vec!["run", "--kubeconfig", "/nonexistent/kubeconfig"],
            "--kubeconfig /nonexistent/kubeconfig",
        ),
        (vec!["run", "--master", "http://[oops"], "--master"),
        (
            vec![
                "run",
                "--manifests",
                "/tmp",
                "--master",
                "http://127.0.0.1:1",
            ],
            "--manifests",
        ),
        (
            vec!["rules", "--master", "http://127.0.0.1:1"],
            "--manifests: required",
        ),
    ] {
        let (code, stderr) = ferry(&args);
        assert_eq!(code, 64, "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}
