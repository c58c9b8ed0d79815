//! Golden rulesets: `tests/golden/<case>/input.yaml` compiled for a node gives
//! `<case>/<node>.nft`, `<case>/<node>.iptables`, `<case>/<node>.ipvs` and
//! `<case>/<node>.userspace.nft` (IPv4), and for IPv6 cases `<case>/<node>.ip6.nft`,
//! `<case>/<node>.ip6tables`, `<case>/<node>.ip6.ipvs` and `<case>/<node>.ip6.userspace.nft`
//! (the `ip6 ferry` table, the `ip6tables-restore` input, IPVS mode's state: kube-ipvs0's
//! addresses, `ipvsadm -Ln`, `ipset save` and the chains, and the userspace mode's table and
//! proxy ports), checked into git: what `ferry rules` prints. IPVS mode is compiled for a node
//! whose only addresses are its Node object's InternalIPs.
//! `FERRY_BLESS=1 cargo test -p ferry-compile --test golden` rewrites them; review the diff. As
//! root, each nft file is also checked with `nft -c -f`, and each iptables file loaded with
//! `iptables-restore --noflush` (both backends), inside a throw-away network namespace.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use ferry_compile::config::LocalDetector;
use ferry_compile::iptables::without_nfacct;
use ferry_compile::mode::{
    IptablesRenderer, IpvsRenderer, NftRenderer, ProxyMode, Renderer, UserspaceRenderer,
};
use ferry_compile::{CompileConfig, NfacctCounters, NodeCompiler};
use ferry_model::{ClusterState, IpFamily, NodeContext};

#[derive(Clone)]
struct Case {
    dir: &'static str,
    node: &'static str,
    config: CompileConfig,
}

impl Case {
    /// The golden file of a mode: `<node>.nft` / `<node>.iptables` / `<node>.ipvs` /
    /// `<node>.userspace.nft` for IPv4, `<node>.ip6.nft` / `<node>.ip6tables` /
    /// `<node>.ip6.ipvs` / `<node>.ip6.userspace.nft` for IPv6.
    fn file(&self, mode: ProxyMode) -> PathBuf {
        let name = match (self.config.family, mode) {
            (IpFamily::V4, ProxyMode::Nftables) => format!("{}.nft", self.node),
            (IpFamily::V4, ProxyMode::Iptables) => format!("{}.iptables", self.node),
            (IpFamily::V6, ProxyMode::Nftables) => format!("{}.ip6.nft", self.node),
            (IpFamily::V6, ProxyMode::Iptables) => format!("{}.ip6tables", self.node),
            (IpFamily::V4, ProxyMode::Ipvs) => format!("{}.ipvs", self.node),
            (IpFamily::V6, ProxyMode::Ipvs) => format!("{}.ip6.ipvs", self.node),
            (IpFamily::V4, ProxyMode::Userspace) => format!("{}.userspace.nft", self.node),
            (IpFamily::V6, ProxyMode::Userspace) => format!("{}.ip6.userspace.nft", self.node),
        };
        golden_dir().join(self.dir).join(name)
    }

    /// The restore tool of a backend for this case's family.
    fn restore(&self, backend: &str) -> String {
        match self.config.family {
            IpFamily::V4 => format!("iptables-{backend}-restore"),
            IpFamily::V6 => format!("ip6tables-{backend}-restore"),
        }
    }
}

/// The dual-stack case, compiled for one family: both families' pod CIDRs given, as
/// kube-proxy's comma-separated `--cluster-cidr` does.
fn dual_stack(family: IpFamily) -> Case {
    dual_stack_case("dual-stack", family)
}

fn dual_stack_case(dir: &'static str, family: IpFamily) -> Case {
    Case {
        dir,
        node: "node-a",
        config: CompileConfig {
            family,
            local_detector: LocalDetector::ClusterCidr(vec![
                "10.244.0.0/16".parse().expect("cidr"),
                "fd00:10:244::/48".parse().expect("cidr"),
            ]),
            ..CompileConfig::default()
        },
    }
}

