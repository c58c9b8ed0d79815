//! Ferry in cluster mode against a real control plane: etcd, kube-apiserver and
//! kube-controller-manager's EndpointSlice controllers, built from source at the release
//! pinned in `lab/k8s/` (`ferry-kube-lab`), with a kubelet stand-in per lab node. Ferry runs as
//! `deploy/`'s ServiceAccount with exactly `deploy/`'s RBAC, reading a kubeconfig with that
//! account's token, as a user would.
//!
//! Needs root (network namespaces) and the Kubernetes binaries: `KUBEBUILDER_ASSETS` /
//! `TEST_ASSET_<NAME>`, the build cache, or Go to build them (`lab/k8s/build`). Without
//! binaries and Go, each test prints `skipped: <test>: <reason>` and passes.

#[path = "support/real_cluster.rs"]
mod real_cluster;
#[path = "support/seed.rs"]
mod seed;

use std::collections::BTreeSet;

use ferry_lab::spec::{MASTER, NODE1, NODE2};
use ferry_lab::{CurlResult, Host};
use real_cluster::{pod_yaml, seed_objects, RealCluster};
use seed::{cluster_url, node_port_url, NODES, POD_A, POD_B};

fn two_ready(eps: &[(String, bool, bool, bool)]) -> bool {
    eps.len() == 2 && eps.iter().all(|e| e.1)
}

fn seed_cluster(test: &str, policy: &str) -> Option<RealCluster> {
    let mut rc = RealCluster::start(test)?;
    rc.apply(&seed_objects(policy));
    rc.wait_endpoints("dev", "url-analysis", "two ready endpoints", two_ready);
    rc.start_ferries(&[]);
    Some(rc)
}

/// The example cluster's curl table, with the Service and its Pods applied with kubectl and the
/// EndpointSlice written by the real controller: Cluster policy answers on every node, SNATed to
/// that node; Local policy (a `kubectl patch`) keeps the client's address on k8s-node2 and drops
/// on the nodes without an endpoint.
#[test]
#[ignore = "needs root: network namespaces"]
fn the_seed_table_with_a_real_control_plane() {
    let Some(rc) = seed_cluster("the_seed_table_with_a_real_control_plane", "Cluster") else {
        return;
    };
    let client = Host::default_client();
    for (node, ip) in NODES {
        let h = rc.hello(&client, &node_port_url(ip));
        assert_eq!(h.client_ip, ip, "Cluster policy via {node} is SNATed to it");
        assert!(h.server_ip == POD_A.1 || h.server_ip == POD_B.1, "{h:?}");
    }
    let h = rc.hello(&Host::node(MASTER), &cluster_url());
    assert_eq!(h.client_ip, "10.1.1.12", "node → ClusterIP is masqueraded");

    rc.kubectl(&[
        "-n",
        "dev",
        "patch",
        "service",
        "url-analysis",
        "-p",
        r#"{"spec":{"externalTrafficPolicy":"Local"}}"#,
    ]);
    let node2 = node_port_url("10.1.1.9");
    let got = rc.wait_curl(
        &client,
        &node2,
        |r| matches!(r, CurlResult::Ok(b) if b.contains("ClientIp : 10.1.1.100")),
        "answered with the client's address",
    );
    assert!(matches!(got, CurlResult::Ok(_)));
    for ip in ["10.1.1.12", "10.1.1.17"] {
        rc.wait_curl(
            &client,
            &node_port_url(ip),
            |r| *r == CurlResult::TimedOut,
            "dropped (no local endpoint)",
        );
    }

    // What kube-proxy's dashboard reads of its API client and process, from a live agent.
    let metrics = match rc.curl(&Host::node(NODE2), "http://127.0.0.1:10249/metrics") {
        CurlResult::Ok(text) => text,
        other => panic!("/metrics: {other:?}"),
    };
    for series in [
        "rest_client_requests_total{code=\"200\",method=\"GET\",host=\"10.1.1.200:6443\"}",
        "rest_client_request_duration_seconds_count{verb=\"GET\",host=\"10.1.1.200:6443\"}",
        "process_resident_memory_bytes ",
    ] {
        assert!(metrics.contains(series), "{series}:\n{metrics}");
    }
}

