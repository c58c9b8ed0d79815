//! The command line: exit codes, messages, `ferry rules` without root.

use std::path::Path;
use std::process::Command;

const FERRY: &str = env!("CARGO_BIN_EXE_ferry");

fn seed() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/seed")
        .display()
        .to_string()
}

/// Runs ferry. When this test runs as root, every command but `rules` and `explain` runs in a
/// network namespace of its own (`unshare --net`): should a flag these tests expect to be
/// refused ever be accepted, or a kube-proxy command line without subcommand (which is `ferry
/// run`) start the agent, it programs that throw-away namespace, never this machine's. `ferry
/// rules` and `ferry explain` run as `nobody` (`setpriv`): they only render, and must work
/// without privileges.
fn ferry(args: &[&str]) -> (i32, String, String) {
    let root = nix::unistd::geteuid().is_root();
    let mut cmd = match args.first() {
        Some(&"rules" | &"explain") if root => {
            let mut cmd = Command::new("setpriv");
            cmd.args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--inh-caps=-all",
                "--",
                FERRY,
            ]);
            cmd
        }
        _ if root => {
            let mut cmd = Command::new("unshare");
            cmd.args(["--net", "--", FERRY]);
            cmd
        }
        _ => Command::new(FERRY),
    };
    let out = cmd.args(args).output().expect("run ferry");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_flags_exit_64_with_one_message_naming_the_flag() {
    let seed = seed();
    for (args, flag) in [
        (
            vec!["run", "--manifests", &seed, "--cluster-cidr", "10.0.0.1"],
            "--cluster-cidr",
        ),
        (
            vec!["run", "--manifests", &seed, "--proxy-mode", "warp"],
            "--proxy-mode",
        ),
        (
            vec![
                "run",
                "--manifests",
                &seed,
                "--nodeport-addresses",
                "nonsense",
            ],
            "--nodeport-addresses",
        ),
        (
            vec!["run", "--manifests", &seed, "--masquerade-bit", "40"],
            "--masquerade-bit",
        ),
        (
            vec!["run", "--manifests", &seed, "--sync-period", "often"],
            "--sync-period",
        ),
        (
            vec![
                "rules",
                "--manifests",
                &seed,
                "--config",
                "/nonexistent.yaml",
            ],
            "--config",
        ),
        (
            vec!["run", "--manifests", &seed, "--iptables-backend", "ebpf"],
            "--iptables-backend",
        ),
        (vec!["run", "--no-such-flag"], "--no-such-flag"),
        (vec!["run"], "--manifests"),
        // A typo on a restart must not program an empty table: a missing PATH is fatal.
        (
            vec!["run", "--manifests", "/nope"],
            "--manifests: /nope: No such file or directory",
        ),
        (
            vec!["rules", "--manifests", "/nope"],
            "--manifests: /nope: No such file or directory",
        ),
    ] {
        let (code, _, stderr) = ferry(&args);
        assert_eq!(code, 64, "{args:?}: {stderr}");
        assert!(stderr.contains(flag), "{args:?}: {stderr}");
    }
}

#[test]
fn a_bad_config_file_value_exits_64_naming_file_and_field() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("kube-proxy.yaml");
    std::fs::write(
        &cfg,
        "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nclusterCIDR: banana\n",
    )
    .expect("write config");
    let cfg = cfg.display().to_string();
    let (code, _, stderr) = ferry(&["rules", "--manifests", &seed(), "--config", &cfg]);
    assert_eq!(code, 64, "{stderr}");
    assert!(stderr.contains("kube-proxy.yaml: clusterCIDR"), "{stderr}");
}

