//! Ferry against upstream kube-proxy: the same cluster, the same nodes, the same packets.
//!
//! One lab, one real control plane (`ferry-kube-lab`: etcd, kube-apiserver and the
//! EndpointSlice controllers built from source, a kubelet stand-in per node), and the proxies
//! **one after the other on the same nodes**, with a cleanup between (the proxy's own:
//! `kube-proxy --cleanup` or `ferry cleanup`, then the node's conntrack table emptied):
//!
//! 1. kube-proxy on every node (as kubeadm runs it, `ferry_kube_lab::kube_proxy`): every
//!    connection of the generated set made and its outcome recorded;
//! 2. Ferry on every node, same mode: the same connections;
//! 3. the changes (a Pod flips not ready, so k8s-node1 loses its last `web` endpoint; a
//!    not-ready Pod becomes ready; Services change type and policy, `diff::change`) made while
//!    Ferry runs, the connections again;
//! 4. Ferry stopped and cleaned up, kube-proxy started on the changed cluster, the connections
//!    again.
//!
//! Ferry's tables (2, 3) are compared with kube-proxy's (1, 4). Each outcome is: answered by
//! which Pods and seeing which source addresses, refused, or timed out. A difference is either
//! Ferry's bug, or deliberate and listed in `docs/src/architecture/kube-proxy-diff.md` and in
//! [`EXPECTED`] here: a difference not listed fails the test, and so does a listed one that no
//! longer shows.
//!
//! The default run makes the small set (`diff::small_set`); `FERRY_DIFF_FULL=1` makes the whole
//! generated set (`diff::full_set`). TCP and UDP (the lab's Pods serve no SCTP). Clients: a Pod
//! on k8s-master, k8s-master itself and k8s-node2 (nodes), k8s-node1 (another node, to
//! load-balancer IPs), and two outside clients (10.1.1.100, 10.1.1.101).
//!
//! Needs root and the Kubernetes binaries (kube-proxy among them): without them each test
//! prints `skipped: <test>: <reason>` and passes.

#[path = "support/diff.rs"]
mod diff;
#[path = "support/kube_proxy.rs"]
mod kube_proxy;
#[path = "support/real_cluster.rs"]
mod real_cluster;
#[path = "support/seed.rs"]
mod seed;

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use diff::Shape;
use ferry_lab::spec::{ClientSpec, MASTER};
use ferry_lab::{CurlResult, Host, LabProcess};
use real_cluster::{pod_yaml, RealCluster};
use seed::{FERRY, NODES};

/// The differences kept on purpose: (mode, `<round>: <probe key>` as the failure message prints
/// it, reason). Kept equal to the list of deliberate differences in
/// `docs/src/architecture/kube-proxy-diff.md`; none shows in the generated set today.
const EXPECTED: &[(&str, &str, &str)] = &[];

#[test]
#[ignore = "needs root: network namespaces"]
fn ferry_and_kube_proxy_agree_in_nftables_mode() {
    differential("ferry_and_kube_proxy_agree_in_nftables_mode", "nftables");
}

#[test]
#[ignore = "needs root: network namespaces"]
fn ferry_and_kube_proxy_agree_in_iptables_mode() {
    differential("ferry_and_kube_proxy_agree_in_iptables_mode", "iptables");
}

