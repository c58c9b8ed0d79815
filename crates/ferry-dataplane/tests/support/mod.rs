//! Helpers shared by the kernel tests: a private network namespace per test, and `nft`.

use std::process::Command;

/// Runs `f` on a thread of its own in a new network namespace (gone when the thread ends, also
/// when `f` panics). Kernel tests are `#[ignore = "needs root: network namespaces"]`; run
/// without root (with `--include-ignored`) they fail here.
pub fn in_new_netns(f: impl FnOnce() + Send + 'static) {
    assert!(
        nix::unistd::geteuid().is_root(),
        "needs root (network namespaces): run the ignored tests as root, as CI does"
    );
    std::thread::spawn(move || {
        nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET).expect("unshare");
        f();
    })
    .join()
    .expect("test thread");
}

/// `nft ARGS` in the current namespace; its output (panics when nft fails).
pub fn nft(args: &[&str]) -> String {
    let out = Command::new("nft").args(args).output().expect("nft");
    assert!(
        out.status.success(),
        "nft {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}
