use super::*;
use crate::fixtures::*;

#[test]
fn applying_an_equal_object_touches_nothing() {
    let mut state = ClusterState::new();
    let svc = mk_service("dev", "web", "10.96.0.10", 8080);
    assert!(!state.apply(Object::from(svc.clone())).is_empty());
    assert!(state.apply(Object::from(svc)).is_empty());
}

#[test]
fn moving_a_slice_to_another_service_touches_both() {
    let mut state = ClusterState::new();
    state.apply(Object::from(mk_slice("dev", "a", 80, vec![])));
    let mut moved = mk_slice("dev", "a", 80, vec![]);
    moved.service = ServiceName::new("dev", "b");
    let touched = state.apply(Object::from(moved));
    assert_eq!(touched.services.len(), 2);
    assert_eq!(state.slices_of(&ServiceName::new("dev", "a")).count(), 0);
    assert_eq!(state.slices_of(&ServiceName::new("dev", "b")).count(), 1);
}

#[test]
fn deleting_a_slice_touches_its_service_and_unindexes_it() {
    let mut state = ClusterState::new();
    state.apply(Object::from(mk_slice("dev", "a", 80, vec![])));
    let key = ObjectKey::EndpointSlice {
        namespace: "dev".into(),
        name: "a-abc".into(),
    };
    let touched = state.delete(&key);
    assert!(touched.services.contains(&ServiceName::new("dev", "a")));
    assert!(state.delete(&key).is_empty());
    assert_eq!(state.keys(), vec![]);
}

#[test]
fn stored_objects_share_names_and_locations() {
    let mut state = ClusterState::new();
    let web = ServiceName::new("dev", "web");
    // The slice arrives first, then its Service, then a second slice on the same nodes.
    let first = mk_slice(
        "dev",
        "web",
        80,
        vec![
            mk_endpoint("10.0.0.2", "node-a"),
            mk_endpoint("10.0.0.3", "node-b"),
        ],
    );
    state.apply(Object::from(first));
    state.apply(Object::from(mk_service("dev", "web", "10.96.0.10", 80)));
    let mut second = mk_slice("dev", "web", 80, vec![mk_endpoint("10.0.0.4", "node-a")]);
    second.name = "web-second".into();
    state.apply(Object::from(second));

    let svc = state.service(&web).expect("stored");
    let slices: Vec<&EndpointSlice> = state.slices_of(&web).collect();
    assert_eq!(slices.len(), 2);
    for slice in &slices {
        assert!(Arc::ptr_eq(&slice.service.name, &svc.name.name));
        assert!(Arc::ptr_eq(&slice.namespace, &svc.name.namespace));
    }
    let location = |slice: &EndpointSlice, i: usize| {
        Arc::clone(slice.endpoints[i].location.as_ref().expect("a location"))
    };
    let (a1, b, a2) = (
        location(slices[0], 0),
        location(slices[0], 1),
        location(slices[1], 0),
    );
    assert!(
        Arc::ptr_eq(&a1, &a2),
        "node-a's endpoints share one location"
    );
    assert!(!Arc::ptr_eq(&a1, &b));
    assert_eq!(slices[1].endpoints[0].node_name(), Some("node-a"));
}

#[test]
fn a_slice_a_source_also_holds_is_kept_as_given_and_one_it_alone_held_is_compacted() {
    let mut state = ClusterState::new();
    let shared = Arc::new(mk_slice(
        "dev",
        "a",
        80,
        vec![mk_endpoint("10.0.0.1", "n1")],
    ));
    state.apply(Object::EndpointSlice(Arc::clone(&shared)));
    let stored = state.slices_of(&ServiceName::new("dev", "a")).next();
    assert!(
        stored.is_some_and(|s| std::ptr::eq(s, &*shared)),
        "one copy, not two"
    );

    // Held by the state alone: compacted, so two slices of one namespace share its name.
    state.apply(Object::from(mk_slice("dev", "b", 80, vec![])));
    state.apply(Object::from(mk_slice("dev", "c", 80, vec![])));
    let of = |name: &str| state.slices_of(&ServiceName::new("dev", name)).next();
    let (b, c) = (of("b").expect("b"), of("c").expect("c"));
    assert!(Arc::ptr_eq(&b.namespace, &c.namespace));
}

/// Service `dev/name` with external IP 192.0.2.1 on `port`/TCP.
fn external(name: &str, cluster_ip: &str, port: u16) -> Object {
    let mut svc = mk_service("dev", name, cluster_ip, port);
    svc.external_ips = vec![ip("192.0.2.1")];
    Object::from(svc)
}

/// Service `dev/name`'s first port as node `n1` programs it.
fn first_port(state: &ClusterState, name: &str) -> Option<crate::ServicePortView> {
    let ctx = crate::NodeContext {
        node_name: "n1".into(),
        family: crate::IpFamily::V4,
    };
    let ports = crate::NodeView::build_service_ports(state, &ctx, &ServiceName::new("dev", name));
    ports.into_iter().next()
}

/// The external IPs Service `dev/name`'s first port is programmed with.
fn served(state: &ClusterState, name: &str) -> Vec<std::net::IpAddr> {
    first_port(state, name)
        .map(|p| p.external_ips)
        .unwrap_or_default()
}

/// What Service `dev/name`'s first port claims but another Service serves.
fn unserved(state: &ClusterState, name: &str) -> Vec<crate::Unserved> {
    first_port(state, name)
        .map(|p| p.unserved)
        .unwrap_or_default()
}

