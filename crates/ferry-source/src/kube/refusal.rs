//! What a refused API request means, in words: `401` (Ferry's credentials) and `403` (its
//! RBAC rights), said next to the API server's own message in the watch-failure log.
//!
//! A revoked or expired ServiceAccount token and a ClusterRole without `watch` both show up as
//! the same endless "watch failed; retrying" otherwise, and the fix for each is different.

use kube::runtime::watcher;

use super::state::Kind;

/// The HTTP status of an API error behind a watcher error, if there is one.
pub(super) fn code(error: &watcher::Error) -> Option<u16> {
    match error {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => match e {
            kube::Error::Api(status) => Some(status.code),
            _ => None,
        },
        watcher::Error::WatchError(status) => Some(status.code),
        watcher::Error::NoResourceVersion => None,
    }
}

/// The resource as RBAC names it.
fn resource(kind: Kind) -> &'static str {
    match kind {
        Kind::Service => "services",
        Kind::EndpointSlice => "endpointslices.discovery.k8s.io",
        Kind::Node => "nodes",
        Kind::ServiceCidr => "servicecidrs.networking.k8s.io",
    }
}

/// What the user should know about a `401` or `403` from a watch of `kind`; `None` for other
/// failures (an unreachable server explains itself).
pub fn explain(kind: Kind, error: &watcher::Error) -> Option<String> {
    match code(error)? {
        401 => Some(
            "the API server does not accept Ferry's credentials (401 Unauthorized: a token \
             expired, revoked, or not for this cluster); Ferry reads a token file again once a \
             minute, as client-go does, and keeps the rules in the kernel until it is let in"
                .to_owned(),
        ),
        403 => Some(format!(
            "Ferry's account may not list or watch {} (403 Forbidden): its ClusterRole needs \
             get, list and watch on them (deploy/clusterrole.yaml)",
            resource(kind)
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use kube::core::Status;

    use super::*;

    fn api(code: u16, reason: &str) -> kube::Error {
        kube::Error::Api(Status::failure(reason, reason).with_code(code).boxed())
    }

    #[test]
    fn a_401_names_the_credentials_wherever_it_comes_from() {
        for e in [
            watcher::Error::InitialListFailed(api(401, "Unauthorized")),
            watcher::Error::WatchStartFailed(api(401, "Unauthorized")),
            watcher::Error::WatchFailed(api(401, "Unauthorized")),
        ] {
            let said = explain(Kind::Service, &e).expect("explained");
            assert!(said.contains("401 Unauthorized"), "{said}");
            assert!(said.contains("once a minute"), "{said}");
        }
    }

    #[test]
    fn a_403_names_the_resource_the_role_lacks() {
        let e = watcher::Error::InitialListFailed(api(403, "Forbidden"));
        let said = explain(Kind::EndpointSlice, &e).expect("explained");
        assert!(
            said.contains("may not list or watch endpointslices.discovery.k8s.io"),
            "{said}"
        );
        let said = explain(Kind::Node, &e).expect("explained");
        assert!(said.contains("watch nodes (403 Forbidden)"), "{said}");
    }

    #[test]
    fn other_failures_explain_themselves() {
        let gone = watcher::Error::WatchError(
            Status::failure("too old", "Expired").with_code(410).boxed(),
        );
        assert_eq!(explain(Kind::Service, &gone), None);
        assert_eq!(
            explain(
                Kind::Service,
                &watcher::Error::InitialListFailed(api(500, "InternalError"))
            ),
            None
        );
        assert_eq!(
            explain(Kind::Service, &watcher::Error::NoResourceVersion),
            None
        );
    }
}
