//! Operating Ferry in the seed lab (nftables mode): the health server, health-check NodePorts
//! probed from outside the cluster, metrics, and SIGTERM. Needs root (skips otherwise).
//!
//! Ferry runs inside each node's namespace, so its servers listen there: probes from the lab's
//! client stay inside the lab's namespaces.

#[path = "support/seed.rs"]
mod seed;

use ferry_lab::spec::{MASTER, NODE1, NODE2};
use ferry_lab::{CurlResult, Host};
use serde_json::Value;

use seed::*;

const LB_CLUSTER_IP: &str = "10.96.198.87";
const LB_NODE_PORT: u16 = 32224;
const HEALTH_CHECK_PORT: u16 = 32500;

/// A LoadBalancer Service with its own health-check NodePort, selecting the url-analysis pods
/// (both on k8s-node2), and its EndpointSlice.
fn lb_manifest(policy: &str, ready: bool) -> String {
    format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: url-analysis-lb\n  namespace: dev\nspec:\n  type: LoadBalancer\n  clusterIP: {LB_CLUSTER_IP}\n  externalTrafficPolicy: {policy}\n  healthCheckNodePort: {HEALTH_CHECK_PORT}\n  ports:\n  - name: http\n    protocol: TCP\n    port: 8080\n    targetPort: 56010\n    nodePort: {LB_NODE_PORT}\n---\n\
apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: url-analysis-lb-abcde\n  namespace: dev\n  labels:\n    kubernetes.io/service-name: url-analysis-lb\naddressType: IPv4\nports:\n- name: http\n  port: 56010\n  protocol: TCP\nendpoints:\n- addresses: [\"{}\"]\n  conditions: {{ready: {ready}}}\n  nodeName: k8s-node2\n- addresses: [\"{}\"]\n  conditions: {{ready: {ready}}}\n  nodeName: k8s-node2\n",
        POD_A.1, POD_B.1
    )
}

/// Writes (or removes, with `None`) `lb.yaml` and waits until every node has synced it.
fn set_lb(seed: &mut SeedLab, text: Option<String>) {
    let before: Vec<usize> = NODES.iter().map(|(n, _)| seed.syncs(n)).collect();
    match text {
        Some(text) => seed.manifests.put("lb.yaml", &text),
        None => std::fs::remove_file(seed.manifests.path().join("lb.yaml")).expect("remove"),
    }
    for ((node, _), n) in NODES.iter().zip(before) {
        seed.wait_synced(node, n + 1);
    }
}

fn health_check_url(node_ip: &str) -> String {
    format!("http://{node_ip}:{HEALTH_CHECK_PORT}/")
}

/// (status, body) of an HTTP answer; panics on a transport failure.
fn probe(seed: &SeedLab, url: &str) -> (u16, Value) {
    let (status, body) = match seed.curl(&Host::default_client(), url) {
        CurlResult::Ok(body) => (200, body),
        CurlResult::Http { status, body } => (status, body),
        other => panic!("{url}: {other:?}\n{}", seed.logs()),
    };
    let json = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{url}: {e}: {body}"));
    (status, json)
}

fn local_endpoints(v: &Value) -> i64 {
    v["localEndpoints"].as_i64().expect("localEndpoints")
}

