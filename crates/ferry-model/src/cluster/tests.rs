use super::*;
use crate::fixtures::*;

#[test]
fn applying_an_equal_object_touches_nothing() {
    let mut state = ClusterState::new();
    let svc = mk_service("dev", "web", "10.96.0.10", 8080);
    assert!(!state.apply(Object::Service(svc.clone())).is_empty());
    assert!(state.apply(Object::Service(svc)).is_empty());
}

#[test]
fn moving_a_slice_to_another_service_touches_both() {
    let mut state = ClusterState::new();
    state.apply(Object::EndpointSlice(mk_slice("dev", "a", 80, vec![])));
    let mut moved = mk_slice("dev", "a", 80, vec![]);
    moved.service = ServiceName::new("dev", "b");
    let touched = state.apply(Object::EndpointSlice(moved));
    assert_eq!(touched.services.len(), 2);
    assert_eq!(state.slices_of(&ServiceName::new("dev", "a")).count(), 0);
    assert_eq!(state.slices_of(&ServiceName::new("dev", "b")).count(), 1);
}

#[test]
fn deleting_a_slice_touches_its_service_and_unindexes_it() {
    let mut state = ClusterState::new();
    state.apply(Object::EndpointSlice(mk_slice("dev", "a", 80, vec![])));
    let key = ObjectKey::EndpointSlice {
        namespace: "dev".into(),
        name: "a-abc".into(),
    };
    let touched = state.delete(&key);
    assert!(touched.services.contains(&ServiceName::new("dev", "a")));
    assert!(state.delete(&key).is_empty());
    assert_eq!(state.keys(), vec![]);
}