#[test]
fn rules_prints_the_ruleset_for_a_node_without_root() {
    let (code, stdout, stderr) = ferry(&[
        "rules",
        "--manifests",
        &seed(),
        "--hostname-override",
        "k8s-node1",
        "--cluster-cidr",
        "192.168.0.0/16",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.starts_with("table ip ferry {"), "{stdout}");
    assert!(
        stdout.contains("tcp . 32223 comment \"dev/url-analysis:http\" : goto nodeport-"),
        "{stdout}"
    );
    assert!(
        stdout.contains("10.96.198.86 . tcp . 8080 . 0 : 192.168.169.166 . 56010"),
        "{stdout}"
    );
    let (_, again, _) = ferry(&[
        "rules",
        "--manifests",
        &seed(),
        "--hostname-override",
        "k8s-node1",
        "--cluster-cidr",
        "192.168.0.0/16",
    ]);
    assert_eq!(stdout, again, "deterministic");
}

#[test]
fn explain_needs_no_privileges_in_any_mode() {
    for (mode, label) in [("nftables", "nft: "), ("iptables", "iptables: ")] {
        let (code, stdout, stderr) = ferry(&[
            "explain",
            "--manifests",
            &seed(),
            "--node",
            "k8s-node1",
            "--from",
            "10.1.1.100",
            "--to",
            "10.1.1.17:32223",
            "--cluster-cidr",
            "192.168.0.0/16",
            "--proxy-mode",
            mode,
        ]);
        assert_eq!(code, 0, "{mode}: {stderr}");
        assert!(stdout.contains(label), "{mode}: {stdout}");
        assert!(stdout.contains("verdict: FORWARDED"), "{mode}: {stdout}");
    }
}

#[test]
fn explain_of_an_unknown_node_exits_64_listing_the_manifests_nodes() {
    let seed = seed();
    let base = [
        "explain",
        "--manifests",
        &seed,
        "--cluster-cidr",
        "192.168.0.0/16",
    ];
    let mut args = base.to_vec();
    args.extend([
        "--node",
        "k8s-nod2",
        "--from",
        "10.1.1.100",
        "--to",
        "10.1.1.9:32223",
    ]);
    let (code, out, err) = ferry(&args);
    assert_eq!(code, 64, "{err}");
    assert!(out.is_empty(), "{out}");
    assert_eq!(
        err,
        "ferry: --node: no Node named \"k8s-nod2\" in the manifests; they define k8s-master, \
         k8s-node1, k8s-node2 (did you mean \"k8s-node2\"?)\n"
    );
    let mut live = base.to_vec();
    live.extend([
        "--node",
        "k8s-node2",
        "--from",
        "10.1.1.100",
        "--to",
        "10.1.1.9:32223",
    ]);
    live.extend(["--live", "--node-address", "10.1.1.19"]);
    let (code, _, err) = ferry(&live);
    assert_eq!(code, 64, "{err}");
    assert!(
        err.starts_with("ferry: --node-address: not with --live"),
        "{err}"
    );
}

#[test]
fn explain_takes_further_node_addresses_for_node_ports() {
    let seed = seed();
    let mut args = vec!["explain", "--manifests", &seed, "--node", "k8s-node2"];
    args.extend(["--from", "10.1.1.100", "--to", "10.1.1.19:32223"]);
    args.extend(["--cluster-cidr", "192.168.0.0/16"]);
    let (code, out, err) = ferry(&args);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("10.1.1.19 is not an address of node k8s-node2"),
        "{out}"
    );
    args.extend(["--node-address", "10.1.1.19"]);
    let (code, out, err) = ferry(&args);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("10.1.1.19 is an address of this node, but NodePort 32223/tcp"),
        "{out}"
    );
    args.extend(["--nodeport-addresses", "10.1.1.0/24"]);
    let (code, out, err) = ferry(&args);
    assert_eq!(code, 0, "{err}");
    assert!(out.contains("verdict: FORWARDED"), "{out}");
}

#[test]
fn rules_reports_bad_objects_and_renders_the_rest() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("bad.yaml"),
        "apiVersion: v1\nkind: Service\nmetadata: {name: broken, namespace: dev}\nspec:\n  clusterIP: 10.96.0.99\n  ports: [{port: 70000}]\n---\n\
apiVersion: v1\nkind: Service\nmetadata: {name: fine, namespace: dev}\nspec:\n  clusterIP: 10.96.0.98\n  ports: [{port: 80}]\n",
    )
    .expect("write");
    let path = dir.path().display().to_string();
    let (code, stdout, stderr) =
        ferry(&["rules", "--manifests", &path, "--hostname-override", "n1"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stderr.contains("Service dev/broken") && stderr.contains("spec.ports[0].port"),
        "{stderr}"
    );
    assert!(
        stdout.contains("10.96.0.98 . tcp . 80 comment \"dev/fine\" : goto reject-chain"),
        "{stdout}"
    );
    assert!(!stdout.contains("10.96.0.99"), "{stdout}");
}

