//! Proxy ports: the port of the node each service port's proxy listener uses.
//!
//! A service port's proxy port is derived from its name (SHA-256 of `namespace/name:port/proto`
//! into the range), and the next free port of the range when that one is taken. So:
//! - the same service port gets the same proxy port on every node and after every restart,
//!   as long as no collision was resolved differently; the applier can also [`restore`] the
//!   assignments it reads back from the kernel's redirect maps, which makes them exact across
//!   restarts (the rules left in the kernel during a restart then keep pointing at the right
//!   service once the new process listens again: a port that moved to another service would
//!   send the old rules' traffic to the wrong service);
//! - an assignment never moves while its service port exists (an endpoint change, or a
//!   service left without endpoints, keeps it), so an endpoint change never rewrites rules.
//!
//! [`restore`]: ProxyPorts::restore

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use sha2::{Digest, Sha256};

use ferry_model::ServicePortName;

/// An inclusive range of node ports the proxy may listen on (`portRange` of
/// `KubeProxyConfiguration`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortRange {
    /// First port.
    pub first: u16,
    /// Last port (inclusive).
    pub last: u16,
}

/// A `portRange` value Ferry cannot use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortRangeError {
    /// The value as given.
    pub value: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

impl fmt::Display for PortRangeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "portRange {:?}: {}", self.value, self.reason)
    }
}

impl std::error::Error for PortRangeError {}

impl PortRange {
    /// Ferry's default when `portRange` is empty or `0-0` on a node with Linux's default
    /// ephemeral ports ([`PortRange::LINUX_EPHEMERAL`]); see [`PortRange::clear_of`] for
    /// other nodes. 19 740 ports: above the Kubernetes components' ports (kubelet 10250,
    /// kube-proxy 10249 and 10256, controller-manager 10257, scheduler 10259), below the
    /// NodePort range (30000-32767), outside the ephemeral ports.
    pub const DEFAULT: PortRange = PortRange {
        first: 10260,
        last: 29999,
    };

    /// Linux's default `net.ipv4.ip_local_port_range`: the ports the kernel gives outgoing
    /// connections (and listeners bound to port 0).
    pub const LINUX_EPHEMERAL: PortRange = PortRange {
        first: 32768,
        last: 60999,
    };

    /// Where the default may lie: the default's window and the ports above the NodePort
    /// range.
    const WINDOWS: [PortRange; 2] = [
        PortRange::DEFAULT,
        PortRange {
            first: 32768,
            last: 65535,
        },
    ];

    /// The default range on a node whose kernel gives `ephemeral` (its
    /// `net.ipv4.ip_local_port_range`) to outgoing connections: [`PortRange::DEFAULT`] when
    /// they leave it whole, else the largest stretch of
    /// [`PortRange::DEFAULT`] or of 32768-65535 the ephemeral ports leave free, so that an
    /// outgoing connection never holds a proxy port (upstream's `portRange: ""` let the
    /// kernel pick ephemeral ports; Ferry's ports are derived from the service ports' names,
    /// to stay the same across restarts, and must not be the kernel's to hand out).
    /// [`PortRange::DEFAULT`] itself when no stretch of at least
    /// [`PortRange::MIN_DEFAULT_SIZE`] ports is left: overlapping, which
    /// [`PortRange::overlaps`] lets the caller say.
    pub fn clear_of(ephemeral: PortRange) -> PortRange {
        if !PortRange::DEFAULT.overlaps(ephemeral) {
            return PortRange::DEFAULT;
        }
        let gaps = Self::WINDOWS.into_iter().flat_map(|w| w.minus(ephemeral));
        // The first of the largest: the default's window wins a tie.
        let best = gaps.fold(None::<PortRange>, |best, g| match best {
            Some(b) if b.size() >= g.size() => Some(b),
            _ => Some(g),
        });
        best.filter(|b| b.size() >= Self::MIN_DEFAULT_SIZE)
            .unwrap_or(PortRange::DEFAULT)
    }

    /// The smallest range [`PortRange::clear_of`] chooses (10 000 Services of one port each).
    pub const MIN_DEFAULT_SIZE: u32 = 10_000;

    /// True when the two ranges share a port.
    pub fn overlaps(&self, other: PortRange) -> bool {
        self.first <= other.last && other.first <= self.last
    }

