//! The local-traffic detector (`detectLocalMode`): which packets come from this cluster's pods,
//! as each mode matches them. Upstream's four detectors: by source CIDR (`ClusterCIDR`, the
//! cluster's pod ranges; `NodeCIDR`, this node's `spec.podCIDRs`), or by the interface the packet
//! came in on (`BridgeInterface`: one bridge, e.g. `cbr0`; `InterfaceNamePrefix`: the pods'
//! host-side interfaces, e.g. `veth*`). An interface detector only sees this node's pods: a pod
//! of another node arrives on the node's uplink, as outside traffic does.

use std::net::IpAddr;

use ipnet::IpNet;

use ferry_model::NodeView;

use crate::config::{CompileConfig, LocalDetector};
use crate::family::of_family;
use crate::nft::RuleMatch;

/// How pod traffic is told apart, for one IP family.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum LocalTraffic {
    /// No detector (`clusterCIDR` empty, or a `NodeCIDR` node without pod CIDRs of the
    /// family): no packet counts as pod traffic.
    #[default]
    None,
    /// Sources within these prefixes (never empty).
    Cidrs(Vec<IpNet>),
    /// Packets that came in on this interface.
    Interface(Interface),
}

/// An input interface: one name, or every name with a prefix.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Interface {
    /// The name, or the prefix.
    pub name: String,
    /// Every interface whose name starts with [`Interface::name`].
    pub prefix: bool,
}

impl LocalTraffic {
    /// The detector `cfg` asks for, for the family compiled (`NodeCIDR`: the view's Node).
    pub fn of(view: &NodeView, cfg: &CompileConfig) -> LocalTraffic {
        let cidrs = |nets: Vec<IpNet>| {
            if nets.is_empty() {
                LocalTraffic::None
            } else {
                LocalTraffic::Cidrs(nets)
            }
        };
        let interface = |name: &str, prefix: bool| {
            LocalTraffic::Interface(Interface {
                name: name.to_owned(),
                prefix,
            })
        };
        match &cfg.local_detector {
            LocalDetector::None => LocalTraffic::None,
            LocalDetector::ClusterCidr(nets) => cidrs(of_family(nets.iter().copied(), cfg.family)),
            LocalDetector::NodeCidr => cidrs(of_family(
                view.node.iter().flat_map(|n| n.pod_cidrs.iter().copied()),
                cfg.family,
            )),
            LocalDetector::BridgeInterface(name) => interface(name, false),
            LocalDetector::InterfaceNamePrefix(prefix) => interface(prefix, true),
        }
    }

    /// Whether some packets count as pod traffic.
    pub fn is_implemented(&self) -> bool {
        !matches!(self, LocalTraffic::None)
    }

    /// The source prefixes of a CIDR detector (empty for the others).
    pub fn cidrs(&self) -> &[IpNet] {
        match self {
            LocalTraffic::Cidrs(c) => c,
            _ => &[],
        }
    }

    /// The iptables matches of "from a pod" (`negate`: "not from a pod"): one match, or
    /// `None` where one rule cannot say it (several CIDRs: the caller needs a chain, or one rule
    /// per CIDR when not negated, [`LocalTraffic::cidrs`]), or no detector.
    pub fn iptables_match(&self, negate: bool) -> Option<String> {
        let not = if negate { "! " } else { "" };
        match self {
            LocalTraffic::Cidrs(c) if c.len() == 1 => Some(format!("{not}-s {}", c[0])),
            LocalTraffic::Interface(i) => {
                let plus = if i.prefix { "+" } else { "" };
                Some(format!("{not}-i {}{plus}", i.name))
            }
            _ => None,
        }
    }

    /// The iptables matches that together say "from a pod", one rule each (`-s` per CIDR, or
    /// the interface's `-i`); none without a detector.
    pub fn iptables_sources(&self) -> Vec<String> {
        match self {
            LocalTraffic::Cidrs(c) => c.iter().map(|c| format!("-s {c}")).collect(),
            LocalTraffic::Interface(_) => self.iptables_match(false).into_iter().collect(),
            LocalTraffic::None => Vec::new(),
        }
    }

