//! The iptables side of IPVS mode: upstream's fixed chains, whose rules match the ipsets
//! instead of listing services (`writeIptablesRules` in upstream's IPVS proxier). A rule that
//! matches a set is written only while the set has entries, as upstream does.

use super::ruleset::Ruleset;
use super::sets::{self, IpSets, SetKind};
use crate::iptables::base::{
    forward_accept_rules, jump, mark_masq_rules, non_pod_masq_rules, postrouting_rules,
};
use crate::iptables::{
    Chain, JumpRule, Restore, Table, KUBE_FORWARD, KUBE_MARK_MASQ, KUBE_POSTROUTING,
    KUBE_PROXY_FIREWALL, KUBE_SERVICES, NON_POD_MASQ,
};

/// nat and filter: NodePort masquerade (nat) and health-check node ports (filter).
pub const KUBE_NODE_PORT: &str = "KUBE-NODE-PORT";
/// nat: load-balancer IP traffic (masqueraded unless the policy is Local).
pub const KUBE_LOAD_BALANCER: &str = "KUBE-LOAD-BALANCER";
/// filter: `loadBalancerSourceRanges` (allowed sources return, the rest is dropped).
pub const KUBE_SOURCE_RANGES_FIREWALL: &str = "KUBE-SOURCE-RANGES-FIREWALL";
/// filter: rejects new connections to kube-ipvs0 addresses on ports no service uses.
pub const KUBE_IPVS_FILTER: &str = "KUBE-IPVS-FILTER";
/// filter: drops the node's own connections to load-balancer IPs whose source ranges do not
/// allow it.
pub const KUBE_IPVS_OUT_FILTER: &str = "KUBE-IPVS-OUT-FILTER";

/// Every nat chain IPVS mode may write (`iptables-restore` declares only the ones in use).
pub const NAT_CHAINS: [&str; 6] = [
    KUBE_SERVICES,
    KUBE_POSTROUTING,
    KUBE_NODE_PORT,
    KUBE_LOAD_BALANCER,
    KUBE_MARK_MASQ,
    NON_POD_MASQ,
];

/// Every filter chain IPVS mode writes.
pub const FILTER_CHAINS: [&str; 6] = [
    KUBE_FORWARD,
    KUBE_NODE_PORT,
    KUBE_PROXY_FIREWALL,
    KUBE_SOURCE_RANGES_FIREWALL,
    KUBE_IPVS_FILTER,
    KUBE_IPVS_OUT_FILTER,
];

/// The chains of IPVS mode, per table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chains {
    /// nat chains.
    pub nat: Vec<Chain>,
    /// filter chains.
    pub filter: Vec<Chain>,
}

impl Chains {
    /// Their `iptables-restore --noflush` input (each chain declared, so emptied, and filled).
    pub fn restore(&self) -> Restore {
        Restore::tables(&[(Table::Nat, &self.nat), (Table::Filter, &self.filter)])
    }

    /// Every chain with the number of rules it is written with: what the periodic check
    /// compares with the kernel (IPVS mode's chains are few and fixed, all top-level).
    pub fn rule_counts(&self) -> Vec<(Table, &str, usize)> {
        [(Table::Nat, &self.nat), (Table::Filter, &self.filter)]
            .into_iter()
            .flat_map(|(table, chains)| {
                chains
                    .iter()
                    .map(move |c| (table, c.name.as_str(), c.rules.len()))
            })
            .collect()
    }

    /// Every chain name of a table.
    pub fn names(&self, table: Table) -> Vec<&str> {
        let chains = match table {
            Table::Nat => &self.nat,
            _ => &self.filter,
        };
        chains.iter().map(|c| c.name.as_str()).collect()
    }
}

/// `-m comment --comment "<set comment>" -m set --match-set <set> <dirs>`.
fn match_set(sets: &IpSets, kind: SetKind, dirs: &str) -> String {
    format!(
        "-m comment --comment \"{}\" -m set --match-set {} {dirs}",
        kind.comment,
        kind.name_in(sets.family)
    )
}

/// `-m set --match-set <set> <dirs>` (no comment).
fn bare_set(sets: &IpSets, kind: SetKind, dirs: &str) -> String {
    format!("-m set --match-set {} {dirs}", kind.name_in(sets.family))
}

fn chain(name: &str, rules: Vec<String>) -> Chain {
    Chain {
        name: name.to_owned(),
        rules,
    }
}

/// Renders the chains of a ruleset.
pub fn render(rs: &Ruleset) -> Chains {
    render_with(rs, &rs.sets())
}

