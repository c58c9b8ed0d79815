//! The node-wide part of the ruleset: fixed chains, the jump to `KUBE-NODEPORTS`, and the jumps
//! from the built-in chains.

use std::collections::BTreeMap;

use ferry_model::IpFamily;

use super::model::{Chain, JumpRule, Ruleset, Table};
use super::names::*;
use crate::plan::{NodePortScope, Plan};

pub(super) fn loopback(family: IpFamily) -> &'static str {
    match family {
        IpFamily::V4 => "127.0.0.0/8",
        IpFamily::V6 => "::1/128",
    }
}

/// upstream's mark text: `%#08x` of the mark (`0x004000` for bit 14).
pub(crate) fn mark_text(mark: u32) -> String {
    format!("{mark:#08x}")
}

/// `KUBE-POSTROUTING`: masquerade what `KUBE-MARK-MASQ` marked (iptables and IPVS modes), then
/// Ferry's owner marker ([`OWNER_COMMENT`]).
pub(crate) fn postrouting_rules(mark: u32) -> Vec<String> {
    let mark = mark_text(mark);
    vec![
        format!("-m mark ! --mark {mark}/{mark} -j RETURN"),
        // Clear the mark so a packet that re-traverses the stack is not masqueraded twice.
        format!("-j MARK --xor-mark {mark}"),
        "-m comment --comment \"kubernetes service traffic requiring SNAT\" -j MASQUERADE --random-fully".to_owned(),
        format!("-m comment --comment \"{OWNER_COMMENT}\" -j RETURN"),
    ]
}

/// `NON_POD_MASQ` (several pod CIDRs): traffic from any of them returns, the rest is marked
/// for masquerading (iptables and IPVS modes).
pub(crate) fn non_pod_masq_rules(pod_cidrs: &[ipnet::IpNet]) -> Vec<String> {
    pod_cidrs
        .iter()
        .map(|c| format!("-s {c} -j RETURN"))
        .chain([format!("-j {KUBE_MARK_MASQ}")])
        .collect()
}

/// `KUBE-MARK-MASQ`: mark for masquerading.
pub(crate) fn mark_masq_rules(mark: u32) -> Vec<String> {
    vec![format!("-j MARK --or-mark {}", mark_text(mark))]
}

/// `KUBE-FORWARD`'s accept rules: marked packets and established connections.
pub(crate) fn forward_accept_rules(mark: u32) -> Vec<String> {
    let mark = mark_text(mark);
    vec![
        format!(
            "-m comment --comment \"kubernetes forwarding rules\" -m mark --mark {mark}/{mark} -j ACCEPT"
        ),
        "-m comment --comment \"kubernetes forwarding conntrack rule\" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT".to_owned(),
    ]
}

/// `KUBE-FORWARD`'s first rule: drop what conntrack marks invalid, counted in upstream's
/// nfacct counter when it exists.
fn ct_invalid_drop(counted: bool) -> String {
    let count = if counted {
        format!(" -m nfacct --nfacct-name {CT_STATE_INVALID_COUNTER}")
    } else {
        String::new()
    };
    format!("-m conntrack --ctstate INVALID{count} -j DROP")
}

/// A jump from a built-in chain: `extra` matches, upstream's comment, `-j target`.
pub(crate) fn jump(
    table: Table,
    chain: &'static str,
    extra: &[&str],
    comment: &str,
    target: &str,
) -> JumpRule {
    let mut args: Vec<String> = extra.iter().map(|s| (*s).to_owned()).collect();
    args.extend(["-m", "comment", "--comment", comment, "-j", target].map(str::to_owned));
    JumpRule { table, chain, args }
}

pub(super) fn chain(name: &str, rules: Vec<String>) -> Chain {
    Chain {
        name: name.to_owned(),
        rules,
    }
}

