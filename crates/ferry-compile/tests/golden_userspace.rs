//! Golden rules of the userspace proxy mode: `tests/golden/<case>/input.yaml` compiled for a
//! node gives `<case>/<node>.userspace.nft` (`<node>.ip6.userspace.nft` for IPv6): the
//! redirect table followed by the proxy-port table (as `#` comments, so the file still loads
//! with `nft -f`). Proxy ports come from the default range, assigned in service-port order.
//! `FERRY_BLESS=1 cargo test -p ferry-compile --test golden_userspace` rewrites them; as root,
//! each is loaded with `nft -f` in a throw-away network namespace.

use std::path::{Path, PathBuf};
use std::process::Command;

use ferry_compile::config::LocalDetector;
use ferry_compile::userspace::{self, PortRange, ProxyPorts};
use ferry_compile::{CompileConfig, Plan};
use ferry_model::{ClusterState, IpFamily, NodeContext, NodeView};

struct Case {
    dir: &'static str,
    node: &'static str,
    config: CompileConfig,
}

impl Case {
    fn file(&self) -> PathBuf {
        let name = match self.config.family {
            IpFamily::V4 => format!("{}.userspace.nft", self.node),
            IpFamily::V6 => format!("{}.ip6.userspace.nft", self.node),
        };
        golden_dir().join(self.dir).join(name)
    }
}

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

fn cluster_cidr(family: IpFamily, cidrs: &[&str]) -> CompileConfig {
    CompileConfig {
        family,
        local_detector: LocalDetector::ClusterCidr(
            cidrs.iter().map(|c| c.parse().expect("cidr")).collect(),
        ),
        ..CompileConfig::default()
    }
}

fn cases() -> Vec<Case> {
    let v4 = |dir, node, cidr| Case {
        dir,
        node,
        config: cluster_cidr(IpFamily::V4, &[cidr]),
    };
    let dual = ["10.244.0.0/16", "fd00:10:244::/48"];
    vec![
        v4("seed-cluster", "k8s-node1", "192.168.0.0/16"),
        v4("seed-local", "k8s-node1", "192.168.0.0/16"),
        v4("seed-local", "k8s-node2", "192.168.0.0/16"),
        v4("load-balancer", "node-a", "10.0.0.0/16"),
        v4("session-affinity", "node-a", "10.0.0.0/8"),
        Case {
            dir: "protocols-and-policies",
            node: "node-a",
            config: CompileConfig {
                masquerade_all: true,
                local_detector: LocalDetector::NodeCidr,
                ..CompileConfig::default()
            },
        },
        Case {
            dir: "dual-stack",
            node: "node-a",
            config: cluster_cidr(IpFamily::V4, &dual),
        },
        Case {
            dir: "dual-stack",
            node: "node-a",
            config: cluster_cidr(IpFamily::V6, &dual),
        },
    ]
}

fn compile(case: &Case) -> String {
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
    let plan = Plan::build(&NodeView::build(&state, &ctx), &case.config);
    let mut ports = ProxyPorts::new(PortRange::DEFAULT);
    for name in plan.services.keys() {
        ports.assign(name).expect("a free proxy port");
    }
    let rules = userspace::render(&plan, &ports);
    let table = userspace::port_table(case.config.family, &rules.ports);
    format!("{}{table}", rules.ruleset)
}

#[test]
fn userspace_rules_match_the_golden_files() {
    let bless = std::env::var_os("FERRY_BLESS").is_some();
    let mut failures = Vec::new();
    for case in cases() {
        let got = compile(&case);
        assert_eq!(got, compile(&case), "{}: deterministic", case.dir);
        let path = case.file();
        if bless {
            std::fs::write(&path, &got).expect("write golden file");
            continue;
        }
        if std::fs::read_to_string(&path).unwrap_or_default() != got {
            failures.push(format!(
                "{} differs (FERRY_BLESS=1 to rewrite):\n{got}",
                path.display()
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
#[ignore = "needs root: network namespaces"]
fn userspace_golden_files_load_with_nft() {
    for case in cases() {
        let path = case.file();
        // A network namespace of its own for each file, gone when nft exits.
        let out = Command::new("unshare")
            .args(["--net", "nft", "-f"])
            .arg(&path)
            .output()
            .expect("run unshare --net nft");
        assert!(
            out.status.success(),
            "{}: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
