use std::sync::{Arc, Mutex};

use ferry_dataplane::nft::{NftDataplane, NftRunner};
use ferry_dataplane::{Applier, Error, SyncKind, SyncReport};
use ferry_model::fixtures::*;
use ferry_model::{IpFamily, NodeContext, Object, TrafficPolicy};
use ferry_source::SourceEvent;

use super::{FamilySync, Syncer};

/// Records every script; fails while `fail` is set (the kernel would keep its old state).
#[derive(Clone, Default)]
struct Recorder {
    scripts: Arc<Mutex<Vec<String>>>,
    fail: Arc<Mutex<bool>>,
}

impl NftRunner for Recorder {
    fn run(&mut self, script: &str) -> Result<(), Error> {
        if *self.fail.lock().expect("lock") {
            return Err(Error::Rejected {
                program: "nft".into(),
                status: "exit status: 1".into(),
                stderr: "injected".into(),
            });
        }
        self.scripts.lock().expect("lock").push(script.to_owned());
        Ok(())
    }
}

fn syncer() -> (Syncer<NftDataplane<Recorder>>, Recorder) {
    let rec = Recorder::default();
    let ctx = NodeContext {
        node_name: "k8s-node2".into(),
        family: IpFamily::V4,
    };
    let s = Syncer::new(vec![FamilySync::new(
        ctx,
        Default::default(),
        NftDataplane::with_runner(rec.clone()),
    )]);
    (s, rec)
}

/// Syncs the only family of a test syncer.
fn sync<A: Applier>(s: &mut Syncer<A>) -> Result<SyncReport, Error> {
    let (state, families) = s.split();
    families[0].sync(state, false)
}

fn seed_objects(endpoints: &[&str]) -> Vec<Object> {
    let svc = with_node_port(
        mk_service("dev", "web", "10.96.198.86", 8080),
        32223,
        TrafficPolicy::Cluster,
    );
    let eps = endpoints
        .iter()
        .map(|a| mk_endpoint(a, "k8s-node2"))
        .collect();
    vec![
        Object::from(svc),
        Object::from(mk_service("dev", "other", "10.96.0.20", 80)),
        Object::from(mk_slice("dev", "web", 56010, eps)),
        Object::from(mk_node("k8s-node2", "10.1.1.9", "192.168.169.128/26")),
    ]
}

#[test]
fn first_sync_is_full_and_recreates_the_table() {
    let (mut s, rec) = syncer();
    assert!(s.handle(SourceEvent::Resync(seed_objects(&["192.168.169.166"]))));
    let report = sync(&mut s).expect("sync");
    assert_eq!(report.kind, SyncKind::Full);
    let scripts = rec.scripts.lock().expect("lock");
    assert!(
        scripts[0].contains("delete table ip ferry"),
        "{}",
        scripts[0]
    );
}

#[test]
fn an_endpoint_change_is_an_incremental_sync_of_that_service_only() {
    let (mut s, rec) = syncer();
    s.handle(SourceEvent::Resync(seed_objects(&["192.168.169.166"])));
    sync(&mut s).expect("first sync");
    // One endpoint replaced by another: same count, so map elements only.
    assert!(s.handle(SourceEvent::Resync(seed_objects(&["192.168.169.168"]))));
    assert_eq!(s.pending_services(), 1);
    let report = sync(&mut s).expect("second sync");
    assert_eq!(report.kind, SyncKind::Partial);
    assert_eq!(report.chains_written, 0);
    let scripts = rec.scripts.lock().expect("lock");
    let delta = &scripts[1];
    assert!(
        delta.contains("add element ip ferry cluster-endpoints { 10.96.198.86 . tcp . 8080 . 0 : 192.168.169.168"),
        "{delta}"
    );
    assert!(!delta.contains("chain"), "no rule, no chain: {delta}");
    assert!(
        !delta.contains("service-ips"),
        "dispatch unchanged: {delta}"
    );
}

/// The manifest source's one file with a new Service and its slice: applied whole, then one
/// sync programs the Service with its endpoint (never the Service alone).
#[test]
fn a_batch_is_applied_whole_before_its_one_sync() {
    let (mut s, rec) = syncer();
    s.handle(SourceEvent::Resync(seed_objects(&["192.168.169.166"])));
    sync(&mut s).expect("first sync");
    let eps = vec![mk_endpoint("192.168.169.170", "k8s-node2")];
    let batch = SourceEvent::Batch(vec![
        SourceEvent::Apply(Object::from(mk_service("dev", "api", "10.96.0.30", 80))),
        SourceEvent::Apply(Object::from(mk_slice("dev", "api", 80, eps))),
        // Unchanged, last: the Batch still reports the change before it.
        SourceEvent::Apply(seed_objects(&[])[3].clone()),
    ]);
    assert!(s.handle(batch));
    assert_eq!(s.pending_services(), 1);
    sync(&mut s).expect("second sync");
    let scripts = rec.scripts.lock().expect("lock");
    assert_eq!(scripts.len(), 2, "one sync for the whole Batch");
    assert!(
        scripts[1].contains("10.96.0.30") && scripts[1].contains("192.168.169.170"),
        "the Service with its endpoint: {}",
        scripts[1]
    );
}

