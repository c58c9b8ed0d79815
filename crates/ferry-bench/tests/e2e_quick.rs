//! `ferry-bench-e2e --quick` as a smoke test: every part runs against the real `ferry` binary
//! and the table comes out. Nothing here looks at a timing.

use std::path::PathBuf;
use std::process::Command;

/// The `ferry` binary of this build (cargo builds it next to this package's binaries when the
/// workspace's tests are built).
fn ferry() -> PathBuf {
    let bench = PathBuf::from(env!("CARGO_BIN_EXE_ferry-bench-e2e"));
    let ferry = bench.with_file_name("ferry");
    assert!(
        ferry.exists(),
        "{} is missing: build it first (cargo build -p ferry)",
        ferry.display()
    );
    ferry
}

#[test]
#[ignore = "needs root: network namespaces"]
fn a_quick_end_to_end_run_measures_every_part() {
    let out = Command::new(env!("CARGO_BIN_EXE_ferry-bench-e2e"))
        .arg("--quick")
        .arg("--ferry")
        .arg(ferry())
        .output()
        .expect("run ferry-bench-e2e");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    for run in [
        "| nftables, manifests |",
        "| nftables, API |",
        "| iptables-nft, manifests |",
        "| iptables-legacy, manifests |",
        "| churn, nftables, manifests",
    ] {
        assert!(stdout.contains(run), "no {run} lines:\n{stdout}\n{stderr}");
    }
    assert!(
        !stdout.contains("| (run) |") && !stdout.contains("never answered"),
        "a part failed:\n{stdout}\n{stderr}"
    );
    // The datapath's reference is measured after `ferry cleanup` removed the rules.
    let reference = stdout
        .lines()
        .find(|l| l.contains("| nftables, manifests | new TCP connection straight"))
        .unwrap_or_default();
    assert!(
        reference.contains("no rules (after cleanup") && !reference.contains("| - ("),
        "{reference}"
    );
    // So is the kernel's NAT floor: the first ClusterIP through a static DNAT and masquerade
    // (connections made, so the two rules were loaded and translated).
    let floor = stdout
        .lines()
        .find(|l| l.contains("through a static DNAT and masquerade"))
        .unwrap_or_default();
    assert!(
        floor.contains(" µs (× ") && floor.contains("(kernel NAT floor)"),
        "{floor}"
    );
    // Correctness, not speed: every churned Service ends on its newest endpoint.
    let churn = stdout
        .lines()
        .find(|l| l.contains("every change programmed"))
        .unwrap_or_default();
    let counted: Vec<&str> = churn
        .split('|')
        .nth(4)
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    assert!(
        counted.len() >= 3 && counted[0] == counted[2] && counted[1] == "of",
        "{churn}"
    );
}