#[test]
#[ignore = "needs root: network namespaces"]
fn health_check_node_ports_answer_by_local_endpoints_and_follow_the_service() {
    let mut seed = SeedLab::start(Mode::Nftables, "Cluster");
    set_lb(&mut seed, Some(lb_manifest("Local", true)));

    let (status, v) = probe(&seed, &health_check_url("10.1.1.9"));
    assert_eq!(
        (status, local_endpoints(&v)),
        (200, 2),
        "k8s-node2 has both pods: {v}"
    );
    assert_eq!(v["service"]["name"], "url-analysis-lb");
    assert_eq!(v["serviceProxyHealthy"], true);
    for ip in ["10.1.1.17", "10.1.1.12"] {
        let (status, v) = probe(&seed, &health_check_url(ip));
        assert_eq!((status, local_endpoints(&v)), (503, 0), "{ip}: {v}");
    }

    // The pods stop being ready: k8s-node2 fails its check too.
    set_lb(&mut seed, Some(lb_manifest("Local", false)));
    let (status, v) = probe(&seed, &health_check_url("10.1.1.9"));
    assert_eq!((status, local_endpoints(&v)), (503, 0), "{v}");

    // Cluster policy needs no health check: the server goes away, without a restart.
    set_lb(&mut seed, Some(lb_manifest("Cluster", true)));
    for (_, ip) in NODES {
        assert_eq!(
            seed.curl(&Host::default_client(), &health_check_url(ip)),
            CurlResult::Refused,
            "{ip}"
        );
    }
    set_lb(&mut seed, Some(lb_manifest("Local", true)));
    assert_eq!(probe(&seed, &health_check_url("10.1.1.9")).0, 200);
    set_lb(&mut seed, None);
    assert_eq!(
        seed.curl(&Host::default_client(), &health_check_url("10.1.1.9")),
        CurlResult::Refused,
        "deleted service: closed"
    );

    for node in [MASTER, NODE1, NODE2] {
        let log = seed.ferry(node).log();
        assert_eq!(
            // The start-up line: `ferry v0.1.0 starting (nftables mode, manifests …)`.
            log.matches(" starting (").count(),
            1,
            "{node} restarted:\n{log}"
        );
    }
    let metrics = seed
        .lab
        .exec(NODE2, ["curl", "-sS", "http://127.0.0.1:10249/metrics"])
        .expect("scrape metrics inside k8s-node2");
    for needle in [
        "# TYPE kubeproxy_sync_proxy_rules_duration_seconds histogram",
        "# TYPE kubeproxy_network_programming_duration_seconds histogram",
        "ferry_service_health_check_servers 0",
        "kubeproxy_sync_proxy_rules_service_changes_total",
    ] {
        assert!(metrics.contains(needle), "{needle}:\n{metrics}");
    }
}

#[test]
#[ignore = "needs root: network namespaces"]
fn the_health_server_answers_on_every_node() {
    let seed = SeedLab::start(Mode::Nftables, "Cluster");
    for (node, ip) in NODES {
        let (status, v) = probe(&seed, &format!("http://{ip}:10256/healthz"));
        assert_eq!(status, 200, "{node}: {v}");
        assert_eq!(v["nodeEligible"], true, "{node}");
        assert!(v["lastUpdated"].is_string() && v["currentTime"].is_string());
        let (status, v) = probe(&seed, &format!("http://{ip}:10256/livez"));
        assert_eq!(status, 200, "{node}: {v}");
    }
    // The metrics server listens on the node's loopback only.
    assert!(matches!(
        seed.curl(&Host::default_client(), "http://10.1.1.9:10249/metrics"),
        CurlResult::Refused
    ));
}

#[test]
#[ignore = "needs root: network namespaces"]
fn a_node_tainted_for_deletion_fails_healthz_but_not_livez() {
    let mut seed = SeedLab::start(Mode::Nftables, "Cluster");
    let before = seed.syncs(NODE1);
    let nodes = std::fs::read_to_string(seed.manifests.path().join("nodes.yaml")).expect("read");
    let pod_cidr = "spec:\n  podCIDR: 192.168.36.64/26\n";
    assert!(nodes.contains(pod_cidr), "{nodes}");
    let tainted = nodes.replace(
        pod_cidr,
        "spec:\n  taints:\n  - key: ToBeDeletedByClusterAutoscaler\n    value: \"1718000000\"\n    effect: NoSchedule\n  podCIDR: 192.168.36.64/26\n",
    );
    seed.manifests.put("nodes.yaml", &tainted);
    seed.wait_synced(NODE1, before + 1);
    let (status, v) = probe(&seed, "http://10.1.1.17:10256/healthz");
    assert_eq!(
        (status, &v["nodeEligible"]),
        (503, &Value::Bool(false)),
        "{v}"
    );
    assert_eq!(probe(&seed, "http://10.1.1.17:10256/livez").0, 200);
    assert_eq!(
        probe(&seed, "http://10.1.1.9:10256/healthz").0,
        200,
        "other nodes unaffected"
    );
}

