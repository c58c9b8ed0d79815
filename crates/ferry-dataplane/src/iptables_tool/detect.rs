//! Which iptables backend the host uses, found the way upstream's iptables wrapper finds it:
//! the one that already holds Kubernetes' marker chains, else the one holding more rules, else
//! nft.

use super::runner::{IptablesCli, IptablesRunner};
use super::IptablesBackend;

/// Chains whose presence says "Kubernetes (kubelet, kube-proxy or Ferry) uses this backend".
const MARKERS: [&str; 3] = [
    "KUBE-IPTABLES-HINT",
    "KUBE-KUBELET-CANARY",
    "KUBE-PROXY-CANARY",
];

fn is_marker(chain: &str) -> bool {
    MARKERS.contains(&chain)
}

/// Whether an `iptables-save` output declares a marker chain (`:NAME POLICY [p:b]`).
fn has_marker(save: &str) -> bool {
    save.lines().any(|l| {
        l.strip_prefix(':')
            .and_then(|d| d.split_whitespace().next())
            .is_some_and(is_marker)
    })
}

fn rule_count(save: &str) -> usize {
    save.lines().filter(|l| l.starts_with("-A ")).count()
}

/// Chooses from the two backends' `iptables-save` outputs (empty when a tool is missing).
pub fn choose(nft_save: &str, legacy_save: &str) -> IptablesBackend {
    if has_marker(nft_save) {
        IptablesBackend::Nft
    } else if has_marker(legacy_save) || rule_count(legacy_save) > rule_count(nft_save) {
        IptablesBackend::Legacy
    } else {
        IptablesBackend::Nft
    }
}

/// Looks at both backends in the current network namespace. A tool that is missing or fails
/// counts as holding nothing. The marker chains are looked for by name first (the nft
/// backend's over nfnetlink: on a node kube-proxy ran on, `iptables-nft-save` of its rules
/// takes seconds); both saves are read only when neither backend has one, to count rules.
pub fn detect() -> IptablesBackend {
    for backend in [IptablesBackend::Nft, IptablesBackend::Legacy] {
        if has_marker_chain(backend) {
            return backend;
        }
    }
    let save = |b: IptablesBackend| IptablesCli::new(b).save(None).unwrap_or_default();
    choose(&save(IptablesBackend::Nft), &save(IptablesBackend::Legacy))
}

/// Whether `backend` holds one of the marker chains, in any table.
fn has_marker_chain(backend: IptablesBackend) -> bool {
    let Ok(tables) = IptablesCli::new(backend).saved_chains() else {
        return false;
    };
    tables.values().flatten().any(|chain| is_marker(chain))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marker_chains_decide_and_nft_wins_a_tie() {
        let hint = "*mangle\n:KUBE-IPTABLES-HINT - [0:0]\nCOMMIT\n";
        let rules = "*filter\n-A INPUT -j ACCEPT\n-A INPUT -j DROP\nCOMMIT\n";
        assert_eq!(choose(hint, rules), IptablesBackend::Nft);
        assert_eq!(choose(rules, hint), IptablesBackend::Legacy);
        assert_eq!(
            choose("", rules),
            IptablesBackend::Legacy,
            "more rules in legacy"
        );
        assert_eq!(choose(rules, ""), IptablesBackend::Nft);
        assert_eq!(choose("", ""), IptablesBackend::Nft, "the default");
    }
}
