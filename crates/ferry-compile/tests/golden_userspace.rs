//! The userspace mode's golden files (`tests/golden/<case>/<node>.userspace.nft`, written by
//! `tests/golden.rs` from `ferry rules`' renderer: the redirect table, then the proxy-port
//! table as `#` comments) load with `nft -f`, each in a throw-away network namespace.

use std::path::Path;
use std::process::Command;

#[test]
#[ignore = "needs root: network namespaces"]
fn userspace_golden_files_load_with_nft() {
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let mut files: Vec<_> = std::fs::read_dir(&golden)
        .expect("golden dir")
        .flat_map(|case| std::fs::read_dir(case.expect("case").path()).expect("case dir"))
        .map(|f| f.expect("file").path())
        .filter(|p| p.to_string_lossy().ends_with(".userspace.nft"))
        .collect();
    files.sort();
    assert!(files.len() >= 10, "{files:?}");
    for path in files {
        // A network namespace of its own for each file, gone when nft exits.
        let out = Command::new("unshare")
            .args(["--net", "nft", "-f"])
            .arg(&path)
            .output()
            .expect("run unshare --net nft");
        assert!(
            out.status.success(),
            "{}: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