#[test]
#[ignore = "needs root: network namespaces"]
fn sigterm_stops_gracefully_and_leaves_the_rules_in_place() {
    let mut seed = SeedLab::start(Mode::Nftables, "Cluster");
    let before = seed
        .lab
        .exec(NODE1, ["nft", "list", "table", "ip", "ferry"])
        .expect("list table");
    let status = seed.ferry(NODE1).stop().expect("SIGTERM");
    assert_eq!(
        status.and_then(|s| s.code()),
        Some(0),
        "exits 0 on SIGTERM (not killed):\n{}",
        seed.ferry(NODE1).log()
    );
    assert!(seed.ferry(NODE1).log().contains("rules stay in place"));
    let after = seed
        .lab
        .exec(NODE1, ["nft", "list", "table", "ip", "ferry"])
        .expect("the table is still there");
    assert_eq!(before, after, "the ruleset is untouched by the shutdown");
    // Traffic keeps flowing through the stopped node's rules.
    let h = seed.hello(&Host::default_client(), &node_port_url("10.1.1.17"));
    assert_eq!(h.client_ip, "10.1.1.17");
    // And the servers are gone with the process.
    assert_eq!(
        seed.curl(&Host::default_client(), "http://10.1.1.17:10256/healthz"),
        CurlResult::Refused
    );
}

#[test]
#[ignore = "needs root: network namespaces"]
fn json_logs_have_one_info_line_per_sync_and_one_warning_per_rejected_object() {
    let mut seed = SeedLab::start(Mode::Nftables, "Cluster");
    seed.ferry(NODE1)
        .stop()
        .expect("stop the text-logging ferry");
    seed.manifests.put(
        "bad.yaml",
        "apiVersion: v1\nkind: Service\nmetadata: {name: broken, namespace: dev}\nspec:\n  clusterIP: 10.96.0.99\n  ports: [{port: 70000}]\n",
    );
    let dir = seed.manifests.path().display().to_string();
    let args = [
        "run",
        "--manifests",
        &dir,
        "--hostname-override",
        NODE1,
        "--cluster-cidr",
        "192.168.0.0/16",
        "--log-format",
        "json",
    ];
    let ferry = seed.lab.spawn_on_node(NODE1, FERRY, args).expect("spawn");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !ferry.log().contains("synced rules") {
        assert!(
            std::time::Instant::now() < deadline,
            "no sync:\n{}",
            ferry.log()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let lines: Vec<Value> = ferry
        .log()
        .lines()
        .filter(|l| !l.starts_with("=== ferry-lab:"))
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let message = |v: &Value| {
        v["fields"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    let syncs: Vec<&Value> = lines
        .iter()
        .filter(|v| message(v) == "synced rules")
        .collect();
    assert_eq!(syncs.len(), 1, "{lines:?}");
    assert_eq!(syncs[0]["level"], "INFO");
    assert!(
        syncs[0]["fields"]["duration_ms"].is_number(),
        "{}",
        syncs[0]
    );
    let error = |v: &Value| v["fields"]["error"].as_str().unwrap_or_default().to_owned();
    let rejected: Vec<&Value> = lines
        .iter()
        .filter(|v| v["level"] == "WARN" && error(v).contains("Service dev/broken"))
        .collect();
    assert_eq!(rejected.len(), 1, "{lines:?}");
    assert!(error(rejected[0]).contains("bad.yaml"), "{}", rejected[0]);
    assert!(
        error(rejected[0]).contains("spec.ports[0].port"),
        "{}",
        rejected[0]
    );
}
