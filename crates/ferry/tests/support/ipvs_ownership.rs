//! IPVS mode owns the node's IPVS table, as upstream's does, except `--ipvs-exclude-cidrs`:
//! a virtual server there, a foreign chain and a foreign ipset survive Ferry's syncs, and
//! `ferry cleanup` removes everything IPVS mode made (virtual servers, kube-ipvs0, the
//! `KUBE-*` sets and chains of both families) and nothing else.

use ferry_lab::spec::NODE1;

use crate::seed::*;

const FOREIGN_VS: &str = "TCP  10.200.0.1:80 rr";

fn foreign_state_survives(seed: &SeedLab, what: &str) {
    let list = seed.lab.exec(NODE1, ["ipvsadm", "-Ln"]).expect("ipvsadm");
    assert!(list.contains(FOREIGN_VS), "{what}: {list}");
    let sets = seed
        .lab
        .exec(NODE1, ["ipset", "list", "-n"])
        .expect("ipset");
    assert!(sets.lines().any(|l| l == "OTHER-SET"), "{what}: {sets}");
    let nat = seed
        .lab
        .exec(NODE1, ["iptables-nft-save", "-t", "nat"])
        .expect("save");
    assert!(
        nat.contains(":OTHER - [0:0]") && nat.contains("-A PREROUTING -j OTHER"),
        "{what}: {nat}"
    );
}

pub fn cleanup_removes_only_ferrys_ipvs_objects() {
    let mut seed = SeedLab::start_with(
        Mode::Ipvs,
        "Cluster",
        &["--ipvs-exclude-cidrs", "10.200.0.0/16"],
    );
    for cmd in [
        "ipvsadm -A -t 10.200.0.1:80 -s rr",
        "ipset create OTHER-SET hash:ip",
        "iptables-nft -t nat -N OTHER",
        "iptables-nft -t nat -A OTHER -j RETURN",
        "iptables-nft -t nat -I PREROUTING -j OTHER",
    ] {
        seed.lab
            .exec(NODE1, cmd.split(' '))
            .expect("add foreign state");
    }
    seed.change(|m| m.endpoints[1].1 = false);
    foreign_state_survives(&seed, "after a sync");
    let list = seed.lab.exec(NODE1, ["ipvsadm", "-Ln"]).expect("ipvsadm");
    assert!(
        list.contains(&format!("TCP  {CLUSTER_IP}:8080 rr")),
        "{list}"
    );
    seed.ferry(NODE1).stop().expect("stop ferry");
    let list = seed.lab.exec(NODE1, ["ipvsadm", "-Ln"]).expect("ipvsadm");
    assert!(
        list.contains(&format!("TCP  {CLUSTER_IP}:8080 rr")),
        "stopping leaves everything in place: {list}"
    );
    seed.lab
        .exec(NODE1, [FERRY, "cleanup"])
        .expect("ferry cleanup");
    foreign_state_survives(&seed, "after ferry cleanup");
    let list = seed.lab.exec(NODE1, ["ipvsadm", "-Ln"]).expect("ipvsadm");
    let services: Vec<&str> = list
        .lines()
        .skip(3)
        .filter(|l| !l.starts_with("  ->"))
        .collect();
    assert_eq!(services, vec![FOREIGN_VS], "{list}");
    let links = seed
        .lab
        .exec(NODE1, ["ip", "-br", "link"])
        .expect("ip link");
    assert!(!links.contains("kube-ipvs0"), "{links}");
    let sets = seed
        .lab
        .exec(NODE1, ["ipset", "list", "-n"])
        .expect("ipset");
    assert_eq!(sets.trim(), "OTHER-SET", "{sets}");
    for save in ["iptables-nft-save", "ip6tables-nft-save"] {
        let rules = seed.lab.exec(NODE1, [save]).expect("save");
        assert!(!rules.contains("KUBE-"), "{save}: {rules}");
    }
}