/// The ServiceCIDR case, compiled for one family.
fn service_cidrs(family: IpFamily) -> Case {
    Case {
        dir: "service-cidrs",
        node: "node-a",
        config: CompileConfig {
            family,
            local_detector: LocalDetector::ClusterCidr(vec![
                "10.0.0.0/8".parse().expect("cidr"),
                "fd00:10::/32".parse().expect("cidr"),
            ]),
            ..CompileConfig::default()
        },
    }
}

fn cluster_cidr(cidr: &str) -> CompileConfig {
    CompileConfig {
        local_detector: LocalDetector::ClusterCidr(vec![cidr.parse().expect("cidr")]),
        ..CompileConfig::default()
    }
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            dir: "seed-cluster",
            node: "k8s-node1",
            config: cluster_cidr("192.168.0.0/16"),
        },
        Case {
            dir: "seed-cluster",
            node: "k8s-node2",
            config: cluster_cidr("192.168.0.0/16"),
        },
        Case {
            dir: "seed-local",
            node: "k8s-node1",
            config: cluster_cidr("192.168.0.0/16"),
        },
        Case {
            dir: "seed-local",
            node: "k8s-node2",
            config: cluster_cidr("192.168.0.0/16"),
        },
        Case {
            dir: "load-balancer",
            node: "node-a",
            config: cluster_cidr("10.0.0.0/16"),
        },
        Case {
            dir: "load-balancer",
            node: "node-b",
            config: cluster_cidr("10.0.0.0/16"),
        },
        Case {
            dir: "session-affinity",
            node: "node-a",
            config: cluster_cidr("10.0.0.0/8"),
        },
        Case {
            dir: "protocols-and-policies",
            node: "node-a",
            config: CompileConfig {
                masquerade_all: true,
                masquerade_bit: 13,
                local_detector: LocalDetector::NodeCidr,
                ..CompileConfig::default()
            },
        },
        dual_stack(IpFamily::V4),
        dual_stack(IpFamily::V6),
        dual_stack_case("session-affinity-dual-stack", IpFamily::V4),
        dual_stack_case("session-affinity-dual-stack", IpFamily::V6),
        // The seed's Local-policy cluster with the interface local-traffic detectors: pod
        // traffic is told by the interface it came in on.
        Case {
            dir: "interface-bridge",
            node: "k8s-node2",
            config: CompileConfig {
                local_detector: LocalDetector::BridgeInterface("cbr0".to_owned()),
                ..CompileConfig::default()
            },
        },
        Case {
            dir: "interface-prefix",
            node: "k8s-node2",
            config: CompileConfig {
                local_detector: LocalDetector::InterfaceNamePrefix("veth".to_owned()),
                ..CompileConfig::default()
            },
        },
        // ServiceCIDRs: nftables mode drops unallocated addresses of the ranges.
        service_cidrs(IpFamily::V4),
        service_cidrs(IpFamily::V6),
        Case {
            dir: "topology",
            node: "node-a1",
            config: cluster_cidr("10.0.0.0/16"),
        },
        Case {
            dir: "topology",
            node: "node-b1",
            config: cluster_cidr("10.0.0.0/16"),
        },
    ]
}

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// The renderer of a mode (what `ferry rules` prints).
fn renderer(mode: ProxyMode) -> &'static dyn Renderer {
    match mode {
        ProxyMode::Nftables => &NftRenderer,
        ProxyMode::Iptables => &IptablesRenderer,
        ProxyMode::Ipvs => &IpvsRenderer,
        ProxyMode::Userspace => &UserspaceRenderer,
    }
}

fn compile(case: &Case, mode: ProxyMode) -> String {
    let scan = ferry_source::manifest::load(&golden_dir().join(case.dir).join("input.yaml"));
    assert!(scan.errors.is_empty(), "{}: {:?}", case.dir, scan.errors);
    let mut state = ClusterState::new();
    for obj in scan.objects {
        state.apply(obj);
    }
    let ctx = NodeContext {
        node_name: case.node.into(),
        family: case.config.family,
    };
    // Each mode's default, as `ferry rules` prints it (on a kernel with nfacct).
    let config = CompileConfig {
        localhost_node_ports: mode.localhost_node_ports_default(),
        nfacct: NfacctCounters::ALL,
        ..case.config.clone()
    };
    let compiler = NodeCompiler::new(&state, &ctx, &config);
    renderer(mode).render(&compiler, &state)
}

