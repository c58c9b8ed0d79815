//! The EndpointController stage: events in, events out.

use ferry_model::fixtures::{
    mk_endpoint, mk_http_probe, mk_node, mk_pod, mk_service, mk_slice, with_selector,
};
use ferry_model::{EndpointSlice, Labels, Object, ObjectKey, Pod, PortRef, ProbeHandler};

use super::*;
use crate::SourceEvent;

fn web() -> Object {
    let mut svc = with_selector(mk_service("dev", "web", "172.30.0.10", 80), "web");
    svc.ports[0].target_port = PortRef::Name("http".into());
    Object::from(svc)
}

fn node() -> Object {
    Object::from(mk_node("node-a", "192.168.0.1", "10.0.1.0/24"))
}

fn pod(name: &str, ip: &str) -> Pod {
    mk_pod("dev", name, "web", ip, "node-a")
}

/// `pod` with an httpGet readiness probe on `http` and no container status.
fn probed(name: &str, ip: &str) -> Pod {
    let mut p = pod(name, ip);
    p.containers[0].ready = None;
    let mut probe = mk_http_probe("/hello", 8080, 15, 10);
    if let ProbeHandler::HttpGet(get) = &mut probe.handler {
        get.port = PortRef::Name("http".into());
    }
    p.containers[0].readiness_probe = Some(probe);
    p
}

/// The slices among `events`' applied and resynced objects: `name: ip(ready) …`.
fn slices(events: &[SourceEvent]) -> Vec<String> {
    let describe = |s: &EndpointSlice| {
        let eps: Vec<String> = s
            .endpoints
            .iter()
            .map(|e| {
                format!(
                    "{}({})",
                    e.address,
                    if e.conditions.ready {
                        "ready"
                    } else {
                        "not ready"
                    }
                )
            })
            .collect();
        format!("{}: {}", s.name, eps.join(" "))
    };
    events
        .iter()
        .flat_map(|e| match e {
            SourceEvent::Apply(o) => vec![o],
            SourceEvent::Resync(objects) => objects.iter().collect(),
            SourceEvent::Delete(_) => Vec::new(),
            SourceEvent::Batch(_) => panic!("the controller's output is flat: {e:?}"),
        })
        .filter_map(|o| match o {
            Object::EndpointSlice(s) => Some(describe(s)),
            _ => None,
        })
        .collect()
}

fn deleted(events: &[SourceEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| match e {
            SourceEvent::Delete(ObjectKey::EndpointSlice { name, .. }) => Some(name.clone()),
            _ => None,
        })
        .collect()
}

/// The derived slice of `web` (its name carries a hash of the port list).
fn web_slice(events: &[SourceEvent]) -> String {
    let all = slices(events);
    assert_eq!(all.len(), 1, "{all:?}");
    let (name, eps) = all[0].split_once(": ").expect("name: endpoints");
    assert!(name.starts_with("web-ipv4-"), "{name}");
    eps.to_owned()
}

/// `web`, its Node and two ready Pods `a` and `b`.
fn web_with_two_pods() -> Vec<Object> {
    vec![
        web(),
        node(),
        Object::from(pod("a", "10.0.1.1")),
        Object::from(pod("b", "10.0.1.2")),
    ]
}

fn resync(c: &mut EndpointController, objects: Vec<Object>) -> Output {
    c.handle(SourceEvent::Resync(objects))
}

#[test]
fn a_resync_hands_on_services_nodes_and_derived_slices_but_no_pods() {
    let mut c = EndpointController::new();
    let out = resync(&mut c, web_with_two_pods());
    let [SourceEvent::Resync(objects)] = &out.events[..] else {
        panic!("one resync: {:?}", out.events)
    };
    assert!(objects.iter().all(|o| !matches!(o, Object::Pod(_))));
    assert_eq!(objects.len(), 3, "service, node, slice");
    assert_eq!(web_slice(&out.events), "10.0.1.1(ready) 10.0.1.2(ready)");
    assert!(out.new_problems.is_empty());
}

