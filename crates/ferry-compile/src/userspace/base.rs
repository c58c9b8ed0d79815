//! The part of the userspace table that does not depend on service ports: hooks, the
//! redirect chains, the checks shared with nftables mode, and the set declarations.

use crate::local::LocalTraffic;
use std::net::IpAddr;

use ipnet::IpNet;

use ferry_model::IpFamily;

use super::HostTarget;
use crate::nft::{self, base, chain, BaseChain, Chain, Ruleset, SetDef};
use crate::plan::Plan;

/// Where service traffic is sent: the node's first primary address of the family.
fn host_target(plan: &Plan) -> HostTarget {
    plan.node_ips
        .first()
        .map_or(HostTarget::Redirect, |ip| HostTarget::Dnat(*ip))
}

/// `dnat ip to NODE:KEY map @MAP`, or `redirect to :KEY map @MAP`.
fn to_proxy(host: HostTarget, key: &str, map: &str) -> String {
    let target = match host {
        HostTarget::Redirect => "redirect to :".to_owned(),
        HostTarget::Dnat(IpAddr::V4(a)) => format!("dnat ip to {a}:"),
        HostTarget::Dnat(IpAddr::V6(a)) => format!("dnat ip6 to [{a}]:"),
    };
    format!("meta l4proto {{ tcp, udp }} {target}{key} map @{map}")
}

fn saddr_within(family: IpFamily, nets: &[IpNet]) -> String {
    let ip = crate::family::nft_family(family);
    let list: Vec<String> = nets.iter().map(ToString::to_string).collect();
    format!("{ip} saddr {{ {} }} ", list.join(", "))
}

/// The nat chains: `portals-*` for service IPs, `nodeports-*` for NodePorts; `*-container`
/// for traffic from outside and from pods (prerouting), `*-host` for the node's own (output).
/// Both DNAT to the node's address (upstream `redirect`ed the container side, which the kernel
/// cannot do for a packet that arrives on an interface without an address, such as the
/// host-side veth of a calico pod: it drops it).
fn nat_chains(plan: &Plan) -> Vec<Chain> {
    let family = plan.family;
    let ip = crate::family::nft_family(family);
    let by_ip = format!("{ip} daddr . meta l4proto . th dport");
    let by_np = "meta l4proto . th dport";
    let np = format!("{} ", nft::node_port_match(plan));
    let pods = match &plan.local {
        LocalTraffic::None => None,
        LocalTraffic::Cidrs(nets) => Some(saddr_within(family, nets)),
        LocalTraffic::Interface(i) => Some(format!(
            "iifname \"{}{}\" ",
            i.name,
            if i.prefix { "*" } else { "" }
        )),
    };
    let host = host_target(plan);
    let redirects = |name: &str, pre: &str, node: bool, key: &str, map: &str| {
        let mut rules = vec![format!("{pre}{}", to_proxy(host, key, map))];
        let local_sources = format!("{map}-local-sources");
        // Pods reach a Local external frontend without local endpoint cluster-wide; the node
        // itself always does (its chain redirects without a source match).
        match (node, &pods) {
            (false, Some(pods)) => rules.push(format!(
                "{pre}{pods}{}",
                to_proxy(host, key, &local_sources)
            )),
            (false, None) => {}
            (true, _) => rules.push(format!("{pre}{}", to_proxy(host, key, &local_sources))),
        }
        Chain {
            name: name.to_owned(),
            rules,
        }
    };
    vec![
        redirects("nodeports-container", &np, false, by_np, "nodeports"),
        redirects("nodeports-host", &np, true, by_np, "nodeports"),
        redirects("portals-container", "", false, &by_ip, "portals"),
        redirects("portals-host", "", true, &by_ip, "portals"),
        // Only what this table redirected (or another DNAT) reaches a proxy listener.
        chain(
            "proxy-ports-check",
            &["meta l4proto . th dport @proxy-ports ct status ! dnat drop"],
        ),
    ]
}

