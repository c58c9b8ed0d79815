//! Typed set and map elements: what the text renderer prints and what a netlink encoder sends.

use std::fmt;
use std::net::{IpAddr, SocketAddr};

use ipnet::IpNet;

use ferry_model::Protocol;

/// The key of an element, one variant per key type Ferry's sets use.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Key {
    /// `address` (`cluster-ips`).
    Addr(IpAddr),
    /// `prefix` (`nodeport-ips`, an interval set).
    Net(IpNet),
    /// `address . address` (`hairpin`).
    AddrPair(IpAddr, IpAddr),
    /// `address . protocol . port`: a service IP frontend.
    Frontend(IpAddr, Protocol, u16),
    /// `protocol . port`: a node port frontend.
    NodePort(Protocol, u16),
    /// `address . protocol . port . slot`: one endpoint slot of a service IP frontend.
    FrontendSlot(IpAddr, Protocol, u16, u32),
    /// `protocol . port . slot`: one endpoint slot of a node port frontend.
    NodePortSlot(Protocol, u16, u32),
    /// `address . protocol . port . source prefix`: a source allowed to reach a load-balancer
    /// IP frontend (`firewall-allow`, an interval set).
    FrontendSource(IpAddr, Protocol, u16, IpNet),
    /// `address . protocol . port . endpoint address . endpoint port`: an endpoint a service
    /// IP frontend with session affinity may pin a client to (`affinity-service-ips`).
    FrontendEndpoint(IpAddr, Protocol, u16, SocketAddr),
    /// `protocol . port . endpoint address . endpoint port`: the same for a node port
    /// (`affinity-nodeports`).
    NodePortEndpoint(Protocol, u16, SocketAddr),
    /// `address . protocol . port . client`: a client pinned through a service IP frontend
    /// (`affinity`; written by the kernel, read back to remove stale pins).
    FrontendClient(IpAddr, Protocol, u16, IpAddr),
    /// `protocol . port . client`: a client pinned through a node port (`nodeport-affinity`).
    NodePortClient(Protocol, u16, IpAddr),
}

/// A verdict held by a verdict map.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Verdict {
    /// `drop`.
    Drop,
    /// `goto chain`.
    Goto(String),
}

/// The value of a map element.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Value {
    /// A verdict (verdict maps).
    Verdict(Verdict),
    /// `address . port`: the DNAT target (endpoint maps).
    Endpoint(SocketAddr),
    /// A port: the proxy port a frontend is redirected to (userspace mode).
    Port(u16),
}

/// One element of a set or map.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Element {
    /// The set or map.
    pub set: &'static str,
    /// Key.
    pub key: Key,
    /// Value for map elements.
    pub value: Option<Value>,
    /// Comment shown by `nft list` (the service port a dispatch element belongs to).
    pub comment: Option<String>,
}

impl Element {
    /// An element without comment.
    pub fn new(set: &'static str, key: Key, value: Option<Value>) -> Self {
        Self {
            set,
            key,
            value,
            comment: None,
        }
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Key::Addr(a) => write!(f, "{a}"),
            Key::Net(n) => write!(f, "{n}"),
            Key::AddrPair(a, b) => write!(f, "{a} . {b}"),
            Key::Frontend(a, p, port) => write!(f, "{a} . {p} . {port}", p = p.as_str()),
            Key::NodePort(p, port) => write!(f, "{} . {port}", p.as_str()),
            Key::FrontendSlot(a, p, port, i) => {
                write!(f, "{a} . {} . {port} . {i}", p.as_str())
            }
            Key::NodePortSlot(p, port, i) => write!(f, "{} . {port} . {i}", p.as_str()),
            Key::FrontendSource(a, p, port, src) => {
                write!(f, "{a} . {} . {port} . ", p.as_str())?;
                // A single address as `nft list` prints it (no `/32`).
                if src.prefix_len() == src.max_prefix_len() {
                    write!(f, "{}", src.addr())
                } else {
                    write!(f, "{src}")
                }
            }
            Key::FrontendEndpoint(a, p, port, ep) => write!(
                f,
                "{a} . {} . {port} . {} . {}",
                p.as_str(),
                ep.ip(),
                ep.port()
            ),
            Key::NodePortEndpoint(p, port, ep) => {
                write!(f, "{} . {port} . {} . {}", p.as_str(), ep.ip(), ep.port())
            }
            Key::FrontendClient(a, p, port, c) => write!(f, "{a} . {} . {port} . {c}", p.as_str()),
            Key::NodePortClient(p, port, c) => write!(f, "{} . {port} . {c}", p.as_str()),
        }
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Drop => f.write_str("drop"),
            Verdict::Goto(c) => write!(f, "goto {c}"),
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Value::Verdict(v) => v.fmt(f),
            Value::Endpoint(ep) => write!(f, "{} . {}", ep.ip(), ep.port()),
            Value::Port(p) => write!(f, "{p}"),
        }
    }
}

impl fmt::Display for Element {
    /// The element as nft writes it inside `elements = { … }`: key, comment, value.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.key)?;
        if let Some(c) = &self.comment {
            write!(f, " comment \"{c}\"")?;
        }
        if let Some(v) = &self.value {
            write!(f, " : {v}")?;
        }
        Ok(())
    }
}
