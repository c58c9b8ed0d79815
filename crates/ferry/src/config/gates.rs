//! The feature gates kube-proxy 1.37 consults (pkg/features/kube_features.go, component-base's
//! logging gates, and the `DefaultFeatureGate.Enabled` calls of cmd/kube-proxy and
//! pkg/proxy), what each does in Ferry, and upstream's refusal of a locked gate set against
//! its lock. A gate not listed here is recorded and named in the "not used" warning.

use std::collections::BTreeMap;

use super::ConfigError;

/// What Ferry does with a gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handling {
    /// Ferry reads the gate and behaves as kube-proxy does with it, as the text says.
    Acts(&'static str),
    /// Recorded only; the text says why and what to do instead.
    Recorded(&'static str),
}

/// One gate of kube-proxy 1.37.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gate {
    /// The gate's name.
    pub name: &'static str,
    /// Its default in 1.37.
    pub default: bool,
    /// Locked to its default (GA or removed-soon): any other value is refused, as the gate
    /// library refuses it.
    pub locked: bool,
    /// What Ferry does with it.
    pub handling: Handling,
}

/// KEP-5495: IPVS mode may be used (default true; deprecated in 1.37).
pub const IPVS: &str = "KubeProxyIPVS";
/// KEP-6032 (alpha in 1.37): nftables mode answers NodePorts on loopback.
pub const NFT_LOCALHOST: &str = "KubeProxyNFTablesLocalhostNodePorts";
/// Services' `spec.externalIPs` are programmed (GA, default true, not locked).
pub const EXTERNAL_IPS: &str = "AllowServiceExternalIPs";
/// ServiceCIDR objects are watched (GA, locked to true since 1.34).
pub const SERVICE_CIDRS: &str = "MultiCIDRServiceAllocator";
/// `trafficDistribution: PreferSameNode` (GA, locked to true since 1.35).
pub const PREFER_SAME: &str = "PreferSameTrafficDistribution";
/// nftables mode may be used (GA, locked to true since 1.33).
pub const NFT_MODE: &str = "NFTablesProxyMode";
/// component-base's alpha logging options (split streams, info buffers).
pub const LOGGING_ALPHA: &str = "LoggingAlphaOptions";

/// The gates kube-proxy 1.37 consults, with Ferry's handling.
pub const GATES: &[Gate] = &[
    gate(
        IPVS,
        true,
        false,
        Handling::Acts("`false` refuses `mode: ipvs`"),
    ),
    gate(
        NFT_LOCALHOST,
        false,
        false,
        Handling::Acts("`false` turns localhost NodePorts off in nftables mode"),
    ),
    gate(
        EXTERNAL_IPS,
        true,
        false,
        Handling::Acts("`false` programs no service's `externalIPs`"),
    ),
    gate(
        SERVICE_CIDRS,
        true,
        true,
        Handling::Acts("ServiceCIDR objects are watched; `false` is refused"),
    ),
    gate(
        PREFER_SAME,
        true,
        true,
        Handling::Acts("`trafficDistribution: PreferSameNode` is followed; `false` is refused"),
    ),
    gate(
        NFT_MODE,
        true,
        true,
        Handling::Acts("nftables mode runs; `false` is refused"),
    ),
    gate(
        LOGGING_ALPHA,
        false,
        false,
        Handling::Acts("`true` allows split log streams and info buffer sizes, refused without"),
    ),
    gate(
        "NFTablesNetlink",
        true,
        false,
        Handling::Recorded(
            "Ferry's nftables mode always writes its elements through netlink and its \
             skeleton with nft -f; the gate cannot switch that",
        ),
    ),
    gate(
        "ComponentFlagz",
        true,
        false,
        Handling::Recorded("Ferry serves no /flagz: /configz shows the effective configuration"),
    ),
    gate(
        "ComponentStatusz",
        true,
        false,
        Handling::Recorded("Ferry serves no /statusz: /status and `ferry status` say the same"),
    ),
    gate(
        "LoggingBetaOptions",
        true,
        false,
        Handling::Recorded("no beta logging option of kube-proxy's is one Ferry has"),
    ),
    gate(
        "ContextualLogging",
        true,
        false,
        Handling::Recorded("Ferry's log lines carry their context as fields already"),
    ),
];