fn differential(test: &str, mode: &str) {
    let Some(mut rc) = RealCluster::start(test) else {
        return;
    };
    let Some(program) = rc.cp.assets().kube_proxy.clone() else {
        println!("skipped: {test}: no kube-proxy binary among the Kubernetes binaries");
        eprintln!("skipped: {test}: no kube-proxy binary among the Kubernetes binaries");
        return;
    };
    let full = std::env::var_os("FERRY_DIFF_FULL").is_some_and(|v| v == "1");
    let mut shapes = if full {
        diff::full_set()
    } else {
        diff::small_set()
    };
    prepare_lab(&mut rc);
    apply_objects(&rc, &shapes);
    let kp = kube_proxy::setup(&rc.cp, &program, mode);

    let started = Instant::now();
    let mut kube_proxies = start_kube_proxies(&rc, &kp);
    wait_canary(&rc, 0, &mut kube_proxies);
    let probes: Vec<diff::Probe> = shapes.iter().flat_map(Shape::probes).collect();
    let kp_initial = diff::run_all(&rc.lab, &probes);
    println!(
        "kube-proxy ({mode} mode), {} connections, {:.1?} since its start",
        probes.len(),
        started.elapsed()
    );
    drop(kube_proxies);
    for (node, _) in NODES {
        kp.cleanup(&rc.lab, node);
    }

    let started = Instant::now();
    // kube-proxy runs `iptables`, which is iptables-nft here (Debian's default alternative).
    let extra = ["--proxy-mode", mode, "--iptables-backend", "nft"];
    rc.start_ferries(&extra);
    wait_canary(&rc, 0, &mut []);
    let ferry_initial = diff::run_all(&rc.lab, &probes);
    println!(
        "Ferry ({mode} mode), {:.1?} since its start",
        started.elapsed()
    );

    // The changes, with Ferry running.
    std::fs::write(rc.fail_dir.path().join("web-c"), "").expect("fail web-c's probe");
    std::fs::remove_file(rc.fail_dir.path().join("sick")).expect("sick's probe passes");
    diff::change(&mut shapes);
    apply_services(&rc, &shapes);
    rc.wait_endpoints("diff", "web", "web-c not ready", |eps| {
        eps.iter().any(|e| e.0 == "192.168.36.70" && !e.1)
    });
    rc.wait_endpoints("diff", "sick", "sick ready", |eps| {
        eps.iter().all(|e| e.1) && !eps.is_empty()
    });
    let probes: Vec<diff::Probe> = shapes.iter().flat_map(Shape::probes).collect();
    wait_canary(&rc, 1, &mut []);
    let ferry_changed = diff::run_all(&rc.lab, &probes);

    rc.ferries.clear();
    for (node, _) in NODES {
        rc.lab
            .exec(node, [FERRY, "cleanup"])
            .unwrap_or_else(|e| panic!("ferry cleanup on {node}: {e}"));
        kube_proxy::flush_conntrack(&rc.lab, node);
    }
    let mut kube_proxies = start_kube_proxies(&rc, &kp);
    wait_canary(&rc, 1, &mut kube_proxies);
    let kp_changed = diff::run_all(&rc.lab, &probes);
    drop(kube_proxies);

    let mut found = BTreeMap::new();
    for (round, a, b) in [
        ("initial", &kp_initial, &ferry_initial),
        ("changed", &kp_changed, &ferry_changed),
    ] {
        for (k, d) in diff::differences(a, b) {
            found.insert(format!("{round}: {k}"), d);
        }
    }
    let expected: BTreeSet<&str> = EXPECTED
        .iter()
        .filter(|(m, _, _)| *m == mode)
        .map(|(_, k, _)| *k)
        .collect();
    let unexpected: Vec<String> = found
        .iter()
        .filter(|(k, _)| !expected.contains(k.as_str()))
        .map(|(k, (a, b))| format!("  {k}\n    kube-proxy: {a}\n    Ferry:      {b}\n"))
        .collect();
    // The list names the small set's connections: the whole set is checked for new ones only.
    let gone: Vec<&str> = expected
        .iter()
        .filter(|k| !full && !found.contains_key(**k))
        .copied()
        .collect();
    println!(
        "kube-proxy, initial:\n{}\nkube-proxy, changed:\n{}",
        diff::render(&kp_initial),
        diff::render(&kp_changed)
    );
    assert!(
        unexpected.is_empty() && gone.is_empty(),
        "{mode} mode: {} unexpected difference(s) from kube-proxy:\n{}\n\
         listed differences that no longer show: {gone:?}",
        unexpected.len(),
        unexpected.concat()
    );
}