#[test]
fn an_unchanged_resync_needs_no_sync() {
    let (mut s, _rec) = syncer();
    s.handle(SourceEvent::Resync(seed_objects(&["192.168.169.166"])));
    sync(&mut s).expect("sync");
    assert!(!s.handle(SourceEvent::Resync(seed_objects(&["192.168.169.166"]))));
}

#[test]
fn a_failed_sync_keeps_the_changes_and_the_next_sync_is_full() {
    let (mut s, rec) = syncer();
    s.handle(SourceEvent::Resync(seed_objects(&["192.168.169.166"])));
    sync(&mut s).expect("sync");
    s.handle(SourceEvent::Resync(seed_objects(&[])));
    *rec.fail.lock().expect("lock") = true;
    assert!(sync(&mut s).is_err());
    *rec.fail.lock().expect("lock") = false;
    let report = sync(&mut s).expect("retry");
    assert_eq!(
        report.kind,
        SyncKind::Full,
        "state after a failure is unknown: full resync"
    );
    let last = rec
        .scripts
        .lock()
        .expect("lock")
        .last()
        .cloned()
        .unwrap_or_default();
    assert!(
        last.contains("goto reject-chain"),
        "the retry carries the change: {last}"
    );
}

#[test]
fn a_change_to_this_nodes_node_object_forces_a_full_sync() {
    let (mut s, _rec) = syncer();
    s.handle(SourceEvent::Resync(seed_objects(&["192.168.169.166"])));
    sync(&mut s).expect("sync");
    assert!(s.handle(SourceEvent::Apply(Object::from(mk_node(
        "k8s-node2",
        "10.1.1.99",
        "192.168.169.128/26"
    )))));
    assert_eq!(sync(&mut s).expect("sync").kind, SyncKind::Full);
}

#[test]
fn deleting_a_service_removes_its_elements() {
    let (mut s, rec) = syncer();
    s.handle(SourceEvent::Resync(seed_objects(&["192.168.169.166"])));
    sync(&mut s).expect("sync");
    let mut objs = seed_objects(&["192.168.169.166"]);
    objs.remove(0);
    s.handle(SourceEvent::Resync(objs));
    sync(&mut s).expect("sync");
    let last = rec
        .scripts
        .lock()
        .expect("lock")
        .last()
        .cloned()
        .unwrap_or_default();
    let delta = last.contains("delete element ip ferry service-ips");
    let reload = last.contains("delete table ip ferry") && !last.contains("\"dev/web:http\"");
    assert!(delta || reload, "{last}");
}

/// The Kubernetes API source's relist (after `410 Gone`) is a Resync of every kind: objects
/// deleted while the watch was away go, and only the services that changed are rewritten.
#[test]
fn a_relist_resync_removes_what_was_deleted_meanwhile_incrementally() {
    let (mut s, rec) = syncer();
    s.handle(SourceEvent::Resync(seed_objects(&["192.168.169.166"])));
    sync(&mut s).expect("sync");
    let late = Object::from(mk_service("dev", "late", "10.96.0.30", 80));
    assert!(s.handle(SourceEvent::Apply(late)));
    sync(&mut s).expect("sync");
    // Meanwhile `dev/other` and `dev/late` were deleted; the watch missed it and relisted.
    let relisted: Vec<Object> = seed_objects(&["192.168.169.166"])
        .into_iter()
        .filter(|o| !matches!(o, Object::Service(svc) if &*svc.name.name == "other"))
        .collect();
    assert!(s.handle(SourceEvent::Resync(relisted)));
    assert_eq!(s.pending_services(), 2, "dev/other and dev/late only");
    let report = sync(&mut s).expect("sync");
    assert_eq!(report.kind, SyncKind::Partial);
    let last = rec
        .scripts
        .lock()
        .expect("lock")
        .last()
        .cloned()
        .unwrap_or_default();
    assert!(
        last.contains("10.96.0.20") && last.contains("10.96.0.30"),
        "{last}"
    );
    assert!(
        !last.contains("10.96.198.86"),
        "unchanged services are not rewritten: {last}"
    );
}

pub(crate) mod families;
mod iptables;
mod periodic;
mod service_cidrs;

