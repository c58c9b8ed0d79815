//! The production agent does not link the test lab: `ferry-lab` and `ferry-kube-lab` are
//! dependencies of the `ferry` binary only through its `lab` feature (on by default, off in
//! deploy/image/build). Read from `cargo metadata`'s resolved graph, nothing built.

use std::process::Command;

use serde_json::Value;

const LAB_CRATES: [&str; 2] = ["ferry_lab", "ferry_kube_lab"];

/// The crates the `ferry` package links (normal dependencies, not dev or build ones) when
/// built with `flags`.
fn linked(flags: &[&str]) -> Vec<String> {
    let manifest = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    let out = Command::new(env!("CARGO"))
        .args(["metadata", "--format-version", "1", "--offline", "--locked"])
        // Only this machine's platform: other platforms' crates (Windows') are not downloaded.
        .args(["--filter-platform", &host()])
        .args(["--manifest-path", manifest])
        .args(flags)
        .output()
        .expect("cargo metadata runs");
    assert!(
        out.status.success(),
        "cargo metadata: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: Value = serde_json::from_slice(&out.stdout).expect("cargo metadata's JSON");
    let ferry = meta["packages"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["name"] == "ferry"))
        .and_then(|p| p["id"].as_str())
        .expect("the ferry package")
        .to_owned();
    let node = meta["resolve"]["nodes"]
        .as_array()
        .and_then(|n| n.iter().find(|n| n["id"] == ferry.as_str()))
        .expect("ferry's node in the resolved graph");
    node["deps"]
        .as_array()
        .expect("deps")
        .iter()
        .filter(|dep| {
            dep["dep_kinds"]
                .as_array()
                .is_some_and(|kinds| kinds.iter().any(|k| k["kind"].is_null()))
        })
        .filter_map(|dep| dep["name"].as_str().map(str::to_owned))
        .collect()
}

/// The host's target triple (`rustc -vV`'s `host:` line).
fn host() -> String {
    let out = Command::new("rustc")
        .arg("-vV")
        .output()
        .expect("rustc -vV");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find_map(|l| l.strip_prefix("host: "))
        .expect("rustc -vV names the host")
        .to_owned()
}

#[test]
fn the_agent_without_the_lab_feature_does_not_link_the_lab() {
    let without = linked(&["--no-default-features"]);
    assert!(
        without.iter().any(|d| d == "ferry_dataplane"),
        "{without:?}"
    );
    for lab in LAB_CRATES {
        assert!(
            !without.iter().any(|d| d == lab),
            "{lab} linked: {without:?}"
        );
    }
}

#[test]
fn the_default_build_keeps_ferry_lab() {
    let default = linked(&[]);
    for lab in LAB_CRATES {
        assert!(
            default.iter().any(|d| d == lab),
            "{lab} not linked: {default:?}"
        );
    }
}
