//! `ferry rules` and `ferry explain` on a dual-stack cluster (no root needed).

use std::path::Path;
use std::process::Command;

const FERRY: &str = env!("CARGO_BIN_EXE_ferry");

fn golden(case: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../ferry-compile/tests/golden")
        .join(case)
        .display()
        .to_string()
}

fn ferry(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(FERRY).args(args).output().expect("run ferry");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

const CIDRS: &str = "10.244.0.0/16,fd00:10:244::/48";

fn rules(mode: &str) -> String {
    let dir = golden("dual-stack");
    let (code, out, err) = ferry(&[
        "rules",
        "--manifests",
        &dir,
        "--hostname-override",
        "node-a",
        "--cluster-cidr",
        CIDRS,
        "--proxy-mode",
        mode,
        // The golden files hold the compiler's default scope (the primary IPs); iptables mode's
        // own default is every local address (upstream's), so ask for the primary IPs.
        "--nodeport-addresses",
        "primary",
    ]);
    assert_eq!(code, 0, "{err}");
    out
}

#[test]
fn rules_print_both_families_tables_as_the_golden_files_hold() {
    let dir = golden("dual-stack");
    let read = |f: &str| std::fs::read_to_string(Path::new(&dir).join(f)).expect("golden");
    assert_eq!(
        rules("nftables"),
        format!("{}{}", read("node-a.nft"), read("node-a.ip6.nft"))
    );
    // The golden files hold iptables mode's localhost NodePorts too (its default, with
    // nodePortAddresses unset); `primary` leaves loopback out, as upstream, so they are off here.
    let without_localhost = |text: String| -> String {
        text.lines()
            .filter(|l| {
                !l.contains("localhost NodePorts: served in user space by Ferry")
                    // The nfacct counting rule of each localhost NodePort.
                    && !l.contains("localhost NodePort\" ")
            })
            .map(|l| format!("{l}\n"))
            .collect()
    };
    assert_eq!(
        rules("iptables"),
        without_localhost(format!(
            "{}# IPv6 rules: ip6tables-restore --noflush input\n{}",
            read("node-a.iptables"),
            read("node-a.ip6tables")
        ))
    );
}

#[test]
fn rules_of_an_ipv4_only_cluster_have_no_ipv6_table() {
    let dir = golden("seed-cluster");
    let (code, out, err) = ferry(&[
        "rules",
        "--manifests",
        &dir,
        "--hostname-override",
        "k8s-node2",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(out.starts_with("table ip ferry {"), "{out}");
    assert!(!out.contains("table ip6"), "{out}");
}

#[test]
fn explain_follows_an_ipv6_packet_and_refuses_mixed_families() {
    let dir = golden("dual-stack");
    let base = [
        "explain",
        "--manifests",
        &dir,
        "--node",
        "node-a",
        "--cluster-cidr",
        CIDRS,
    ];
    let mut args = base.to_vec();
    args.extend(["--from", "fd00:10:244:1::9", "--to", "[fd00:10:96::10]:80"]);
    let (code, out, err) = ferry(&args);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.starts_with("fd00:10:244:1::9 → [fd00:10:96::10]:80/tcp on node node-a"),
        "{out}"
    );
    assert!(out.contains("from: a pod (in fd00:10:244::/48)"), "{out}");
    assert!(out.contains("+ [fd00:10:244:2::5]:8080 on node-b"), "{out}");
    let mut mixed = base.to_vec();
    mixed.extend(["--from", "10.244.1.9", "--to", "[fd00:10:96::10]:80"]);
    let (code, _, err) = ferry(&mixed);
    assert_eq!(code, 64, "{err}");
    assert!(err.contains("different IP families"), "{err}");
}
