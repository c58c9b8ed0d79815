//! What a mode's cleanup removed, or would remove (`ferry cleanup [--dry-run]`, kube-proxy's
//! `--cleanup`): every mode's line in the mode table has a cleanup returning a [`Cleanup`].

mod chains;
pub(crate) mod layouts;

pub(crate) use chains::remove_chains;

/// What a cleanup removes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Scope {
    /// Only find the objects; remove nothing.
    pub dry_run: bool,
    /// Remove kube-proxy's objects too: its `KUBE-*` chains (iptables and IPVS layouts, where
    /// Ferry's owner marker is not there), its IPVS state, its nftables tables (`ip
    /// kube-proxy`, `ip6 kube-proxy`). `ferry cleanup --also-kube-proxy`, kube-proxy's
    /// `--cleanup`, and an agent removing the other modes' rules after its first sync (as
    /// kube-proxy does at start-up).
    pub kube_proxy: bool,
}

/// What a mode's cleanup found in this network namespace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cleanup {
    /// The objects removed (or, dry, that would be), one phrase each (`Ferry's table ip
    /// ferry`, `kube-proxy's iptables-nft nat chains: KUBE-SERVICES, …`).
    pub objects: Vec<String>,
    /// Where the cleanup could not look, and why (`iptables-legacy is not installed`).
    pub skipped: Vec<String>,
    /// kube-proxy's objects found and left (the scope did not include them), one phrase each
    /// saying how they were told from Ferry's.
    pub left: Vec<String>,
}

impl Cleanup {
    /// Adds `other`'s findings to these.
    pub fn extend(&mut self, other: Cleanup) {
        self.objects.extend(other.objects);
        self.skipped.extend(other.skipped);
        self.left.extend(other.left);
    }
}

/// At most `shown` of `names` (then how many more): a cleanup of 10 000 services names a few
/// chains, not every one.
pub(crate) fn some_of(names: &[String], shown: usize) -> String {
    let mut out = names
        .iter()
        .take(shown)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > shown {
        out.push_str(&format!(" and {} more", names.len() - shown));
    }
    out
}

/// True when `e` says the program is not installed.
pub(crate) fn not_installed(e: &crate::Error) -> bool {
    matches!(e, crate::Error::Spawn { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lists_are_cut_with_a_count() {
        let names: Vec<String> = (1..=5).map(|i| format!("C{i}")).collect();
        assert_eq!(some_of(&names, 8), "C1, C2, C3, C4, C5");
        assert_eq!(some_of(&names, 2), "C1, C2 and 3 more");
    }
}
