//! Golden outputs of `ferry explain` (text, JSON, Mermaid), including the seed question:
//! client → k8s-node1:32223 with the Local and the Cluster policy. `FERRY_BLESS=1` rewrites them.

use std::path::Path;
use std::process::Command;

#[path = "support/flows.rs"]
mod flows;
#[path = "support/seed.rs"]
mod seed;

/// One explained packet: its golden files are `<name>.{txt,json,mmd}`.
struct Case {
    name: &'static str,
    policy: &'static str,
    node: &'static str,
    from: &'static str,
    to: &'static str,
    mode: &'static str,
    /// Further flags (`--node-address`).
    extra: &'static [&'static str],
    /// With the flows' `dev/only-a` Service (pod A its only endpoint).
    only_a: bool,
    /// With the API server's default ServiceCIDR ([`SERVICE_CIDR`]).
    service_cidr: bool,
}

/// The ServiceCIDR a 1.33+ API server makes from `--service-cluster-ip-range` (the seed's
/// ClusterIPs are in it).
const SERVICE_CIDR: &str = "apiVersion: networking.k8s.io/v1
kind: ServiceCIDR
metadata:
  name: kubernetes
spec:
  cidrs: [\"10.96.0.0/12\"]
";

const fn case(
    name: &'static str,
    policy: &'static str,
    node: &'static str,
    from: &'static str,
    to: &'static str,
    mode: &'static str,
) -> Case {
    Case {
        name,
        policy,
        node,
        from,
        to,
        mode,
        extra: &[],
        only_a: false,
        service_cidr: false,
    }
}

const POD_A: &str = "192.168.169.166";

const CASES: &[Case] = &[
    case(
        "seed-local-node1",
        "Local",
        "k8s-node1",
        "10.1.1.100",
        "10.1.1.17:32223",
        "nftables",
    ),
    case(
        "seed-cluster-node1",
        "Cluster",
        "k8s-node1",
        "10.1.1.100",
        "10.1.1.17:32223",
        "nftables",
    ),
    case(
        "seed-local-node2",
        "Local",
        "k8s-node2",
        "10.1.1.100",
        "10.1.1.9:32223/tcp",
        "nftables",
    ),
    case(
        "pod-to-cluster-ip",
        "Cluster",
        "k8s-master",
        "192.168.235.200",
        "10.96.198.86:8080",
        "nftables",
    ),
    case(
        "seed-local-node1-iptables",
        "Local",
        "k8s-node1",
        "10.1.1.100",
        "10.1.1.17:32223",
        "iptables",
    ),
    case(
        "seed-cluster-node1-iptables",
        "Cluster",
        "k8s-node1",
        "10.1.1.100",
        "10.1.1.17:32223",
        "iptables",
    ),
    // Hairpin: masqueraded only when the chosen endpoint is the sender.
    case(
        "hairpin-two-endpoints",
        "Cluster",
        "k8s-node2",
        POD_A,
        "10.96.198.86:8080",
        "nftables",
    ),
    case(
        "hairpin-two-endpoints-iptables",
        "Cluster",
        "k8s-node2",
        POD_A,
        "10.96.198.86:8080",
        "iptables",
    ),
    Case {
        only_a: true,
        ..case(
            "hairpin-only-endpoint",
            "Cluster",
            "k8s-node2",
            POD_A,
            "10.96.0.60:8080",
            "nftables",
        )
    },
    // A NodePort on a secondary address: outside nodePortAddresses (the primary IPs: nftables
    // mode's default, given to iptables mode, whose default is every local address), so not
    // translated; iptables mode's filter drops it anyway without a local endpoint.
    Case {
        extra: &["--node-address", "10.1.1.27"],
        ..case(
            "node-port-secondary-address-local",
            "Local",
            "k8s-node1",
            "10.1.1.100",
            "10.1.1.27:32223",
            "nftables",
        )
    },
    Case {
        extra: &[
            "--node-address",
            "10.1.1.27",
            "--nodeport-addresses",
            "primary",
        ],
        ..case(
            "node-port-secondary-address-local-iptables",
            "Local",
            "k8s-node1",
            "10.1.1.100",
            "10.1.1.27:32223",
            "iptables",
        )
    },
    case(
        "node-port-not-a-node-address",
        "Cluster",
        "k8s-node1",
        "10.1.1.100",
        "10.1.1.9:32223",
        "nftables",
    ),
    // The userspace mode: redirected to Ferry's proxy port, the endpoint sees the node.
    case(
        "seed-cluster-node1-userspace",
        "Cluster",
        "k8s-node1",
        "10.1.1.100",
        "10.1.1.17:32223",
        "userspace",
    ),
    // Localhost NodePorts (iptables mode's default): Ferry's proxy on 127.0.0.1.
    case(
        "localhost-node-port-iptables",
        "Local",
        "k8s-node1",
        "10.1.1.17",
        "127.0.0.1:32223",
        "iptables",
    ),
    // An address of the service CIDR that no Service holds: nftables mode drops it (upstream's
    // cluster-ips-check); iptables mode, as upstream's, routes it on.
    Case {
        service_cidr: true,
        ..case(
            "unallocated-service-ip",
            "Cluster",
            "k8s-node2",
            POD_A,
            "10.96.0.99:80",
            "nftables",
        )
    },
    Case {
        service_cidr: true,
        ..case(
            "unallocated-service-ip-iptables",
            "Cluster",
            "k8s-node2",
            POD_A,
            "10.96.0.99:80",
            "iptables",
        )
    },
];

#[test]
fn explain_outputs_match_the_golden_files() {
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/explain");
    let bless = std::env::var_os("FERRY_BLESS").is_some();
    let mut failures = Vec::new();
    for c in CASES {
        let manifests = seed::Manifests::new(c.policy);
        if c.only_a {
            for (name, text) in flows::EXTRA_MANIFESTS {
                manifests.put(name, text);
            }
        }
        if c.service_cidr {
            manifests.put("service-cidr.yaml", SERVICE_CIDR);
        }
        let dir = manifests.path().display().to_string();
        for (output, ext) in [("text", "txt"), ("json", "json"), ("mermaid", "mmd")] {
            let out = Command::new(seed::FERRY)
                .args(["explain", "--manifests", &dir, "--node", c.node])
                .args(["--from", c.from, "--to", c.to])
                .args(["--cluster-cidr", "192.168.0.0/16", "--output", output])
                .args(["--proxy-mode", c.mode])
                .args(c.extra)
                .output()
                .expect("run ferry explain");
            let name = c.name;
            assert!(
                out.status.success(),
                "{name}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            let got = String::from_utf8_lossy(&out.stdout).into_owned();
            let path = golden.join(format!("{name}.{ext}"));
            if bless {
                std::fs::write(&path, &got).expect("write golden");
            } else if std::fs::read_to_string(&path).unwrap_or_default() != got {
                failures.push(format!(
                    "{} differs (FERRY_BLESS=1 rewrites):\n{got}",
                    path.display()
                ));
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// The seed's NodePort with `sessionAffinity: ClientIP` (timeoutSeconds 600): the pin step,
/// in both modes (text output).
#[test]
fn explain_with_session_affinity_matches_the_golden_files() {
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/explain");
    let bless = std::env::var_os("FERRY_BLESS").is_some();
    let mut manifests = seed::Manifests::new("Cluster");
    manifests.affinity_timeout = Some(600);
    manifests.write();
    let dir = manifests.path().display().to_string();
    for (name, mode) in [
        ("affinity-node-port", "nftables"),
        ("affinity-node-port-iptables", "iptables"),
    ] {
        let out = Command::new(seed::FERRY)
            .args(["explain", "--manifests", &dir, "--node", "k8s-node1"])
            .args(["--from", "10.1.1.100", "--to", "10.1.1.17:32223"])
            .args(["--cluster-cidr", "192.168.0.0/16", "--proxy-mode", mode])
            .output()
            .expect("run ferry explain");
        assert!(out.status.success(), "{name}: {out:?}");
        let got = String::from_utf8_lossy(&out.stdout).into_owned();
        let path = golden.join(format!("{name}.txt"));
        if bless {
            std::fs::write(&path, &got).expect("write golden");
        } else {
            let want = std::fs::read_to_string(&path).unwrap_or_default();
            assert_eq!(want, got, "{} (FERRY_BLESS=1 rewrites)", path.display());
        }
    }
}