/// Renders the chains of a ruleset whose sets are `sets` (already computed, e.g. kept
/// up to date incrementally by the applier).
pub fn render_with(rs: &Ruleset, sets: &IpSets) -> Chains {
    let mark = rs.node.masquerade_mark;
    let mut nat = vec![
        chain(KUBE_SERVICES, services(rs, sets)),
        chain(KUBE_POSTROUTING, postrouting(sets, mark)),
        chain(KUBE_NODE_PORT, nat_node_port(sets)),
        chain(KUBE_LOAD_BALANCER, load_balancer(sets)),
        chain(KUBE_MARK_MASQ, mark_masq_rules(mark)),
    ];
    if rs.node.local.cidrs().len() > 1 && !rs.node.masquerade_all {
        nat.push(chain(
            NON_POD_MASQ,
            non_pod_masq_rules(rs.node.local.cidrs()),
        ));
    }
    let filter = vec![
        chain(KUBE_FORWARD, forward_accept_rules(mark)),
        chain(
            KUBE_NODE_PORT,
            vec![format!(
                "{} -j ACCEPT",
                match_set(sets, sets::HEALTH_CHECK_NODE_PORT, "dst")
            )],
        ),
        chain(KUBE_PROXY_FIREWALL, proxy_firewall(sets)),
        chain(KUBE_SOURCE_RANGES_FIREWALL, source_ranges(sets)),
        chain(KUBE_IPVS_FILTER, ipvs_filter(sets)),
        chain(KUBE_IPVS_OUT_FILTER, out_filter(rs)),
    ];
    Chains { nat, filter }
}

/// nat `KUBE-SERVICES`: masquerade marks for service traffic, the jump to `KUBE-NODE-PORT`,
/// and ACCEPT for IPVS traffic (IPVS does the DNAT, after the filter table).
fn services(rs: &Ruleset, sets: &IpSets) -> Vec<String> {
    let mut rules = Vec::new();
    if !sets.is_empty(sets::LOAD_BALANCER) {
        let m = match_set(sets, sets::LOAD_BALANCER, "dst,dst");
        rules.push(format!("{m} -j {KUBE_LOAD_BALANCER}"));
    }
    if !sets.is_empty(sets::CLUSTER_IP) {
        let m = match_set(sets, sets::CLUSTER_IP, "dst,dst");
        let local = &rs.node.local;
        rules.push(if rs.node.masquerade_all {
            format!("{m} -j {KUBE_MARK_MASQ}")
        } else if let Some(not_pods) = local.iptables_match(true) {
            // Traffic from outside the cluster to a ClusterIP may leave the node: masquerade.
            format!("{m} {not_pods} -j {KUBE_MARK_MASQ}")
        } else if local.cidrs().len() > 1 {
            format!("{m} -j {NON_POD_MASQ}")
        } else {
            // No detector: masquerade node traffic whose source is a VIP itself (the kernel
            // picks a kube-ipvs0 address as the source of a connection to a VIP).
            let m = match_set(sets, sets::CLUSTER_IP, "src,dst");
            format!("{m} -j {KUBE_MARK_MASQ}")
        });
    }
    // External IPs: accept traffic that comes from off the node (not from a bridge port, not
    // from a local address) or is addressed to a local address.
    let external = |rules: &mut Vec<String>, m: String| {
        rules.push(format!(
            "{m} -m physdev ! --physdev-is-in -m addrtype ! --src-type LOCAL -j ACCEPT"
        ));
        rules.push(format!("{m} -m addrtype --dst-type LOCAL -j ACCEPT"));
    };
    if !sets.is_empty(sets::EXTERNAL_IP) {
        let m = match_set(sets, sets::EXTERNAL_IP, "dst,dst");
        rules.push(format!("{m} -j {KUBE_MARK_MASQ}"));
        external(&mut rules, m);
    }
    if !sets.is_empty(sets::EXTERNAL_IP_LOCAL) {
        external(
            &mut rules,
            match_set(sets, sets::EXTERNAL_IP_LOCAL, "dst,dst"),
        );
    }
    rules.push(format!("-m addrtype --dst-type LOCAL -j {KUBE_NODE_PORT}"));
    for kind in [sets::CLUSTER_IP, sets::LOAD_BALANCER] {
        if !sets.is_empty(kind) {
            rules.push(format!("{} -j ACCEPT", bare_set(sets, kind, "dst,dst")));
        }
    }
    rules
}

fn postrouting(sets: &IpSets, mark: u32) -> Vec<String> {
    let mut rules = Vec::new();
    if !sets.is_empty(sets::LOOP_BACK) {
        // Hairpin: a pod whose connection to a service came back to itself.
        let m = match_set(sets, sets::LOOP_BACK, "dst,dst,src");
        rules.push(format!("{m} -j MASQUERADE"));
    }
    rules.extend(postrouting_rules(mark));
    rules
}

