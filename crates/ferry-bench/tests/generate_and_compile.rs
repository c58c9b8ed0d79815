//! The generator and the compile step on small clusters (no root, no kernel).

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};

use ipnet::Ipv4Net;

use ferry_bench::cluster::{ClusterSpec, ServiceKind};
use ferry_bench::compile::{build_state, compile, compile_config, node_context, RulesetSize};
use ferry_compile::nft::{NodeRules, Transaction, Value, Verdict};
use ferry_compile::NodeCompiler;
use ferry_model::{Object, TrafficPolicy};

fn spec(n: usize, m: usize) -> ClusterSpec {
    ClusterSpec::new(n, m).expect("valid spec")
}

fn net(s: &str) -> Ipv4Net {
    s.parse().expect("cidr")
}

#[test]
fn the_generator_uses_realistic_unique_addresses() {
    let spec = spec(300, 4);
    let objects = spec.objects();
    let services: Vec<_> = objects
        .iter()
        .filter_map(|o| match o {
            Object::Service(s) => Some(s),
            _ => None,
        })
        .collect();
    assert_eq!(services.len(), 300);
    let names: BTreeSet<_> = services.iter().map(|s| s.name.clone()).collect();
    assert_eq!(names.len(), 300, "service names are unique");
    let ips: BTreeSet<_> = services.iter().map(|s| s.cluster_ips[0]).collect();
    assert_eq!(ips.len(), 300, "ClusterIPs are unique");
    let range = net("10.96.0.0/12");
    assert!(ips
        .iter()
        .all(|ip| matches!(ip, IpAddr::V4(v4) if range.contains(v4))));

    let mut pods = BTreeSet::new();
    for o in &objects {
        if let Object::EndpointSlice(slice) = o {
            assert_eq!(slice.endpoints.len(), 4);
            for ep in &slice.endpoints {
                let IpAddr::V4(ip) = ep.address else {
                    panic!("IPv4 only")
                };
                let node = ep.node_name().expect("endpoints have a node");
                let idx: usize = node.trim_start_matches("node-").parse().expect("node-N");
                let cidr = net(&format!("10.{}.0.0/14", 64 + 4 * idx));
                assert!(cidr.contains(&ip), "{ip} on {node} is outside {cidr}");
                assert!(net("10.0.0.0/8").contains(&ip));
                assert!(!range.contains(&ip), "pods stay out of the service range");
                pods.insert(ip);
            }
        }
    }
    assert_eq!(pods.len(), 300 * 4, "pod IPs are unique");
    let fresh: Ipv4Addr = match spec.changed_slice(0).1.endpoints[0].address {
        IpAddr::V4(ip) => ip,
        IpAddr::V6(_) => panic!("IPv4 only"),
    };
    assert!(
        !pods.contains(&fresh),
        "a change moves an endpoint to a new pod"
    );
}

#[test]
fn services_mix_cluster_ip_and_node_port_kinds() {
    let spec = spec(10, 3);
    let kinds: Vec<_> = (0..10).map(|i| spec.kind(i)).collect();
    assert_eq!(
        kinds[0],
        ServiceKind::NodePort {
            node_port: 30000,
            policy: TrafficPolicy::Cluster
        }
    );
    assert_eq!(
        kinds[5],
        ServiceKind::NodePort {
            node_port: 30001,
            policy: TrafficPolicy::Local
        }
    );
    assert_eq!(
        kinds
            .iter()
            .filter(|k| **k == ServiceKind::ClusterIp)
            .count(),
        8
    );
    // The default NodePort range holds 2768 ports: beyond that, services stay ClusterIP.
    let big = ClusterSpec::new(20_000, 1).expect("valid spec");
    assert_eq!(big.kind(5 * 2768), ServiceKind::ClusterIp);
    assert!(matches!(
        big.kind(5 * 2767),
        ServiceKind::NodePort {
            node_port: 32767,
            ..
        }
    ));
}

#[test]
fn a_tiny_cluster_compiles_to_the_expected_counts() {
    // 10 services × 3 endpoints, compiled for node-1:
    // - services 0 (NodePort, Cluster policy) and 5 (NodePort, Local policy), 8 ClusterIP;
    // - chains: 9 base + 10 fixed (session affinity's post-DNAT hook and `affinity-record`
    //   included) + 3 shared dispatch chains: `cluster-ip-cluster-3` (all ten
    //   ClusterIPs), `nodeport-cluster-3` (service 0), `nodeport-local-3-1` (service 5 has one
    //   endpoint on node-1: pod 16);
    // - elements: 10 cluster-ips + 10 hairpin (node-1's pods 1, 4, … 28) + 10 service-ips
    //   + 2 service-nodeports
    //   + 1 nodeport-ips (node-1's InternalIP) + 30 cluster-endpoints (10 × 3 slots)
    //   + 6 nodeport-cluster-endpoints (2 × 3) + 1 nodeport-local-endpoints;
    // - rules: 29 base/fixed + 2 (ClusterIP: masquerade, DNAT) + 2 (NodePort, Cluster:
    //   masquerade, DNAT) + 4 (NodePort, Local: pods, node masquerade, node, local).
    let state = build_state(spec(10, 3).objects());
    let (rs, _) = compile(&state, &node_context(), &compile_config().expect("config"));
    let size = RulesetSize::of(&rs);
    assert_eq!(size.chains, 22);
    assert_eq!(size.service_chains, 3);
    assert_eq!(size.sets, 17);
    assert_eq!(size.elements, 70);
    assert_eq!(size.rules, 37);
    assert!(size.script_bytes > 0);
    let els = rs.all_elements();
    let count = |set: &str| els.get(set).map_or(0, Vec::len);
    assert_eq!(count("cluster-ips"), 10);
    assert_eq!(count("hairpin"), 10);
    assert_eq!(count("service-ips"), 10);
    assert_eq!(count("service-nodeports"), 2);
    assert_eq!(count("nodeport-ips"), 1);
    assert_eq!(count("no-endpoint-services"), 0);
    assert_eq!(count("cluster-endpoints"), 30);
    assert_eq!(count("nodeport-cluster-endpoints"), 6);
    assert_eq!(count("nodeport-local-endpoints"), 1);
}