#[test]
fn hand_written_slices_are_used_until_pods_are_selected_then_reported() {
    let hand = || {
        Object::from(mk_slice(
            "dev",
            "web",
            8080,
            vec![mk_endpoint("10.0.9.9", "node-a")],
        ))
    };
    let mut c = EndpointController::new();
    // The seed today: a selector Service, a hand-written slice, no Pods.
    let out = resync(&mut c, vec![web(), node(), hand()]);
    assert_eq!(slices(&out.events), ["web-abc: 10.0.9.9(ready)"]);
    // A Pod it selects appears: the Pods win, the slice is reported and withdrawn.
    let out = c.handle(SourceEvent::Apply(Object::from(pod("a", "10.0.1.1"))));
    assert_eq!(web_slice(&out.events), "10.0.1.1(ready)");
    assert_eq!(deleted(&out.events), ["web-abc"]);
    let [problem] = &out.new_problems[..] else {
        panic!("one problem: {:?}", out.new_problems)
    };
    assert_eq!(
        problem.to_string(),
        "EndpointSlice dev/web-abc: metadata.labels[kubernetes.io/service-name]: Service dev/web \
         takes its endpoints from the Pods its selector app=web selects (dev/a), so this \
         hand-written slice is left out: a Service gets its endpoints from Pods or from \
         hand-written slices, never both"
    );
    assert_eq!(c.problems().count(), 1);
    // The Pod goes: the hand-written slice is back, the problem gone.
    let out = c.handle(SourceEvent::Delete(ObjectKey::Pod {
        namespace: "dev".into(),
        name: "a".into(),
    }));
    assert_eq!(slices(&out.events), ["web-abc: 10.0.9.9(ready)"]);
    assert_eq!(deleted(&out.events).len(), 1);
    assert_eq!(c.problems().count(), 0);
}

#[test]
fn services_without_a_selector_keep_their_slices_whatever_the_pods() {
    let mut plain = mk_service("dev", "web", "172.30.0.10", 80);
    plain.selector = None;
    let hand = Object::from(mk_slice(
        "dev",
        "web",
        8080,
        vec![mk_endpoint("10.0.9.9", "node-a")],
    ));
    let mut c = EndpointController::new();
    let out = resync(
        &mut c,
        vec![
            Object::from(plain),
            node(),
            hand,
            Object::from(pod("a", "10.0.1.1")),
        ],
    );
    assert_eq!(slices(&out.events), ["web-abc: 10.0.9.9(ready)"]);
    assert!(c.selected_pods().next().is_none());
}

#[test]
fn probe_verdicts_move_a_pod_in_and_out_of_the_ready_set() {
    let mut c = EndpointController::new();
    let out = resync(
        &mut c,
        vec![web(), node(), Object::from(probed("a", "10.0.1.1"))],
    );
    // Before its first verdict, a probed container without a running status is not ready.
    assert_eq!(web_slice(&out.events), "10.0.1.1(not ready)");
    let verdict = |ready| ReadinessUpdate {
        pod: PodKey::new("dev", "a"),
        container: "app".into(),
        ready,
    };
    assert_eq!(
        web_slice(&c.readiness(&verdict(Some(true))).events),
        "10.0.1.1(ready)"
    );
    assert!(
        c.readiness(&verdict(Some(true))).events.is_empty(),
        "no change, no event"
    );
    assert_eq!(
        web_slice(&c.readiness(&verdict(Some(false))).events),
        "10.0.1.1(not ready)"
    );
    let pod = c.pod(&PodKey::new("dev", "a")).map(|p| &*p.name);
    assert_eq!(pod, Some("a"));
    // No verdict any more: the status speaks again (ready, but no running state: not ready).
    assert!(c.readiness(&verdict(None)).events.is_empty());
    // A verdict about a Pod that is gone changes nothing.
    let gone = ReadinessUpdate {
        pod: PodKey::new("dev", "gone"),
        container: "app".into(),
        ready: Some(true),
    };
    assert!(c.readiness(&gone).events.is_empty());
}

#[test]
fn pods_follow_their_labels_and_services_their_selectors() {
    let mut c = EndpointController::new();
    resync(&mut c, web_with_two_pods());
    let mut moved = pod("b", "10.0.1.2");
    moved.labels = Labels::new([("app", "db")]);
    let out = c.handle(SourceEvent::Apply(Object::from(moved)));
    assert_eq!(web_slice(&out.events), "10.0.1.1(ready)");
    // The Service itself goes: its derived slice goes with it.
    let out = c.handle(SourceEvent::Delete(ObjectKey::Service(
        ferry_model::ServiceName::new("dev", "web"),
    )));
    assert_eq!(deleted(&out.events).len(), 1);
    assert!(matches!(
        out.events[0],
        SourceEvent::Delete(ObjectKey::Service(_))
    ));
}

