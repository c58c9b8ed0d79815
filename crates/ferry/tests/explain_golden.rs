//! Golden outputs of `ferry explain` (text, JSON, Mermaid), including the seed question:
//! client → k8s-node1:32223 with the Local and the Cluster policy. `FERRY_BLESS=1` rewrites them.

use std::path::Path;
use std::process::Command;

#[path = "support/seed.rs"]
mod seed;

const CASES: &[(&str, &str, &str, &str, &str, &str)] = &[
    // name, policy, node, from, to, proxy mode
    (
        "seed-local-node1",
        "Local",
        "k8s-node1",
        "10.1.1.100",
        "10.1.1.17:32223",
        "nftables",
    ),
    (
        "seed-cluster-node1",
        "Cluster",
        "k8s-node1",
        "10.1.1.100",
        "10.1.1.17:32223",
        "nftables",
    ),
    (
        "seed-local-node2",
        "Local",
        "k8s-node2",
        "10.1.1.100",
        "10.1.1.9:32223/tcp",
        "nftables",
    ),
    (
        "pod-to-cluster-ip",
        "Cluster",
        "k8s-master",
        "192.168.235.200",
        "10.96.198.86:8080",
        "nftables",
    ),
    (
        "seed-local-node1-iptables",
        "Local",
        "k8s-node1",
        "10.1.1.100",
        "10.1.1.17:32223",
        "iptables",
    ),
    (
        "seed-cluster-node1-iptables",
        "Cluster",
        "k8s-node1",
        "10.1.1.100",
        "10.1.1.17:32223",
        "iptables",
    ),
];

#[test]
fn explain_outputs_match_the_golden_files() {
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/explain");
    let bless = std::env::var_os("FERRY_BLESS").is_some();
    let mut failures = Vec::new();
    for (name, policy, node, from, to, mode) in CASES {
        let manifests = seed::Manifests::new(policy);
        let dir = manifests.path().display().to_string();
        for (output, ext) in [("text", "txt"), ("json", "json"), ("mermaid", "mmd")] {
            let out = Command::new(seed::FERRY)
                .args([
                    "explain",
                    "--manifests",
                    &dir,
                    "--node",
                    node,
                    "--from",
                    from,
                    "--to",
                    to,
                ])
                .args([
                    "--cluster-cidr",
                    "192.168.0.0/16",
                    "--output",
                    output,
                    "--proxy-mode",
                    mode,
                ])
                .output()
                .expect("run ferry explain");
            assert!(
                out.status.success(),
                "{name}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let got = String::from_utf8_lossy(&out.stdout).into_owned();
            let path = golden.join(format!("{name}.{ext}"));
            if bless {
                std::fs::write(&path, &got).expect("write golden");
            } else if std::fs::read_to_string(&path).unwrap_or_default() != got {
                failures.push(format!(
                    "{} differs (FERRY_BLESS=1 rewrites):\n{got}",
                    path.display()
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The seed's NodePort with `sessionAffinity: ClientIP` (timeoutSeconds 600): the pin step,
/// in both modes (text output).
#[test]
fn explain_with_session_affinity_matches_the_golden_files() {
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/explain");
    let bless = std::env::var_os("FERRY_BLESS").is_some();
    let mut manifests = seed::Manifests::new("Cluster");
    manifests.affinity_timeout = Some(600);
    manifests.write();
    let dir = manifests.path().display().to_string();
    for (name, mode) in [
        ("affinity-node-port", "nftables"),
        ("affinity-node-port-iptables", "iptables"),
    ] {
        let out = Command::new(seed::FERRY)
            .args(["explain", "--manifests", &dir, "--node", "k8s-node1"])
            .args(["--from", "10.1.1.100", "--to", "10.1.1.17:32223"])
            .args(["--cluster-cidr", "192.168.0.0/16", "--proxy-mode", mode])
            .output()
            .expect("run ferry explain");
        assert!(out.status.success(), "{name}: {out:?}");
        let got = String::from_utf8_lossy(&out.stdout).into_owned();
        let path = golden.join(format!("{name}.txt"));
        if bless {
            std::fs::write(&path, &got).expect("write golden");
        } else {
            let want = std::fs::read_to_string(&path).unwrap_or_default();
            assert_eq!(want, got, "{} (FERRY_BLESS=1 rewrites)", path.display());
        }
    }
}