#[test]
fn rules_in_iptables_mode_print_iptables_restore_input_with_upstreams_chains() {
    let seed = seed();
    let (code, stdout, stderr) = ferry(&[
        "rules",
        "--manifests",
        &seed,
        "--hostname-override",
        "k8s-node2",
        "--proxy-mode",
        "iptables",
        "--cluster-cidr",
        "192.168.0.0/16",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.starts_with("*filter\n"), "{stdout}");
    for needle in [
        "-A KUBE-SERVICES -m comment --comment \"dev/url-analysis:http cluster IP\"",
        "-j KUBE-NODEPORTS",
        ":KUBE-SVC-AYLZKIJBQT7UVAZQ - [0:0]",
        "-j MASQUERADE --random-fully",
        ":KUBE-PROXY-CANARY - [0:0]",
    ] {
        assert!(stdout.contains(needle), "{needle}: {stdout}");
    }
}

#[test]
fn bad_server_addresses_exit_64_naming_the_flag() {
    let seed = seed();
    for flag in ["--healthz-bind-address", "--metrics-bind-address"] {
        // (An IP alone is fine: kube-proxy adds the default port.)
        let (code, _, stderr) = ferry(&["run", "--manifests", &seed, flag, "nowhere"]);
        assert_eq!(code, 64, "{flag}: {stderr}");
        assert!(stderr.contains(flag), "{stderr}");
    }
}

#[test]
fn check_accepts_a_valid_config_and_manifests() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("kube-proxy.yaml");
    std::fs::write(
        &cfg,
        "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nhostnameOverride: k8s-node2\nclusterCIDR: 192.168.0.0/16\nhealthzBindAddress: 0.0.0.0:10256\n",
    )
    .expect("write config");
    let cfg = cfg.display().to_string();
    let (code, stdout, stderr) = ferry(&["check", "--config", &cfg, "--manifests", &seed()]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(stdout.contains("node k8s-node2"), "{stdout}");
    assert!(stdout.trim_end().ends_with("ferry check: ok"), "{stdout}");
}

#[test]
fn check_prints_every_problem_and_exits_1() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(
        dir.path().join("bad.yaml"),
        "apiVersion: v1\nkind: Service\nmetadata: {name: broken, namespace: dev}\nspec:\n  clusterIP: 10.96.0.99\n  ports: [{port: 70000}]\n---\n\
apiVersion: v1\nkind: Service\nmetadata: {name: worse, namespace: dev}\nspec:\n  clusterIP: 10.96.0.300\n  ports: [{port: 80}]\n---\n\
apiVersion: v1\nkind: Service\nmetadata: {name: fine, namespace: dev}\nspec:\n  clusterIP: 10.96.0.98\n  ports: [{port: 80}]\n",
    )
    .expect("write");
    let path = dir.path().display().to_string();
    let (code, stdout, _) = ferry(&["check", "--manifests", &path, "--hostname-override", "n1"]);
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.contains("Service dev/broken: spec.ports[0].port"),
        "{stdout}"
    );
    assert!(
        stdout.contains("Service dev/worse: spec.clusterIP"),
        "{stdout}"
    );
    assert!(stdout.contains("1 valid objects"), "{stdout}");
    assert!(stdout.contains("ferry check: 2 problem(s)"), "{stdout}");

    let cfg = dir.path().join("kube-proxy.yaml");
    std::fs::write(
        &cfg,
        "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmetricsBindAddress: nowhere\n",
    )
    .expect("write config");
    let cfg = cfg.display().to_string();
    let (code, stdout, _) = ferry(&["check", "--config", &cfg]);
    assert_eq!(code, 1, "{stdout}");
    assert!(
        stdout.contains("kube-proxy.yaml: metricsBindAddress"),
        "{stdout}"
    );
}

fn data(file: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(file)
        .display()
        .to_string()
}

