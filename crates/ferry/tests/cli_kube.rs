//! `ferry run` without manifests: the Kubernetes API source's configuration errors exit 64 with
//! one clear message; an API server that does not answer yet is waited for. (Running against a
//! fake API server in the example cluster is the lab test `lab_kube.rs`.)
//!
//! Why the fake API server: it starts answering at a moment the test chooses, and it serves
//! objects the test writes in place (no kubectl, no controller) in a millisecond, so the
//! flag and configuration cases run without the real control plane's binaries. With the real
//! one: `kube_real.rs`.

#[path = "support/node_ns.rs"]
mod node_ns;

use std::net::TcpListener;
use std::process::Command;

use ferry_lab::LabProcess;
use ferry_testkit::{objects, FakeApiServer};

const FERRY: &str = env!("CARGO_BIN_EXE_ferry");
/// The API server's port in the test's namespace (nothing else listens there).
const PORT: u16 = 6443;

/// Runs ferry outside any pod (no in-cluster service account environment). As root, in a
/// network namespace of its own (`unshare --net`): should the agent ever start (a kubeconfig
/// found on this machine, a flag accepted), it programs that throw-away namespace, never this
/// machine's.
fn ferry(args: &[&str]) -> (i32, String) {
    let mut cmd = if nix::unistd::geteuid().is_root() {
        let mut cmd = Command::new("unshare");
        cmd.args(["--net", "--", FERRY]);
        cmd
    } else {
        Command::new(FERRY)
    };
    let out = cmd
        .args(args)
        .env_remove("KUBERNETES_SERVICE_HOST")
        .env_remove("KUBERNETES_SERVICE_PORT")
        .output()
        .expect("run ferry");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn run_without_manifests_or_an_api_server_exits_64_saying_what_to_pass() {
    let (code, stderr) = ferry(&["run", "--hostname-override", "k8s-node2"]);
    assert_eq!(code, 64, "{stderr}");
    assert!(
        stderr.contains("no Kubernetes API server")
            && stderr.contains("--kubeconfig")
            && stderr.contains("--manifests"),
        "{stderr}"
    );
}

/// An API server that is not up yet is waited for, as kube-proxy's informers do: `ferry run`
/// keeps running and warns about each failed attempt, naming the URL; `/healthz` answers as
/// upstream's does while the proxy starts (healthy: nothing is queued yet). Once a fake API
/// server listens on that port, Ferry connects, lists and does its first sync. All in a
/// namespace of the test's own (the server's socket is made in there too).
#[test]
#[ignore = "needs root: network namespaces"]
fn an_unreachable_master_is_waited_for_then_synced_from() {
    let ns = node_ns::NodeNs::new("ku");
    // Nothing listens on the port in the new namespace yet: connection refused.
    let bind = || ferry_lab::netns::run_in(&ns.name, || TcpListener::bind(("127.0.0.1", PORT)));
    let url = format!("http://127.0.0.1:{PORT}");
    let args = [
        "run",
        "--master",
        &url,
        "--hostname-override",
        node_ns::NODE,
    ];
    let log = ns.dir.path().join("ferry.log");
    // Dropped before `ns` (declared after it): stops ferry, also when an assert fails.
    let ferry = LabProcess::spawn("ferry", &ns.name, node_ns::FERRY, args, &log).expect("spawn");
    let warning = format!("cannot reach the Kubernetes API server at {url}");
    node_ns::wait_log(&ferry, &warning, 2);
    assert!(ferry.log().contains("trying again in"), "{}", ferry.log());
    let health = ns.run(
        "curl",
        &[
            "-s",
            "-w",
            "\n%{http_code}",
            "http://127.0.0.1:10256/healthz",
        ],
    );
    let health = String::from_utf8_lossy(&health.stdout).into_owned();
    assert!(
        health.ends_with("\n200"),
        "/healthz while waiting: {health}"
    );

    let listener = bind().expect("enter the namespace").expect("bind the port");
    let server = FakeApiServer::start(listener).expect("fake API server");
    server.apply(objects::service("dev", "web", "10.96.0.10", 80, 8080));
    server.apply(objects::endpoint_slice(
        "dev",
        "web-abc",
        "web",
        8080,
        &[("192.168.169.166", true, node_ns::NODE)],
    ));
    server.apply(objects::node(
        node_ns::NODE,
        "10.1.1.9",
        "192.168.169.128/26",
    ));
    // The back-off may have grown to 4 s or 8 s meanwhile; wait_log allows 30 s.
    node_ns::wait_log(&ferry, "connected to the Kubernetes API", 1);
    let log = node_ns::wait_log(&ferry, "synced rules", 1);
    assert!(log.contains("listed the Kubernetes API"), "{log}");
}

#[test]
fn bad_kubeconfig_master_or_source_combinations_exit_64_naming_the_flag() {
    for (args, needle) in [
        (
            vec!["run", "--kubeconfig", "/nonexistent/kubeconfig"],
            "--kubeconfig /nonexistent/kubeconfig",
        ),
        (vec!["run", "--master", "http://[oops"], "--master"),
        (
            vec![
                "run",
                "--manifests",
                "/tmp",
                "--master",
                "http://127.0.0.1:1",
            ],
            "--manifests",
        ),
        (
            vec!["rules", "--master", "http://127.0.0.1:1"],
            "the Kubernetes API server did not answer within 10s",
        ),
    ] {
        let (code, stderr) = ferry(&args);
        assert_eq!(code, 64, "{args:?}: {stderr}");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
    }
}

/// `ferry rules` and `ferry explain` without `--manifests` read the API server as the agent
/// does (`--master`, or the kubeconfig a `--config` file's `clientConnection.kubeconfig`
/// names): the same Services, EndpointSlices and Node. The fake API server listens inside the
/// test's namespace, and ferry runs in there.
#[test]
#[ignore = "needs root: network namespaces"]
fn rules_and_explain_read_the_objects_the_agent_reads_from_the_api_server() {
    let ns = node_ns::NodeNs::new("kr");
    let listener = ferry_lab::netns::run_in(&ns.name, || TcpListener::bind(("127.0.0.1", PORT)))
        .expect("enter the namespace")
        .expect("bind the port");
    let server = FakeApiServer::start(listener).expect("fake API server");
    server.apply(objects::service("dev", "web", "10.96.0.10", 80, 8080));
    server.apply(objects::endpoint_slice(
        "dev",
        "web-abc",
        "web",
        8080,
        &[("192.168.169.166", true, node_ns::NODE)],
    ));
    server.apply(objects::node(
        node_ns::NODE,
        "10.1.1.9",
        "192.168.169.128/26",
    ));
    let url = format!("http://127.0.0.1:{PORT}");
    let (code, stdout, stderr) = ns.ferry(&[
        "rules",
        "--master",
        &url,
        "--hostname-override",
        node_ns::NODE,
        "--cluster-cidr",
        "192.168.0.0/16",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("10.96.0.10 . tcp . 80 comment \"dev/web:http\""),
        "{stdout}"
    );

    let kubeconfig = ns.dir.path().join("kubeconfig.conf");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {url}\n\
             contexts:\n- name: c\n  context:\n    cluster: c\n    user: u\n\
             current-context: c\nusers:\n- name: u\n  user: {{}}\n"
        ),
    )
    .expect("write kubeconfig");
    let config = ns.dir.path().join("config.conf");
    std::fs::write(
        &config,
        format!(
            "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\n\
             mode: nftables\nclusterCIDR: 192.168.0.0/16\nclientConnection:\n  kubeconfig: {}\n",
            kubeconfig.display()
        ),
    )
    .expect("write config");
    let config = config.display().to_string();
    let (code, stdout, stderr) = ns.ferry(&[
        "explain",
        "--config",
        &config,
        "--node",
        node_ns::NODE,
        "--from",
        "10.1.1.100",
        "--to",
        "10.96.0.10:80",
    ]);
    assert_eq!(code, 0, "{stderr}");
    assert!(
        stdout.contains("Service dev/web") && stdout.contains("192.168.169.166:8080"),
        "{stdout}"
    );
}
