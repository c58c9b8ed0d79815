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
#[path = "support/real_cluster.rs"]
mod real_cluster;
#[path = "support/seed.rs"]
mod seed;
#[path = "support/traffic.rs"]
mod traffic;

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use ferry_lab::spec::{CLIENT, MASTER};
use ferry_lab::{Host, LabProcess};
use real_cluster::{seed_objects, RealCluster};
use seed::{CLUSTER_IP, FERRY, MASTER_POD, NODES, NODE_PORT};
use serde_json::Value;
use traffic::{Kind, Target, Traffic};

/// The node that moves.
const NODE: &str = MASTER;
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
    let config = std::fs::read_to_string(&kp.config).expect("kube-proxy's configuration");
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

/// The page's ```sh block that starts with `start`, its indentation removed.
fn doc_block<'a>(page: &'a str, start: &str) -> String {
    let mut blocks = Vec::new();
    let mut current: Option<Vec<&'a str>> = None;
    for line in page.lines() {
        match (&mut current, line.trim()) {
            (None, "```sh") => current = Some(Vec::new()),
            (Some(_), "```") => blocks.push(current.take().expect("open block")),
            (Some(lines), _) => lines.push(line),
            (None, _) => {}
        }
    }
    let block = blocks
        .into_iter()
        .map(|lines| {
            let indent = lines
                .iter()
                .filter(|l| !l.trim().is_empty())
                .map(|l| l.len() - l.trim_start().len())
                .min()
                .unwrap_or(0);
            lines
                .iter()
                .map(|l| l.get(indent..).unwrap_or(""))
                .collect::<Vec<_>>()
                .join("\n")
        })
        .find(|b| b.starts_with(start));
    block.unwrap_or_else(|| panic!("migrate.md has no ```sh block starting {start:?}"))
}

