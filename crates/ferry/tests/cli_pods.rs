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
