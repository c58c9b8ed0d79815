//! Frontends two Services claim, through full and incremental syncs against the real kernel:
//! an external IP on another Service's ClusterIP and port is never programmed, whichever
//! Service comes first (before, the incremental sync that added it was refused by the kernel:
//! the key was in the map already). Runs in a private network namespace. Skipped unless root.

mod support;
use support::{in_new_netns, nft};

use std::collections::BTreeSet;

use ferry_compile::mode::ProxyMode;
use ferry_compile::{CompileConfig, NodeCompiler};
use ferry_dataplane::mode::ModeOptions;
use ferry_dataplane::modes::entry;
use ferry_dataplane::Applier;
use ferry_model::fixtures::{mk_endpoint, mk_node, mk_service, mk_slice};
use ferry_model::{ClusterState, IpFamily, NodeContext, Object, ObjectKey, ServiceName};

/// Service `dev/name` on `cluster_ip`:80 with one endpoint, and `external` IPs.
fn service(
    state: &mut ClusterState,
    name: &str,
    cluster_ip: &str,
    external: &[&str],
) -> BTreeSet<ServiceName> {
    let mut svc = mk_service("dev", name, cluster_ip, 80);
    svc.external_ips = external.iter().map(|ip| ip.parse().expect("ip")).collect();
    let mut touched = state.apply(Object::from(svc)).services;
    let slice = mk_slice("dev", name, 8080, vec![mk_endpoint("10.0.0.5", "n1")]);
    touched.extend(state.apply(Object::from(slice)).services);
    touched
}

/// Syncs `dirty` (everything when `None`).
fn sync(applier: &mut dyn Applier, state: &ClusterState, dirty: Option<&BTreeSet<ServiceName>>) {
    let context = NodeContext {
        node_name: "n1".into(),
        family: IpFamily::V4,
    };
    let config = CompileConfig::default();
    let compiler = NodeCompiler::new(state, &context, &config);
    match dirty {
        None => applier.sync_full(&compiler, state),
        Some(dirty) => applier.sync_partial(&compiler, state, dirty),
    }
    .expect("sync");
}

/// Who the kernel sends 10.96.0.99:80 to (the comment of its `service-ips` element).
fn holder() -> Option<String> {
    let map = nft(&["list", "map", "ip", "ferry", "service-ips"]);
    let at = map.find("10.96.0.99 . tcp . 80 comment \"")?;
    let rest = &map[at..].split('"').nth(1)?;
    Some((*rest).to_owned())
}

#[test]
#[ignore = "needs root: network namespaces"]
fn an_external_ip_on_another_services_cluster_ip_is_never_programmed() {
    in_new_netns(|| {
        let mut state = ClusterState::new();
        state.apply(Object::from(mk_node("n1", "10.1.1.9", "10.0.0.0/24")));
        let options = ModeOptions::default();
        let mut applier = (entry(ProxyMode::Nftables).open)(&options).applier(IpFamily::V4);
        // dev/z's ClusterIP first, then dev/a (first by name) claiming it as an external IP.
        service(&mut state, "z", "10.96.0.99", &[]);
        sync(applier.as_mut(), &state, None);
        let touched = service(&mut state, "a", "10.96.0.10", &["10.96.0.99"]);
        sync(applier.as_mut(), &state, Some(&touched));
        assert_eq!(holder().as_deref(), Some("dev/z:http"));
        sync(applier.as_mut(), &state, None);
        assert_eq!(holder().as_deref(), Some("dev/z:http"));
        // z goes: a takes the address over in the same incremental sync.
        let touched = state
            .delete(&ObjectKey::Service(ServiceName::new("dev", "z")))
            .services;
        sync(applier.as_mut(), &state, Some(&touched));
        assert_eq!(holder().as_deref(), Some("dev/a:http"));
        // z comes back: it takes its ClusterIP back from a.
        let touched = service(&mut state, "z", "10.96.0.99", &[]);
        sync(applier.as_mut(), &state, Some(&touched));
        assert_eq!(holder().as_deref(), Some("dev/z:http"));
    });
}
