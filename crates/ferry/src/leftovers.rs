//! kube-proxy's leftovers on a node Ferry starts on (issue 15, phase 2): what the kernel holds
//! from kube-proxy, and the one line per finding that says what Ferry does about it.
//!
//! Pure: the facts come from `nft list tables`, `iptables-save -t nat` and the presence of the
//! `kube-ipvs0` link, read by the dataplane (the reading lands with the mode table of issue 11).
#![allow(dead_code)]

use crate::config::ProxyMode;

/// What kube-proxy left in this network namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Leftovers {
    /// kube-proxy's nftables tables (`ip kube-proxy`, `ip6 kube-proxy`).
    pub nft_tables: Vec<String>,
    /// `KUBE-SERVICES` in the nat table (kube-proxy's iptables or IPVS mode, or Ferry's own
    /// iptables mode).
    pub iptables_chains: bool,
    /// The `kube-ipvs0` dummy link of kube-proxy's IPVS mode.
    pub ipvs_link: bool,
}

impl Leftovers {
    /// Reads the facts from the tools' output.
    pub fn parse(nft_tables: &str, iptables_nat: &str, ipvs_link: bool) -> Leftovers {
        Leftovers {
            nft_tables: nft_tables
                .lines()
                .filter_map(|l| l.trim().strip_prefix("table "))
                .filter(|t| t.ends_with(" kube-proxy"))
                .map(str::to_owned)
                .collect(),
            iptables_chains: iptables_nat
                .lines()
                .any(|l| l.starts_with(":KUBE-SERVICES ")),
            ipvs_link,
        }
    }

    /// One line per finding: what it is and what Ferry does about it in `mode`.
    pub fn describe(&self, mode: ProxyMode) -> Vec<String> {
        let mut out = Vec::new();
        if !self.nft_tables.is_empty() {
            out.push(format!(
                "kube-proxy's nftables tables are here ({}): Ferry leaves them alone; both \
                 DNAT the same Services until you delete them (`nft delete table ip kube-proxy`)",
                self.nft_tables.join(", ")
            ));
        }
        if self.ipvs_link {
            out.push(
                "kube-proxy's IPVS mode left kube-ipvs0 and its virtual servers: IPVS sees packets \
                 before Ferry's rules; run `kube-proxy --cleanup` (docs/migrate.md)"
                    .to_owned(),
            );
        }
        if self.iptables_chains {
            out.push(match mode {
                ProxyMode::Nftables => "iptables KUBE-* chains are here (kube-proxy's iptables \
                     mode, or Ferry's): removed now, Ferry's nftables table replaces them"
                    .to_owned(),
                ProxyMode::Iptables => "iptables KUBE-* chains are here: Ferry takes them over \
                     at its first sync (same names)"
                    .to_owned(),
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_kube_proxys_tables_chains_and_ipvs_link() {
        let l = Leftovers::parse(
            "table ip ferry\ntable ip kube-proxy\ntable ip6 kube-proxy\ntable inet filter\n",
            "*nat\n:PREROUTING ACCEPT [0:0]\n:KUBE-SERVICES - [0:0]\nCOMMIT\n",
            true,
        );
        assert_eq!(l.nft_tables, ["ip kube-proxy", "ip6 kube-proxy"]);
        assert!(l.iptables_chains && l.ipvs_link);
        let lines = l.describe(ProxyMode::Nftables);
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(lines[2].contains("removed now"), "{lines:?}");
        assert!(Leftovers::parse("table ip ferry\n", "", false)
            .describe(ProxyMode::Nftables)
            .is_empty());
    }
}