#[test]
fn a_successful_sync_hands_out_the_stale_udp_flows_once() {
    use ferry_model::Protocol;
    let (mut s, rec) = syncer();
    let udp = |endpoints: &[&str]| {
        let mut svc = mk_service("dev", "dns", "10.96.0.10", 53);
        svc.ports[0].protocol = Protocol::Udp;
        let eps = endpoints
            .iter()
            .map(|a| mk_endpoint(a, "k8s-node2"))
            .collect();
        let mut slice = mk_slice("dev", "dns", 5353, eps);
        slice.ports[0].protocol = Protocol::Udp;
        vec![Object::from(svc), Object::from(slice)]
    };
    s.handle(SourceEvent::Resync(udp(&[
        "192.168.169.166",
        "192.168.169.168",
    ])));
    sync(&mut s).expect("sync");
    assert_eq!(
        s.split().1[0].take_stale_flows().len(),
        1,
        "the first sync checks every frontend"
    );
    assert!(s.split().1[0].take_stale_flows().is_empty());

    for obj in udp(&["192.168.169.168"]) {
        s.handle(SourceEvent::Apply(obj));
    }
    *rec.fail.lock().expect("lock") = true;
    assert!(sync(&mut s).is_err());
    assert!(
        s.split().1[0].take_stale_flows().is_empty(),
        "nothing before the rules are in"
    );
    *rec.fail.lock().expect("lock") = false;
    sync(&mut s).expect("sync");
    let stale = s.split().1[0].take_stale_flows();
    assert_eq!(stale.len(), 1);
    let removed = std::net::SocketAddr::new(ip("192.168.169.166"), 5353);
    assert!(stale[0].matches("10.96.0.10:53".parse().expect("addr"), removed));
}

#[test]
fn pending_endpoint_changes_are_counted_per_service_as_upstream_does() {
    let (mut s, _) = syncer();
    for obj in seed_objects(&["192.168.169.130"]) {
        s.handle(SourceEvent::Apply(obj));
    }
    sync(&mut s).expect("sync");
    // Two slices of dev/web change: one pending endpoint change (upstream's endpoints change
    // tracker is keyed by Service), two changes counted in the total.
    let slice = |ep| mk_slice("dev", "web", 56010, vec![mk_endpoint(ep, "k8s-node2")]);
    let first = slice("192.168.169.131");
    let mut second = slice("192.168.169.132");
    second.name = "web-def".into();
    s.handle(SourceEvent::Apply(Object::from(first)));
    s.handle(SourceEvent::Apply(Object::from(second)));
    let pending = s.primary().pending_changes();
    let names: Vec<String> = pending.endpoints.iter().map(|n| n.to_string()).collect();
    assert_eq!(names, ["dev/web"]);
    assert_eq!(pending.slices_total, 3, "the first slice, then two changes");
    sync(&mut s).expect("sync");
    assert!(s.primary().pending_changes().endpoints.is_empty());
}

/// Two families of a test syncer (IPv4 primary).
fn dual_syncer() -> Syncer<NftDataplane<Recorder>> {
    let family = |family| {
        FamilySync::new(
            NodeContext {
                node_name: "k8s-node2".into(),
                family,
            },
            Default::default(),
            NftDataplane::with_runner(Recorder::default()),
        )
    };
    Syncer::new(vec![family(IpFamily::V4), family(IpFamily::V6)])
}

#[test]
fn a_resync_notes_what_the_same_objects_applied_one_by_one_note() {
    let mut objects = seed_objects(&["192.168.169.130", "192.168.169.131"]);
    objects.push(Object::from(mk_service("dev", "api", "10.96.0.30", 80)));
    let mut late = mk_slice(
        "dev",
        "api",
        80,
        vec![mk_endpoint("192.168.169.140", "k8s-node1")],
    );
    late.trigger_time = Some("2026-12-03T07:00:00Z".into());
    objects.push(Object::from(late));
    let mut one_by_one = dual_syncer();
    for obj in objects.clone() {
        one_by_one.handle(SourceEvent::Apply(obj));
    }
    let mut resynced = dual_syncer();
    assert!(resynced.handle(SourceEvent::Resync(objects)));
    assert_eq!(
        resynced.primary().pending_changes(),
        one_by_one.primary().pending_changes()
    );
    assert_eq!(resynced.pending_services(), 3);
    let names = |p: &super::PendingChanges| -> Vec<String> {
        p.services
            .iter()
            .chain(&p.endpoints)
            .map(|n| n.to_string())
            .collect()
    };
    assert_eq!(
        names(resynced.primary().pending_changes()),
        ["dev/api", "dev/other", "dev/web", "dev/api", "dev/web"]
    );
    // The second family counts and keeps trigger times, not names (only the primary's feed
    // the metrics).
    let first = resynced.primary().pending_changes();
    let second = &resynced.families[1].changes;
    assert!(names(second).is_empty());
    assert_eq!(
        (second.services_total, second.slices_total),
        (first.services_total, first.slices_total)
    );
    assert_eq!(second.services_total, 3);
    assert_eq!(second.trigger_times, ["2026-12-03T07:00:00Z"]);
    assert_eq!(resynced.families[1].dirty.len(), 3);
}