/// `deploy/` applies to a real API server as it is (server-side dry run of the DaemonSet and
/// ConfigMap; the RBAC is applied for real by the harness), Ferry runs with exactly those
/// rights, and the real authorizer refuses it anything more.
#[test]
#[ignore = "needs root: network namespaces"]
fn deploy_applies_and_ferrys_account_has_exactly_its_rights() {
    let Some(rc) = RealCluster::start("deploy_applies_and_ferrys_account_has_exactly_its_rights")
    else {
        return;
    };
    let deploy = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy");
    for file in ["configmap.yaml", "daemonset.yaml"] {
        let path = deploy.join(file).display().to_string();
        let out = rc.kubectl(&["apply", "--dry-run=server", "-f", &path]);
        assert!(out.contains("(server dry run)"), "{file}: {out}");
    }
    let ferry = |args: &[&str]| rc.cp.kubectl_as(&rc.kubeconfig, args);
    for allowed in [
        ["get", "services", "-A"],
        ["get", "endpointslices", "-A"],
        ["get", "nodes", "k8s-node1"],
        ["get", "servicecidrs", "kubernetes"],
    ] {
        ferry(&allowed).unwrap_or_else(|e| panic!("{allowed:?} refused: {e}"));
    }
    let refused = ferry(&["get", "pods", "-A"]).expect_err("ferry may not list Pods");
    let text = refused.to_string();
    assert!(
        text.contains("Forbidden") && text.contains("system:serviceaccount:kube-system:ferry"),
        "{text}"
    );
    let write = ferry(&[
        "-n",
        "default",
        "delete",
        "service",
        "kubernetes",
        "--dry-run=server",
    ])
    .expect_err("ferry may not write");
    assert!(write.to_string().contains("Forbidden"), "{write}");
}