#[test]
fn rulesets_match_the_golden_files() {
    let bless = std::env::var_os("FERRY_BLESS").is_some();
    let mut failures = Vec::new();
    for (case, mode) in cases()
        .into_iter()
        .flat_map(|c| ProxyMode::ALL.map(|m| (c.clone(), m)))
    {
        let got = compile(&case, mode);
        assert_eq!(
            got,
            compile(&case, mode),
            "{}: output must be deterministic",
            case.dir
        );
        let path = case.file(mode);
        if bless {
            std::fs::write(&path, &got).expect("write golden file");
            continue;
        }
        let want = std::fs::read_to_string(&path).unwrap_or_default();
        if got != want {
            failures.push(format!(
                "{} differs (FERRY_BLESS=1 to rewrite):\n{got}",
                path.display()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// A network namespace deleted on drop, even when the test panics.
struct Netns(String);

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn running_as_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .map(|s| {
            s.lines()
                .any(|l| l.starts_with("Uid:") && l.split_whitespace().nth(1) == Some("0"))
        })
        .unwrap_or(false)
}

impl Netns {
    fn create(tag: &str) -> Netns {
        let ns = Netns(format!("ferry-golden-{tag}-{}", std::process::id()));
        let ok = Command::new("ip")
            .args(["netns", "add", &ns.0])
            .status()
            .expect("ip netns add");
        assert!(ok.success());
        ns
    }
}

#[test]
#[ignore = "needs root: network namespaces"]
fn golden_files_are_valid_nftables() {
    assert!(
        running_as_root(),
        "needs root: run the ignored tests as root"
    );
    let ns = Netns::create("nft");
    for case in cases() {
        let path = case.file(ProxyMode::Nftables);
        let mut text = std::fs::read_to_string(&path).expect("golden file");
        if case.config.family == IpFamily::V6 {
            // nft 1.0.6 cannot generate the IPv6 session affinity `update` rules (an
            // assertion in its register allocation); Ferry writes them over netlink and
            // ferry-dataplane/tests/affinity_kernel.rs checks the kernel takes them.
            text = text
                .lines()
                .filter(|l| !l.contains(" update @"))
                .map(|l| format!("{l}\n"))
                .collect();
        }
        let mut child = Command::new("ip")
            .args(["netns", "exec", &ns.0, "nft", "-c", "-f", "-"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("run nft -c");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(text.as_bytes())
            .expect("write to nft");
        let out = child.wait_with_output().expect("nft -c");
        assert!(
            out.status.success(),
            "{}: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
#[ignore = "needs root: network namespaces"]
fn golden_files_load_with_iptables_restore_on_both_backends() {
    assert!(
        running_as_root(),
        "needs root: run the ignored tests as root"
    );
    for backend in ["nft", "legacy"] {
        for case in cases() {
            let restore = case.restore(backend);
            let restore = restore.as_str();
            assert!(
                Command::new(restore).arg("--version").output().is_ok(),
                "{restore} is not installed (CI installs iptables)"
            );
            // A fresh namespace per file: each must load on its own, as a first sync does.
            let ns = Netns::create(case.node);
            let path = case.file(ProxyMode::Iptables);
            // Without the nfacct matches: the counters they name are created by `ferry run`
            // in its namespace (this one has none); ferry-dataplane's iptables_saved_kernel
            // test loads every golden file with them.
            let text = std::fs::read_to_string(&path).expect("read golden file");
            let out = restore_input(
                Command::new("ip").args(["netns", "exec", &ns.0, restore, "--noflush"]),
                &without_nfacct(&text),
            );
            assert!(
                out.status.success(),
                "{restore} {}: {}",
                path.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
    }
}

/// Runs `cmd` with `input` on its standard input.
fn restore_input(cmd: &mut Command, input: &str) -> std::process::Output {
    use std::io::Write as _;
    let mut child = cmd
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run iptables-restore");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write");
    child.wait_with_output().expect("wait")
}
