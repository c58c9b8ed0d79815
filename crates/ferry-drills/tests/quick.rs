//! Every drill in its short mode (`ferry-drills --quick`), as CI runs them: a broken promise
//! fails the test with the drill's table.

use std::path::PathBuf;
use std::process::Command;

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
