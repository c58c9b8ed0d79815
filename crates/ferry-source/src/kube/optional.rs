//! The one optional watch, ServiceCIDRs: what Ferry says when the API server will not serve
//! them, once.
//!
//! Upstream kube-proxy 1.37 always starts its ServiceCIDR informer (the
//! `MultiCIDRServiceAllocator` gate is locked on since 1.34) and does not wait for it before
//! its first sync; on an API server older than 1.33 (`404`) or under a ClusterRole without
//! `servicecidrs` (`403`) its reflector logs the failure on every retry. Ferry does the same
//! without the noise: the first refusal is logged once, in words, and Ferry carries on without
//! service CIDRs while the watch keeps retrying quietly (kube-rs's back-off, at most every
//! 30 s), so a ClusterRole fixed later, or an upgraded server, is picked up.

use super::state::Kind;

/// What the source has said about an optional kind's refusals.
#[derive(Debug, Default)]
pub struct Optional {
    /// The HTTP status last explained, while the kind is refused.
    refused: Option<u16>,
}

impl Optional {
    /// A `code` refusal of `kind`'s watch: the warning to log, the first time (or when the
    /// reason changes); `None` for a refusal already explained, or a failure that is no
    /// refusal (an unreachable server is explained like any other watch's failure).
    pub fn refused(&mut self, kind: Kind, code: u16) -> Option<String> {
        if kind.required() || !matches!(code, 403 | 404) || self.refused == Some(code) {
            return None;
        }
        self.refused = Some(code);
        Some(explain(code))
    }

    /// True when `code` is a refusal of `kind` this source carries on without (logged by
    /// [`Optional::refused`] once).
    pub fn is_refusal(kind: Kind, code: Option<u16>) -> bool {
        !kind.required() && matches!(code, Some(403 | 404))
    }

    /// The kind listed: true when it had been refused (the caller says it is back).
    pub fn listed(&mut self) -> bool {
        self.refused.take().is_some()
    }
}

fn explain(code: u16) -> String {
    let why = match code {
        404 => {
            "the API server does not serve networking.k8s.io/v1 servicecidrs (404 Not Found: \
             Kubernetes before 1.33, or the API turned off)"
        }
        _ => {
            "Ferry's account may not list or watch servicecidrs.networking.k8s.io (403 \
             Forbidden): its ClusterRole needs get, list and watch on them \
             (deploy/clusterrole.yaml)"
        }
    };
    format!(
        "{why}; carrying on without service CIDRs: nftables mode cannot drop traffic to \
         unallocated addresses of the service range, which is routed on as before; the watch \
         keeps retrying quietly"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_of_service_cidrs_is_said_once_per_reason() {
        let mut optional = Optional::default();
        let first = optional.refused(Kind::ServiceCidr, 404).expect("said");
        assert!(first.contains("404 Not Found"), "{first}");
        assert!(
            first.contains("carrying on without service CIDRs"),
            "{first}"
        );
        assert_eq!(optional.refused(Kind::ServiceCidr, 404), None);
        let rbac = optional.refused(Kind::ServiceCidr, 403).expect("said");
        assert!(rbac.contains("deploy/clusterrole.yaml"), "{rbac}");
        assert!(optional.listed());
        assert!(!optional.listed());
        assert!(optional.refused(Kind::ServiceCidr, 403).is_some());
    }

    #[test]
    fn only_refusals_of_the_optional_kind_are_carried_on_without() {
        assert!(Optional::is_refusal(Kind::ServiceCidr, Some(404)));
        assert!(Optional::is_refusal(Kind::ServiceCidr, Some(403)));
        assert!(!Optional::is_refusal(Kind::ServiceCidr, Some(401)));
        assert!(!Optional::is_refusal(Kind::ServiceCidr, None));
        assert!(!Optional::is_refusal(Kind::Service, Some(404)));
        assert_eq!(Optional::default().refused(Kind::Node, 403), None);
    }
}
