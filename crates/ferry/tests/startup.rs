//! `ferry run`'s start-up and failure behaviour, each with the input that broke it, in a
//! network namespace of its own (never this machine's): a missing tool or capability stops it
//! at once with one line; a failing sync is retried with back-off and logged at a limited rate,
//! the last good rules staying; `--manifests` that disappear keep the last good rules until
//! they return; an empty directory is no Services; kube-proxy's leftovers are named with what
//! Ferry does about them, and removed without holding up changes.

#[path = "support/node_ns.rs"]
mod node_ns;

use std::time::{Duration, Instant};

use node_ns::{seed, seed_copy, tools_dir, wait_exit, wait_log, NodeNs};

/// The error line of a run that stopped at start.
fn stopped_with(
    ns: &NodeNs,
    extra: &[&str],
    path: Option<&std::path::Path>,
    prefix: &[&str],
) -> String {
    let mut ferry = ns.spawn_ferry(&seed(), extra, path, prefix);
    let code = wait_exit(&mut ferry);
    let log = ferry.log();
    assert_eq!(code, 1, "{log}");
    assert!(!log.contains("synced rules"), "{log}");
    let errors: Vec<&str> = log.lines().filter(|l| l.contains("ERROR")).collect();
    assert_eq!(errors.len(), 1, "one line says why:\n{log}");
    errors[0].to_owned()
}

#[test]
#[ignore = "needs root: network namespaces"]
fn a_mode_whose_tool_is_missing_stops_at_start_naming_the_package() {
    let ns = NodeNs::new("tool");
    let empty = tools_dir(ns.dir.path(), &[]);
    let line = stopped_with(&ns, &[], Some(&empty), &[]);
    assert!(
        line.contains(
            "nftables mode needs `nft`, which is not on PATH (Debian/Ubuntu package `nftables`)"
        ),
        "{line}"
    );
    let line = stopped_with(
        &ns,
        &["--proxy-mode", "iptables", "--iptables-backend", "nft"],
        Some(&empty),
        &[],
    );
    assert!(
        line.contains(
            "needs `iptables-nft-restore`, which is not on PATH (Debian/Ubuntu package `iptables`)"
        ),
        "{line}"
    );
    let line = stopped_with(&ns, &["--proxy-mode", "ipvs"], Some(&empty), &[]);
    assert!(
        line.contains("IPVS mode")
            && line.contains("needs `ipset`, which is not on PATH (Debian/Ubuntu package `ipset`)"),
        "{line}"
    );
    // The userspace mode's redirect rules are Ferry's nftables table.
    let line = stopped_with(&ns, &["--proxy-mode", "userspace"], Some(&empty), &[]);
    assert!(
        line.contains(
            "userspace mode needs `nft`, which is not on PATH (Debian/Ubuntu package `nftables`)"
        ),
        "{line}"
    );
}

/// IPVS mode on a kernel without IP_VS (this machine's): one line naming the module. Where the
/// kernel has IPVS (`/proc/net/ip_vs`), there is nothing to check.
#[test]
#[ignore = "needs root: network namespaces"]
fn ipvs_mode_without_ipvs_in_the_kernel_stops_naming_the_module() {
    if std::path::Path::new("/proc/net/ip_vs").exists() {
        return;
    }
    let ns = NodeNs::new("noipvs");
    let line = stopped_with(&ns, &["--proxy-mode", "ipvs"], None, &[]);
    assert!(
        line.contains("the kernel has no IPVS") && line.contains("load the ip_vs module"),
        "{line}"
    );
}

