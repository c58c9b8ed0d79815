//! The migration of `docs/src/cluster/migrate.md`, rehearsed under live traffic: a node of a
//! real control plane's cluster runs upstream kube-proxy in iptables mode (kubeadm's default),
//! is moved to Ferry with the page's steps, then rolled back to kube-proxy with its rollback
//! steps. Meanwhile a Pod on that node opens a new connection to a ClusterIP, and a client
//! outside the cluster one to the node's NodePort, every 10 ms, and long-lived keep-alive
//! connections to both ask again every 50 ms (`support/traffic.rs`). The goal, asserted: no
//! failed new connection and no broken long-lived one, in any step.
//!
//! The page's `kubectl` commands are read from the page and run as they are (`worker-1` being
//! the lab's `k8s-master`), against the real API server, on kube-proxy's DaemonSet as kubeadm
//! creates it and on `deploy/` (its ConfigMap's `clusterCIDR` set, as step 2 says). The lab runs
//! no DaemonSet controller and no real kubelet, so the test plays their part: after each
//! command it reads both DaemonSets and the node's labels back from the API server, and runs
//! on the node the proxy whose DaemonSet now schedules there: the one no longer scheduled is
//! stopped (SIGTERM, as the kubelet stops a pod), and after a 2 s pause (the new pod's
//! creation and start) the other one starts. Ferry starts as `deploy/daemonset.yaml`'s pod
//! (`--config` with the ConfigMap, in-cluster credentials); kube-proxy as kubeadm's
//! (`support/kube_proxy.rs`).
//!
//! Needs root and the Kubernetes binaries with kube-proxy: without them it prints
//! `skipped: <test>: <reason>` and passes.

#[path = "support/kube_proxy.rs"]
mod kube_proxy;
#[path = "support/migration.rs"]
mod migration;
#[path = "support/real_cluster.rs"]
mod real_cluster;
#[path = "support/seed.rs"]
mod seed;
#[path = "support/traffic.rs"]
mod traffic;

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use ferry_lab::spec::CLIENT;
use ferry_lab::{Host, LabProcess};
use migration::{doc_block, kubeadm_kube_proxy, run, run_on_node, Node, Proxy, NODE};
use real_cluster::{seed_objects, RealCluster};
use seed::{CLUSTER_IP, FERRY, MASTER_POD, NODES, NODE_PORT};
use traffic::{Kind, Target, Traffic};

const NODE_IP: &str = "10.1.1.12";
/// How long the traffic runs in each step once it is done (beside the step's own time).
const SETTLE: Duration = Duration::from_secs(3);