    /// The parts of this range outside `other` (none, one or two).
    fn minus(self, other: PortRange) -> impl Iterator<Item = PortRange> {
        let below = (other.first > self.first).then(|| PortRange {
            first: self.first,
            last: self.last.min(other.first - 1),
        });
        let above = (other.last < self.last).then(|| PortRange {
            first: self.first.max(other.last + 1),
            last: self.last,
        });
        [below, above]
            .into_iter()
            .flatten()
            .filter(|r| r.first <= r.last)
    }

    /// True when a `portRange` value asks for Ferry's default (empty or `0-0`, as upstream's
    /// "let the kernel choose").
    pub fn is_default(value: &str) -> bool {
        matches!(value.trim(), "" | "0-0")
    }

    /// Parses `portRange`: `begin-end` or `begin+offset` (upstream's `PortRange` syntax);
    /// empty or `0-0` means [`PortRange::DEFAULT`].
    pub fn parse(value: &str) -> Result<PortRange, PortRangeError> {
        let err = |reason| PortRangeError {
            value: value.to_owned(),
            reason,
        };
        let v = value.trim();
        if Self::is_default(v) {
            return Ok(PortRange::DEFAULT);
        }
        let (first, last) = if let Some((a, b)) = v.split_once('-') {
            let a: u16 = a.trim().parse().map_err(|_| err("begin is not a port"))?;
            let b: u16 = b.trim().parse().map_err(|_| err("end is not a port"))?;
            (a, b)
        } else if let Some((a, off)) = v.split_once('+') {
            let a: u16 = a.trim().parse().map_err(|_| err("begin is not a port"))?;
            let off: u16 = off
                .trim()
                .parse()
                .map_err(|_| err("offset is not a number"))?;
            (
                a,
                a.checked_add(off)
                    .ok_or_else(|| err("range ends past 65535"))?,
            )
        } else {
            return Err(err("expected begin-end or begin+offset"));
        };
        if first == 0 || last < first {
            return Err(err("begin must be at least 1 and not after end"));
        }
        Ok(PortRange { first, last })
    }

    /// Number of ports in the range.
    pub fn size(&self) -> u32 {
        u32::from(self.last) - u32::from(self.first) + 1
    }

    /// True when `port` is in the range.
    pub fn contains(&self, port: u16) -> bool {
        (self.first..=self.last).contains(&port)
    }

    /// The `i`-th port after `start`, wrapping around the range.
    fn nth_from(&self, start: u16, i: u32) -> u16 {
        let offset = (u32::from(start - self.first) + i) % self.size();
        // In range by construction: first + offset <= last.
        self.first + u16::try_from(offset).unwrap_or(0)
    }
}

impl Default for PortRange {
    fn default() -> Self {
        PortRange::DEFAULT
    }
}

impl fmt::Display for PortRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.first, self.last)
    }
}

/// Every port of the range is assigned, unusable, or released in this sync.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeExhausted {
    /// The service port left without a proxy port.
    pub name: ServicePortName,
    /// The range.
    pub range: PortRange,
}

impl fmt::Display for RangeExhausted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Service {} port {:?} ({}) got no proxy port: all {} ports of portRange {} are taken \
             (set portRange to a larger range)",
            self.name.service,
            self.name.port,
            self.name.protocol,
            self.range.size(),
            self.range
        )
    }
}

impl std::error::Error for RangeExhausted {}

/// The proxy port assignments of a node (both IP families share them: a dual-stack service
/// port listens on the same port number in each).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProxyPorts {
    range: PortRange,
    by_name: BTreeMap<ServicePortName, u16>,
    owner: BTreeMap<u16, ServicePortName>,
    /// Ports the dataplane could not bind (another program holds them): never assigned again.
    unusable: BTreeSet<u16>,
    /// Ports released whose listeners may still be open (they close after the rules that
    /// redirected to them are gone): not given again until [`closed`](Self::closed), or the
    /// next service port's listener would find its port busy and mark it unusable for good.
    closing: BTreeSet<u16>,
}

impl ProxyPorts {
    /// No assignment yet.
    pub fn new(range: PortRange) -> Self {
        Self {
            range,
            ..Self::default()
        }
    }