#[test]
fn counts_scale_as_the_formula_says() {
    // chains = 19 + `cluster-ip-cluster-M` + `nodeport-cluster-M` + one `nodeport-local-M-L`
    // per distinct local endpoint count L of the Local-policy NodePorts;
    // elements = 2N (cluster-ips, service-ips) + node-1's pods (hairpin: pods p with
    //   p mod 3 = 1 of the N×M) + N×M (cluster-endpoints)
    //   + NodePort × (1 + M) (service-nodeports, nodeport-cluster-endpoints)
    //   + Σ L (nodeport-local-endpoints) + 1.
    for (n, m) in [(100, 10), (250, 4)] {
        let spec = spec(n, m);
        let node_ports = (0..n)
            .filter(|i| spec.kind(*i) != ServiceKind::ClusterIp)
            .count();
        let state = build_state(spec.objects());
        let (rs, _) = compile(&state, &node_context(), &compile_config().expect("config"));
        let local_counts: Vec<usize> = rs
            .all_elements()
            .get("service-nodeports")
            .into_iter()
            .flatten()
            .filter_map(|e| match &e.value {
                Some(Value::Verdict(Verdict::Goto(c))) => c
                    .strip_prefix(&format!("nodeport-local-{m}-"))
                    .and_then(|l| l.parse().ok()),
                _ => None,
            })
            .collect();
        let distinct: std::collections::BTreeSet<_> = local_counts.iter().collect();
        let size = RulesetSize::of(&rs);
        assert_eq!(size.chains, 21 + distinct.len(), "N={n}");
        let local: usize = local_counts.iter().sum();
        assert_eq!(
            size.elements,
            2 * n + (n * m + 1) / 3 + n * m + node_ports * (1 + m) + local + 1,
            "N={n}"
        );
    }
}

#[test]
fn an_endpoint_change_recompiles_one_service_and_changes_elements_only() {
    // Change 0 moves pod 15 (node-0) to pod 30 (node-0); change 1 pod 13 (node-1) to pod 31
    // (node-1): only this node's pods are in `hairpin`.
    for (k, hairpin) in [(0, false), (1, true)] {
        endpoint_change(k, hairpin);
    }
}

fn endpoint_change(k: usize, hairpin: bool) {
    let spec = spec(10, 3);
    let ctx = node_context();
    let cfg = compile_config().expect("config");
    let mut state = build_state(spec.objects());
    let (installed, _) = compile(&state, &ctx, &cfg);

    let (i, slice) = spec.changed_slice(k);
    let touched = state.apply(Object::from(slice));
    assert_eq!(touched.services.len(), 1);
    let compiler = NodeCompiler::new(&state, &ctx, &cfg);
    let rules = NodeRules::new(&compiler);
    assert!(
        installed.same_base(&rules.base()),
        "an endpoint change must not need a full sync"
    );
    let changes: std::collections::BTreeMap<_, _> = touched
        .services
        .iter()
        .map(|name| (name.clone(), rules.service(&state, name)))
        .collect();
    let name = touched.services.iter().next().expect("one service").clone();
    assert_eq!(&*name.name, spec.name(i));

    // The agent's per-service recompile equals that service in a full recompile.
    let (full, _) = compile(&state, &ctx, &cfg);
    assert_eq!(
        changes.get(&name).cloned().flatten().as_ref(),
        full.services.get(&name)
    );

    let tx = Transaction::delta(&installed, &changes);
    assert_eq!(tx.chains_written, 0, "{}", tx.text);
    assert!(!tx.text.contains("chain"), "no chain or rule: {}", tx.text);
    assert!(tx.text.contains("cluster-endpoints"), "{}", tx.text);
    for verb in ["delete", "add"] {
        assert_eq!(
            tx.text
                .contains(&format!("{verb} element ip ferry hairpin")),
            hairpin,
            "change {k}: {}",
            tx.text
        );
    }
}

/// The whole benchmark at N=100, end to end (needs root: it creates network namespaces).
#[test]
#[ignore = "needs root: network namespaces"]
fn quick_run_succeeds() {
    assert!(ferry_lab::running_as_root(), "the benchmark needs root");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ferry-bench"))
        .args(["--quick", "--changes=3", "--compile-runs=1"])
        .output()
        .expect("run ferry-bench");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("BENCH mode=nftables n=100 m=10 "),
        "{stdout}"
    );
    assert!(stdout.contains("status=ok"), "{stdout}");
}