/// The probing Pod, the second client, and the clients' routes (as a router in front of the
/// cluster would have them): load-balancer IPs to k8s-node2 and k8s-master, external IPs to
/// k8s-node1, the Service CIDR to k8s-master.
fn prepare_lab(rc: &mut RealCluster) {
    rc.lab
        .add_client(&ClientSpec {
            name: diff::CLIENT2.0.into(),
            ip: diff::CLIENT2.1.parse().expect("client2's address"),
            pod_routes: true,
        })
        .expect("add client2");
    // Rejections are ICMP messages, which a node rate-limits per destination (a burst of 6,
    // then one a second): the many rejected connections of one client would time out at
    // random. The limit is per namespace; the lab's nodes lift it.
    for node in rc.lab.nodes() {
        ferry_lab::netns::sysctl(&node.netns, &[("net.ipv4.icmp_ratelimit", "0")])
            .expect("lift the ICMP rate limit");
    }
    let ip: Ipv4Addr = diff::PROBE_POD.1.parse().expect("probe pod's address");
    rc.lab
        .add_pod(MASTER, diff::PROBE_POD.0, ip)
        .expect("add the probe pod");
    let routes = [
        ("198.18.0.0/24", diff::NODE2_IP),
        ("198.18.2.0/24", diff::MASTER_IP),
        ("198.18.1.0/24", diff::NODE1_IP),
        ("10.96.0.0/12", diff::MASTER_IP),
    ];
    for client in [Host::default_client(), Host::client(diff::CLIENT2.0)] {
        for (dst, via) in routes {
            rc.lab
                .add_route(
                    &client,
                    dst.parse().expect("route"),
                    via.parse().expect("via"),
                )
                .expect("add a client's route");
        }
    }
}

/// The Pods (the `sick` one failing its probe, the `term` one deleted with a long grace
/// period) and the Services; returns once the EndpointSlices say so.
fn apply_objects(rc: &RealCluster, shapes: &[Shape]) {
    rc.cp.ensure_namespace("diff").expect("namespace diff");
    std::fs::write(rc.fail_dir.path().join("sick"), "").expect("fail sick's probe");
    let pods: String = diff::PODS
        .iter()
        .map(|(name, ip, node, app, _)| pod_yaml("diff", name, ip, node, app))
        .collect();
    rc.apply(&pods);
    let web = "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  namespace: diff\nspec:\n  \
               selector:\n    app: web\n  ports:\n  - port: 80\n    targetPort: 56010\n\
               ---\napiVersion: v1\nkind: Service\nmetadata:\n  name: sick\n  namespace: diff\n\
               spec:\n  selector:\n    app: sick\n  ports:\n  - port: 80\n    targetPort: 56010\n\
               ---\napiVersion: v1\nkind: Service\nmetadata:\n  name: term\n  namespace: diff\n\
               spec:\n  selector:\n    app: term\n  ports:\n  - port: 80\n    targetPort: 56010\n";
    rc.apply(web);
    apply_services(rc, shapes);
    rc.wait_endpoints("diff", "web", "three ready", |eps| {
        eps.len() == 3 && eps.iter().all(|e| e.1)
    });
    rc.wait_endpoints("diff", "sick", "one not ready", |eps| {
        eps.len() == 1 && !eps[0].1
    });
    rc.wait_endpoints("diff", "term", "one ready", |eps| {
        eps.len() == 1 && eps[0].1
    });
    // An hour's grace: the whole set's rounds take longer than the Pod's own 600 s.
    rc.kubectl(&[
        "-n",
        "diff",
        "delete",
        "pod",
        "term",
        "--wait=false",
        "--grace-period=3600",
    ]);
    rc.wait_endpoints("diff", "term", "terminating and serving", |eps| {
        eps.len() == 1 && !eps[0].1 && eps[0].2 && eps[0].3
    });
}