    /// The range.
    pub fn range(&self) -> PortRange {
        self.range
    }

    /// The port a service port gets when it is free: derived from its name, the same on every
    /// node.
    pub fn preferred(&self, name: &ServicePortName) -> u16 {
        let key = format!("{}/{}", name, name.protocol);
        let digest = Sha256::digest(key.as_bytes());
        let n = u32::from_be_bytes([digest[0], digest[1], digest[2], digest[3]]);
        self.range.nth_from(self.range.first, n % self.range.size())
    }

    /// The assigned port of a service port.
    pub fn get(&self, name: &ServicePortName) -> Option<u16> {
        self.by_name.get(name).copied()
    }

    /// Every assignment, by service port.
    pub fn iter(&self) -> impl Iterator<Item = (&ServicePortName, u16)> {
        self.by_name.iter().map(|(n, p)| (n, *p))
    }

    /// Number of assignments.
    pub fn len(&self) -> usize {
        self.by_name.len()
    }

    /// True without assignments.
    pub fn is_empty(&self) -> bool {
        self.by_name.is_empty()
    }

    /// The port of `name`: its existing assignment, else its preferred port or the next free
    /// one after it.
    pub fn assign(&mut self, name: &ServicePortName) -> Result<u16, RangeExhausted> {
        if let Some(p) = self.get(name) {
            return Ok(p);
        }
        let exhausted = || RangeExhausted {
            name: name.clone(),
            range: self.range,
        };
        // Without a free port, fail at once instead of probing the whole range for every
        // service port left over (seconds per sync at 10 000 of them).
        let in_range = |set: &BTreeSet<u16>| set.range(self.range.first..=self.range.last).count();
        let taken = self.owner.len() + in_range(&self.unusable) + in_range(&self.closing);
        if taken >= self.range.size() as usize {
            return Err(exhausted());
        }
        let start = self.preferred(name);
        let free = (0..self.range.size())
            .map(|i| self.range.nth_from(start, i))
            .find(|p| !self.owner.contains_key(p) && !self.unavailable(*p));
        let port = free.ok_or_else(exhausted)?;
        self.by_name.insert(name.clone(), port);
        self.owner.insert(port, name.clone());
        Ok(port)
    }

    /// Takes over an assignment read back from the kernel (the rules of the previous process).
    /// Refused (false) when the port is outside the range, unusable, or already someone
    /// else's, or the service port already has another one.
    pub fn restore(&mut self, name: &ServicePortName, port: u16) -> bool {
        if !self.range.contains(port) || self.unavailable(port) {
            return false;
        }
        match (self.by_name.get(name), self.owner.get(&port)) {
            (Some(p), _) => *p == port,
            (None, Some(_)) => false,
            (None, None) => {
                self.by_name.insert(name.clone(), port);
                self.owner.insert(port, name.clone());
                true
            }
        }
    }

    /// Unusable, or released and maybe still listened on.
    fn unavailable(&self, port: u16) -> bool {
        self.unusable.contains(&port) || self.closing.contains(&port)
    }

    /// Frees the port of a service port that is gone; it is given again once its listener
    /// is [`closed`](Self::closed).
    pub fn release(&mut self, name: &ServicePortName) {
        if let Some(p) = self.by_name.remove(name) {
            self.owner.remove(&p);
            self.closing.insert(p);
        }
    }

    /// The listeners of the released ports are closed: their ports can be given again.
    pub fn closed(&mut self) {
        self.closing.clear();
    }

    /// Frees every assignment whose service port `keep` rejects.
    pub fn retain(&mut self, mut keep: impl FnMut(&ServicePortName) -> bool) {
        let gone: Vec<ServicePortName> =
            self.by_name.keys().filter(|n| !keep(n)).cloned().collect();
        for name in &gone {
            self.release(name);
        }
    }

    /// Records that `port` cannot be bound (another program holds it): its service port
    /// loses it and gets another at its next [`assign`](Self::assign).
    pub fn mark_unusable(&mut self, port: u16) -> Option<ServicePortName> {
        self.unusable.insert(port);
        let owner = self.owner.remove(&port)?;
        self.by_name.remove(&owner);
        Some(owner)
    }
}

#[cfg(test)]
mod tests;
