//! The soak's end check in iptables mode: which endpoints each ClusterIP DNATs to, read from
//! `iptables-save -t nat` through kube-proxy's chains (`KUBE-SERVICES` → `KUBE-SVC-` →
//! `KUBE-SEP-`). iptables-save writes rules in its own canonical form, so they are not
//! compared as text with `ferry rules`: the drill knows every Service's final endpoints and
//! compares those.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{Ipv4Addr, SocketAddrV4};

/// Each ClusterIP:port's DNAT destinations (addresses), as the nat table's rules route it.
pub(super) fn endpoints_by_cluster_ip(save: &str) -> BTreeMap<SocketAddrV4, BTreeSet<Ipv4Addr>> {
    let mut frontends = Vec::new();
    let mut seps: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    let mut destination: BTreeMap<&str, Ipv4Addr> = BTreeMap::new();
    for line in save.lines() {
        let Some(rule) = line.strip_prefix("-A ") else {
            continue;
        };
        let words: Vec<&str> = rule.split_whitespace().collect();
        let (chain, target) = (words[0], value(&words, "-j"));
        match target {
            Some(t) if chain == "KUBE-SERVICES" && t.starts_with("KUBE-SVC-") => {
                let ip = value(&words, "-d").and_then(|d| d.trim_end_matches("/32").parse().ok());
                let port = value(&words, "--dport").and_then(|p| p.parse().ok());
                if let (Some(ip), Some(port)) = (ip, port) {
                    frontends.push((SocketAddrV4::new(ip, port), t));
                }
            }
            Some(t) if chain.starts_with("KUBE-SVC-") && t.starts_with("KUBE-SEP-") => {
                seps.entry(chain).or_default().push(t);
            }
            Some("DNAT") if chain.starts_with("KUBE-SEP-") => {
                let to = value(&words, "--to-destination").and_then(|d| d.parse().ok());
                if let Some(to) = to.map(|a: SocketAddrV4| *a.ip()) {
                    destination.insert(chain, to);
                }
            }
            _ => {}
        }
    }
    frontends
        .into_iter()
        .map(|(frontend, svc)| {
            let addresses = seps
                .get(svc)
                .into_iter()
                .flatten()
                .filter_map(|sep| destination.get(sep).copied())
                .collect();
            (frontend, addresses)
        })
        .collect()
}

/// The word after `flag` in a rule.
fn value<'a>(words: &[&'a str], flag: &str) -> Option<&'a str> {
    let at = words.iter().position(|w| *w == flag)?;
    words.get(at + 1).copied()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn follows_a_cluster_ip_through_its_service_and_endpoint_chains() {
        let save = r#"*nat
:KUBE-SERVICES - [0:0]
:KUBE-SVC-AAAA - [0:0]
:KUBE-SEP-1111 - [0:0]
:KUBE-SEP-2222 - [0:0]
-A KUBE-SERVICES -d 10.96.0.10/32 -p tcp -m comment --comment "drill/svc-0:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-AAAA
-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
-A KUBE-SVC-AAAA ! -s 10.64.0.0/12 -d 10.96.0.10/32 -p tcp -m tcp --dport 80 -j KUBE-MARK-MASQ
-A KUBE-SVC-AAAA -m statistic --mode random --probability 0.50000000000 -j KUBE-SEP-1111
-A KUBE-SVC-AAAA -j KUBE-SEP-2222
-A KUBE-SEP-1111 -s 10.64.0.1/32 -j KUBE-MARK-MASQ
-A KUBE-SEP-1111 -p tcp -m tcp -j DNAT --to-destination 10.64.0.1:8080
-A KUBE-SEP-2222 -p tcp -m tcp -j DNAT --to-destination 10.64.0.2:8080
COMMIT
"#;
        let found = endpoints_by_cluster_ip(save);
        let frontend: SocketAddrV4 = "10.96.0.10:80".parse().expect("address");
        let want: BTreeSet<Ipv4Addr> = ["10.64.0.1", "10.64.0.2"]
            .iter()
            .map(|a| a.parse().expect("address"))
            .collect();
        assert_eq!(found.len(), 1);
        assert_eq!(found[&frontend], want);
    }
}
