//! The source's memory (`state::State`), fed watcher events directly (no server). The real
//! kube-rs client against a fake API server is tested in `tests/kube.rs`.

use ferry_model::fixtures::*;
use ferry_model::{Object, ObjectKey, ObjectRef, ServiceName};

use super::state::{Change, Converted, Kind, State};
use crate::{InvalidObject, SourceEvent};

fn svc(name: &str, ip: &str) -> Object {
    Object::from(mk_service("dev", name, ip, 80))
}

fn key(name: &str) -> ObjectKey {
    ObjectKey::Service(ServiceName::new("dev", name))
}

fn ok(object: Object) -> Converted {
    Converted {
        key: object.key(),
        result: Ok(Some(object)),
    }
}

fn bad(name: &str) -> Converted {
    let object = ObjectRef::new("Service", "dev", name);
    Converted {
        key: key(name),
        result: Err(InvalidObject::new(
            &object,
            "spec.clusterIP",
            "must be an IP",
        )),
    }
}

fn node() -> Object {
    Object::from(mk_node("k8s-node2", "10.1.1.9", "192.168.169.128/26"))
}

/// Feeds events, collecting what is emitted and what is reported invalid.
#[derive(Default)]
struct Run {
    state: State,
    invalid: Vec<String>,
}

impl Run {
    fn feed(&mut self, kind: Kind, changes: Vec<Change>) -> Vec<SourceEvent> {
        let mut out = Vec::new();
        for c in changes {
            let invalid = &mut self.invalid;
            if let Some(e) = self
                .state
                .handle(kind, c, &mut |e| invalid.push(e.to_string()))
            {
                out.push(e);
            }
        }
        out
    }

    fn list(&mut self, kind: Kind, objects: Vec<Converted>) -> Vec<SourceEvent> {
        let mut changes = vec![Change::Init];
        changes.extend(objects.into_iter().map(Change::InitApply));
        changes.push(Change::InitDone);
        self.feed(kind, changes)
    }

    /// Every kind listed: services `a`, `b`, no slices, this node.
    fn ready() -> Run {
        let mut run = Run::default();
        run.list(
            Kind::Service,
            vec![ok(svc("a", "10.96.0.1")), ok(svc("b", "10.96.0.2"))],
        );
        run.list(Kind::EndpointSlice, vec![]);
        run.list(Kind::Node, vec![ok(node())]);
        run
    }
}

#[test]
fn nothing_is_emitted_until_every_kind_has_listed_then_one_resync_of_all() {
    let mut run = Run::default();
    assert!(run
        .list(Kind::Service, vec![ok(svc("a", "10.96.0.1"))])
        .is_empty());
    assert!(run
        .feed(
            Kind::Service,
            vec![Change::Apply(ok(svc("b", "10.96.0.2")))]
        )
        .is_empty());
    assert!(run.list(Kind::Node, vec![ok(node())]).is_empty());
    assert!(!run.state.is_ready());
    let out = run.list(Kind::EndpointSlice, vec![]);
    assert_eq!(
        out,
        vec![SourceEvent::Resync(vec![
            svc("a", "10.96.0.1"),
            svc("b", "10.96.0.2"),
            node()
        ])]
    );
    assert!(run.state.is_ready());
}

#[test]
fn after_the_first_list_changes_pass_through_and_repeats_do_not() {
    let mut run = Run::ready();
    let changed = svc("a", "10.96.0.9");
    let out = run.feed(
        Kind::Service,
        vec![
            Change::Apply(ok(changed.clone())),
            Change::Apply(ok(changed.clone())),
            Change::Delete(svc("b", "10.96.0.2").key()),
            Change::Delete(svc("never-seen", "10.96.0.3").key()),
        ],
    );
    assert_eq!(
        out,
        vec![SourceEvent::Apply(changed), SourceEvent::Delete(key("b"))]
    );
}

#[test]
fn a_relist_resyncs_everything_and_drops_objects_deleted_meanwhile() {
    let mut run = Run::ready();
    // `b` was deleted while the watch was away (410 Gone → relist); `c` was created.
    let out = run.list(
        Kind::Service,
        vec![ok(svc("a", "10.96.0.1")), ok(svc("c", "10.96.0.3"))],
    );
    assert_eq!(
        out,
        vec![SourceEvent::Resync(vec![
            svc("a", "10.96.0.1"),
            svc("c", "10.96.0.3"),
            node()
        ])]
    );
}

