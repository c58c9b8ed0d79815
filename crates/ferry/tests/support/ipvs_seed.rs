//! Seed 004's commands in IPVS mode: `ip addr show kube-ipvs0`, `ipvsadm -Ln`,
//! `ipset list KUBE-NODE-PORT-LOCAL-TCP` and `iptables -t nat -L -n` show the seed's own lines
//! (printed for the README: `cargo test -p ferry --test lab_ipvs -- --include-ignored
//! --nocapture seed_commands`).

use ferry_lab::spec::{NODE1, NODE2};
use ferry_lab::Host;

use crate::seed::*;

/// Lines of seed 004 (k8s-node1, Local policy) that `iptables -t nat -L -n` must show as
/// they are (trailing spaces aside).
const SEED_NAT_LINES: &[&str] = &[
    "KUBE-SERVICES  all  --  0.0.0.0/0            0.0.0.0/0            /* kubernetes service portals */",
    "KUBE-POSTROUTING  all  --  0.0.0.0/0            0.0.0.0/0            /* kubernetes postrouting rules */",
    "MARK       all  --  0.0.0.0/0            0.0.0.0/0            MARK or 0x4000",
    "RETURN     all  --  0.0.0.0/0            0.0.0.0/0            mark match ! 0x4000/0x4000",
    "MARK       all  --  0.0.0.0/0            0.0.0.0/0            MARK xor 0x4000",
    "MASQUERADE  all  --  0.0.0.0/0            0.0.0.0/0            /* kubernetes service traffic requiring SNAT */ random-fully",
    "KUBE-MARK-MASQ  all  -- !192.168.0.0/16       0.0.0.0/0            /* Kubernetes service cluster ip + port for masquerade purpose */ match-set KUBE-CLUSTER-IP dst,dst",
    "KUBE-NODE-PORT  all  --  0.0.0.0/0            0.0.0.0/0            ADDRTYPE match dst-type LOCAL",
    "ACCEPT     all  --  0.0.0.0/0            0.0.0.0/0            match-set KUBE-CLUSTER-IP dst,dst",
    "RETURN     tcp  --  0.0.0.0/0            0.0.0.0/0            /* Kubernetes nodeport TCP port with externalTrafficPolicy=local */ match-set KUBE-NODE-PORT-LOCAL-TCP dst",
    "KUBE-MARK-MASQ  tcp  --  0.0.0.0/0            0.0.0.0/0            /* Kubernetes nodeport TCP port for masquerade purpose */ match-set KUBE-NODE-PORT-TCP dst",
    "KUBE-MARK-MASQ  all  --  0.0.0.0/0            0.0.0.0/0",
];

/// The hairpin rule (seed 004 shows it on k8s-node1; here only k8s-node2 has local
/// endpoints, so only its `KUBE-LOOP-BACK` has entries and the rule).
const SEED_HAIRPIN_LINE: &str = "MASQUERADE  all  --  0.0.0.0/0            0.0.0.0/0            /* Kubernetes endpoints dst ip:port, source ip for solving hairpin purpose */ match-set KUBE-LOOP-BACK dst,dst,src";

/// The seed's `ipset list KUBE-NODE-PORT-LOCAL-TCP` lines (Local policy) that do not depend on
/// the kernel's memory accounting.
const SEED_IPSET_LOCAL: &[&str] = &[
    "Name: KUBE-NODE-PORT-LOCAL-TCP",
    "Type: bitmap:port",
    "Header: range 0-65535",
    "References: 1",
    "Number of entries: 1",
    "Members:",
    "32223",
];

fn trimmed(text: &str) -> Vec<String> {
    text.lines().map(|l| l.trim_end().to_owned()).collect()
}

fn run(seed: &SeedLab, node: &str, argv: &[&str], shown: &mut String) -> Vec<String> {
    let out = seed.lab.exec(node, argv).expect("seed command");
    shown.push_str(&format!("[root@{node} ~]# {}\n{out}\n", argv.join(" ")));
    trimmed(&out)
}

