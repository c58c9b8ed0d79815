//! Upstream kube-proxy's ipsets in IPVS mode: names, types, comments, and their entries.
//!
//! The iptables rules of IPVS mode match these sets instead of listing services; their names
//! and types are upstream's (`pkg/proxy/ipvs/ipset.go`), so `ipset list KUBE-CLUSTER-IP` works
//! as in every article about IPVS mode. IPv6 sets are named `KUBE-6-…`, as upstream names them
//! so both families' sets can coexist.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::IpAddr;

use ipnet::IpNet;

use ferry_model::{IpFamily, Protocol};

/// An ipset type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SetType {
    /// `hash:ip`.
    HashIp,
    /// `hash:ip,port`.
    HashIpPort,
    /// `hash:ip,port,ip`.
    HashIpPortIp,
    /// `hash:ip,port,net`.
    HashIpPortNet,
    /// `bitmap:port` (range 0-65535).
    BitmapPort,
}

impl SetType {
    /// The name ipset uses.
    pub fn as_str(self) -> &'static str {
        match self {
            SetType::HashIp => "hash:ip",
            SetType::HashIpPort => "hash:ip,port",
            SetType::HashIpPortIp => "hash:ip,port,ip",
            SetType::HashIpPortNet => "hash:ip,port,net",
            SetType::BitmapPort => "bitmap:port",
        }
    }
}

/// The longest set name the kernel takes (`IPSET_MAXNAMELEN` - 1).
pub const MAX_SET_NAME: usize = 31;

/// One upstream set: its name (IPv4 spelling), type and comment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SetKind {
    /// Name in the IPv4 proxier (`KUBE-CLUSTER-IP`).
    pub name: &'static str,
    /// Type.
    pub set_type: SetType,
    /// Upstream's comment, used in the iptables rules that match the set.
    pub comment: &'static str,
}

macro_rules! kinds {
    ($($id:ident = $name:literal, $ty:ident, $comment:literal;)*) => {
        $(
            #[doc = concat!("`", $name, "`: ", $comment, ".")]
            pub const $id: SetKind = SetKind { name: $name, set_type: SetType::$ty, comment: $comment };
        )*
        /// Every set, in upstream's order (`ipsetInfo`).
        pub const ALL: [SetKind; [$($name),*].len()] = [$($id),*];
    };
}

kinds! {
    LOOP_BACK = "KUBE-LOOP-BACK", HashIpPortIp, "Kubernetes endpoints dst ip:port, source ip for solving hairpin purpose";
    CLUSTER_IP = "KUBE-CLUSTER-IP", HashIpPort, "Kubernetes service cluster ip + port for masquerade purpose";
    EXTERNAL_IP = "KUBE-EXTERNAL-IP", HashIpPort, "Kubernetes service external ip + port for masquerade and filter purpose";
    EXTERNAL_IP_LOCAL = "KUBE-EXTERNAL-IP-LOCAL", HashIpPort, "Kubernetes service external ip + port with externalTrafficPolicy=local";
    LOAD_BALANCER = "KUBE-LOAD-BALANCER", HashIpPort, "Kubernetes service lb portal";
    LOAD_BALANCER_FW = "KUBE-LOAD-BALANCER-FW", HashIpPort, "Kubernetes service load balancer ip + port for load balancer with sourceRange";
    LOAD_BALANCER_LOCAL = "KUBE-LOAD-BALANCER-LOCAL", HashIpPort, "Kubernetes service load balancer ip + port with externalTrafficPolicy=local";
    LOAD_BALANCER_SOURCE_IP = "KUBE-LOAD-BALANCER-SOURCE-IP", HashIpPortIp, "Kubernetes service load balancer ip + port + source IP for packet filter purpose";
    LOAD_BALANCER_SOURCE_CIDR = "KUBE-LOAD-BALANCER-SOURCE-CIDR", HashIpPortNet, "Kubernetes service load balancer ip + port + source cidr for packet filter purpose";
    NODE_PORT_TCP = "KUBE-NODE-PORT-TCP", BitmapPort, "Kubernetes nodeport TCP port for masquerade purpose";
    NODE_PORT_LOCAL_TCP = "KUBE-NODE-PORT-LOCAL-TCP", BitmapPort, "Kubernetes nodeport TCP port with externalTrafficPolicy=local";
    NODE_PORT_UDP = "KUBE-NODE-PORT-UDP", BitmapPort, "Kubernetes nodeport UDP port for masquerade purpose";
    NODE_PORT_LOCAL_UDP = "KUBE-NODE-PORT-LOCAL-UDP", BitmapPort, "Kubernetes nodeport UDP port with externalTrafficPolicy=local";
    NODE_PORT_SCTP = "KUBE-NODE-PORT-SCTP-HASH", HashIpPort, "Kubernetes nodeport SCTP port for masquerade purpose with type 'hash ip:port'";
    NODE_PORT_LOCAL_SCTP = "KUBE-NODE-PORT-LOCAL-SCTP-HASH", HashIpPort, "Kubernetes nodeport SCTP port with externalTrafficPolicy=local with type 'hash ip:port'";
    HEALTH_CHECK_NODE_PORT = "KUBE-HEALTH-CHECK-NODE-PORT", BitmapPort, "Kubernetes health check node port";
    IPVS_IPS = "KUBE-IPVS-IPS", HashIp, "Addresses on the ipvs interface";
}