#[test]
#[ignore = "needs root: network namespaces"]
fn migrate_md_moves_a_node_to_ferry_and_back_without_losing_a_connection() {
    let test = "migrate_md_moves_a_node_to_ferry_and_back_without_losing_a_connection";
    let Some(mut rc) = RealCluster::start(test) else {
        return;
    };
    let Some(program) = rc.cp.assets().kube_proxy.clone() else {
        println!("skipped: {test}: no kube-proxy binary among the Kubernetes binaries");
        eprintln!("skipped: {test}: no kube-proxy binary among the Kubernetes binaries");
        return;
    };
    let page = std::fs::read_to_string(repo().join("docs/src/cluster/migrate.md")).expect("page");
    rc.apply(&seed_objects("Cluster"));
    rc.wait_endpoints("dev", "url-analysis", "two ready endpoints", |eps| {
        eps.len() == 2 && eps.iter().all(|e| e.1)
    });
    let kp = kube_proxy::setup(&rc.cp, &program, "iptables");
    let config = std::fs::read_to_string(kp.config_file()).expect("kube-proxy's configuration");
    rc.apply(&kubeadm_kube_proxy(&config));
    let ip = MASTER_POD.1.parse().expect("pod address");
    rc.lab.add_pod(NODE, MASTER_POD.0, ip).expect("client pod");
    let deploy = deploy_with_cluster_cidr();

    // Before: kube-proxy on every node, as kubeadm runs it.
    let mut node = Node::default();
    let mut others: Vec<LabProcess> = NODES[1..]
        .iter()
        .map(|(n, _)| kp.start(&rc.lab, n))
        .collect();
    node.reconcile(&mut rc, &kp);
    wait_healthy(&rc, "kube-proxy");
    let targets = targets(&rc);
    for t in &targets {
        wait_answered(t);
    }
    let t = Traffic::start(
        &targets,
        Duration::from_millis(10),
        2,
        "kube-proxy in iptables mode",
    );
    std::thread::sleep(SETTLE);

    t.step("1. kube-proxy's DaemonSet patched");
    run(
        &rc,
        &deploy,
        doc_block(&page, "kubectl -n kube-system patch ds kube-proxy"),
    );
    node.reconcile(&mut rc, &kp);
    std::thread::sleep(SETTLE);

    t.step("2. Ferry installed");
    run(
        &rc,
        &deploy,
        doc_block(&page, "kubectl apply -f deploy/serviceaccount.yaml"),
    );
    node.reconcile(&mut rc, &kp);
    std::thread::sleep(SETTLE);

    t.step("3. node labelled: kube-proxy stops, Ferry starts");
    run(
        &rc,
        &deploy,
        doc_block(
            &page,
            "kubectl label node worker-1 proxy.ferry.dev/ferry=true",
        ),
    );
    node.reconcile(&mut rc, &kp);
    assert_eq!(
        node.running,
        Some(Proxy::Ferry),
        "the label moves the node to Ferry"
    );
    rc.wait_logged(NODE, "synced rules", 1);
    rc.wait_logged(NODE, "removed what iptables mode left", 1);
    std::thread::sleep(SETTLE);

    t.step("4. node checked");
    wait_healthy(&rc, "Ferry");
    let status = rc.lab.exec(NODE, [FERRY, "status"]).expect("ferry status");
    assert!(
        status.contains("kernel: programmed"),
        "ferry status:\n{status}"
    );
    std::thread::sleep(SETTLE);

    t.step("rollback 1. label removed: Ferry stops, kube-proxy starts");
    run(
        &rc,
        &deploy,
        doc_block(&page, "kubectl label node worker-1 proxy.ferry.dev/ferry-"),
    );
    node.reconcile(&mut rc, &kp);
    assert_eq!(
        node.running,
        Some(Proxy::KubeProxy),
        "the label's removal moves it back"
    );
    wait_healthy(&rc, "kube-proxy");
    run_on_node(
        &rc,
        doc_block(&page, "until curl -s 127.0.0.1:10249/metrics"),
    );

    t.step("rollback 2. ferry cleanup");
    let dry = rc
        .lab
        .exec(NODE, [FERRY, "cleanup", "--dry-run"])
        .expect("ferry cleanup --dry-run");
    let done = rc
        .lab
        .exec(NODE, [FERRY, "cleanup"])
        .expect("ferry cleanup");
    println!("$ ferry cleanup --dry-run\n{dry}$ ferry cleanup\n{done}");
    assert!(
        done.contains("removed table ip ferry"),
        "ferry cleanup:\n{done}"
    );
    let saved = rc
        .lab
        .exec(NODE, ["iptables-save", "-t", "nat"])
        .expect("iptables-save");
    assert!(
        saved.contains(":KUBE-SERVICES") && saved.contains("KUBE-SVC-"),
        "kube-proxy's chains are left:\n{saved}"
    );
    std::thread::sleep(SETTLE);

    t.step("rollback 3. kube-proxy's DaemonSet patch removed");
    run(
        &rc,
        &deploy,
        doc_block(
            &page,
            "kubectl -n kube-system patch ds kube-proxy --type json",
        ),
    );
    node.reconcile(&mut rc, &kp);
    assert_eq!(node.running, Some(Proxy::KubeProxy));
    std::thread::sleep(SETTLE);

    let report = t.stop();
    println!(
        "{report}\n{} new connections, {} requests on long-lived ones",
        report.attempts(Kind::New),
        report.attempts(Kind::LongLived)
    );
    let failures = report.failures();
    drop(node);
    others.clear();
    assert!(
        failures.is_empty(),
        "{} failed connection(s):\n{}\n{}",
        failures.len(),
        failures.join("\n"),
        rc.logs()
    );
}

fn repo() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// A Pod on the node to the ClusterIP, and the outside client to the node's NodePort.
fn targets(rc: &RealCluster) -> Vec<Target> {
    let ns = |h: &Host| rc.lab.netns_of(h).expect("namespace").to_owned();
    let addr = |s: String| -> SocketAddr { s.parse().expect("address") };
    vec![
        Target {
            name: "Pod on the node → ClusterIP".into(),
            netns: ns(&Host::pod(MASTER_POD.0)),
            addr: addr(format!("{CLUSTER_IP}:8080")),
        },
        Target {
            name: "outside client → NodePort".into(),
            netns: ns(&Host::client(CLIENT)),
            addr: addr(format!("{NODE_IP}:{NODE_PORT}")),
        },
    ]
}

/// Waits until a connection to the target is answered (before the traffic starts).
fn wait_answered(t: &Target) {
    let deadline = Instant::now() + ferry_lab::scaled(Duration::from_secs(30));
    while let Err(e) = traffic::one_request(&t.netns, t.addr) {
        assert!(Instant::now() < deadline, "{}: never answered: {e}", t.name);
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Waits until the node's health check answers 200 (the proxy named has synced).
fn wait_healthy(rc: &RealCluster, proxy: &str) {
    let url = format!("http://{NODE_IP}:10256/healthz");
    rc.wait_curl(
        &Host::node(NODE),
        &url,
        |r| r.is_ok(),
        &format!("{proxy} healthy"),
    );
}

/// `deploy/`, its ConfigMap's `clusterCIDR` set to the lab's pod network (migrate.md's step 2).
fn deploy_with_cluster_cidr() -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("temporary folder");
    let target = dir.path().join("deploy");
    std::fs::create_dir(&target).expect("deploy/");
    for entry in std::fs::read_dir(repo().join("deploy")).expect("deploy/") {
        let path = entry.expect("entry").path();
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let text = text.replace("clusterCIDR: \"\"", "clusterCIDR: 192.168.0.0/16");
        std::fs::write(target.join(path.file_name().expect("name")), text).expect("copy");
    }
    dir
}
