//! Text renderings of IPVS state, as the commands people use print them: `ipvsadm -Ln`,
//! `ip addr show kube-ipvs0` (addresses only) and the whole desired state for `ferry rules`.

use std::fmt::{self, Write as _};
use std::net::SocketAddr;

use ferry_model::IpFamily;

use super::chains;
use super::model::{Forward, VirtualAddress, VirtualServer, FLAG_SOURCE_HASH_PORT};
use super::ruleset::Ruleset;
use super::DUMMY_DEVICE;

/// The header `ipvsadm -Ln` prints with Debian's and most distributions' kernels (IPVS 1.2.1,
/// a 4096-entry connection table).
pub const IPVSADM_HEADER: &str = "IP Virtual Server version 1.2.1 (size=4096)";

/// One real server line's values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RealServerLine {
    /// Address.
    pub address: SocketAddr,
    /// Forwarding method.
    pub forward: Forward,
    /// Weight.
    pub weight: u32,
    /// Active connections.
    pub active: u32,
    /// Inactive connections.
    pub inactive: u32,
}

impl RealServerLine {
    /// A desired real server's line (no connections yet).
    pub fn of(rs: &super::model::RealServer) -> Self {
        Self {
            address: rs.address,
            forward: rs.forward,
            weight: rs.weight,
            active: 0,
            inactive: 0,
        }
    }
}

/// The service line of `ipvsadm -Ln`: `TCP  10.96.0.1:443 rr`, then `persistent <timeout>`
/// (and `mask` when not a host mask) and scheduler flags, as ipvsadm prints them.
pub fn service_line(addr: &VirtualAddress, vs: &VirtualServer) -> String {
    let proto = addr.protocol.as_str().to_ascii_uppercase();
    let mut line = format!("{proto}  {} {}", addr.socket(), vs.scheduler);
    if vs.flags & FLAG_SOURCE_HASH_PORT != 0 && matches!(vs.scheduler.as_str(), "sh" | "mh") {
        let _ = write!(line, " ({}-port)", vs.scheduler);
    }
    if vs.persistent() {
        let _ = write!(line, " persistent {}", vs.timeout);
        if vs.netmask != super::model::host_netmask(addr.family()) {
            match addr.family() {
                IpFamily::V4 => {
                    let _ = write!(line, " mask {}", std::net::Ipv4Addr::from(vs.netmask));
                }
                IpFamily::V6 => {
                    let _ = write!(line, " mask {}", vs.netmask);
                }
            }
        }
    }
    line
}

/// A real server line: `  -> 192.168.169.166:56010        Masq    1      0          0`
/// (ipvsadm pads the last column too; the trailing spaces are left out here).
pub fn real_server_line(rs: &RealServerLine) -> String {
    let line = format!(
        "  -> {:<28} {:<7} {:<6} {:<10} {:<10}",
        rs.address.to_string(),
        rs.forward.as_str(),
        rs.weight,
        rs.active,
        rs.inactive
    );
    line.trim_end().to_owned()
}

/// `ipvsadm -Ln` of a list of virtual servers with their real servers, in the given order.
pub fn ipvsadm_list<'a>(
    services: impl IntoIterator<Item = (&'a VirtualAddress, &'a VirtualServer, Vec<RealServerLine>)>,
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "{IPVSADM_HEADER}");
    out.push_str("Prot LocalAddress:Port Scheduler Flags\n");
    out.push_str("  -> RemoteAddress:Port           Forward Weight ActiveConn InActConn\n");
    for (addr, vs, reals) in services {
        let _ = writeln!(out, "{}", service_line(addr, vs));
        for rs in &reals {
            let _ = writeln!(out, "{}", real_server_line(rs));
        }
    }
    out
}

impl Ruleset {
    /// `ipvsadm -Ln` of the desired virtual servers (no connections yet), sorted by protocol,
    /// address and port.
    pub fn ipvsadm(&self) -> String {
        let services = self.virtual_services();
        ipvsadm_list(services.iter().map(|(addr, vs)| {
            let reals = vs.real_servers.values().map(RealServerLine::of).collect();
            (addr, &vs.server, reals)
        }))
    }

    /// kube-ipvs0's addresses, one `inet 10.96.0.1/32` line each, as `ip addr` shows them.
    pub fn dummy_addresses(&self) -> String {
        let mut out = String::new();
        for ip in self.bind_addresses() {
            let (kw, len) = if ip.is_ipv4() {
                ("inet", 32)
            } else {
                ("inet6", 128)
            };
            let _ = writeln!(out, "    {kw} {ip}/{len} scope global {DUMMY_DEVICE}");
        }
        out
    }
}

impl fmt::Display for Ruleset {
    /// Everything IPVS mode programs for this family, in the words of the tools that show it:
    /// kube-ipvs0's addresses, `ipvsadm -Ln`, `ipset save` (also `ipset restore` input), and the
    /// `iptables-restore` input of the chains (`ferry rules --proxy-mode ipvs`, golden files).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "# ip addr show {DUMMY_DEVICE}")?;
        f.write_str(&self.dummy_addresses())?;
        writeln!(f, "\n# ipvsadm -Ln")?;
        f.write_str(&self.ipvsadm())?;
        writeln!(f, "\n# ipset save")?;
        write!(f, "{}", self.sets())?;
        let tool = match self.family {
            IpFamily::V4 => "iptables-restore",
            IpFamily::V6 => "ip6tables-restore",
        };
        writeln!(f, "\n# {tool} --noflush")?;
        f.write_str(&chains::render(self).restore().text)
    }
}
