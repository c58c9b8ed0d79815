//! One service port's chain names and its protocol match, as the iptables rules write them.

use super::names::{service_chain, EXTERNAL_PREFIX, LOCAL_PREFIX, SVC_PREFIX};
use crate::plan::{EndpointSet, ServicePlan};

/// Per-port names and the `-m proto -p proto` match.
pub(super) struct Port<'a> {
    pub(super) sp: &'a ServicePlan,
    pub(super) name: String,
    pub(super) proto: &'static str,
    pub(super) svc: String,
    pub(super) svl: String,
    pub(super) ext: String,
}

impl<'a> Port<'a> {
    pub(super) fn new(sp: &'a ServicePlan) -> Self {
        Self {
            sp,
            name: sp.name.to_string(),
            proto: sp.name.protocol.as_str(),
            svc: service_chain(SVC_PREFIX, &sp.name),
            svl: service_chain(LOCAL_PREFIX, &sp.name),
            ext: service_chain(EXTERNAL_PREFIX, &sp.name),
        }
    }

    pub(super) fn set_chain(&self, set: EndpointSet) -> &str {
        match set {
            EndpointSet::Cluster => &self.svc,
            EndpointSet::Local => &self.svl,
        }
    }

    /// `-m comment --comment "<text>" -m <proto> -p <proto>`; the comment is quoted when it
    /// has spaces, as upstream writes it.
    pub(super) fn head(&self, comment: &str) -> String {
        format!(
            "-m comment --comment {} -m {p} -p {p}",
            quote(comment),
            p = self.proto
        )
    }

    pub(super) fn dest(&self, addr: impl std::fmt::Display, port: u16) -> String {
        format!("-d {addr} --dport {port}")
    }
}

pub(super) fn quote(s: &str) -> String {
    if s.contains(' ') {
        format!("\"{s}\"")
    } else {
        s.to_owned()
    }
}