#[test]
#[ignore = "needs root: network namespaces"]
fn a_missing_capability_stops_at_start_naming_it() {
    let ns = NodeNs::new("cap");
    let no_admin = ["setpriv", "--bounding-set=-net_admin"];
    let line = stopped_with(&ns, &[], None, &no_admin);
    assert!(
        line.contains("nftables mode needs CAP_NET_ADMIN")
            && line.contains("capabilities.add: [NET_ADMIN]"),
        "{line}"
    );
    // iptables-legacy talks to the kernel over a raw socket (measured: without CAP_NET_RAW it
    // cannot even read the nat table).
    let no_raw = ["setpriv", "--bounding-set=-net_raw"];
    let legacy = ["--proxy-mode", "iptables", "--iptables-backend", "legacy"];
    let line = stopped_with(&ns, &legacy, None, &no_raw);
    assert!(line.contains("needs CAP_NET_RAW"), "{line}");
    assert!(!line.contains("CAP_NET_ADMIN"), "{line}");
    let userspace = ["--proxy-mode", "userspace"];
    let line = stopped_with(&ns, &userspace, None, &no_admin);
    assert!(
        line.contains("userspace mode needs CAP_NET_ADMIN"),
        "{line}"
    );
}

/// CPU seconds `pid` used so far.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let after_name = stat.rsplit_once(')').map(|(_, s)| s).unwrap_or_default();
    let f: Vec<u64> = after_name
        .split_whitespace()
        .filter_map(|s| s.parse().ok())
        .collect();
    // utime and stime: fields 14 and 15 of stat, 12 and 13 after the name and state.
    (f[10] + f[11]) as f64 / 100.0
}

/// The input that made Ferry log ~5 500 lines a second at 100 % CPU: a sync that keeps
/// failing (here: nft removed after start) with minSyncPeriod under a second.
#[test]
#[ignore = "needs root: network namespaces"]
fn a_failing_sync_backs_off_logs_once_and_keeps_the_last_good_rules() {
    let ns = NodeNs::new("fail");
    let bin = tools_dir(ns.dir.path(), &["nft"]);
    let flags = ["--sync-period", "2s", "--min-sync-period", "0s"];
    let ferry = ns.spawn_ferry(&seed(), &flags, Some(&bin), &[]);
    wait_log(&ferry, "synced rules", 1);
    std::fs::remove_file(bin.join("nft")).expect("remove nft");
    // Periodic rounds only check the kernel (over netlink); emptying a top-level chain makes
    // the check ask for a full sync, which fails without nft, then every retry (full) until
    // nft is back. The service map, and so the rule under test, stays.
    let flush = ns.run("nft", &["flush", "chain", "ip", "ferry", "services"]);
    assert!(flush.status.success(), "{flush:?}");
    let log = wait_log(&ferry, "sync failed", 1);
    let families = log.matches("sync failed").count();
    let pid = ferry.pid().expect("running");
    let (cpu, start) = (cpu_seconds(pid), Instant::now());
    std::thread::sleep(Duration::from_secs(8));
    let used = cpu_seconds(pid) - cpu;
    eprintln!(
        "a failing ferry used {:.3} s of CPU in {:.1} s ({:.2} %)",
        used,
        start.elapsed().as_secs_f64(),
        100.0 * used / start.elapsed().as_secs_f64()
    );
    let log = ferry.log();
    assert_eq!(
        log.matches("sync failed").count(),
        families,
        "retries within the minute are not logged again:\n{log}"
    );
    assert!(
        log.contains("could not run nft: No such file or directory"),
        "{log}"
    );
    assert!(log.contains("retry_in=1s"), "{log}");
    let table = ns.run("nft", &["list", "map", "ip", "ferry", "service-ips"]);
    assert!(
        String::from_utf8_lossy(&table.stdout).contains("10.96.198.86 . tcp . 8080"),
        "the last good rules stay: {table:?}"
    );
    std::os::unix::fs::symlink(node_ns::which("nft"), bin.join("nft")).expect("nft back");
    let log = wait_log(&ferry, "sync succeeded again after", 1);
    assert!(log.contains("synced rules kind=Full"), "{log}");
}