/// Runs a command of the page as a user would at a workstation: `sh`, kubectl on the `PATH`
/// with the administrator's kubeconfig, in a folder holding `deploy/`; `worker-1` is the node.
fn run(rc: &RealCluster, deploy: &tempfile::TempDir, command: String) {
    let command = command.replace("worker-1", NODE);
    println!("$ {command}");
    let kubectl_dir = rc
        .cp
        .assets()
        .kubectl
        .parent()
        .expect("kubectl's folder")
        .to_owned();
    let path = format!(
        "{}:{}",
        kubectl_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut cmd = ferry_lab::netns::exec_command(rc.cp.netns(), "sh", ["-c", &command]);
    cmd.current_dir(deploy.path())
        .env("PATH", path)
        .env("KUBECONFIG", rc.cp.admin_kubeconfig());
    let out = ferry_lab::netns::run_unchecked(&mut cmd).expect("run sh");
    print!("{}", String::from_utf8_lossy(&out.stdout));
    assert!(
        out.status.success(),
        "{command}: {}: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs a command of the page in a shell on the node (at most a minute).
fn run_on_node(rc: &RealCluster, command: String) {
    println!("{NODE}$ {command}");
    let out = rc
        .lab
        .exec(NODE, ["timeout", "60", "sh", "-c", &command])
        .unwrap_or_else(|e| panic!("{command}: {e}"));
    print!("{out}");
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Proxy {
    KubeProxy,
    Ferry,
}

/// The proxy running on the node, as the DaemonSets would have it.
#[derive(Default)]
struct Node {
    running: Option<Proxy>,
    kube_proxy: Option<LabProcess>,
}

impl Node {
    /// Reads both DaemonSets and the node's labels back, and runs the proxy that is scheduled.
    fn reconcile(&mut self, rc: &mut RealCluster, kp: &kube_proxy::KubeProxySetup) {
        let get = |args: &[&str]| -> Value {
            serde_json::from_str(&rc.kubectl(args)).expect("kubectl's JSON")
        };
        let labels = get(&["get", "node", NODE, "-o", "json"])["metadata"]["labels"].clone();
        let scheduled = |ds: &str| -> bool {
            let ds = rc
                .cp
                .kubectl(&["-n", "kube-system", "get", "ds", ds, "-o", "json"]);
            ds.ok().is_some_and(|text| {
                let v: Value = serde_json::from_str(&text).expect("DaemonSet JSON");
                schedules(&v["spec"]["template"]["spec"], &labels)
            })
        };
        let want = match (scheduled("kube-proxy"), scheduled("ferry")) {
            (true, false) => Some(Proxy::KubeProxy),
            (false, true) => Some(Proxy::Ferry),
            (false, false) => None,
            (true, true) => panic!("both kube-proxy's and Ferry's DaemonSets schedule on {NODE}"),
        };
        if want == self.running {
            return;
        }
        match self.running {
            Some(Proxy::KubeProxy) => self.kube_proxy = None,
            Some(Proxy::Ferry) => rc.ferries.retain(|(n, _)| *n != NODE),
            None => {}
        }
        if self.running.is_some() {
            std::thread::sleep(Duration::from_secs(2));
        }
        match want {
            Some(Proxy::KubeProxy) => self.kube_proxy = Some(kp.start(&rc.lab, NODE)),
            Some(Proxy::Ferry) => rc.spawn_ferry_in_cluster(NODE),
            None => {}
        }
        println!(
            "{NODE}: {:?} → {want:?} at {:?}",
            self.running,
            Instant::now()
        );
        self.running = want;
    }
}

/// Whether a pod spec's `nodeSelector` and required node affinity admit a node's labels
/// (the `matchExpressions` operators In, NotIn, Exists, DoesNotExist).
fn schedules(spec: &Value, labels: &Value) -> bool {
    let label = |k: &str| labels.get(k).and_then(Value::as_str);
    let selector_ok = spec["nodeSelector"]
        .as_object()
        .is_none_or(|m| m.iter().all(|(k, v)| label(k) == v.as_str()));
    let terms = &spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"];
    let expression_ok = |e: &Value| {
        let key = e["key"].as_str().unwrap_or_default();
        let values: Vec<&str> = e["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        match e["operator"].as_str() {
            Some("In") => label(key).is_some_and(|v| values.contains(&v)),
            Some("NotIn") => label(key).is_none_or(|v| !values.contains(&v)),
            Some("Exists") => label(key).is_some(),
            Some("DoesNotExist") => label(key).is_none(),
            other => panic!("node affinity operator {other:?} not understood here"),
        }
    };
    let affinity_ok = terms.as_array().is_none_or(|terms| {
        terms.iter().any(|t| {
            t["matchExpressions"]
                .as_array()
                .into_iter()
                .flatten()
                .all(expression_ok)
        })
    });
    selector_ok && affinity_ok
}

/// kube-proxy's ConfigMap and DaemonSet as kubeadm creates them (the DaemonSet's pods are the
/// processes this test runs itself).
fn kubeadm_kube_proxy(config: &str) -> String {
    let indented: String = config.lines().map(|l| format!("    {l}\n")).collect();
    format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kube-proxy\n  namespace: kube-system\n  \
         labels:\n    app: kube-proxy\ndata:\n  config.conf: |\n{indented}---\n\
         apiVersion: apps/v1\nkind: DaemonSet\nmetadata:\n  name: kube-proxy\n  \
         namespace: kube-system\n  labels:\n    k8s-app: kube-proxy\nspec:\n  selector:\n    \
         matchLabels:\n      k8s-app: kube-proxy\n  template:\n    metadata:\n      labels:\n        \
         k8s-app: kube-proxy\n    spec:\n      hostNetwork: true\n      \
         priorityClassName: system-node-critical\n      serviceAccountName: kube-proxy\n      \
         nodeSelector:\n        kubernetes.io/os: linux\n      tolerations:\n      \
         - operator: Exists\n      containers:\n      - name: kube-proxy\n        \
         image: registry.k8s.io/kube-proxy:v1.37.2\n        command:\n        \
         - /usr/local/bin/kube-proxy\n        - --config=/var/lib/kube-proxy/config.conf\n        \
         - --hostname-override=$(NODE_NAME)\n        env:\n        - name: NODE_NAME\n          \
         valueFrom:\n            fieldRef:\n              fieldPath: spec.nodeName\n        \
         securityContext:\n          privileged: true\n        volumeMounts:\n        \
         - mountPath: /var/lib/kube-proxy\n          name: kube-proxy\n      volumes:\n      \
         - name: kube-proxy\n        configMap:\n          name: kube-proxy\n"
    )
}
