//! Typed IPVS state: virtual servers and their real servers, as the kernel holds them.

use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;

use ferry_model::{IpFamily, Protocol, ServicePortName};

/// `IP_VS_SVC_F_PERSISTENT`: session affinity (`sessionAffinity: ClientIP`).
pub const FLAG_PERSISTENT: u32 = 0x1;
/// `IP_VS_SVC_F_HASHED`: set by the kernel on every service in its table; never compared.
pub const FLAG_HASHED: u32 = 0x2;
/// `IP_VS_SVC_F_SCHED_SH_PORT` (`IP_VS_SVC_F_SCHED2`): the `mh` scheduler hashes the source
/// port too (upstream sets it with `mh`, its `FlagSourceHash`).
pub const FLAG_SOURCE_HASH_PORT: u32 = 0x10;

/// The schedulers upstream accepts in `ipvs.scheduler`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Scheduler {
    /// Round robin (upstream's default).
    #[default]
    Rr,
    /// Weighted round robin.
    Wrr,
    /// Least connection.
    Lc,
    /// Weighted least connection.
    Wlc,
    /// Locality-based least connection.
    Lblc,
    /// Locality-based least connection with replication.
    Lblcr,
    /// Source hashing.
    Sh,
    /// Destination hashing.
    Dh,
    /// Shortest expected delay.
    Sed,
    /// Never queue.
    Nq,
    /// Maglev hashing (with the source port, as upstream).
    Mh,
}

impl Scheduler {
    /// Every scheduler, in upstream's documentation order.
    pub const ALL: [Scheduler; 11] = [
        Scheduler::Rr,
        Scheduler::Wrr,
        Scheduler::Lc,
        Scheduler::Wlc,
        Scheduler::Lblc,
        Scheduler::Lblcr,
        Scheduler::Sh,
        Scheduler::Dh,
        Scheduler::Sed,
        Scheduler::Nq,
        Scheduler::Mh,
    ];

    /// The kernel's name (`ip_vs_<name>` module).
    pub fn as_str(self) -> &'static str {
        match self {
            Scheduler::Rr => "rr",
            Scheduler::Wrr => "wrr",
            Scheduler::Lc => "lc",
            Scheduler::Wlc => "wlc",
            Scheduler::Lblc => "lblc",
            Scheduler::Lblcr => "lblcr",
            Scheduler::Sh => "sh",
            Scheduler::Dh => "dh",
            Scheduler::Sed => "sed",
            Scheduler::Nq => "nq",
            Scheduler::Mh => "mh",
        }
    }
}

impl FromStr for Scheduler {
    type Err = String;
    /// Parses `ipvs.scheduler`; empty means the default (`rr`), as upstream.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s.is_empty() {
            return Ok(Scheduler::Rr);
        }
        Scheduler::ALL
            .into_iter()
            .find(|x| x.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Scheduler::ALL.iter().map(|x| x.as_str()).collect();
                format!("unknown IPVS scheduler {s:?} (one of {})", names.join(", "))
            })
    }
}

impl fmt::Display for Scheduler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What identifies a virtual server: protocol, address and port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct VirtualAddress {
    /// TCP, UDP or SCTP.
    pub protocol: Protocol,
    /// The address (ClusterIP, external IP, load-balancer IP or node address).
    pub ip: IpAddr,
    /// The port (service port, or node port).
    pub port: u16,
}

impl VirtualAddress {
    /// The family of the address.
    pub fn family(&self) -> IpFamily {
        IpFamily::of(&self.ip)
    }

    /// `ip:port` (`[ip]:port` for IPv6).
    pub fn socket(&self) -> SocketAddr {
        SocketAddr::new(self.ip, self.port)
    }
}

impl fmt::Display for VirtualAddress {
    /// `TCP  10.96.0.1:443`, as `ipvsadm -Ln` prints it (upper-case protocol, two spaces).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let proto = self.protocol.as_str().to_ascii_uppercase();
        write!(f, "{proto:<4} {}", self.socket())
    }
}