/// `want` is among `lines`. iptables 1.8.9 (Debian 12's) prints the protocol column as a
/// number in `-L` (`all` as `0`, `tcp` as `6`); a seed line matches that spelling too.
fn assert_has(lines: &[String], want: &str, what: &str) {
    let newer = [
        (" all  ", " 0    "),
        (" tcp  ", " 6    "),
        (" udp  ", " 17   "),
    ]
    .iter()
    .fold(want.to_owned(), |w, (name, number)| {
        w.replacen(name, number, 1)
    });
    assert!(
        lines.iter().any(|l| l == want || *l == newer),
        "{what}: no line {want:?} in:\n{}",
        lines.join("\n")
    );
}

/// Seed 004's commands on the Local-policy lab, and the seed's lines in their output.
pub fn seed_commands_show_the_seeds_lines() {
    let seed = SeedLab::start(Mode::Ipvs, "Local");
    seed.hello(&Host::default_client(), &node_port_url("10.1.1.9"));
    let mut shown = String::new();

    let link = run(
        &seed,
        NODE1,
        &["ip", "addr", "show", "kube-ipvs0"],
        &mut shown,
    );
    assert!(
        link[0].contains("kube-ipvs0: <BROADCAST,NOARP> mtu 1500 qdisc noop state DOWN"),
        "{}",
        link[0]
    );
    assert_has(
        &link,
        &format!("    inet {CLUSTER_IP}/32 scope global kube-ipvs0"),
        "ip addr",
    );

    // k8s-node1 (no local pod): the NodePort's virtual server has no real server.
    let list = run(&seed, NODE1, &["ipvsadm", "-Ln"], &mut shown);
    for (i, header) in [
        "IP Virtual Server version 1.2.1 (size=4096)",
        "Prot LocalAddress:Port Scheduler Flags",
        "  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn",
    ]
    .iter()
    .enumerate()
    {
        assert_eq!(list[i], *header, "ipvsadm -Ln header");
    }
    let at = |lines: &[String], service: &str| {
        lines
            .iter()
            .position(|l| l == service)
            .unwrap_or_else(|| panic!("no {service:?} in:\n{}", lines.join("\n")))
    };
    let np = at(&list, "TCP  10.1.1.17:32223 rr");
    assert!(
        !list.get(np + 1).is_some_and(|l| l.starts_with("  ->")),
        "empty on k8s-node1"
    );
    let reals: Vec<String> = [POD_A.1, POD_B.1]
        .iter()
        .map(|ip| format!("  -> {ip}:56010        Masq    1      0          0"))
        .collect();
    let cip = at(&list, &format!("TCP  {CLUSTER_IP}:8080 rr"));
    let mut got = list[cip + 1..cip + 3].to_vec();
    got.sort();
    assert_eq!(
        got, reals,
        "the ClusterIP's real servers, as seed 004 shows them"
    );

    // k8s-node2 (both pods): the NodePort's virtual server has both.
    let list2 = run(&seed, NODE2, &["ipvsadm", "-Ln"], &mut shown);
    let np2 = at(&list2, "TCP  10.1.1.9:32223 rr");
    assert!(
        list2[np2 + 1].starts_with("  -> ") && list2[np2 + 2].starts_with("  -> "),
        "{}",
        list2.join("\n")
    );

    let set = run(
        &seed,
        NODE1,
        &["ipset", "list", "KUBE-NODE-PORT-LOCAL-TCP"],
        &mut shown,
    );
    for want in SEED_IPSET_LOCAL {
        assert_has(&set, want, "ipset list");
    }

    let nat = run(
        &seed,
        NODE1,
        &["iptables", "-t", "nat", "-L", "-n"],
        &mut shown,
    );
    for want in SEED_NAT_LINES {
        assert_has(&nat, want, "iptables -t nat -L -n on k8s-node1");
    }
    let nat2 = run(
        &seed,
        NODE2,
        &["iptables", "-t", "nat", "-L", "-n"],
        &mut shown,
    );
    assert_has(
        &nat2,
        SEED_HAIRPIN_LINE,
        "iptables -t nat -L -n on k8s-node2",
    );
    println!("\nIPVS mode, Local policy, after one request to k8s-node2's NodePort:\n{shown}");
}
