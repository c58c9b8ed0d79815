//! `ferry check` with Pods in the manifests (standalone mode's EndpointSlice controller). No
//! root needed.

use std::path::Path;
use std::process::Command;

fn example(name: &str) -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples")
        .join(name)
}

fn check(dir: &Path) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["check", "--hostname-override", "k8s-node2", "--manifests"])
        .arg(dir)
        .output()
        .expect("run ferry check");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

#[test]
fn the_seed_with_pods_instead_of_a_slice_is_valid() {
    let (code, stdout) = check(&example("seed-pods"));
    assert_eq!(code, 0, "{stdout}");
    assert!(
        stdout.contains("(1 Services, 0 EndpointSlices, 3 Nodes, 2 Pods), 0 problems"),
        "{stdout}"
    );
}

#[test]
fn a_hand_written_slice_of_a_service_fed_by_pods_is_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    for (from, file) in [
        ("seed", "service.yaml"),
        ("seed", "nodes.yaml"),
        ("seed", "endpoints.yaml"),
        ("seed-pods", "pods.yaml"),
    ] {
        std::fs::copy(example(from).join(file), dir.path().join(file)).expect("copy");
    }
    let (code, stdout) = check(dir.path());
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.contains(
            "error: EndpointSlice dev/url-analysis-7x2kq: metadata.labels[kubernetes.io/service-name]: \
             Service dev/url-analysis takes its endpoints from the Pods its selector app=url-analysis selects"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("ferry check: 1 problem(s)"), "{stdout}");
}

#[test]
fn a_pod_on_a_node_missing_from_the_manifests_is_named() {
    let dir = tempfile::tempdir().expect("tempdir");
    for file in ["service.yaml", "pods.yaml"] {
        std::fs::copy(example("seed-pods").join(file), dir.path().join(file)).expect("copy");
    }
    let (code, stdout) = check(dir.path());
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.contains(
            "error: Pod dev/url-analysis-deployment-547845566c-4rt9d: spec.nodeName: Node k8s-node2 \
             is not in the manifests"
        ),
        "{stdout}"
    );
}

#[test]
fn offline_explain_names_the_pods_and_says_their_probes_are_not_run() {
    let out = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args(["explain", "--node", "k8s-node1", "--from", "10.1.1.100"])
        .args([
            "--to",
            "10.1.1.17:32223",
            "--cluster-cidr",
            "192.168.0.0/16",
        ])
        .arg("--manifests")
        .arg(example("seed-pods"))
        .output()
        .expect("run ferry explain");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    // The seed's Pods list no container status: until a probe passes they are not ready.
    assert!(
        stdout.contains(
            "   - 192.168.169.166:56010 on k8s-node2 (Pod dev/url-analysis-deployment-547845566c-4rt9d): \
             not ready\n     readiness probe of url-analysis (GET http://192.168.169.166:56010/hello) \
             not run by explain: until probed, the Pod counts as not ready"
        ),
        "{stdout}"
    );
    assert!(stdout.contains("verdict: REJECTED"), "{stdout}");
}