/// A virtual server's settings (everything but its address and real servers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VirtualServer {
    /// Scheduler name (`rr`, …; read back, any name the kernel reports).
    pub scheduler: String,
    /// `IP_VS_SVC_F_*` flags, [`FLAG_HASHED`] left out.
    pub flags: u32,
    /// Persistence timeout in seconds (0 without [`FLAG_PERSISTENT`]).
    pub timeout: u32,
    /// Persistence netmask: `0xffffffff` for IPv4, the prefix length 128 for IPv6 (what
    /// ipvsadm sends; one client address per persistence template).
    pub netmask: u32,
}

impl VirtualServer {
    /// A virtual server of `scheduler`, with ClientIP persistence for `affinity` seconds.
    pub fn new(scheduler: Scheduler, affinity: Option<u32>, family: IpFamily) -> Self {
        let mut flags = 0;
        if affinity.is_some() {
            flags |= FLAG_PERSISTENT;
        }
        if scheduler == Scheduler::Mh {
            flags |= FLAG_SOURCE_HASH_PORT;
        }
        Self {
            scheduler: scheduler.as_str().to_owned(),
            flags,
            timeout: affinity.unwrap_or(0),
            netmask: host_netmask(family),
        }
    }

    /// True with session affinity.
    pub fn persistent(&self) -> bool {
        self.flags & FLAG_PERSISTENT != 0
    }
}

/// The persistence netmask meaning "one client address".
pub fn host_netmask(family: IpFamily) -> u32 {
    match family {
        IpFamily::V4 => u32::MAX,
        IpFamily::V6 => 128,
    }
}

/// How a real server is reached (`IP_VS_CONN_F_FWD_MASK` values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Forward {
    /// NAT (`Masq`): what kube-proxy uses.
    Masq,
    /// Local node.
    Local,
    /// IP-in-IP tunnel.
    Tunnel,
    /// Direct routing.
    Route,
    /// Bypass.
    Bypass,
}

impl Forward {
    /// The kernel's value.
    pub fn code(self) -> u32 {
        match self {
            Forward::Masq => 0,
            Forward::Local => 1,
            Forward::Tunnel => 2,
            Forward::Route => 3,
            Forward::Bypass => 4,
        }
    }

    /// From the kernel's value (the low three bits).
    pub fn from_code(code: u32) -> Self {
        match code & 0x7 {
            1 => Forward::Local,
            2 => Forward::Tunnel,
            3 => Forward::Route,
            4 => Forward::Bypass,
            _ => Forward::Masq,
        }
    }

    /// As `ipvsadm -Ln` prints it.
    pub fn as_str(self) -> &'static str {
        match self {
            Forward::Masq => "Masq",
            Forward::Local => "Local",
            Forward::Tunnel => "Tunnel",
            Forward::Route => "Route",
            Forward::Bypass => "Bypass",
        }
    }
}

/// A real server (IPVS destination) of a virtual server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RealServer {
    /// The endpoint.
    pub address: SocketAddr,
    /// Weight; 0 while a removed endpoint drains (graceful termination).
    pub weight: u32,
    /// Forwarding method (always [`Forward::Masq`] from Ferry).
    pub forward: Forward,
}

impl RealServer {
    /// An endpoint as upstream adds it: masquerade, weight 1.
    pub fn endpoint(address: SocketAddr) -> Self {
        Self {
            address,
            weight: 1,
            forward: Forward::Masq,
        }
    }
}

/// Which frontend of a service port a virtual server is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum FrontendKind {
    /// The ClusterIP.
    ClusterIp,
    /// An external IP (`spec.externalIPs`).
    ExternalIp,
    /// A load-balancer IP.
    LoadBalancer,
    /// A NodePort on one node address.
    NodePort,
}

impl FrontendKind {
    /// Words for explanations.
    pub fn as_str(self) -> &'static str {
        match self {
            FrontendKind::ClusterIp => "cluster IP",
            FrontendKind::ExternalIp => "external IP",
            FrontendKind::LoadBalancer => "load-balancer IP",
            FrontendKind::NodePort => "node port",
        }
    }
}

/// One desired virtual server: its settings, its real servers, and whose it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VirtualService {
    /// The service port it belongs to.
    pub service: ServicePortName,
    /// Which of the port's frontends it is.
    pub kind: FrontendKind,
    /// Its settings.
    pub server: VirtualServer,
    /// Its real servers, by address.
    pub real_servers: BTreeMap<SocketAddr, RealServer>,
}
