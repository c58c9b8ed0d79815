//! The one place that maps an IP family to the names each mode's kernel objects and tools use.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

use ferry_model::IpFamily;

/// nftables' address family of a table (`ip`, `ip6`): `table ip ferry`, `nft list table ip6
/// ferry`, and the payload keyword of rules (`ip daddr`, `ip6 daddr`).
pub fn nft_family(family: IpFamily) -> &'static str {
    match family {
        IpFamily::V4 => "ip",
        IpFamily::V6 => "ip6",
    }
}

/// The iptables tool of a family (`iptables`, `ip6tables`); backends and tools append to it
/// (`ip6tables-legacy-restore`).
pub fn iptables_tool(family: IpFamily) -> &'static str {
    match family {
        IpFamily::V4 => "iptables",
        IpFamily::V6 => "ip6tables",
    }
}

/// The family's loopback address (`127.0.0.1`, `::1`): where localhost NodePorts answer.
pub fn loopback(family: IpFamily) -> IpAddr {
    match family {
        IpFamily::V4 => IpAddr::V4(Ipv4Addr::LOCALHOST),
        IpFamily::V6 => IpAddr::V6(Ipv6Addr::LOCALHOST),
    }
}

/// The networks of `family` among `nets`, sorted, without duplicates.
pub(crate) fn of_family(nets: impl IntoIterator<Item = IpNet>, family: IpFamily) -> Vec<IpNet> {
    let mut v: Vec<IpNet> = nets
        .into_iter()
        .filter(|n| IpFamily::of(&n.addr()) == family)
        .collect();
    v.sort();
    v.dedup();
    v
}
