//! The canonical digests of the chains an `iptables-save` prints, read line by line.

use std::collections::BTreeMap;

use ferry_model::IpFamily;

use super::Digest;
use crate::iptables::model::ChainDigest;

/// The canonical digests of the chains of one `iptables-save` table, read line by line (the
/// output of 110 000 chains is 31 MiB: it is not held). A chain with a rule that has no
/// canonical form has no digest (`None`).
#[derive(Debug)]
pub struct SavedDigests {
    family: IpFamily,
    chains: BTreeMap<String, Option<Digest>>,
}

impl SavedDigests {
    /// Nothing read yet.
    pub fn new(family: IpFamily) -> Self {
        Self {
            family,
            chains: BTreeMap::new(),
        }
    }

    /// Reads one line (`:CHAIN …` declares a chain, `-A CHAIN rule` adds a rule to it).
    pub fn line(&mut self, line: &str) {
        if let Some(rest) = line.strip_prefix(':') {
            let chain = rest.split_whitespace().next().unwrap_or_default();
            self.chains
                .entry(chain.to_owned())
                .or_insert_with(|| Some(Digest::default()));
        } else if let Some(rest) = line.strip_prefix("-A ") {
            let (chain, rule) = rest.split_once(' ').unwrap_or((rest, ""));
            let entry = match self.chains.get_mut(chain) {
                Some(entry) => entry,
                None => self
                    .chains
                    .entry(chain.to_owned())
                    .or_insert_with(|| Some(Digest::default())),
            };
            if entry
                .as_mut()
                .and_then(|d| d.add(rule, self.family))
                .is_none()
            {
                *entry = None;
            }
        }
    }

    /// Each chain's digest.
    pub fn finish(self) -> BTreeMap<String, Option<ChainDigest>> {
        self.chains
            .into_iter()
            .map(|(name, d)| (name, d.map(Digest::finish)))
            .collect()
    }
}