fn apply_services(rc: &RealCluster, shapes: &[Shape]) {
    let yaml: String = shapes.iter().map(Shape::manifest).collect();
    rc.apply(&yaml);
    for s in shapes {
        if let Some(patch) = s.status_patch() {
            rc.kubectl(&[
                "-n",
                "diff",
                "patch",
                "service",
                &s.name,
                "--subresource=status",
                "--type=merge",
                "-p",
                &patch,
            ]);
        }
    }
}

fn start_kube_proxies(rc: &RealCluster, kp: &kube_proxy::KubeProxySetup) -> Vec<LabProcess> {
    NODES
        .iter()
        .map(|(node, _)| kp.start(&rc.lab, node))
        .collect()
}

/// Creates Service `canary-<n>` (the last write of a round) and waits until every node's
/// proxy sends its ClusterIP to a `web` Pod: the proxy has seen everything written before.
fn wait_canary(rc: &RealCluster, n: u8, kube_proxies: &mut [LabProcess]) {
    let ip = format!("10.96.101.{}", 10 + n);
    rc.apply(&format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: canary-{n}\n  namespace: diff\n\
         spec:\n  clusterIP: {ip}\n  selector:\n    app: web\n  ports:\n  - port: 80\n    \
         targetPort: 56010\n"
    ));
    let url = format!("http://{ip}/hello");
    let deadline = Instant::now() + ferry_lab::scaled(Duration::from_secs(60));
    for (node, _) in NODES {
        loop {
            if matches!(rc.curl(&Host::node(node), &url), CurlResult::Ok(_)) {
                break;
            }
            let logs: String = kube_proxies
                .iter_mut()
                .map(|p| {
                    let running = p.is_running();
                    format!("--- {} (running: {running}):\n{}", p.name(), p.log())
                })
                .collect();
            assert!(
                kube_proxies.iter_mut().all(LabProcess::is_running),
                "a kube-proxy exited:\n{logs}"
            );
            assert!(
                Instant::now() < deadline,
                "{node}: canary-{n} never answered\n{logs}\n{}",
                rc.logs()
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// The generated sets never give two Services one address or port (the API server would
/// refuse the second, or a probe would reach the wrong one), and the second round's changes
/// touch both types and policies.
#[test]
fn the_generated_sets_have_distinct_addresses_and_ports_and_the_changes_touch_them() {
    for (name, mut set) in [("small", diff::small_set()), ("full", diff::full_set())] {
        let mut seen = BTreeSet::new();
        for s in &set {
            for key in [
                s.name.clone(),
                s.cluster_ip(),
                s.node_port().to_string(),
                s.health_check_node_port().to_string(),
                s.external_ip(),
            ]
            .into_iter()
            .chain(s.lb_ips())
            {
                assert!(seen.insert(key.clone()), "{name} set: {key} used twice");
            }
        }
        let before: Vec<String> = set.iter().map(Shape::manifest).collect();
        diff::change(&mut set);
        let after: Vec<String> = set.iter().map(Shape::manifest).collect();
        let changed = before.iter().zip(&after).filter(|(a, b)| a != b).count();
        assert!(changed >= 4, "{name} set: only {changed} Services changed");
        let became_node_port = before
            .iter()
            .zip(&after)
            .any(|(a, b)| a.contains("type: ClusterIP") && b.contains("type: NodePort"));
        assert!(became_node_port, "{name} set: no type change");
    }
}

/// kube-proxy's configuration is kubeadm's with only `conntrack.maxPerCore` changed.
#[test]
fn kube_proxys_configuration_is_kubeadms_with_max_per_core_zero() {
    let text = kube_proxy::config("nftables", "192.168.0.0/16", std::path::Path::new("/k"));
    for line in [
        "kind: KubeProxyConfiguration",
        "mode: nftables",
        "clusterCIDR: 192.168.0.0/16",
        "  kubeconfig: /k",
        "  maxPerCore: 0",
        "hostnameOverride: \"\"",
    ] {
        assert!(text.lines().any(|l| l == line), "no {line:?} in\n{text}");
    }
    assert_eq!(kube_proxy::CHANGED_SETTINGS.len(), 1);
}
