//! iptables against the real kernel: the chains Ferry reads over nfnetlink (for its cleanups,
//! the start-up look for kube-proxy's leftovers and the backend detection) are the ones
//! `iptables-nft-save` declares, and the backend detection picks the backend Kubernetes'
//! marker chains are in. Each case runs in a private network namespace. Skipped unless root.

mod support;
use support::{in_new_netns, nft};

use std::collections::BTreeMap;
use std::io::Write as _;
use std::process::{Command, Stdio};

use ferry_compile::iptables::{Chain, Ruleset, ServiceRules};
use ferry_dataplane::iptables::{
    detect_backend, IptablesBackend, IptablesCli, IptablesDataplane, IptablesRunner as _,
};
use ferry_model::{IpFamily, ServiceName};

/// Feeds `input` to `program` (an `iptables-restore`), panicking when it fails.
fn restore(program: &str, input: &str) {
    let mut child = Command::new(program)
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect(program);
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write");
    let out = child.wait_with_output().expect(program);
    assert!(
        out.status.success(),
        "{program}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// iptables' built-in chains: `iptables-nft-save` declares every one of a table's, also those
/// the kernel does not hold (nothing was ever added to them); they are nobody's to remove.
const BUILT_IN: [&str; 5] = ["PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"];

/// The chains but the built-in ones each table of `program`'s (an `iptables-save`) output,
/// or of `read`, declares, sorted.
fn user_chains(mut tables: BTreeMap<String, Vec<String>>) -> BTreeMap<String, Vec<String>> {
    for chains in tables.values_mut() {
        chains.retain(|c| !BUILT_IN.contains(&c.as_str()));
        chains.sort_unstable();
    }
    tables
}

/// The chains each table of `program`'s (an `iptables-save`) output declares.
fn saved(program: &str) -> BTreeMap<String, Vec<String>> {
    let out = Command::new(program).output().expect(program);
    assert!(out.status.success(), "{program}");
    let mut tables: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut table = String::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        if let Some(t) = line.strip_prefix('*') {
            table = t.to_owned();
            tables.entry(table.clone()).or_default();
        } else if let Some(rest) = line.strip_prefix(':') {
            let chain = rest.split_whitespace().next().unwrap_or_default();
            tables
                .entry(table.clone())
                .or_default()
                .push(chain.to_owned());
        }
    }
    tables
}

#[test]
#[ignore = "needs root: network namespaces"]
fn the_chains_read_over_netlink_are_those_iptables_nft_save_declares() {
    in_new_netns(|| {
        let kube = "*nat\n:PREROUTING ACCEPT [0:0]\n:KUBE-SERVICES - [0:0]\n\
                    :KUBE-SVC-AAAA - [0:0]\n:KUBE-SEP-BBBB - [0:0]\n\
                    -A PREROUTING -m comment --comment \"kubernetes service portals\" -j KUBE-SERVICES\n\
                    -A KUBE-SERVICES -d 10.96.0.10/32 -p tcp -m tcp --dport 80 -j KUBE-SVC-AAAA\n\
                    -A KUBE-SVC-AAAA -j KUBE-SEP-BBBB\n\
                    -A KUBE-SEP-BBBB -p tcp -m tcp -j DNAT --to-destination 10.0.0.5:8080\n\
                    COMMIT\n\
                    *filter\n:INPUT ACCEPT [0:0]\n:KUBE-FORWARD - [0:0]\n:MINE - [0:0]\nCOMMIT\n\
                    *mangle\n:KUBE-IPTABLES-HINT - [0:0]\nCOMMIT\n";
        restore("iptables-nft-restore", kube);
        restore(
            "ip6tables-nft-restore",
            "*nat\n:KUBE-SERVICES - [0:0]\n:KUBE-SVC-CCCC - [0:0]\nCOMMIT\n",
        );
        // Tables that are not iptables': Ferry's own and kube-proxy's nftables tables.
        for (family, table) in [("ip", "ferry"), ("ip", "kube-proxy"), ("inet", "nat")] {
            nft(&["add", "table", family, table]);
            nft(&["add", "chain", family, table, "services"]);
        }
        for (family, program) in [
            (IpFamily::V4, "iptables-nft-save"),
            (IpFamily::V6, "ip6tables-nft-save"),
        ] {
            let read = IptablesCli::for_family(IptablesBackend::Nft, family)
                .saved_chains()
                .expect("chains");
            assert_eq!(user_chains(read), user_chains(saved(program)), "{family:?}");
        }
        let v4 = IptablesCli::new(IptablesBackend::Nft)
            .saved_chains()
            .expect("chains");
        assert!(v4["nat"].contains(&"KUBE-SEP-BBBB".to_owned()), "{v4:?}");
        assert!(
            !v4.contains_key("ferry") && !v4.contains_key("kube-proxy"),
            "{v4:?}"
        );
    });
}

#[test]
#[ignore = "needs root: network namespaces"]
fn the_backend_holding_a_kubernetes_marker_chain_is_detected_else_the_one_with_more_rules() {
    let canary = "*mangle\n:KUBE-KUBELET-CANARY - [0:0]\nCOMMIT\n";
    let rules = "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -j ACCEPT\n-A INPUT -j ACCEPT\nCOMMIT\n";
    in_new_netns(|| assert_eq!(detect_backend(), IptablesBackend::Nft, "nothing anywhere"));
    in_new_netns(|| {
        restore("iptables-legacy-restore", rules);
        assert_eq!(detect_backend(), IptablesBackend::Legacy, "more rules");
        restore("iptables-nft-restore", canary);
        assert_eq!(detect_backend(), IptablesBackend::Nft, "nft's marker");
    });
    in_new_netns(|| {
        restore("iptables-nft-restore", rules);
        restore("iptables-legacy-restore", canary);
        assert_eq!(detect_backend(), IptablesBackend::Legacy, "legacy's marker");
    });
}

/// Services `a`, `b`, `c` in upstream's shape (a `KUBE-SVC-` chain jumping to one `KUBE-SEP-`
/// chain), `b`'s endpoint on port `b_port`.
fn three_services(b_port: u16) -> Ruleset {
    let mut rs = Ruleset {
        family: IpFamily::V4,
        nat: vec![
            Chain {
                name: "KUBE-MARK-MASQ".into(),
                rules: vec!["-j MARK --or-mark 0x4000".into()],
            },
            Chain {
                name: "KUBE-POSTROUTING".into(),
                rules: Vec::new(),
            },
        ],
        filter: ["KUBE-FORWARD", "KUBE-NODEPORTS"]
            .map(|name| Chain {
                name: name.into(),
                rules: Vec::new(),
            })
            .into(),
        nodeport_jumps: Vec::new(),
        external_first: Vec::new(),
        large_cluster: false,
        services: BTreeMap::new(),
    };
    for (i, name) in ["a", "b", "c"].into_iter().enumerate() {
        let port = if name == "b" { b_port } else { 8080 };
        let (svc, sep) = (format!("KUBE-SVC-{name}"), format!("KUBE-SEP-{name}"));
        let rules = ServiceRules {
            chains: vec![
                Chain {
                    name: sep.clone(),
                    rules: vec![
                        format!("-m comment --comment \"dev/{name}:http\" -s 10.64.0.{i} -j KUBE-MARK-MASQ"),
                        format!("-m comment --comment \"dev/{name}:http\" -m tcp -p tcp -j DNAT --to-destination 10.64.0.{i}:{port}"),
                    ],
                },
                Chain {
                    name: svc.clone(),
                    rules: vec![format!(
                        "-m comment --comment \"dev/{name}:http -> 10.64.0.{i}:{port}\" -m statistic --mode random --probability 0.5000000000 -j {sep}"
                    )],
                },
            ],
            nat_services: vec![format!(
                "-m comment --comment \"dev/{name}:http cluster IP\" -m tcp -p tcp -d 10.96.0.{i} --dport 80 -j {svc}"
            )],
            endpoints: 1,
            ..ServiceRules::default()
        };
        rs.set_service(ServiceName::new("dev", name), Some(rules));
    }
    rs
}

#[test]
#[ignore = "needs root: network namespaces"]
fn a_restart_rewrites_only_the_chains_that_differ_from_what_it_wants() {
    for backend in [IptablesBackend::Nft, IptablesBackend::Legacy] {
        in_new_netns(move || {
            let first = IptablesDataplane::new(backend)
                .apply_full(three_services(8080))
                .expect("first sync");
            // A restart: a new process, which knows nothing of what the kernel holds. `b`'s
            // endpoint moved while it was down, and someone deleted a rule of `a`'s.
            IptablesCli::new(backend)
                .iptables(&["-t", "nat", "-D", "KUBE-SEP-a", "1"])
                .expect("delete a rule");
            let restart = IptablesDataplane::new(backend)
                .apply_full(three_services(9090))
                .expect("restart");
            assert!(
                restart.chains_written + 3 == first.chains_written,
                "{backend:?}: a's SVC chain and c's two are as wanted: {} of {}",
                restart.chains_written,
                first.chains_written
            );
            let save = IptablesCli::new(backend).save(None).expect("save");
            for wanted in [
                "-A KUBE-SEP-a -s 10.64.0.0/32 -m comment --comment \"dev/a:http\" -j KUBE-MARK-MASQ",
                "--to-destination 10.64.0.1:9090",
                "--to-destination 10.64.0.2:8080",
            ] {
                assert!(save.contains(wanted), "{backend:?}: no {wanted}\n{save}");
            }
            assert!(!save.contains("10.64.0.1:8080"), "{backend:?}:\n{save}");
            // Nothing differs now: only the top-level chains are written.
            let again = IptablesDataplane::new(backend)
                .apply_full(three_services(9090))
                .expect("second restart");
            assert_eq!(
                again.chains_written + 6,
                first.chains_written,
                "{backend:?}"
            );
        });
    }
}
