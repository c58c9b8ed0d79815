//! The migration rehearsal's parts (`migration_rehearsal.rs`): migrate.md's commands read
//! from the page and run as a user would, kubeadm's kube-proxy objects, and the stand-in for
//! the DaemonSet controller and kubelet that runs, on the node, the proxy whose DaemonSet
//! schedules there.

use std::time::{Duration, Instant};

use ferry_lab::LabProcess;
use serde_json::Value;

use crate::kube_proxy;
use crate::real_cluster::RealCluster;

/// The node that moves.
pub const NODE: &str = ferry_lab::spec::MASTER;

/// The page's ```sh block that starts with `start`, its indentation removed.
pub fn doc_block<'a>(page: &'a str, start: &str) -> String {
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
pub fn run(rc: &RealCluster, deploy: &tempfile::TempDir, command: String) {
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
pub fn run_on_node(rc: &RealCluster, command: String) {
    println!("{NODE}$ {command}");
    let out = rc
        .lab
        .exec(NODE, ["timeout", "60", "sh", "-c", &command])
        .unwrap_or_else(|e| panic!("{command}: {e}"));
    print!("{out}");
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Proxy {
    KubeProxy,
    Ferry,
}

/// The proxy running on the node, as the DaemonSets would have it.
#[derive(Default)]
pub struct Node {
    pub running: Option<Proxy>,
    kube_proxy: Option<LabProcess>,
}

impl Node {
    /// Reads both DaemonSets and the node's labels back, and runs the proxy that is scheduled.
    pub fn reconcile(&mut self, rc: &mut RealCluster, kp: &kube_proxy::KubeProxySetup) {
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
pub fn kubeadm_kube_proxy(config: &str) -> String {
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