/// EndpointSlices from the real controller: a Service of 120 Pods (two slices), a Pod failing
/// its probe (not ready: no traffic), a Pod deleted gracefully (terminating, still serving:
/// used when no endpoint is ready, kube-proxy's terminating fallback), and
/// `publishNotReadyAddresses`.
#[test]
#[ignore = "needs root: network namespaces"]
fn endpoint_slices_from_the_real_controller() {
    let Some(rc) = seed_cluster("endpoint_slices_from_the_real_controller", "Cluster") else {
        return;
    };
    let master = Host::node(MASTER);

    // 120 Pods over the three nodes: more than a slice holds (100 by default).
    let mut yaml = "apiVersion: v1\nkind: Service\nmetadata:\n  name: big\n  namespace: dev\n\
                    spec:\n  selector:\n    app: big\n  ports:\n  - port: 80\n    \
                    targetPort: 56010\n"
        .to_owned();
    for i in 0..120 {
        let node = [MASTER, NODE1, NODE2][i % 3];
        yaml.push_str(&pod_yaml("dev", &format!("big-{i}"), "", node, "big"));
    }
    rc.apply(&yaml);
    rc.wait_endpoints("dev", "big", "120 ready endpoints", |eps| {
        eps.len() == 120 && eps.iter().all(|e| e.1)
    });
    let slices = rc.kubectl(&[
        "-n",
        "dev",
        "get",
        "endpointslices",
        "-l",
        "kubernetes.io/service-name=big",
        "-o",
        "name",
    ]);
    assert!(slices.lines().count() >= 2, "several slices: {slices}");
    let ip = rc.kubectl(&[
        "-n",
        "dev",
        "get",
        "service",
        "big",
        "-o",
        "jsonpath={.spec.clusterIP}",
    ]);
    let url = format!("http://{}/hello", ip.trim());
    let endpoints: BTreeSet<String> = rc
        .slice_endpoints("dev", "big")
        .into_iter()
        .map(|e| e.0)
        .collect();
    let mut seen = BTreeSet::new();
    rc.wait_curl(
        &master,
        &url,
        |r| matches!(r, CurlResult::Ok(_)),
        "answered",
    );
    for _ in 0..40 {
        let h = rc.hello(&master, &url);
        assert!(endpoints.contains(&h.server_ip), "{h:?} is not an endpoint");
        seen.insert(h.server_ip);
    }
    assert!(seen.len() >= 15, "40 connections reached only {seen:?}");

    // POD_A fails its probe: the controller marks it not ready, Ferry stops using it.
    std::fs::write(rc.fail_dir.path().join(POD_A.0), "").expect("fail file");
    rc.wait_endpoints("dev", "url-analysis", "POD_A not ready", |eps| {
        eps.iter().any(|e| e.0 == POD_A.1 && !e.1)
    });
    rc.wait_curl(
        &master,
        &cluster_url(),
        |r| matches!(r, CurlResult::Ok(b) if b.contains(POD_B.1)),
        "answered by POD_B",
    );
    for _ in 0..20 {
        let h = rc.hello(&master, &cluster_url());
        assert_eq!(
            h.server_ip, POD_B.1,
            "the failing Pod gets no new connection"
        );
    }

    // POD_B is deleted gracefully (600 s): terminating but serving. No endpoint is ready, so
    // the serving terminating one takes the traffic.
    rc.kubectl(&["-n", "dev", "delete", "pod", POD_B.0, "--wait=false"]);
    rc.wait_endpoints(
        "dev",
        "url-analysis",
        "POD_B terminating and serving",
        |eps| eps.iter().any(|e| e.0 == POD_B.1 && !e.1 && e.2 && e.3),
    );
    rc.wait_logged(MASTER, "synced rules", 1);
    let got = rc.wait_curl(
        &master,
        &cluster_url(),
        |r| matches!(r, CurlResult::Ok(b) if b.contains(POD_B.1)),
        "answered by the terminating POD_B",
    );
    assert!(matches!(got, CurlResult::Ok(_)));

    // publishNotReadyAddresses: the failing POD_A is published as ready and gets traffic
    // (its /hello answers 503: the connection reached it).
    rc.apply(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: unready\n  namespace: dev\nspec:\n  \
         clusterIP: 10.96.0.77\n  publishNotReadyAddresses: true\n  selector:\n    \
         app: url-analysis\n  ports:\n  - port: 80\n    targetPort: 56010\n",
    );
    rc.wait_endpoints("dev", "unready", "POD_A published", |eps| {
        eps.iter().any(|e| e.0 == POD_A.1 && e.1)
    });
    rc.wait_curl(
        &master,
        "http://10.96.0.77/hello",
        |r| matches!(r, CurlResult::Http { status: 503, .. }),
        "answered 503 by the not-ready POD_A",
    );
}

/// Faults: kube-apiserver stopped (the rules stay and traffic flows), etcd compacted while
/// it is away (the watches resume from a resourceVersion it no longer serves: `410 Gone`, a
/// relist), a change made after its return (converged); then Ferry's token revoked (every
/// request refused: the rules stay, the log says why) and rotated (converged).
#[test]
#[ignore = "needs root: network namespaces"]
fn api_faults_keep_the_rules_and_converge() {
    let Some(mut rc) = seed_cluster("api_faults_keep_the_rules_and_converge", "Cluster") else {
        return;
    };
    let client = Host::default_client();
    let node2 = node_port_url("10.1.1.9");
    rc.hello(&client, &node2);

    rc.cp.stop_apiserver().expect("stop kube-apiserver");
    rc.wait_logged(NODE2, "Kubernetes API watch failed", 1);
    rc.hello(&client, &node2);
    rc.cp.compact_etcd().expect("compact etcd");
    rc.cp.start_apiserver().expect("start kube-apiserver");
    rc.wait_logged(NODE2, "relisted the Kubernetes API", 1);
    rc.kubectl(&[
        "-n",
        "dev",
        "delete",
        "pod",
        POD_A.0,
        "--grace-period=0",
        "--force",
    ]);
    rc.wait_endpoints("dev", "url-analysis", "POD_A gone", |eps| {
        eps.iter().all(|e| e.0 != POD_A.1)
    });
    for (_, ip) in NODES {
        rc.wait_curl(
            &client,
            &node_port_url(ip),
            |r| matches!(r, CurlResult::Ok(b) if b.contains(POD_B.1)),
            "answered by POD_B only",
        );
    }

    let _ = NODE1;
}