#[test]
fn an_invalid_update_is_reported_and_the_last_good_version_kept_across_relists() {
    let mut run = Run::ready();
    assert!(run
        .feed(Kind::Service, vec![Change::Apply(bad("a"))])
        .is_empty());
    assert_eq!(run.invalid.len(), 1);
    assert!(
        run.invalid[0].contains("Service dev/a: spec.clusterIP"),
        "{}",
        run.invalid[0]
    );
    let out = run.list(Kind::Service, vec![bad("a"), bad("new")]);
    assert_eq!(run.invalid.len(), 3);
    let SourceEvent::Resync(objects) = &out[0] else {
        panic!("{out:?}")
    };
    assert!(objects.contains(&svc("a", "10.96.0.1")), "last good kept");
    assert!(!objects.iter().any(|o| o.key() == key("new")));
}

#[test]
fn an_object_that_becomes_ignored_is_deleted() {
    let mut run = Run::ready();
    let headless = Converted {
        key: key("a"),
        result: Ok(None),
    };
    let out = run.feed(Kind::Service, vec![Change::Apply(headless)]);
    assert_eq!(out, vec![SourceEvent::Delete(key("a"))]);
}

fn cidr(name: &str, range: &str) -> Object {
    Object::from(ferry_model::ServiceCidr {
        name: name.into(),
        cidrs: vec![range.parse().expect("cidr")],
    })
}

#[test]
fn service_cidrs_are_not_waited_for_and_their_later_list_sends_what_changed() {
    let mut run = Run::ready();
    assert!(run.state.is_ready(), "ready without ServiceCIDRs");
    assert!(
        run.list(Kind::ServiceCidr, vec![]).is_empty(),
        "nothing new"
    );
    let out = run.list(
        Kind::ServiceCidr,
        vec![ok(cidr("kubernetes", "10.96.0.0/12"))],
    );
    assert_eq!(
        out,
        vec![SourceEvent::Apply(cidr("kubernetes", "10.96.0.0/12"))]
    );
    let relisted = run.list(Kind::ServiceCidr, vec![ok(cidr("next", "10.100.0.0/16"))]);
    assert_eq!(
        relisted,
        vec![SourceEvent::Batch(vec![
            SourceEvent::Delete(ObjectKey::ServiceCidr("kubernetes".into())),
            SourceEvent::Apply(cidr("next", "10.100.0.0/16")),
        ])]
    );
    let deleted = run.feed(
        Kind::ServiceCidr,
        vec![Change::Delete(ObjectKey::ServiceCidr("next".into()))],
    );
    assert_eq!(
        deleted,
        vec![SourceEvent::Delete(ObjectKey::ServiceCidr("next".into()))]
    );
}

#[test]
fn service_cidrs_listed_first_are_in_the_first_resync() {
    let mut run = Run::default();
    assert!(run
        .list(
            Kind::ServiceCidr,
            vec![ok(cidr("kubernetes", "10.96.0.0/12"))]
        )
        .is_empty());
    run.list(Kind::Service, vec![]);
    run.list(Kind::EndpointSlice, vec![]);
    let out = run.list(Kind::Node, vec![ok(node())]);
    assert_eq!(
        out,
        vec![SourceEvent::Resync(vec![
            node(),
            cidr("kubernetes", "10.96.0.0/12")
        ])]
    );
}

#[test]
fn a_one_shot_read_waits_for_service_cidrs_unless_they_are_refused() {
    let mut run = Run {
        state: State::waiting_for_optional(),
        ..Run::default()
    };
    run.list(Kind::Service, vec![]);
    run.list(Kind::EndpointSlice, vec![]);
    assert!(run.list(Kind::Node, vec![ok(node())]).is_empty());
    assert!(!run.state.is_ready(), "waits for the ServiceCIDR list");
    assert_eq!(
        run.state.refused(Kind::ServiceCidr),
        Some(SourceEvent::Resync(vec![node()]))
    );
    assert_eq!(run.state.refused(Kind::ServiceCidr), None, "said once");
    assert_eq!(
        run.state.refused(Kind::Node),
        None,
        "required kinds are never skipped"
    );
}
