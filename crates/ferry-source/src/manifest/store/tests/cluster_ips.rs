//! ClusterIPs written twice: the first Service keeps the address, the other is refused and
//! named, and taken in as soon as the address is free (node ports and external frontends:
//! `ports`).

use ferry_model::fixtures::mk_service;
use ferry_model::Object;

use super::{apply, file, gone, service_key, texts, update};
use crate::manifest::store::Store;
use crate::SourceEvent;

/// Service `dev/name` on `ips` (dual-stack when there are two).
fn on(name: &str, ips: &[&str]) -> Object {
    let mut service = mk_service("dev", name, ips[0], 80);
    service.cluster_ips = ips.iter().map(|ip| ip.parse().expect("an IP")).collect();
    Object::from(service)
}

#[test]
fn a_clusterip_claimed_twice_stays_with_the_first_and_the_second_is_named() {
    let mut store = Store::default();
    let a = on("a", &["10.96.0.10"]);
    let b = on("b", &["10.96.0.10"]);
    let first = update(
        &mut store,
        vec![
            file("/m/b.yaml", vec![b.clone()]),
            file("/m/a.yaml", vec![a.clone()]),
        ],
    );
    assert_eq!(first.events, [apply(&a)]);
    assert_eq!(
        texts(&first.errors),
        [
            "/m/b.yaml: Service dev/b: spec.clusterIP: ClusterIP 10.96.0.10 is already \
          Service dev/a's (in /m/a.yaml); this one is skipped"
        ]
    );
    assert_eq!(store.objects(), [a]);
}

#[test]
fn when_the_holder_is_deleted_the_refused_service_is_applied() {
    let mut store = Store::default();
    let a = on("a", &["10.96.0.10"]);
    let b = on("b", &["10.96.0.10"]);
    update(
        &mut store,
        vec![
            file("/m/a.yaml", vec![a]),
            file("/m/b.yaml", vec![b.clone()]),
        ],
    );
    let change = update(&mut store, vec![gone("/m/a.yaml")]);
    assert_eq!(
        change.events,
        [SourceEvent::Delete(service_key("a")), apply(&b)]
    );
    assert!(change.errors.is_empty(), "{:?}", change.errors);
    assert_eq!(store.objects(), [b]);
}

#[test]
fn when_the_holder_moves_to_another_address_the_refused_service_is_applied() {
    let mut store = Store::default();
    let b = on("b", &["10.96.0.10"]);
    update(
        &mut store,
        vec![
            file("/m/a.yaml", vec![on("a", &["10.96.0.10"])]),
            file("/m/b.yaml", vec![b.clone()]),
        ],
    );
    let a = on("a", &["10.96.0.20"]);
    let change = update(&mut store, vec![file("/m/a.yaml", vec![a.clone()])]);
    assert_eq!(change.events, [apply(&a), apply(&b)]);
    assert!(change.errors.is_empty(), "{:?}", change.errors);

    // Taking the address back refuses the other again: it is deleted and named.
    let back = on("a", &["10.96.0.10"]);
    let change = update(&mut store, vec![file("/m/a.yaml", vec![back.clone()])]);
    assert_eq!(
        change.events,
        [apply(&back), SourceEvent::Delete(service_key("b"))]
    );
    assert_eq!(texts(&change.errors).len(), 1, "{:?}", change.errors);
    assert!(texts(&change.errors)[0].starts_with("/m/b.yaml: Service dev/b: spec.clusterIP"));
}

#[test]
fn two_services_in_one_file_keep_document_order() {
    let mut store = Store::default();
    let a = on("a", &["10.96.0.10"]);
    let b = on("b", &["10.96.0.10"]);
    let first = update(
        &mut store,
        vec![file("/m/all.yaml", vec![b.clone(), a.clone()])],
    );
    assert_eq!(first.events, [apply(&b)]);
    assert_eq!(
        texts(&first.errors),
        [
            "/m/all.yaml: Service dev/a: spec.clusterIP: ClusterIP 10.96.0.10 is already \
          Service dev/b's (in /m/all.yaml); this one is skipped"
        ]
    );
    // The holder removed from the file: the other takes the address in the same update.
    let change = update(&mut store, vec![file("/m/all.yaml", vec![a.clone()])]);
    assert_eq!(
        change.events,
        [apply(&a), SourceEvent::Delete(service_key("b"))]
    );
    assert!(change.errors.is_empty(), "{:?}", change.errors);
}

#[test]
fn a_refused_service_holds_none_of_its_addresses() {
    // b is refused for its IPv4 address, so c keeps the IPv6 address b also claims; when a
    // goes, b takes both and c is refused in turn.
    let mut store = Store::default();
    let a = on("a", &["10.96.0.10"]);
    let b = on("b", &["10.96.0.10", "fd00::10"]);
    let c = on("c", &["fd00::10"]);
    let first = update(
        &mut store,
        vec![
            file("/m/a.yaml", vec![a]),
            file("/m/b.yaml", vec![b.clone()]),
            file("/m/c.yaml", vec![c]),
        ],
    );
    assert_eq!(first.errors.len(), 1, "{:?}", first.errors);
    let change = update(&mut store, vec![gone("/m/a.yaml")]);
    assert_eq!(
        change.events,
        [
            SourceEvent::Delete(service_key("a")),
            apply(&b),
            SourceEvent::Delete(service_key("c"))
        ]
    );
    assert_eq!(
        texts(&change.errors),
        [
            "/m/c.yaml: Service dev/c: spec.clusterIP: ClusterIP fd00::10 is already \
          Service dev/b's (in /m/b.yaml); this one is skipped"
        ]
    );
}

#[test]
fn the_second_address_of_a_dual_stack_service_is_named_by_its_index() {
    let mut store = Store::default();
    let first = update(
        &mut store,
        vec![
            file("/m/a.yaml", vec![on("a", &["fd00::10"])]),
            file("/m/b.yaml", vec![on("b", &["10.96.0.10", "fd00::10"])]),
        ],
    );
    let [error] = &texts(&first.errors)[..] else {
        panic!("one error expected: {:?}", first.errors)
    };
    assert!(
        error.starts_with("/m/b.yaml: Service dev/b: spec.clusterIPs[1]: ClusterIP fd00::10"),
        "{error}"
    );
}

#[test]
fn a_change_elsewhere_does_not_recheck_the_refused_service() {
    let mut store = Store::default();
    update(
        &mut store,
        vec![
            file("/m/a.yaml", vec![on("a", &["10.96.0.10"])]),
            file("/m/b.yaml", vec![on("b", &["10.96.0.10"])]),
            file("/m/c.yaml", vec![on("c", &["10.96.0.30"])]),
        ],
    );
    // Neither the holder's address nor the refused one's file changed: nothing to say.
    let change = update(
        &mut store,
        vec![file("/m/c.yaml", vec![on("c", &["10.96.0.31"])])],
    );
    assert_eq!(change.events, [apply(&on("c", &["10.96.0.31"]))]);
    assert!(change.errors.is_empty(), "{:?}", change.errors);
    // The refused one's file read again: it is named again.
    let again = update(
        &mut store,
        vec![file("/m/b.yaml", vec![on("b", &["10.96.0.10"])])],
    );
    assert!(again.events.is_empty(), "{:?}", again.events);
    assert_eq!(again.errors.len(), 1, "{:?}", again.errors);
}
