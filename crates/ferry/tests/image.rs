//! Ferry's container image, built as a user builds it (`deploy/image/build`: mmdebstrap and
//! umoci, no container runtime), here with this test build's binary, then unpacked and run:
//! its configuration starts `ferry run`, its tools (nft, iptables, ipset, conntrack) run, and
//! `ferry run` from the image's root file system, in a network namespace of the test's own,
//! programs the example cluster with the image's `nft`.
//!
//! Needs root, Debian's mirror (mmdebstrap downloads the packages), skopeo, and ~30 s.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ferry_lab::netns::in_private_netns;

const FERRY: &str = env!("CARGO_BIN_EXE_ferry");

fn repo() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

fn run(cmd: &mut Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?}: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

#[test]
#[ignore = "needs root: network namespaces"]
fn the_image_built_without_a_container_runtime_runs_ferry_with_its_own_tools() {
    let out = tempfile::tempdir().expect("temporary folder");
    let built = run(Command::new(repo().join("deploy/image/build"))
        .args(["--binary", FERRY, "--out"])
        .arg(out.path()));
    println!("{built}");
    let archive = out.path().join("ferry-0.1.0.oci.tar");
    assert!(archive.is_file(), "no {}", archive.display());

    // What a push reads (skopeo copy oci-archive:… docker://…).
    let seen = run(Command::new("skopeo")
        .args(["inspect", "--config"])
        .arg(format!("oci-archive:{}", archive.display())));
    assert!(
        seen.contains("/usr/local/bin/ferry"),
        "skopeo inspect --config:\n{seen}"
    );

    let bundle = out.path().join("bundle");
    let layout = format!("{}:0.1.0", out.path().join("oci").display());
    run(Command::new("umoci")
        .args(["unpack", "--image", &layout])
        .arg(&bundle));
    let config: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(bundle.join("config.json")).expect("runtime config"),
    )
    .expect("runtime config JSON");
    assert_eq!(
        config["process"]["args"],
        serde_json::json!(["/usr/local/bin/ferry", "run"]),
        "the image runs `ferry run`"
    );

    let rootfs = bundle.join("rootfs");
    let chroot = |args: &[&str]| run(Command::new("chroot").arg(&rootfs).args(args));
    assert!(chroot(&["/usr/local/bin/ferry", "version"]).contains("ferry"));
    // kube-proxy's DaemonSet's command, through the link.
    assert!(chroot(&["/usr/local/bin/kube-proxy", "--version"]).contains("ferry"));
    for tool in [
        "nft",
        "iptables-nft-restore",
        "iptables-legacy-restore",
        "ipset",
        "conntrack",
    ] {
        chroot(&[tool, "--version"]);
    }

    // `ferry run` from the image, on the example cluster, in a namespace of its own.
    let manifests = rootfs.join("manifests");
    std::fs::create_dir(&manifests).expect("manifests folder");
    for entry in std::fs::read_dir(repo().join("examples/seed")).expect("examples/seed") {
        let path = entry.expect("entry").path();
        std::fs::copy(&path, manifests.join(path.file_name().expect("name"))).expect("copy");
    }
    let rootfs = rootfs.display().to_string();
    in_private_netns(move || {
        // A private mount namespace for the image's /proc; chroot into the image.
        let script = format!(
            "mount -t proc proc {rootfs}/proc && exec chroot {rootfs} /usr/local/bin/ferry run \
             --manifests /manifests --hostname-override k8s-node2 --cluster-cidr 192.168.0.0/16"
        );
        let mut ferry = Command::new("unshare")
            .args(["--mount", "--propagation", "private", "sh", "-c", &script])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the image's ferry");
        let deadline = Instant::now() + Duration::from_secs(30);
        let table = loop {
            let out = Command::new("nft")
                .args(["list", "table", "ip", "ferry"])
                .output()
                .expect("nft");
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            if text.contains("10.96.198.86") || Instant::now() > deadline {
                break text;
            }
            std::thread::sleep(Duration::from_millis(200));
        };
        let _ = ferry.kill();
        let _ = ferry.wait();
        assert!(
            table.contains("10.96.198.86"),
            "the image's ferry never programmed the example's ClusterIP:\n{table}"
        );
    });
}