/// A revoked token: Ferry runs on a token bound to a Secret; the Secret is deleted (the real
/// authenticator refuses the token from then on) and the API server restarted, so every watch
/// must make a new request: each is refused `401`, Ferry says its credentials are not
/// accepted, and the rules stay. A fresh token written to the token file is read within a
/// minute (kube-rs re-reads a `tokenFile` as client-go does) and a change made meanwhile
/// reaches the kernel.
#[test]
#[ignore = "needs root: network namespaces"]
fn a_revoked_token_keeps_the_rules_and_a_rotated_one_converges() {
    let test = "a_revoked_token_keeps_the_rules_and_a_rotated_one_converges";
    let Some(mut rc) = RealCluster::start(test) else {
        return;
    };
    rc.apply(&seed_objects("Cluster"));
    rc.wait_endpoints("dev", "url-analysis", "two ready endpoints", two_ready);
    rc.apply(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: ferry-token-holder\n  \
         namespace: kube-system\n",
    );
    let bound = rc
        .cp
        .token("kube-system", "ferry", 3600, Some("ferry-token-holder"))
        .expect("a token bound to the Secret");
    std::fs::write(&rc.token_file, &bound).expect("write the bound token");
    rc.start_ferries(&[]);
    let client = Host::default_client();
    let node2 = node_port_url("10.1.1.9");
    rc.hello(&client, &node2);

    rc.kubectl(&[
        "-n",
        "kube-system",
        "delete",
        "secret",
        "ferry-token-holder",
    ]);
    rc.cp.stop_apiserver().expect("stop kube-apiserver");
    rc.cp.start_apiserver().expect("start kube-apiserver");
    rc.wait_logged(
        NODE2,
        "does not accept Ferry's credentials (401 Unauthorized",
        1,
    );
    rc.hello(&client, &node2);

    let fresh = rc
        .cp
        .token("kube-system", "ferry", 3600, None)
        .expect("a fresh token");
    std::fs::write(&rc.token_file, &fresh).expect("rotate the token");
    rc.kubectl(&[
        "-n",
        "dev",
        "delete",
        "pod",
        POD_A.0,
        "--grace-period=0",
        "--force",
    ]);
    // Up to a minute until the file is read again, then up to the watch back-off (30 s).
    rc.wait_only_answered_by(
        std::time::Duration::from_secs(150),
        &client,
        &node2,
        POD_B.1,
    );
}

/// In-cluster configuration, as the DaemonSet's pod has it: `deploy/configmap.yaml` as
/// `--config`, no kubeconfig, the ServiceAccount's token, CA and namespace at
/// `/var/run/secrets/kubernetes.io/serviceaccount` and `KUBERNETES_SERVICE_HOST`/`_PORT`.
/// Ferry connects, lists and programs the seed table; a Pod failing its probe leaves it.
#[test]
#[ignore = "needs root: network namespaces"]
fn in_cluster_configuration_as_the_daemonset_gives_it() {
    let Some(mut rc) = RealCluster::start("in_cluster_configuration_as_the_daemonset_gives_it")
    else {
        return;
    };
    rc.apply(&seed_objects("Cluster"));
    rc.wait_endpoints("dev", "url-analysis", "two ready endpoints", two_ready);
    rc.start_ferries_in_cluster();
    assert!(
        rc.ferry(NODE1)
            .log()
            .contains("watching the Kubernetes API"),
        "{}",
        rc.logs()
    );
    let client = Host::default_client();
    for (node, ip) in NODES {
        let h = rc.hello(&client, &node_port_url(ip));
        assert_eq!(h.client_ip, ip, "Cluster policy via {node} is SNATed to it");
    }
    std::fs::write(rc.fail_dir.path().join(POD_A.0), "").expect("fail POD_A's probe");
    rc.wait_endpoints("dev", "url-analysis", "POD_A not ready", |eps| {
        eps.iter().any(|e| e.0 == POD_A.1 && !e.1)
    });
    let node2 = node_port_url("10.1.1.9");
    rc.wait_only_answered_by(std::time::Duration::from_secs(30), &client, &node2, POD_B.1);
}