#[test]
fn kubeadms_configmap_checks_clean_as_kubectl_prints_it() {
    let cm = data("kubeadm-kube-proxy-configmap.yaml");
    let (code, stdout, stderr) = ferry(&[
        "check",
        "--config",
        &cm,
        "--hostname-override",
        "k8s-node2",
        "--manifests",
        &seed(),
    ]);
    assert_eq!(code, 0, "{stdout}{stderr}");
    // The one warning is kube-proxy 1.37's about the empty mode (kubeadm 1.37 writes
    // `mode: iptables`).
    let warnings: Vec<&str> = stdout.lines().filter(|l| l.contains("warning")).collect();
    assert!(
        warnings.len() == 1 && warnings[0].contains("no proxy mode given"),
        "{stdout}"
    );
    // kubeadm's `mode: ""` is iptables mode for kube-proxy, so for Ferry; check says so and
    // names what differs from kube-proxy with this file.
    assert!(
        stdout.contains("node k8s-node2, iptables mode (mode \"\" in ")
            && stdout.contains("kube-proxy's default, as kube-proxy runs it)"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "differs from kube-proxy with the same configuration: NodePorts on 127.0.0.1"
        ),
        "{stdout}"
    );
}

#[test]
fn a_kube_proxy_command_line_without_subcommand_writes_its_config_and_exits() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = dir.path().join("written.yaml");
    let cm = data("kubeadm-kube-proxy-configmap.yaml");
    // A copied DaemonSet's args, plus kube-proxy's --write-config-to (nothing is run).
    let (code, _, stderr) = ferry(&[
        &format!("--config={cm}"),
        "--hostname-override=k8s-node2",
        "--v=2",
        "--masquerade-all=true",
        "--logtostderr",
        &format!("--write-config-to={}", out.display()),
    ]);
    assert_eq!(code, 0, "{stderr}");
    let written = std::fs::read_to_string(&out).expect("written");
    for line in [
        "kind: KubeProxyConfiguration",
        "hostnameOverride: k8s-node2",
        "healthzBindAddress: 0.0.0.0:10256",
        "clusterCIDR: 10.244.0.0/16",
    ] {
        assert!(written.contains(line), "{line}:\n{written}");
    }
    let (code, stdout, _) = ferry(&["version"]);
    assert_eq!(code, 0);
    assert!(stdout.starts_with("ferry v"), "{stdout}");
}

#[test]
fn explain_hints_at_a_skipped_document_when_the_destination_is_not_a_service() {
    let dir = tempfile::tempdir().expect("tempdir");
    for entry in std::fs::read_dir(seed()).expect("seed") {
        let path = entry.expect("entry").path();
        std::fs::copy(&path, dir.path().join(path.file_name().expect("name"))).expect("copy");
    }
    std::fs::write(
        dir.path().join("typo.yaml"),
        "apiVersion: v1\nkind: Servce\nmetadata: {name: d, namespace: dev}\nspec:\n  clusterIP: 10.96.0.77\n  ports: [{port: 80}]\n",
    )
    .expect("write");
    let manifests = dir.path().display().to_string();
    let (code, stdout, stderr) = ferry(&[
        "explain",
        "--manifests",
        &manifests,
        "--node",
        "k8s-node2",
        "--from",
        "10.1.1.100",
        "--to",
        "10.96.0.77:80",
        "--cluster-cidr",
        "192.168.0.0/16",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("NOT A SERVICE"), "{stdout}");
    assert!(
        stdout.contains("hint: ")
            && stdout.contains("Servce dev/d: kind: skipped: \"Servce\" is not a kind Ferry reads (did you mean Service?)"),
        "{stdout}"
    );
}

#[test]
fn a_missing_kubeconfig_named_by_the_config_file_is_said_to_come_from_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = dir.path().join("config.conf");
    std::fs::write(
        &cfg,
        "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n\
         clientConnection:\n  kubeconfig: /nonexistent/kubeconfig.conf\nclusterCIDR: 10.0.0.0/8\n\
         healthzBindAddress: 127.0.0.1:0\nmetricsBindAddress: 127.0.0.1:0\n",
    )
    .expect("write");
    let cfg = cfg.display().to_string();
    let (code, _, stderr) = ferry(&["run", "--config", &cfg, "--hostname-override", "n1"]);
    assert_eq!(code, 64, "{stderr}");
    assert!(
        stderr.contains(&format!(
            "ferry: clientConnection.kubeconfig of --config {cfg}: /nonexistent/kubeconfig.conf: "
        )) && !stderr.contains("--kubeconfig /nonexistent"),
        "{stderr}"
    );
}