#[test]
fn a_node_change_updates_the_zone_and_an_unknown_node_is_reported_once() {
    let mut c = EndpointController::new();
    let out = resync(&mut c, vec![web(), Object::from(pod("a", "10.0.1.1"))]);
    assert_eq!(slices(&out.events), ["web-ipv4: "], "the placeholder");
    assert_eq!(out.new_problems.len(), 1);
    assert_eq!(out.new_problems[0].field, "spec.nodeName");
    let mut zoned = mk_node("node-a", "192.168.0.1", "10.0.1.0/24");
    zoned
        .labels
        .insert("topology.kubernetes.io/zone".into(), "zone-a".into());
    let out = c.handle(SourceEvent::Apply(Object::from(zoned)));
    assert!(matches!(
        &out.events[0],
        SourceEvent::Apply(Object::Node(_))
    ));
    let Some(SourceEvent::Apply(Object::EndpointSlice(slice))) = out.events.get(1) else {
        panic!("a slice update: {:?}", out.events)
    };
    assert_eq!(slice.endpoints[0].zone(), Some("zone-a"));
    assert_eq!(c.problems().count(), 0);
}

#[test]
fn verdicts_in_one_batch_recompute_each_service_once() {
    let mut c = EndpointController::new();
    let pods = [probed("a", "10.0.1.1"), probed("b", "10.0.1.2")];
    let mut objects = vec![web(), node()];
    objects.extend(pods.into_iter().map(Object::from));
    resync(&mut c, objects);
    let ready = |name: &str| ReadinessUpdate {
        pod: PodKey::new("dev", name),
        container: "app".into(),
        ready: Some(true),
    };
    let out = c.readiness_all(&[ready("a"), ready("b")]);
    assert_eq!(web_slice(&out.events), "10.0.1.1(ready) 10.0.1.2(ready)");
    assert_eq!(out.events.len(), 1, "one slice update for both verdicts");
}

#[test]
fn a_batch_is_taken_whole_and_each_service_derived_once() {
    let mut c = EndpointController::new();
    resync(&mut c, vec![node()]);
    let out = c.handle(SourceEvent::Batch(vec![
        SourceEvent::Apply(web()),
        SourceEvent::Apply(Object::from(pod("a", "10.0.1.1"))),
        SourceEvent::Apply(Object::from(pod("b", "10.0.1.2"))),
    ]));
    assert_eq!(
        out.events.len(),
        2,
        "the Service, then its slice: {:?}",
        out.events
    );
    assert_eq!(out.events[0], SourceEvent::Apply(web()));
    assert_eq!(web_slice(&out.events), "10.0.1.1(ready) 10.0.1.2(ready)");
}

/// The stage as `ferry run` runs it: a Service with its Pods in, the Service with its derived
/// slice out as one Batch, so the state never syncs the Service without its endpoints.
#[tokio::test]
async fn the_stage_sends_a_service_and_its_derived_slice_as_one_batch() {
    use std::sync::Arc;
    use tokio::sync::mpsc;

    let (source, input) = mpsc::channel(4);
    let (output, mut state) = mpsc::channel(4);
    let options = StageOptions {
        check: Arc::new(crate::probe::NetworkCheck::default()),
        max_concurrent: 1,
        book: Arc::default(),
    };
    tokio::spawn(run(input, output, options, |_| {}));
    source
        .send(SourceEvent::Resync(vec![node()]))
        .await
        .expect("send");
    let first = state.recv().await.expect("the resync");
    assert!(matches!(first, SourceEvent::Resync(_)), "{first:?}");
    let batch = SourceEvent::Batch(vec![
        SourceEvent::Apply(web()),
        SourceEvent::Apply(Object::from(pod("a", "10.0.1.1"))),
    ]);
    source.send(batch).await.expect("send");
    let Some(SourceEvent::Batch(events)) = state.recv().await else {
        panic!("one Batch expected");
    };
    assert_eq!(events[0], SourceEvent::Apply(web()));
    assert_eq!(web_slice(&events), "10.0.1.1(ready)");
    drop(source);
    assert!(state.recv().await.is_none(), "nothing else was sent");
}

