//! Typed rules of the shared dispatch chains.
//!
//! The dispatch chains are the only rules that read the `typeof` endpoint maps, and nft 1.0.6
//! cannot add such a rule once the map exists in the kernel ("conflicting protocols specified:
//! tcp vs. th"). So the dataplane writes these rules over netlink itself, from this typed
//! form, while `ferry rules` and the golden files print them with [`fmt::Display`], in the
//! exact text `nft list table` prints for what the dataplane writes.
//!
//! Adding a kind of match or action: add a variant here with its text in the `Display`
//! impl, then its expressions in `ferry-dataplane/src/netlink/encode/rule.rs` (the compiler
//! refuses to build until both exist), and compare the two with the netns test
//! `ferry-dataplane/tests/netlink_kernel.rs`.

use std::fmt;

use ipnet::IpNet;

use ferry_model::IpFamily;

/// A shared dispatch chain: a name that says everything its rules depend on, and the rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DispatchChain {
    /// Chain name.
    pub name: String,
    /// Rules, in order.
    pub rules: Vec<DispatchRule>,
}

/// One rule: matches (all must hold), then an action.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DispatchRule {
    /// The table's family (`ip saddr` or `ip6 saddr`).
    pub family: IpFamily,
    /// Conditions, in order.
    pub matches: Vec<RuleMatch>,
    /// What a matching packet gets.
    pub action: RuleAction,
}

/// A condition on the packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleMatch {
    /// `ip saddr PREFIX`, `ip saddr != PREFIX`, `ip saddr { P1, P2 }`: the source is (not)
    /// within one of `nets` (never empty).
    Saddr {
        /// True for `!=`.
        negate: bool,
        /// The prefixes.
        nets: Vec<IpNet>,
    },
    /// `fib saddr type local`: the source is one of this node's addresses.
    SaddrLocal,
    /// `iifname "cbr0"`, `iifname != "cbr0"`, `iifname "veth*"`: the packet came in (or not)
    /// on this interface, or on one whose name starts with `name` (`prefix`).
    Iifname {
        /// True for `!=`.
        negate: bool,
        /// The name or prefix.
        name: String,
        /// Every name starting with `name`.
        prefix: bool,
    },
}

/// How the DNAT finds the frontend in an endpoint map.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DnatKey {
    /// `ip daddr . meta l4proto . th dport`: service IPs (ClusterIPs, external IPs).
    ServiceIp,
    /// `meta l4proto . th dport`: node ports (the destination is any node address).
    NodePort,
}

/// What a matching packet gets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RuleAction {
    /// `jump CHAIN`.
    Jump(&'static str),
    /// `meta l4proto { tcp, udp, sctp } dnat ip to KEY . numgen random mod SLOTS map @MAP`:
    /// DNAT to the endpoint the map holds for the frontend and a random slot.
    Dnat {
        /// The frontend part of the map key.
        key: DnatKey,
        /// Number of slots (endpoints), at least 1.
        slots: u32,
        /// The endpoint map.
        map: &'static str,
    },
    /// `meta l4proto { tcp, udp, sctp } dnat ip to KEY . ip saddr map @MAP`: session
    /// affinity, a client with a pin in `MAP` goes back to the endpoint it holds (a client
    /// without one does not match and falls through to the [`RuleAction::Dnat`] draw).
    PinnedDnat {
        /// The frontend part of the pin map key.
        key: DnatKey,
        /// The pin map (`affinity`, `nodeport-affinity`).
        map: &'static str,
    },
    /// `meta l4proto { tcp, udp, sctp } update @MAP { FRONTEND . ip saddr timeout T : ip daddr
    /// . th dport }`, after DNAT: adds (or renews) the pin of the client to the endpoint the
    /// connection was translated to. FRONTEND is the original destination from conntrack
    /// (`ct original ip daddr . meta l4proto . ct original proto-dst`, without the address for
    /// node ports).
    RecordPin {
        /// Which frontend the pin is for.
        key: DnatKey,
        /// The pin's lifetime in seconds (`sessionAffinityConfig.clientIP.timeoutSeconds`).
        timeout: u32,
        /// The pin map.
        map: &'static str,
    },
}

/// A duration as `nft list` prints it: `3h`, `1m30s`, `1d`, `5s`.
pub fn nft_duration(secs: u32) -> String {
    let mut out = String::new();
    let mut rest = secs;
    for (unit, len) in [("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)] {
        if rest >= len {
            out.push_str(&format!("{}{unit}", rest / len));
            rest %= len;
        }
    }
    if out.is_empty() {
        out.push_str("0s");
    }
    out
}

impl DispatchRule {
    /// `ip` or `ip6`.
    pub fn ip(&self) -> &'static str {
        crate::family::nft_family(self.family)
    }
}

impl fmt::Display for DispatchRule {
    /// The rule as `nft list` prints it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ip = self.ip();
        for m in &self.matches {
            match m {
                RuleMatch::Saddr { negate, nets } => {
                    let op = if *negate { "!= " } else { "" };
                    write!(f, "{ip} saddr {op}")?;
                    if let [net] = nets.as_slice() {
                        write!(f, "{net} ")?;
                    } else {
                        let list: Vec<String> = nets.iter().map(ToString::to_string).collect();
                        write!(f, "{{ {} }} ", list.join(", "))?;
                    }
                }
                RuleMatch::SaddrLocal => f.write_str("fib saddr type local ")?,
                RuleMatch::Iifname {
                    negate,
                    name,
                    prefix,
                } => {
                    let op = if *negate { "!= " } else { "" };
                    let star = if *prefix { "*" } else { "" };
                    write!(f, "iifname {op}\"{name}{star}\" ")?;
                }
            }
        }
        match &self.action {
            RuleAction::Jump(chain) => write!(f, "jump {chain}"),
            RuleAction::Dnat { key, slots, map } => {
                let key = match key {
                    DnatKey::ServiceIp => format!("{ip} daddr . meta l4proto . th dport"),
                    DnatKey::NodePort => "meta l4proto . th dport".to_owned(),
                };
                write!(
                    f,
                    "meta l4proto {{ tcp, udp, sctp }} dnat {ip} to {key} . numgen random mod {slots} map @{map}"
                )
            }
            RuleAction::PinnedDnat { key, map } => {
                let key = match key {
                    DnatKey::ServiceIp => format!("{ip} daddr . meta l4proto . th dport"),
                    DnatKey::NodePort => "meta l4proto . th dport".to_owned(),
                };
                write!(
                    f,
                    "meta l4proto {{ tcp, udp, sctp }} dnat {ip} to {key} . {ip} saddr map @{map}"
                )
            }
            RuleAction::RecordPin { key, timeout, map } => {
                let frontend = match key {
                    DnatKey::ServiceIp => {
                        format!("ct original {ip} daddr . meta l4proto . ct original proto-dst")
                    }
                    DnatKey::NodePort => "meta l4proto . ct original proto-dst".to_owned(),
                };
                write!(
                    f,
                    "meta l4proto {{ tcp, udp, sctp }} update @{map} {{ {frontend} . {ip} saddr timeout {} : {ip} daddr . th dport }}",
                    nft_duration(*timeout)
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::nft_duration;

    #[test]
    fn durations_print_as_nft_lists_them() {
        assert_eq!(nft_duration(10_800), "3h");
        assert_eq!(nft_duration(60), "1m");
        assert_eq!(nft_duration(5), "5s");
        assert_eq!(nft_duration(86_400), "1d");
        assert_eq!(nft_duration(90_061), "1d1h1m1s");
        assert_eq!(nft_duration(0), "0s");
    }
}