#[test]
#[ignore = "needs root: network namespaces"]
fn manifests_missing_at_start_are_fatal_and_missing_later_keep_the_last_good_rules() {
    let ns = NodeNs::new("gone");
    let (code, _, err) = ns.ferry(&[
        "run",
        "--manifests",
        "/nope",
        "--hostname-override",
        "k8s-node2",
    ]);
    assert_eq!(code, 64, "{err}");
    assert_eq!(
        err,
        "ferry: --manifests: /nope: No such file or directory (os error 2)\n"
    );
    let manifests = seed_copy(ns.dir.path(), "manifests");
    let ferry = ns.spawn_ferry(&manifests, &["--sync-period", "2s"], None, &[]);
    wait_log(&ferry, "synced rules", 1);
    let away = ns.dir.path().join("away");
    std::fs::rename(&manifests, &away).expect("move away");
    let log = wait_log(&ferry, "is missing", 1);
    assert!(
        log.contains("keeping the last good rules (1 Services) until it returns"),
        "{log}"
    );
    let (_, status, _) = ns.ferry(&["status"]);
    assert!(status.contains("source: --manifests"), "{status}");
    assert!(
        status.contains("ClusterIP  dev/url-analysis:http"),
        "{status}"
    );
    assert!(status.contains("kernel: programmed"), "{status}");
    std::fs::rename(&away, &manifests).expect("move back");
    wait_log(&ferry, "the manifests are back", 1);
    let (_, status, _) = ns.ferry(&["status"]);
    assert!(!status.contains("source: "), "{status}");
}

#[test]
#[ignore = "needs root: network namespaces"]
fn an_empty_directory_is_no_services() {
    let ns = NodeNs::new("empty");
    let manifests = ns.dir.path().join("manifests");
    std::fs::create_dir(&manifests).expect("mkdir");
    let ferry = ns.spawn_ferry(&manifests, &[], None, &[]);
    wait_log(&ferry, "synced rules", 1);
    let (code, status, err) = ns.ferry(&["status"]);
    assert_eq!(code, 0, "{err}");
    assert!(status.ends_with("\nno Service to program\n"), "{status}");
    let tables = ns.run("nft", &["list", "tables"]);
    assert!(String::from_utf8_lossy(&tables.stdout).contains("table ip ferry"));
    let copy = seed_copy(ns.dir.path(), "later");
    for f in std::fs::read_dir(&copy).expect("copy") {
        let f = f.expect("entry").path();
        std::fs::rename(&f, manifests.join(f.file_name().expect("name"))).expect("move in");
    }
    wait_log(&ferry, "synced rules", 2);
    let (_, status, _) = ns.ferry(&["status"]);
    assert!(status.contains("dev/url-analysis:http"), "{status}");
}

/// In nftables mode kube-proxy's iptables chains are removed beside the agent: a change made
/// meanwhile is programmed without waiting for the removal. The removal is held up by holding
/// the xtables lock its iptables-legacy tools wait for (a lock file of this test's own).
#[test]
#[ignore = "needs root: network namespaces"]
fn a_change_is_programmed_while_kube_proxys_chains_are_being_removed() {
    use nix::fcntl::{Flock, FlockArg};

    let ns = NodeNs::new("beside");
    for args in [
        ["-t", "nat", "-N", "KUBE-SERVICES"],
        ["-t", "nat", "-N", "KUBE-SVC-OLD"],
    ] {
        let out = ns.run("iptables-legacy", &args);
        assert!(out.status.success(), "{out:?}");
    }
    let lock_file = ns.dir.path().join("xtables.lock");
    let file = std::fs::File::create(&lock_file).expect("lock file");
    let lock = Flock::lock(file, FlockArg::LockExclusive).expect("lock");
    let manifests = seed_copy(ns.dir.path(), "manifests");
    let env = format!("XTABLES_LOCKFILE={}", lock_file.display());
    let ferry = ns.spawn_ferry(&manifests, &[], None, &[&env]);
    wait_log(&ferry, "synced rules", 1);
    std::fs::remove_file(manifests.join("endpoints.yaml")).expect("remove");
    let log = wait_log(&ferry, "synced rules", 2);
    assert!(
        !log.contains("removed what iptables mode left")
            && !log.contains("removing iptables mode's rules failed"),
        "the removal had ended before the change was programmed: {log}"
    );
    drop(lock);
    let log = wait_log(&ferry, "removed what iptables mode left", 1);
    assert!(log.contains("KUBE-SVC-OLD"), "{log}");
    let nat = ns.run("iptables-legacy-save", &["-t", "nat"]);
    assert!(!String::from_utf8_lossy(&nat.stdout).contains("KUBE-SVC-OLD"));
}

