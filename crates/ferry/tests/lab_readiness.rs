//! Seed 004's readiness section with real packets: the url-analysis Pods listed in the manifests
//! (no hand-written EndpointSlice), their `httpGet /hello` readiness probe run by each node's
//! Ferry, one Pod starting to fail; what `ferry status`, the metrics and `ferry explain --live`
//! say of it. Needs root.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use ferry_lab::{CurlResult, Host, PodProgram};

#[path = "support/seed.rs"]
mod seed;

use ferry_lab::spec::NODE2;
use seed::{cluster_url, node_port_url, Hello, Manifests, SeedLab, FERRY, POD_A, POD_B};

/// The seed's probe, on a shorter clock so the test takes seconds: first run 4 s after Ferry
/// sees the Pod, then every second; 3 failures make a Pod not ready, 2 successes ready again.
fn pods_yaml() -> String {
    let mut out = String::new();
    for (name, ip) in [POD_A, POD_B] {
        out.push_str(&format!(
            "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: dev\n  labels:\n    app: url-analysis\nspec:\n  nodeName: k8s-node2\n  containers:\n  - name: url-analysis\n    ports:\n    - name: http\n      containerPort: 56010\n    readinessProbe:\n      httpGet:\n        path: /hello\n        port: 56010\n      initialDelaySeconds: 4\n      periodSeconds: 1\n      failureThreshold: 3\n      successThreshold: 2\nstatus:\n  phase: Running\n  podIP: {ip}\n"
        ));
    }
    out
}

struct ReadinessLab {
    seed: SeedLab,
    fail_dir: tempfile::TempDir,
}

impl ReadinessLab {
    fn start() -> Self {
        let fail_dir = tempfile::tempdir().expect("tempdir");
        let program = PodProgram::ferry(FERRY)
            .arg("--fail-dir")
            .arg(fail_dir.path());
        let seed = SeedLab::start_with_pods(
            seed::Mode::Nftables,
            "Cluster",
            &[],
            program,
            |m: &mut Manifests| {
                m.with_slice = false;
                m.put("pods.yaml", &pods_yaml());
            },
        );
        Self { seed, fail_dir }
    }

    fn set_failing(&self, pod: &str, failing: bool) {
        let file = self.fail_dir.path().join(pod);
        if failing {
            std::fs::write(file, "").expect("make the pod fail /hello");
        } else {
            std::fs::remove_file(file).expect("make the pod pass /hello");
        }
    }

    /// The pods that answer `n` new connections to `url` from the client.
    fn answering(&self, url: &str, n: usize) -> BTreeSet<String> {
        (0..n)
            .filter_map(|_| match self.seed.curl(&Host::default_client(), url) {
                CurlResult::Ok(body) => Some(Hello::parse(&body).server_name),
                _ => None,
            })
            .collect()
    }