const fn gate(name: &'static str, default: bool, locked: bool, handling: Handling) -> Gate {
    Gate {
        name,
        default,
        locked,
        handling,
    }
}

/// The gate named `name`, if kube-proxy 1.37 consults it.
pub fn find(name: &str) -> Option<&'static Gate> {
    GATES.iter().find(|g| g.name == name)
}

/// Whether Ferry acts on the gate.
pub fn acts_on(name: &str) -> bool {
    find(name).is_some_and(|g| matches!(g.handling, Handling::Acts(_)))
}

/// The gate's value: as `gates` sets it, else its 1.37 default (`false` for a gate kube-proxy
/// does not consult).
pub fn enabled(gates: &BTreeMap<String, bool>, name: &str) -> bool {
    gates
        .get(name)
        .copied()
        .unwrap_or_else(|| find(name).is_some_and(|g| g.default))
}

/// The gates of `gates` Ferry does not act on, by name.
pub fn unused(gates: &BTreeMap<String, bool>) -> Vec<&str> {
    gates
        .keys()
        .map(String::as_str)
        .filter(|g| !acts_on(g))
        .collect()
}

/// Upstream's refusal of a locked gate set against its lock, in the gate library's words.
/// `place` names the field or flag (`featureGates`, `--feature-gates`).
pub fn check(gates: &BTreeMap<String, bool>, place: &str) -> Result<(), ConfigError> {
    for (name, value) in gates {
        if let Some(g) = find(name).filter(|g| g.locked && g.default != *value) {
            return Err(ConfigError::new(
                place,
                format!(
                    "cannot set feature gate {name} to {value}, feature is locked to {} \
                     (kube-proxy 1.37 refuses it too): remove {name} from the gates",
                    g.default
                ),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gates(items: &[(&str, bool)]) -> BTreeMap<String, bool> {
        items.iter().map(|(n, v)| ((*n).to_owned(), *v)).collect()
    }

    #[test]
    fn a_locked_gate_against_its_lock_is_refused_naming_it() {
        for name in [SERVICE_CIDRS, PREFER_SAME, NFT_MODE] {
            let err = check(&gates(&[(name, false)]), "--feature-gates").expect_err(name);
            assert_eq!(err.place, "--feature-gates");
            assert!(
                err.message.starts_with(&format!(
                    "cannot set feature gate {name} to false, feature is locked to true"
                )),
                "{err:?}"
            );
            // Set to its lock, it is accepted and acted on (Ferry does what it asks).
            assert!(check(&gates(&[(name, true)]), "x").is_ok());
            assert!(acts_on(name));
        }
    }

    #[test]
    fn an_unlocked_gate_takes_either_value_and_defaults_to_1_37s() {
        assert!(check(&gates(&[(EXTERNAL_IPS, false), (IPVS, false)]), "x").is_ok());
        assert!(enabled(&gates(&[]), EXTERNAL_IPS));
        assert!(!enabled(&gates(&[(EXTERNAL_IPS, false)]), EXTERNAL_IPS));
        assert!(!enabled(&gates(&[]), NFT_LOCALHOST));
        assert!(!enabled(&gates(&[]), "NoSuchGate"));
    }

    #[test]
    fn gates_ferry_does_not_act_on_are_named_with_unknown_ones() {
        let set = gates(&[
            ("NFTablesNetlink", false),
            ("Foo", true),
            (EXTERNAL_IPS, false),
            (LOGGING_ALPHA, true),
        ]);
        assert_eq!(unused(&set), ["Foo", "NFTablesNetlink"]);
        for g in GATES {
            let (Handling::Acts(text) | Handling::Recorded(text)) = g.handling;
            assert!(!text.is_empty() && !text.contains('\n'), "{}", g.name);
        }
    }
}