/// kube-proxy's nftables table and iptables chains, as its modes leave them.
fn leave_kube_proxys_rules(ns: &NodeNs) {
    let out = ns.run("nft", &["add", "table", "ip", "kube-proxy"]);
    assert!(out.status.success(), "{out:?}");
    for args in [
        ["-t", "nat", "-N", "KUBE-SERVICES"],
        ["-t", "nat", "-N", "KUBE-SVC-OLD"],
    ] {
        let out = ns.run("iptables-nft", &args);
        assert!(out.status.success(), "{out:?}");
    }
}

#[test]
#[ignore = "needs root: network namespaces"]
fn kube_proxys_leftovers_are_named_at_start_with_what_ferry_does_about_them() {
    let ns = NodeNs::new("left");
    leave_kube_proxys_rules(&ns);
    let mut ferry = ns.spawn_ferry(&seed(), &[], None, &[]);
    let log = wait_log(&ferry, "removed what iptables mode left", 1);
    assert!(
        log.contains("kube-proxy's leftovers: table ip kube-proxy (kube-proxy's nftables mode): Ferry leaves it alone")
            && log.contains("remove it once Ferry has synced: nft delete table ip kube-proxy"),
        "{log}"
    );
    assert!(
        log.contains("kube-proxy's leftovers: iptables-nft nat chain KUBE-SERVICES and the KUBE-* chains of kube-proxy's iptables layout: removed after Ferry's first sync (iptables mode's cleanup, as kube-proxy removes the other modes' rules when it starts)"),
        "{log}"
    );
    // Removed after the first sync, not before.
    let synced = log.find("synced rules").expect("synced");
    let removed = log
        .find("removed what iptables mode left")
        .expect("removed");
    assert!(synced < removed, "{log}");
    assert!(
        log.contains("removed what iptables mode left: kube-proxy's iptables-nft nat chains: KUBE-SERVICES, 1 per-service chain (KUBE-SVC-OLD, …)"),
        "each removal is logged at info, saying whose: {log}"
    );
    ferry.stop().expect("stop");
    let tables = String::from_utf8_lossy(&ns.run("nft", &["list", "tables"]).stdout).into_owned();
    assert!(
        tables.contains("table ip kube-proxy"),
        "kube-proxy's table stays: {tables}"
    );
    let nat = ns.run("iptables-nft-save", &["-t", "nat"]);
    assert!(!String::from_utf8_lossy(&nat.stdout).contains("KUBE-SVC-OLD"));

    // In iptables mode the chains are its own: taken over; kube-proxy's nftables tables are
    // another mode's, removed after the first sync as kube-proxy in iptables mode does.
    let ns = NodeNs::new("left2");
    leave_kube_proxys_rules(&ns);
    let iptables = ["--proxy-mode", "iptables", "--iptables-backend", "nft"];
    let ferry = ns.spawn_ferry(&seed(), &iptables, None, &[]);
    let log = wait_log(&ferry, "removed what nftables mode left", 1);
    assert!(
        log.contains("iptables-nft nat chain KUBE-SERVICES and the KUBE-* chains of kube-proxy's iptables layout: iptables mode programs these chains (same names) and takes them over at its first sync")
            && log.contains("removed what nftables mode left: kube-proxy's table ip kube-proxy"),
        "{log}"
    );
}
