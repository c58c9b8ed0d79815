//! Load-balancer IPs in upstream's iptables layout: `"… loadbalancer IP"` rules in nat
//! `KUBE-SERVICES`, and with `loadBalancerSourceRanges` a `KUBE-FW-` chain (allowed sources go
//! on to `KUBE-EXT-`) plus a filter `KUBE-PROXY-FIREWALL` rule dropping what it did not DNAT.

use super::base::chain;
use super::model::ServiceRules;
use super::names::{service_chain, FIREWALL_PREFIX, KUBE_PROXY_FIREWALL};
use super::port::Port;

/// Adds one service port's load-balancer rules. `verdict`: the filter target and comment for
/// external traffic that is not forwarded (no endpoints, or Local without local ones). Like
/// upstream's iptables mode, a service without endpoints gets no `KUBE-FW-` chain: every
/// source is rejected (nftables mode drops the disallowed sources first).
pub(super) fn load_balancer(
    p: &Port<'_>,
    has_endpoints: bool,
    verdict: Option<&(&'static str, String)>,
    out: &mut ServiceRules,
) {
    let sp = p.sp;
    let firewall = sp.firewall.as_ref().filter(|_| has_endpoints);
    let fw = service_chain(FIREWALL_PREFIX, &sp.name);
    for addr in &sp.load_balancer_ips {
        let dest = p.dest(addr, sp.port);
        if has_endpoints {
            let target = if firewall.is_some() { &fw } else { &p.ext };
            out.nat_services.push(format!(
                "{} {dest} -j {target}",
                p.head(&format!("{} loadbalancer IP", p.name))
            ));
        }
        if firewall.is_some() {
            out.filter_firewall.push(format!(
                "{} {dest} -j DROP",
                p.head(&format!("{} traffic not accepted by {fw}", p.name))
            ));
        }
        if let Some((target, comment)) = verdict {
            out.filter_external
                .push(format!("{} {dest} -j {target}", p.head(comment)));
        }
    }
    if let Some(fw_rules) = firewall {
        // Allowed sources go on to the external chain (DNAT); the rest reach the end of
        // the chain un-NATed and are dropped by filter KUBE-PROXY-FIREWALL.
        let comment = format!("-m comment --comment \"{} loadbalancer IP\"", p.name);
        let mut rules: Vec<String> = fw_rules
            .allowed
            .iter()
            .map(|src| format!("{comment} -s {src} -j {}", p.ext))
            .collect();
        rules.push(format!(
            "-m comment --comment \"other traffic to {} will be dropped by {KUBE_PROXY_FIREWALL}\"",
            p.name
        ));
        out.chains.push(chain(&fw, rules));
    }
}
