//! Whether a forwarded connection is masqueraded, per target.
//!
//! Most reasons hold for the whole connection (the policy, the source), but hairpin traffic
//! (a pod reaching itself through its Service) is masqueraded only when the random choice
//! lands on the sender: the kernel's hairpin rule compares the source with the endpoint the
//! connection was DNATed to (nftables: the `hairpin` set, iptables: `-s` in the `KUBE-SEP-`
//! chain). So the answer belongs to each target, and the summary is derived from them.

use std::net::{IpAddr, SocketAddr};

use super::{step, Packet, Step, StepKind, Trace, Verdict};

/// Why a pod reaching itself is masqueraded.
pub const HAIRPIN: &str = "hairpin: this endpoint is the sender itself";

/// One endpoint the connection may be DNATed to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The endpoint.
    pub addr: SocketAddr,
    /// Why the connection is masqueraded when it goes to this endpoint; `None`: the endpoint
    /// sees the original source.
    pub masquerade: Option<String>,
}

impl Target {
    /// `addr` for a connection from `src`, masqueraded for `always` whatever the target (the
    /// policy or the source), otherwise only when the target is the sender and the mode's
    /// hairpin rule covers the sender here (`hairpin`).
    pub(super) fn new(addr: SocketAddr, src: IpAddr, always: Option<&str>, hairpin: bool) -> Self {
        let masquerade = match always {
            Some(why) => Some(why.to_owned()),
            None if hairpin && addr.ip() == src => Some(HAIRPIN.to_owned()),
            None => None,
        };
        Self { addr, masquerade }
    }
}

/// Whether a forwarded connection is masqueraded, over every target it may go to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Masquerade<'a> {
    /// Whichever the target: the endpoint sees the original source.
    No,
    /// Whichever the target, for these reasons (each once, in target order).
    Yes(Vec<&'a str>),
    /// It depends on the target: masqueraded for some, not for the others.
    Some(&'a [Target]),
}

impl Masquerade<'_> {
    /// `yes`, `no` or `some`.
    pub fn word(&self) -> &'static str {
        match self {
            Masquerade::No => "no",
            Masquerade::Yes(_) => "yes",
            Masquerade::Some(_) => "some",
        }
    }
}

impl Trace {
    /// Whether the connection is masqueraded; `None` unless it is forwarded.
    pub fn masquerade(&self) -> Option<Masquerade<'_>> {
        let Verdict::Forwarded { targets } = &self.verdict else {
            return None;
        };
        let masqueraded = targets.iter().filter(|t| t.masquerade.is_some()).count();
        Some(if masqueraded == 0 {
            Masquerade::No
        } else if masqueraded < targets.len() {
            Masquerade::Some(targets)
        } else {
            let mut why: Vec<&str> = Vec::new();
            for reason in targets.iter().filter_map(|t| t.masquerade.as_deref()) {
                if !why.contains(&reason) {
                    why.push(reason);
                }
            }
            Masquerade::Yes(why)
        })
    }

    /// The summary line after `masquerade: `, for people.
    pub(super) fn masquerade_text(&self) -> Option<String> {
        Some(match self.masquerade()? {
            Masquerade::No => "no: the endpoint sees the original source".to_owned(),
            Masquerade::Yes(why) => format!("yes: {}", why.join("; ")),
            Masquerade::Some(targets) => {
                let each: Vec<String> = targets
                    .iter()
                    .map(|t| match &t.masquerade {
                        Some(why) => format!("yes to {} ({why})", t.addr),
                        None => format!("no to {} (it sees the original source)", t.addr),
                    })
                    .collect();
                format!("depends on the endpoint chosen: {}", each.join("; "))
            }
        })
    }
}

impl Trace {
    /// iptables mode (as upstream's) has the hairpin rule in every endpoint's `KUBE-SEP-`
    /// chain, wherever the endpoint's node; nftables mode's `hairpin` set holds only the
    /// addresses that may send from this node, so its trace has no hairpin step for a sender
    /// known to be on another node. Adds that step, and the masquerade it causes, back.
    pub(super) fn hairpin_for_iptables(&mut self) {
        let proxied_or_hairpin = self.steps.iter().any(|s| {
            matches!(
                s.kind,
                StepKind::Hairpin | StepKind::Proxied(_) | StepKind::LocalhostNodePort
            )
        });
        let src = self.packet.src;
        let Verdict::Forwarded { targets } = &mut self.verdict else {
            return;
        };
        if proxied_or_hairpin || !targets.iter().any(|t| t.addr.ip() == src) {
            return;
        }
        for target in targets.iter_mut() {
            if target.addr.ip() == src && target.masquerade.is_none() {
                target.masquerade = Some(HAIRPIN.to_owned());
            }
        }
        let hairpin = hairpin_step(targets, &self.packet);
        let at = self
            .steps
            .iter()
            .rposition(|s| matches!(s.kind, StepKind::Forward(_)))
            .map_or(self.steps.len(), |i| i + 1);
        self.steps.insert(at, hairpin);
    }
}

/// The hairpin step of a connection whose sender is among `targets`.
pub(super) fn hairpin_step(targets: &[Target], p: &Packet) -> Step {
    let what = if targets.iter().all(|e| e.addr.ip() == p.src) {
        "the endpoint is the sender itself (hairpin): the connection is masqueraded"
    } else {
        "if the chosen endpoint is the sender itself (hairpin), the packet is masqueraded"
    };
    step(
        StepKind::Hairpin,
        what,
        "a pod reaching itself through its Service must see the node as the peer",
        vec![
            "chain masquerading".into(),
            format!("set hairpin element {} . {}", p.src, p.src),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().expect("socket address")
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("address")
    }

    #[test]
    fn a_reason_for_the_whole_connection_holds_for_every_target() {
        let t = Target::new(
            addr("192.168.1.5:80"),
            ip("192.168.1.5"),
            Some("masqueradeAll"),
            true,
        );
        assert_eq!(t.masquerade.as_deref(), Some("masqueradeAll"));
    }

    #[test]
    fn hairpin_masquerades_only_the_target_that_is_the_sender() {
        let me = Target::new(addr("192.168.1.5:80"), ip("192.168.1.5"), None, true);
        let other = Target::new(addr("192.168.1.6:80"), ip("192.168.1.5"), None, true);
        assert_eq!(me.masquerade.as_deref(), Some(HAIRPIN));
        assert_eq!(other.masquerade, None);
        // Same address, another port: still the sender (the rules compare addresses only).
        let me_too = Target::new(addr("192.168.1.5:81"), ip("192.168.1.5"), None, true);
        assert!(me_too.masquerade.is_some());
        // A sender the mode's hairpin rule does not cover here (nftables: a pod known to be
        // on another node) keeps its address.
        let elsewhere = Target::new(addr("192.168.1.5:80"), ip("192.168.1.5"), None, false);
        assert_eq!(elsewhere.masquerade, None);
    }
}