    /// Polls until new connections from `from` to `url` are refused.
    fn wait_refused(&self, from: &Host, url: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.seed.curl(from, url) != CurlResult::Refused {
            assert!(
                Instant::now() < deadline,
                "{from:?} → {url}: still answered\n{}",
                self.seed.logs()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// Runs `ferry ARGS` on k8s-node2 (where the Pods and their probing Ferry are) until its
    /// stdout contains every one of `needles`; returns that stdout.
    fn wait_ferry_says(&self, args: &[&str], needles: &[&str]) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let out = self
                .seed
                .lab
                .exec_in(
                    &Host::node(NODE2),
                    std::iter::once(FERRY).chain(args.iter().copied()),
                )
                .expect("run ferry on k8s-node2");
            let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
            if needles.iter().all(|n| stdout.contains(n)) {
                return stdout;
            }
            assert!(
                Instant::now() < deadline,
                "ferry {args:?} never said {needles:?}:\n{stdout}\n{}\n{}",
                String::from_utf8_lossy(&out.stderr),
                self.seed.logs()
            );
            std::thread::sleep(Duration::from_millis(300));
        }
    }

    /// Polls until the pods answering `url` are exactly `want` (20 connections each round).
    fn wait_answering(&self, url: &str, want: &[&str]) {
        let want: BTreeSet<String> = want.iter().map(|s| (*s).to_owned()).collect();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let got = self.answering(url, 20);
            if got == want {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{url}: answering {got:?}, want {want:?}\n{}",
                self.seed.logs()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

#[test]
#[ignore = "needs root: network namespaces"]
fn a_pod_failing_its_readiness_probe_gets_no_new_connections_until_it_passes_again() {
    let lab = ReadinessLab::start();
    let node_port = node_port_url("10.1.1.17");
    // Initial delay: right after start no probe has passed, so the Service has no ready
    // endpoint and rejects.
    assert_eq!(
        lab.seed.curl(&Host::default_client(), &node_port),
        CurlResult::Refused,
        "before the initial delay\n{}",
        lab.seed.logs()
    );
    lab.wait_answering(&node_port, &[POD_A.0, POD_B.0]);

    lab.set_failing(POD_B.0, true);
    lab.wait_answering(&node_port, &[POD_A.0]);
    // Once out, it stays out: no new connection reaches it while it fails.
    assert_eq!(
        lab.answering(&node_port, 50),
        BTreeSet::from([POD_A.0.to_owned()])
    );
    the_failing_probe_is_visible(&lab);

    lab.set_failing(POD_B.0, false);
    lab.wait_answering(&node_port, &[POD_A.0, POD_B.0]);
}

/// On the Pods' node, while POD_B fails: `ferry status` shows both probes, the metric counts
/// failures, and `ferry explain --live` asks the agent and names the failing probe.
fn the_failing_probe_is_visible(lab: &ReadinessLab) {
    let (a, b) = (POD_A.1, POD_B.1);
    let failing = format!(
        "{b}:56010 not ready, local (node k8s-node2, Pod dev/{}): not used: not ready: readiness \
         probe failing since ",
        POD_B.0
    );
    let status = lab.wait_ferry_says(
        &["status"],
        &[
            &failing,
            &format!("readiness probe of url-analysis (GET http://{a}:56010/hello): ready; last success"),
            &format!("readiness probe of url-analysis (GET http://{b}:56010/hello): not ready; last failure"),
        ],
    );
    assert!(
        status.contains("HTTP probe failed with statuscode: 503"),
        "{status}"
    );

    let metrics = lab
        .seed
        .lab
        .exec(NODE2, ["curl", "-s", "http://127.0.0.1:10249/metrics"])
        .expect("curl /metrics");
    for result in ["success", "failure"] {
        let series = format!(
            "ferry_readiness_probe_results_total{{namespace=\"dev\",service=\"url-analysis\",result=\"{result}\"}} "
        );
        assert!(metrics.contains(&series), "{series}\n{metrics}");
    }

    let manifests = lab.seed.manifests.path().display().to_string();
    let explain = lab.wait_ferry_says(
        &[
            "explain",
            "--live",
            "--manifests",
            &manifests,
            "--node",
            "k8s-node2",
            "--from",
            "10.1.1.100",
            "--to",
            "10.1.1.9:32223",
            "--cluster-cidr",
            "192.168.0.0/16",
        ],
        &[
            &format!("+ {a}:56010 on k8s-node2 (Pod dev/{})", POD_A.0),
            &format!(
                "- {b}:56010 on k8s-node2 (Pod dev/{}): not ready: readiness probe failing since ",
                POD_B.0
            ),
            "the agent's readiness probe of url-analysis",
        ],
    );
    // Judged by the agent's verdicts, the explanation is what the kernel holds.
    assert!(
        explain.contains("agrees with the compiled rules"),
        "{explain}"
    );
    assert!(
        explain.contains(&format!("verdict: FORWARDED to one of {a}:56010\n")),
        "{explain}"
    );
}

#[test]
#[ignore = "needs root: network namespaces"]
fn a_service_whose_pods_all_fail_rejects_on_cluster_ip_and_node_port() {
    let lab = ReadinessLab::start();
    let node_port = node_port_url("10.1.1.9");
    lab.wait_answering(&node_port, &[POD_A.0, POD_B.0]);
    lab.set_failing(POD_A.0, true);
    lab.set_failing(POD_B.0, true);
    // Each node's Ferry probes on its own clock: wait for the client's node and the master.
    lab.wait_refused(&Host::default_client(), &node_port);
    lab.wait_refused(&Host::node(ferry_lab::spec::MASTER), &cluster_url());
}
