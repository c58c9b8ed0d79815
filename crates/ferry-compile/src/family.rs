//! The one place that maps an IP family to the names each mode's kernel objects and tools use.

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