#[test]
fn a_hand_written_slice_is_handed_on_as_the_same_allocation() {
    let mut c = EndpointController::new();
    let slice = std::sync::Arc::new(mk_slice("dev", "web", 8080, vec![]));
    let out = resync(
        &mut c,
        vec![web(), node(), Object::EndpointSlice(slice.clone())],
    );
    let [SourceEvent::Resync(objects)] = &out.events[..] else {
        panic!("one Resync expected: {:?}", out.events);
    };
    let passed = objects.iter().find_map(|o| match o {
        Object::EndpointSlice(s) => Some(s),
        _ => None,
    });
    assert!(passed.is_some_and(|s| std::sync::Arc::ptr_eq(s, &slice)));
}

#[test]
fn hand_written_slices_pass_through_and_follow_their_service_label() {
    // `web` takes its endpoints from Pod `a`; `api` (no Pods) from hand-written slices.
    let mut api = mk_service("dev", "api", "172.30.0.11", 80);
    api.selector = None;
    let slice = |service: &str, ip: &str| {
        let mut s = mk_slice("dev", service, 8080, vec![mk_endpoint(ip, "node-a")]);
        s.name = "moving".into();
        Object::from(s)
    };
    let mut c = EndpointController::new();
    let mut objects = vec![Object::from(api)];
    objects.extend(web_with_two_pods());
    resync(&mut c, objects);

    // Written for `api`: handed on as it is; edited: handed on again.
    let out = c.handle(SourceEvent::Apply(slice("api", "10.0.9.1")));
    assert_eq!(slices(&out.events), ["moving: 10.0.9.1(ready)"]);
    let out = c.handle(SourceEvent::Apply(slice("api", "10.0.9.2")));
    assert_eq!(slices(&out.events), ["moving: 10.0.9.2(ready)"]);
    assert!(deleted(&out.events).is_empty());
    // The same again: nothing to hand on.
    let out = c.handle(SourceEvent::Apply(slice("api", "10.0.9.2")));
    assert!(out.events.is_empty(), "{:?}", out.events);

    // Relabelled to `web`, whose Pods win: withdrawn, and reported.
    let out = c.handle(SourceEvent::Apply(slice("web", "10.0.9.2")));
    assert_eq!(deleted(&out.events), ["moving"]);
    assert!(slices(&out.events).is_empty(), "{:?}", out.events);
    assert_eq!(c.problems().count(), 1);
    // And back to `api` in one batch with an edit: handed on once, in its last version.
    let out = c.handle(SourceEvent::Batch(vec![
        SourceEvent::Apply(slice("api", "10.0.9.3")),
        SourceEvent::Apply(slice("api", "10.0.9.4")),
    ]));
    assert_eq!(slices(&out.events), ["moving: 10.0.9.4(ready)"]);
    assert!(deleted(&out.events).is_empty());
    assert_eq!(c.problems().count(), 0);
    // Deleted: withdrawn.
    let out = c.handle(SourceEvent::Delete(ObjectKey::EndpointSlice {
        namespace: "dev".into(),
        name: "moving".into(),
    }));
    assert_eq!(deleted(&out.events), ["moving"]);

    // A resync hands on `web`'s derived slice and `api`'s hand-written one, by Service.
    let out = c.handle(SourceEvent::Apply(slice("api", "10.0.9.5")));
    assert_eq!(slices(&out.events), ["moving: 10.0.9.5(ready)"]);
    let mut objects = vec![slice("api", "10.0.9.5")];
    let mut api = mk_service("dev", "api", "172.30.0.11", 80);
    api.selector = None;
    objects.push(Object::from(api));
    objects.extend(web_with_two_pods());
    let out = resync(&mut c, objects);
    let all = slices(&out.events);
    assert_eq!(all.len(), 2, "{all:?}");
    assert_eq!(all[0], "moving: 10.0.9.5(ready)");
    assert!(all[1].starts_with("web-ipv4-"), "{all:?}");
}