/// nat `KUBE-NODE-PORT`: Local NodePorts return (client IP kept), the others are marked.
fn nat_node_port(sets: &IpSets) -> Vec<String> {
    let mut rules = Vec::new();
    let list = [
        ("tcp", sets::NODE_PORT_LOCAL_TCP, sets::NODE_PORT_TCP, "dst"),
        ("udp", sets::NODE_PORT_LOCAL_UDP, sets::NODE_PORT_UDP, "dst"),
        (
            "sctp",
            sets::NODE_PORT_LOCAL_SCTP,
            sets::NODE_PORT_SCTP,
            "dst,dst",
        ),
    ];
    for (proto, local, all, dirs) in list {
        if !sets.is_empty(local) {
            let m = match_set(sets, local, dirs);
            rules.push(format!("-p {proto} {m} -j RETURN"));
        }
        if !sets.is_empty(all) {
            let m = match_set(sets, all, dirs);
            rules.push(format!("-p {proto} {m} -j {KUBE_MARK_MASQ}"));
        }
    }
    rules
}

fn load_balancer(sets: &IpSets) -> Vec<String> {
    let mut rules = Vec::new();
    if !sets.is_empty(sets::LOAD_BALANCER_LOCAL) {
        let m = match_set(sets, sets::LOAD_BALANCER_LOCAL, "dst,dst");
        rules.push(format!("{m} -j RETURN"));
    }
    rules.push(format!("-j {KUBE_MARK_MASQ}"));
    rules
}

fn proxy_firewall(sets: &IpSets) -> Vec<String> {
    if sets.is_empty(sets::LOAD_BALANCER_FW) {
        return Vec::new();
    }
    let m = match_set(sets, sets::LOAD_BALANCER_FW, "dst,dst");
    vec![format!("{m} -j {KUBE_SOURCE_RANGES_FIREWALL}")]
}

fn source_ranges(sets: &IpSets) -> Vec<String> {
    let mut rules = Vec::new();
    for kind in [
        sets::LOAD_BALANCER_SOURCE_CIDR,
        sets::LOAD_BALANCER_SOURCE_IP,
    ] {
        if !sets.is_empty(kind) {
            rules.push(format!(
                "{} -j RETURN",
                match_set(sets, kind, "dst,dst,src")
            ));
        }
    }
    rules.push("-j DROP".to_owned());
    rules
}

/// filter `KUBE-IPVS-FILTER`: a kube-ipvs0 address answers only on its services' ports
/// (upstream issue 72236: otherwise every host port is reachable through every VIP).
fn ipvs_filter(sets: &IpSets) -> Vec<String> {
    let mut rules: Vec<String> = [
        sets::LOAD_BALANCER,
        sets::CLUSTER_IP,
        sets::EXTERNAL_IP,
        sets::EXTERNAL_IP_LOCAL,
    ]
    .into_iter()
    .map(|k| format!("{} -j RETURN", bare_set(sets, k, "dst,dst")))
    .collect();
    rules.push(format!(
        "{} -j RETURN",
        bare_set(sets, sets::HEALTH_CHECK_NODE_PORT, "dst")
    ));
    rules.push(format!(
        "-m conntrack --ctstate NEW {} -j REJECT",
        bare_set(sets, sets::IPVS_IPS, "dst")
    ));
    rules
}

fn out_filter(rs: &Ruleset) -> Vec<String> {
    rs.no_node_access()
        .iter()
        .map(|va| {
            format!(
                "-s {ip} -m ipvs --vaddr {ip} --vproto {p} --vport {port} -j DROP",
                ip = va.ip,
                p = va.protocol,
                port = va.port
            )
        })
        .collect()
}

/// The jumps from the built-in chains, upstream's list and comments (inserted first in their
/// chain).
pub fn jump_rules() -> Vec<JumpRule> {
    let list: [(Table, &'static str, &str, &str); 9] = [
        (
            Table::Nat,
            "OUTPUT",
            "kubernetes service portals",
            KUBE_SERVICES,
        ),
        (
            Table::Nat,
            "PREROUTING",
            "kubernetes service portals",
            KUBE_SERVICES,
        ),
        (
            Table::Nat,
            "POSTROUTING",
            "kubernetes postrouting rules",
            KUBE_POSTROUTING,
        ),
        (
            Table::Filter,
            "FORWARD",
            "kubernetes forwarding rules",
            KUBE_FORWARD,
        ),
        (
            Table::Filter,
            "INPUT",
            "kubernetes health check rules",
            KUBE_NODE_PORT,
        ),
        (
            Table::Filter,
            "INPUT",
            "kube-proxy firewall rules",
            KUBE_PROXY_FIREWALL,
        ),
        (
            Table::Filter,
            "FORWARD",
            "kube-proxy firewall rules",
            KUBE_PROXY_FIREWALL,
        ),
        (
            Table::Filter,
            "INPUT",
            "kubernetes ipvs access filter",
            KUBE_IPVS_FILTER,
        ),
        (
            Table::Filter,
            "OUTPUT",
            "kubernetes ipvs access filter",
            KUBE_IPVS_OUT_FILTER,
        ),
    ];
    list.iter()
        .map(|(table, chain, comment, target)| jump(*table, chain, &[], comment, target))
        .collect()
}
