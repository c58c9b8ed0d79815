//! `ferry cleanup` against the real kernel, with kube-proxy's rules beside (or instead of)
//! Ferry's: kube-proxy's `KUBE-*` chains (its iptables layout, jumps as kube-proxy writes
//! them) and its nftables tables stay unless `--also-kube-proxy` asks for them; Ferry's chains
//! (its owner marker in nat `KUBE-POSTROUTING`) go; once kube-proxy has synced over Ferry's
//! chains (a rollback), they are kube-proxy's. Each test runs in a network namespace of its
//! own, which goes with its thread even when the test fails.

use std::process::Command;

use ferry_compile::iptables::without_nfacct;
use ferry_lab::netns::in_private_netns;

const FERRY: &str = env!("CARGO_BIN_EXE_ferry");

/// What kube-proxy's iptables mode writes for one Service with one endpoint, with its jumps
/// from the built-in chains as kube-proxy writes them (`--ctstate NEW`, its comments).
const KUBE_PROXY_RULES: &str = r#"*mangle
:KUBE-PROXY-CANARY - [0:0]
COMMIT
*filter
:KUBE-EXTERNAL-SERVICES - [0:0]
:KUBE-FORWARD - [0:0]
:KUBE-NODEPORTS - [0:0]
:KUBE-PROXY-CANARY - [0:0]
:KUBE-PROXY-FIREWALL - [0:0]
:KUBE-SERVICES - [0:0]
-A INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL
-A INPUT -m comment --comment "kubernetes health check service ports" -j KUBE-NODEPORTS
-A INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES
-A FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL
-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
-A FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES
-A OUTPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL
-A OUTPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x4000/0x4000 -j ACCEPT
-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
COMMIT
*nat
:KUBE-MARK-MASQ - [0:0]
:KUBE-NODEPORTS - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-PROXY-CANARY - [0:0]
:KUBE-SEP-ABCDEFGHIJKLMNOP - [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-SVC-QRSTUVWXYZ234567 - [0:0]
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
-A KUBE-MARK-MASQ -j MARK --or-mark 0x4000
-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
-A KUBE-POSTROUTING -j MARK --xor-mark 0x4000
-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
-A KUBE-SEP-ABCDEFGHIJKLMNOP -s 10.0.1.5/32 -m comment --comment "ns/svc:http" -j KUBE-MARK-MASQ
-A KUBE-SEP-ABCDEFGHIJKLMNOP -p tcp -m comment --comment "ns/svc:http" -m tcp -j DNAT --to-destination 10.0.1.5:8080
-A KUBE-SERVICES -d 172.30.0.10/32 -p tcp -m comment --comment "ns/svc:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-QRSTUVWXYZ234567
-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
-A KUBE-SVC-QRSTUVWXYZ234567 -m comment --comment "ns/svc:http -> 10.0.1.5:8080" -j KUBE-SEP-ABCDEFGHIJKLMNOP
COMMIT
"#;

/// kube-proxy's nftables mode's tables (a chain each, as kube-proxy's have).
const KUBE_PROXY_TABLES: &str = "table ip kube-proxy {\n chain services {\n }\n}\n\
                                 table ip6 kube-proxy {\n chain services {\n }\n}\n";

/// Someone else's chain and rules, which no cleanup may touch.
const FOREIGN: [&str; 3] = [
    ":OTHER - [0:0]",
    "-A PREROUTING -j OTHER",
    "-A INPUT -p tcp -m tcp --dport 9 -j ACCEPT",
];

fn run(program: &str, args: &[&str], stdin: Option<&str>) -> (i32, String, String) {
    use std::io::Write as _;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap_or_else(|e| panic!("{program}: {e}"));
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        pipe.write_all(text.as_bytes()).expect("write stdin");
    }
    let out = child.wait_with_output().expect("wait");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn ok(program: &str, args: &[&str], stdin: Option<&str>) -> String {
    let (code, out, err) = run(program, args, stdin);
    assert_eq!(code, 0, "{program} {args:?}: {err}{out}");
    out
}

/// `iptables-save` without its comments (they carry the time).
fn save() -> String {
    ok("iptables-save", &[], None)
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect()
}

fn add_foreign_rules() {
    ok("iptables", &["-t", "nat", "-N", "OTHER"], None);
    ok(
        "iptables",
        &["-t", "nat", "-I", "PREROUTING", "-j", "OTHER"],
        None,
    );
    ok(
        "iptables",
        &["-A", "INPUT", "-p", "tcp", "--dport", "9", "-j", "ACCEPT"],
        None,
    );
}

fn assert_foreign_rules_stay(rules: &str) {
    for needle in FOREIGN {
        assert!(rules.contains(needle), "{needle}:\n{rules}");
    }
}

fn cleanup(args: &[&str]) -> (i32, String, String) {
    let mut all = vec!["cleanup"];
    all.extend_from_slice(args);
    run(FERRY, &all, None)
}

#[test]
#[ignore = "needs root: network namespaces"]
fn kube_proxys_chains_and_tables_stay_unless_also_kube_proxy_is_asked_for() {
    in_private_netns(|| {
        ok("iptables-restore", &["--noflush"], Some(KUBE_PROXY_RULES));
        ok("nft", &["-f", "-"], Some(KUBE_PROXY_TABLES));
        add_foreign_rules();
        let before = save();

        let (code, out, err) = cleanup(&[]);
        assert_eq!(code, 0, "{err}{out}");
        assert!(
            out.contains(
                "iptables mode: left iptables-nft: 14 KUBE-* chains of kube-proxy's iptables layout"
            ) && out.contains("`ferry cleanup --also-kube-proxy` removes them")
                && out.contains("nftables mode: left kube-proxy's nftables mode's table ip kube-proxy, table ip6 kube-proxy"),
            "{out}"
        );
        assert!(!out.contains("removed"), "{out}");
        assert_eq!(save(), before, "ferry cleanup changed kube-proxy's rules");
        assert!(ok("nft", &["list", "tables"], None).contains("table ip kube-proxy"));

        let (code, out, err) = cleanup(&["--also-kube-proxy", "--dry-run"]);
        assert_eq!(code, 0, "{err}{out}");
        assert!(
            out.contains("iptables mode: would remove kube-proxy's iptables-nft jumps: filter INPUT → KUBE-PROXY-FIREWALL"),
            "{out}"
        );
        assert_eq!(save(), before, "a dry run changed the rules");

        let (code, out, err) = cleanup(&["--also-kube-proxy"]);
        assert_eq!(code, 0, "{err}{out}");
        for needle in [
            "iptables mode: removed kube-proxy's iptables-nft nat chains: ",
            ", 2 per-service chains (KUBE-S",
            "iptables mode: removed kube-proxy's iptables-nft filter chains: ",
            "iptables mode: removed kube-proxy's iptables-nft mangle chains: KUBE-PROXY-CANARY\n",
            "nftables mode: removed kube-proxy's table ip kube-proxy",
            "nftables mode: removed kube-proxy's table ip6 kube-proxy",
        ] {
            assert!(out.contains(needle), "{needle}:\n{out}");
        }
        let after = save();
        assert!(!after.contains("KUBE-"), "{after}");
        assert_foreign_rules_stay(&after);
        assert!(!ok("nft", &["list", "tables"], None).contains("kube-proxy"));
    });
}

/// Ferry's iptables-mode chains as `ferry rules` prints them, with Ferry's jumps.
fn load_ferrys_chains() {
    let seed = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/seed");
    let rules = ok(
        FERRY,
        &[
            "rules",
            "--manifests",
            seed,
            "--hostname-override",
            "k8s-node2",
            "--proxy-mode",
            "iptables",
            "--cluster-cidr",
            "192.168.0.0/16",
        ],
        None,
    );
    // `ferry rules` shows the rules of a node with nfacct, whose counters `ferry run` creates
    // in its namespace; this one has none, and the cleanup does not depend on them.
    let rules = without_nfacct(&rules);
    ok("iptables-restore", &["--noflush"], Some(&rules));
    for chain in ["PREROUTING", "OUTPUT"] {
        ok(
            "iptables",
            &[
                "-t",
                "nat",
                "-I",
                chain,
                "-m",
                "comment",
                "--comment",
                "kubernetes service portals",
                "-j",
                "KUBE-SERVICES",
            ],
            None,
        );
    }
}

#[test]
#[ignore = "needs root: network namespaces"]
fn ferrys_chains_go_and_once_kube_proxy_has_synced_over_them_they_stay() {
    in_private_netns(|| {
        load_ferrys_chains();
        add_foreign_rules();
        let (code, out, err) = cleanup(&[]);
        assert_eq!(code, 0, "{err}{out}");
        assert!(
            out.contains("iptables mode: removed Ferry's iptables-nft nat chains: ")
                && out.contains("iptables mode: removed Ferry's iptables-nft jumps: "),
            "{out}"
        );
        let after = save();
        assert!(!after.contains("KUBE-"), "{after}");
        assert_foreign_rules_stay(&after);
    });
    in_private_netns(|| {
        load_ferrys_chains();
        // A rollback: kube-proxy's first sync rewrites the layout's top-level chains, its
        // KUBE-POSTROUTING without Ferry's marker among them.
        ok("iptables-restore", &["--noflush"], Some(KUBE_PROXY_RULES));
        let before = save();
        let (code, out, err) = cleanup(&[]);
        assert_eq!(code, 0, "{err}{out}");
        assert!(
            out.contains(
                "of kube-proxy's iptables layout (no Ferry marker in nat KUBE-POSTROUTING"
            ),
            "{out}"
        );
        assert_eq!(save(), before, "kube-proxy's chains were changed");
    });
}

#[test]
#[ignore = "needs root: network namespaces"]
fn a_chain_someone_else_jumps_to_is_not_removed_and_the_message_names_the_rule() {
    in_private_netns(|| {
        ok("iptables-restore", &["--noflush"], Some(KUBE_PROXY_RULES));
        ok("iptables", &["-t", "nat", "-N", "CNI-HOSTPORT"], None);
        ok(
            "iptables",
            &["-t", "nat", "-A", "CNI-HOSTPORT", "-j", "KUBE-MARK-MASQ"],
            None,
        );
        let before = save();
        let (code, out, err) = cleanup(&["--also-kube-proxy"]);
        assert_eq!(code, 1, "{err}{out}");
        assert!(
            err.contains(
                "iptables-nft: cannot remove nat chain KUBE-MARK-MASQ: a rule of a chain that is \
                 neither Ferry's nor kube-proxy's jumps to it (`-A CNI-HOSTPORT -j KUBE-MARK-MASQ`)"
            ),
            "{err}"
        );
        let after = save();
        let nat = |s: &str| s[s.find("*nat").expect("nat")..].to_owned();
        assert_eq!(
            nat(&after),
            nat(&before),
            "the nat table was left as it was"
        );
    });
}

/// The same on the legacy backend (kube-proxy on an older node): kube-proxy's chains stay, and
/// go with their jumps only when asked for.
#[test]
#[ignore = "needs root: network namespaces"]
fn on_the_legacy_backend_too_kube_proxys_chains_stay_unless_asked_for() {
    in_private_netns(|| {
        ok(
            "iptables-legacy-restore",
            &["--noflush"],
            Some(KUBE_PROXY_RULES),
        );
        let legacy_save = || -> String {
            ok("iptables-legacy-save", &[], None)
                .lines()
                .filter(|l| !l.starts_with('#'))
                .map(|l| format!("{l}\n"))
                .collect()
        };
        let before = legacy_save();
        let (code, out, err) = cleanup(&[]);
        assert_eq!(code, 0, "{err}{out}");
        assert!(
            out.contains("iptables mode: left iptables-legacy: 14 KUBE-* chains of kube-proxy's iptables layout"),
            "{out}"
        );
        assert_eq!(legacy_save(), before);
        let (code, out, err) = cleanup(&["--also-kube-proxy"]);
        assert_eq!(code, 0, "{err}{out}");
        assert!(
            out.contains("iptables mode: removed kube-proxy's iptables-legacy jumps: "),
            "{out}"
        );
        let after = legacy_save();
        assert!(!after.contains("KUBE-"), "{after}");
    });
}