fn names(touched: &Touched) -> Vec<&str> {
    touched.services.iter().map(|s| &*s.name).collect()
}

#[test]
fn an_external_ip_and_port_claimed_twice_is_served_by_the_first_service_by_name() {
    // Whatever order they come in: b first, then a, which takes the frontend and touches b.
    let mut state = ClusterState::new();
    state.apply(external("b", "10.96.0.11", 80));
    let touched = state.apply(external("a", "10.96.0.10", 80));
    assert_eq!(names(&touched), ["a", "b"]);
    assert_eq!(served(&state, "a"), [ip("192.0.2.1")]);
    assert!(served(&state, "b").is_empty());
    let not = unserved(&state, "b");
    assert_eq!(not.len(), 1, "{not:?}");
    assert_eq!((not[0].ip, &*not[0].holder.name), (ip("192.0.2.1"), "a"));
    assert!(!not[0].holder_cluster_ip && !not[0].load_balancer);
    assert_eq!(
        not[0].why(),
        "Service dev/a claims it too and serves it (the first by name)"
    );

    let mut other_order = ClusterState::new();
    other_order.apply(external("a", "10.96.0.10", 80));
    other_order.apply(external("b", "10.96.0.11", 80));
    assert!(served(&other_order, "b").is_empty());

    // a goes: b serves it, and is touched so an incremental sync says so.
    let touched = state.delete(&ObjectKey::Service(ServiceName::new("dev", "a")));
    assert_eq!(names(&touched), ["a", "b"]);
    assert_eq!(served(&state, "b"), [ip("192.0.2.1")]);
}

#[test]
fn services_share_an_external_ip_on_different_ports() {
    let mut state = ClusterState::new();
    state.apply(external("a", "10.96.0.10", 80));
    let touched = state.apply(external("b", "10.96.0.11", 443));
    assert_eq!(names(&touched), ["b"]);
    assert_eq!(served(&state, "a"), [ip("192.0.2.1")]);
    assert_eq!(served(&state, "b"), [ip("192.0.2.1")]);
}

#[test]
fn an_external_ip_on_another_services_cluster_ip_and_port_is_never_served() {
    // dev/a's external IP is dev/z's ClusterIP with the same port: the ClusterIP keeps it,
    // although dev/a comes first by name, whatever order they come in.
    let mut svc = mk_service("dev", "a", "10.96.0.10", 80);
    svc.external_ips = vec![ip("10.96.0.99")];
    let intercepting = Object::from(svc);
    let allocated = || Object::from(mk_service("dev", "z", "10.96.0.99", 80));
    let mut state = ClusterState::new();
    state.apply(intercepting.clone());
    let touched = state.apply(allocated());
    assert_eq!(names(&touched), ["a", "z"], "a loses the frontend");
    assert!(served(&state, "a").is_empty());
    let not = unserved(&state, "a");
    assert_eq!(not.len(), 1, "{not:?}");
    assert!(not[0].holder_cluster_ip);
    assert_eq!(
        format!("{}: {}", not[0].what(), not[0].why()),
        "external IP 10.96.0.99: it is Service dev/z's ClusterIP, which keeps its destination"
    );

    let mut other_order = ClusterState::new();
    other_order.apply(allocated());
    other_order.apply(intercepting);
    assert!(served(&other_order, "a").is_empty());

    // z goes: a serves it, and is touched so an incremental sync says so.
    let touched = state.delete(&ObjectKey::Service(ServiceName::new("dev", "z")));
    assert_eq!(names(&touched), ["a", "z"]);
    assert_eq!(served(&state, "a"), [ip("10.96.0.99")]);

    // On another port the address is a's to serve, beside z's ClusterIP.
    state.apply(Object::from(mk_service("dev", "z", "10.96.0.99", 443)));
    assert_eq!(served(&state, "a"), [ip("10.96.0.99")]);
    // z's port changes to a's: a loses it again.
    let touched = state.apply(allocated());
    assert_eq!(names(&touched), ["a", "z"]);
    assert!(served(&state, "a").is_empty());
}

#[test]
fn a_services_own_cluster_ip_as_its_external_ip_is_served() {
    let mut svc = mk_service("dev", "a", "10.96.0.10", 80);
    svc.external_ips = vec![ip("10.96.0.10")];
    let mut state = ClusterState::new();
    state.apply(Object::from(svc));
    assert_eq!(served(&state, "a"), [ip("10.96.0.10")]);
}

#[test]
fn a_service_cidr_change_touches_the_service_cidrs_only() {
    let mut state = ClusterState::new();
    let cidr = |range: &str| {
        Object::from(crate::ServiceCidr {
            name: "kubernetes".into(),
            cidrs: vec![range.parse().expect("cidr")],
        })
    };
    let touched = state.apply(cidr("10.96.0.0/12"));
    assert!(touched.service_cidrs && touched.services.is_empty() && touched.nodes.is_empty());
    assert!(state.apply(cidr("10.96.0.0/12")).is_empty(), "unchanged");
    assert!(state.apply(cidr("10.96.0.0/16")).service_cidrs);
    assert_eq!(state.keys(), [ObjectKey::ServiceCidr("kubernetes".into())]);
    let key = ObjectKey::ServiceCidr("kubernetes".into());
    assert_eq!(key.object_ref().to_string(), "ServiceCIDR kubernetes");
    assert!(state.delete(&key).service_cidrs);
    assert!(state.delete(&key).is_empty());
    assert_eq!(state.service_cidrs().count(), 0);
}