/// Renders everything that does not depend on individual services.
pub fn render_base(plan: &Plan) -> Ruleset {
    let mut nat = vec![
        chain(KUBE_POSTROUTING, postrouting_rules(plan.masquerade_mark)),
        chain(KUBE_MARK_MASQ, mark_masq_rules(plan.masquerade_mark)),
    ];
    if plan.local.cidrs().len() > 1 {
        nat.push(chain(NON_POD_MASQ, non_pod_masq_rules(plan.local.cidrs())));
    }
    let filter = vec![
        chain(
            KUBE_FORWARD,
            // Unless nf_conntrack_tcp_be_liberal is on (upstream's rule): an out-of-window
            // packet would otherwise reach the pod un-NATed and reset the connection.
            plan.drop_ct_invalid
                .then(|| ct_invalid_drop(plan.nfacct.ct_state_invalid))
                .into_iter()
                .chain(forward_accept_rules(plan.masquerade_mark))
                .collect(),
        ),
        Chain::new(KUBE_NODEPORTS),
    ];
    let comment =
        "-m comment --comment \"kubernetes service nodeports; NOTE: this must be the last rule in this chain\"";
    let local = "-m addrtype --dst-type LOCAL";
    let nodeport_jumps = match &plan.node_ports {
        NodePortScope::AllLocal => vec![format!(
            "{comment} {local} ! -d {} -j {KUBE_NODEPORTS}",
            loopback(plan.family)
        )],
        NodePortScope::LocalWithin(nets) => {
            // A prefix covering loopback (e.g. 0.0.0.0/0): iptables has one `-d` per rule, so
            // loopback destinations leave the chain before the NodePort jumps.
            let skip_loopback = plan.node_ports.covers_loopback().then(|| {
                format!(
                    "-m comment --comment \"NodePorts are never opened on localhost\" -d {} -j RETURN",
                    loopback(plan.family)
                )
            });
            skip_loopback
                .into_iter()
                .chain(
                    nets.iter()
                        .map(|n| format!("{comment} -d {n} {local} -j {KUBE_NODEPORTS}")),
                )
                .collect()
        }
    };
    // Localhost NodePorts are served by Ferry's proxy: the node's own connections to
    // 127.0.0.1:NODEPORT are delivered locally, through filter INPUT, and must not meet the
    // `--dst-type LOCAL` drop of a service without local endpoints (upstream DNATs them in
    // nat OUTPUT, so they never reach that chain; the proxy uses cluster-wide endpoints).
    let external_first = plan
        .localhost_node_ports
        .then(|| {
            format!(
                "-m comment --comment \"localhost NodePorts: served in user space by Ferry\" -d {} -j RETURN",
                loopback(plan.family)
            )
        })
        .into_iter()
        .collect();
    Ruleset {
        family: plan.family,
        nat,
        filter,
        nodeport_jumps,
        external_first,
        large_cluster: false,
        services: BTreeMap::new(),
    }
}

/// The jumps from the built-in chains into Ferry's chains (upstream's list, same comments).
pub fn jump_rules() -> Vec<JumpRule> {
    let new = ["-m", "conntrack", "--ctstate", "NEW"].as_slice();
    let list: [(Table, &'static str, &[&str], &str, &str); 12] = [
        (
            Table::Filter,
            "INPUT",
            new,
            "kubernetes externally-visible service portals",
            KUBE_EXTERNAL_SERVICES,
        ),
        (
            Table::Filter,
            "FORWARD",
            new,
            "kubernetes externally-visible service portals",
            KUBE_EXTERNAL_SERVICES,
        ),
        (
            Table::Filter,
            "INPUT",
            &[],
            "kubernetes health check service ports",
            KUBE_NODEPORTS,
        ),
        (
            Table::Filter,
            "FORWARD",
            new,
            "kubernetes service portals",
            KUBE_SERVICES,
        ),
        (
            Table::Filter,
            "OUTPUT",
            new,
            "kubernetes service portals",
            KUBE_SERVICES,
        ),
        (
            Table::Filter,
            "FORWARD",
            &[],
            "kubernetes forwarding rules",
            KUBE_FORWARD,
        ),
        (
            Table::Filter,
            "INPUT",
            new,
            "kubernetes load balancer firewall",
            KUBE_PROXY_FIREWALL,
        ),
        (
            Table::Filter,
            "OUTPUT",
            new,
            "kubernetes load balancer firewall",
            KUBE_PROXY_FIREWALL,
        ),
        (
            Table::Filter,
            "FORWARD",
            new,
            "kubernetes load balancer firewall",
            KUBE_PROXY_FIREWALL,
        ),
        (
            Table::Nat,
            "OUTPUT",
            &[],
            "kubernetes service portals",
            KUBE_SERVICES,
        ),
        (
            Table::Nat,
            "PREROUTING",
            &[],
            "kubernetes service portals",
            KUBE_SERVICES,
        ),
        (
            Table::Nat,
            "POSTROUTING",
            &[],
            "kubernetes postrouting rules",
            KUBE_POSTROUTING,
        ),
    ];
    list.iter()
        .map(|(table, chain, extra, comment, target)| jump(*table, chain, extra, comment, target))
        .collect()
}