impl SetKind {
    /// The set's name in `family`: IPv6 sets are `KUBE-6-…`, cut to the kernel's 31
    /// characters as upstream cuts them (`KUBE-6-LOAD-BALANCER-SOURCE-CID`).
    pub fn name_in(&self, family: IpFamily) -> String {
        match family {
            IpFamily::V4 => self.name.to_owned(),
            IpFamily::V6 => {
                let mut name = self.name.replacen("KUBE-", "KUBE-6-", 1);
                name.truncate(MAX_SET_NAME);
                name
            }
        }
    }

    /// The set's `create` line for `ipset restore` (upstream's parameters: hash sets with
    /// `hashsize 1024 maxelem 65536`, bitmaps with `range 0-65535`).
    pub fn create_line(&self, family: IpFamily) -> String {
        let name = self.name_in(family);
        let ty = self.set_type.as_str();
        match self.set_type {
            SetType::BitmapPort => format!("create {name} {ty} range 0-65535"),
            _ => {
                let fam = match family {
                    IpFamily::V4 => "inet",
                    IpFamily::V6 => "inet6",
                };
                format!("create {name} {ty} family {fam} hashsize 1024 maxelem 65536")
            }
        }
    }
}

/// One entry, printed as `ipset save` prints it (upstream's `Entry.String()`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SetEntry {
    /// `hash:ip`: `10.96.0.1`.
    Ip(IpAddr),
    /// `hash:ip,port`: `10.96.0.1,tcp:443`.
    IpPort(IpAddr, Protocol, u16),
    /// `hash:ip,port,ip`: `10.0.0.5,tcp:8080,10.0.0.5`.
    IpPortIp(IpAddr, Protocol, u16, IpAddr),
    /// `hash:ip,port,net`: `203.0.113.7,tcp:80,198.51.100.0/24`.
    IpPortNet(IpAddr, Protocol, u16, IpNet),
    /// `bitmap:port`: `32223`.
    Port(u16),
}

impl fmt::Display for SetEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SetEntry::Ip(ip) => write!(f, "{ip}"),
            SetEntry::IpPort(ip, p, port) => write!(f, "{ip},{p}:{port}"),
            SetEntry::IpPortIp(ip, p, port, ip2) => write!(f, "{ip},{p}:{port},{ip2}"),
            // ipset prints a host prefix without its length.
            SetEntry::IpPortNet(ip, p, port, net) if net.prefix_len() == net.max_prefix_len() => {
                write!(f, "{ip},{p}:{port},{}", net.addr())
            }
            SetEntry::IpPortNet(ip, p, port, net) => write!(f, "{ip},{p}:{port},{}", net.trunc()),
            SetEntry::Port(port) => write!(f, "{port}"),
        }
    }
}

/// Every set of one family with its entries (empty sets included: upstream creates all of
/// them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IpSets {
    /// The family.
    pub family: IpFamily,
    /// Entries per set, keyed by the set's IPv4 name.
    pub entries: BTreeMap<&'static str, BTreeSet<SetEntry>>,
}

impl IpSets {
    /// Every set, empty.
    pub fn new(family: IpFamily) -> Self {
        Self {
            family,
            entries: ALL.iter().map(|k| (k.name, BTreeSet::new())).collect(),
        }
    }

    /// Adds an entry to a set.
    pub fn add(&mut self, kind: SetKind, entry: SetEntry) {
        self.entries.entry(kind.name).or_default().insert(entry);
    }

    /// Removes an entry from a set.
    pub fn remove(&mut self, kind: SetKind, entry: &SetEntry) {
        if let Some(set) = self.entries.get_mut(kind.name) {
            set.remove(entry);
        }
    }

    /// The entries of a set.
    pub fn get(&self, kind: SetKind) -> impl Iterator<Item = &SetEntry> {
        self.entries.get(kind.name).into_iter().flatten()
    }

    /// True when a set has no entry (upstream then leaves out the rules matching it).
    pub fn is_empty(&self, kind: SetKind) -> bool {
        self.get(kind).next().is_none()
    }

    /// Every set's kind with its entries, in upstream's order.
    pub fn iter(&self) -> impl Iterator<Item = (SetKind, &BTreeSet<SetEntry>)> {
        ALL.iter().map(move |k| {
            (
                *k,
                self.entries
                    .get(k.name)
                    .unwrap_or(const { &BTreeSet::new() }),
            )
        })
    }
}

impl fmt::Display for IpSets {
    /// The sets as `ipset save` prints them (without the kernel's `bucketsize`/`initval`), which
    /// is also `ipset restore` input.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (kind, entries) in self.iter() {
            writeln!(f, "{}", kind.create_line(self.family))?;
            let name = kind.name_in(self.family);
            for e in entries {
                writeln!(f, "add {name} {e}")?;
            }
        }
        Ok(())
    }
}