/// The sets the proxy maps add to the ones shared with nftables mode.
fn proxy_sets(addr: &str) -> Vec<SetDef> {
    let svc = format!("type {addr} . inet_proto . inet_service : inet_service");
    let np = "type inet_proto . inet_service : inet_service".to_owned();
    vec![
        SetDef::map("nodeports", np.clone(), "protocol . node port : proxy port"),
        SetDef::map(
            "nodeports-local-sources",
            np,
            "protocol . node port : proxy port, for the node and its pods only (Local policy, no local endpoint)",
        ),
        SetDef::map(
            "portals",
            svc.clone(),
            "service IP . protocol . port : proxy port (ClusterIPs, external and load-balancer IPs)",
        ),
        SetDef::map(
            "portals-local-sources",
            svc,
            "service IP . protocol . port : proxy port, for the node and its pods only (Local policy, no local endpoint)",
        ),
        SetDef::set(
            "proxy-ports",
            "type inet_proto . inet_service".to_owned(),
            "the proxy listeners: reachable only through the redirects of this table",
        ),
    ]
}

/// Renders everything that does not depend on individual service ports: nftables mode's
/// base ruleset with its own hooks, the redirect chains and maps instead of the dispatch ones.
pub fn render_base(plan: &Plan) -> Ruleset {
    // The checks before and after DNAT are nftables mode's: same chains, same sets.
    let mut ruleset = nft::render_base(plan);
    const SHARED_CHAINS: [&str; 6] = [
        "cluster-ips-check",
        "firewall-allow-check",
        "firewall-check",
        "nodeport-endpoints-check",
        "reject-chain",
        "service-endpoints-check",
    ];
    const SHARED_SETS: [&str; 6] = [
        "cluster-ips",
        "firewall-allow",
        "firewall-ips",
        "no-endpoint-nodeports",
        "no-endpoint-services",
        "nodeport-ips",
    ];
    ruleset.base_chains = base_chains();
    ruleset
        .chains
        .retain(|c| SHARED_CHAINS.contains(&c.name.as_str()));
    ruleset.chains.extend(nat_chains(plan));
    ruleset.chains.sort_by(|a, b| a.name.cmp(&b.name));
    let addr = match plan.family {
        IpFamily::V4 => "ipv4_addr",
        IpFamily::V6 => "ipv6_addr",
    };
    ruleset.sets.retain(|s| SHARED_SETS.contains(&s.name));
    ruleset.sets.extend(proxy_sets(addr));
    ruleset.sets.sort_by(|a, b| a.name.cmp(b.name));
    ruleset
}

fn base_chains() -> Vec<BaseChain> {
    let new = |chain: &str| format!("ct state new jump {chain}");
    vec![
        // Before DNAT: loadBalancerSourceRanges sees the load-balancer IP.
        base("filter", "prerouting", -110, &[&new("firewall-check")]),
        base(
            "filter",
            "input",
            -110,
            &[
                &new("nodeport-endpoints-check"),
                &new("service-endpoints-check"),
                &new("proxy-ports-check"),
            ],
        ),
        base(
            "filter",
            "forward",
            -110,
            &[&new("service-endpoints-check"), &new("cluster-ips-check")],
        ),
        base(
            "filter",
            "output",
            -110,
            &[&new("service-endpoints-check"), &new("firewall-check")],
        ),
        BaseChain {
            // After DNAT: a packet of the node's to a ClusterIP port nobody serves.
            chain: chain("filter-output-post-dnat", &[&new("cluster-ips-check")]),
            ..base("filter", "output", -90, &[])
        },
        base(
            "nat",
            "prerouting",
            -100,
            &["jump portals-container", "jump nodeports-container"],
        ),
        base(
            "nat",
            "output",
            -100,
            &["jump portals-host", "jump nodeports-host"],
        ),
    ]
}