    /// The nftables match of "from a pod" (`negate`: not), or `None` without a detector.
    pub fn rule_match(&self, negate: bool) -> Option<RuleMatch> {
        match self {
            LocalTraffic::None => None,
            LocalTraffic::Cidrs(nets) => Some(RuleMatch::Saddr {
                negate,
                nets: nets.clone(),
            }),
            LocalTraffic::Interface(i) => Some(RuleMatch::Iifname {
                negate,
                name: i.name.clone(),
                prefix: i.prefix,
            }),
        }
    }

    /// Whether a packet from `src` counts as pod traffic, for `ferry explain`, which knows
    /// addresses, not interfaces: an interface detector is taken to see this node's pods
    /// (`node_pod_cidrs`) and no one else.
    pub fn from_pods(&self, src: &IpAddr, node_pod_cidrs: &[IpNet]) -> bool {
        match self {
            LocalTraffic::None => false,
            LocalTraffic::Cidrs(nets) => nets.iter().any(|n| n.contains(src)),
            LocalTraffic::Interface(_) => node_pod_cidrs.iter().any(|n| n.contains(src)),
        }
    }

    /// For `ferry explain`, why a packet is not pod traffic: `not in 192.168.0.0/16`, `it did not
    /// come in on cbr0`, `it did not come in on an interface named veth*`.
    pub fn not_a_pod(&self) -> String {
        match self {
            LocalTraffic::None => "no local-traffic detector".to_owned(),
            LocalTraffic::Cidrs(_) => format!("not in {}", self.describe()),
            LocalTraffic::Interface(i) if i.prefix => {
                format!("it did not come in on an interface named {}*", i.name)
            }
            LocalTraffic::Interface(i) => format!("it did not come in on {}", i.name),
        }
    }

    /// For `ferry explain`: what the detector looks at (`192.168.0.0/16`, `input interface
    /// cbr0`, `input interface veth*`).
    pub fn describe(&self) -> String {
        match self {
            LocalTraffic::None => "no local-traffic detector".to_owned(),
            LocalTraffic::Cidrs(nets) => {
                let list: Vec<String> = nets.iter().map(ToString::to_string).collect();
                list.join(", ")
            }
            LocalTraffic::Interface(i) => {
                let star = if i.prefix { "*" } else { "" };
                format!("input interface {}{star}", i.name)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn net(s: &str) -> IpNet {
        s.parse().expect("net")
    }

    #[test]
    fn each_detector_has_its_iptables_and_nftables_match() {
        let one = LocalTraffic::Cidrs(vec![net("10.0.0.0/16")]);
        assert_eq!(
            one.iptables_match(true).as_deref(),
            Some("! -s 10.0.0.0/16")
        );
        let two = LocalTraffic::Cidrs(vec![net("10.0.0.0/16"), net("10.1.0.0/16")]);
        assert_eq!(two.iptables_match(false), None);
        let bridge = LocalTraffic::Interface(Interface {
            name: "cbr0".into(),
            prefix: false,
        });
        assert_eq!(bridge.iptables_match(false).as_deref(), Some("-i cbr0"));
        let veth = LocalTraffic::Interface(Interface {
            name: "veth".into(),
            prefix: true,
        });
        assert_eq!(veth.iptables_match(true).as_deref(), Some("! -i veth+"));
        assert_eq!(
            veth.rule_match(false),
            Some(RuleMatch::Iifname {
                negate: false,
                name: "veth".into(),
                prefix: true
            })
        );
        assert_eq!(LocalTraffic::None.rule_match(false), None);
    }

    #[test]
    fn an_interface_detector_sees_this_nodes_pods_only() {
        let veth = LocalTraffic::Interface(Interface {
            name: "veth".into(),
            prefix: true,
        });
        let here = [net("10.0.1.0/24")];
        assert!(veth.from_pods(&"10.0.1.5".parse().expect("ip"), &here));
        assert!(!veth.from_pods(&"10.0.2.5".parse().expect("ip"), &here));
        assert_eq!(veth.describe(), "input interface veth*");
    }
}
