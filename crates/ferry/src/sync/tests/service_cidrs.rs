//! ServiceCIDR changes: they dirty no Service, yet must reach the kernel.

use ferry_dataplane::SyncKind;
use ferry_model::{Object, ObjectKey, ServiceCidr};
use ferry_source::SourceEvent;

use super::{seed_objects, sync, syncer};

fn kubernetes(cidr: &str) -> Object {
    Object::from(ServiceCidr {
        name: "kubernetes".into(),
        cidrs: vec![cidr.parse().expect("cidr")],
    })
}

const DROP: &str = "ip daddr { 10.96.0.0/12 } drop";

#[test]
fn a_service_cidr_change_is_a_full_sync_that_writes_the_drop_rule() {
    let (mut s, rec) = syncer();
    s.handle(SourceEvent::Resync(seed_objects(&["192.168.169.166"])));
    sync(&mut s).expect("first sync");
    assert!(!rec.scripts.lock().expect("lock")[0].contains(DROP));

    assert!(s.handle(SourceEvent::Apply(kubernetes("10.96.0.0/12"))));
    assert_eq!(sync(&mut s).expect("sync").kind, SyncKind::Full);
    let written = rec.scripts.lock().expect("lock").concat();
    assert!(written.contains(DROP), "{written}");

    // The same object again changes nothing.
    assert!(!s.handle(SourceEvent::Apply(kubernetes("10.96.0.0/12"))));

    let before = rec.scripts.lock().expect("lock").len();
    assert!(s.handle(SourceEvent::Delete(ObjectKey::ServiceCidr(
        "kubernetes".into()
    ))));
    assert_eq!(sync(&mut s).expect("sync").kind, SyncKind::Full);
    let scripts = rec.scripts.lock().expect("lock");
    let after = scripts[before..].concat();
    assert!(
        after.contains("add rule ip ferry cluster-ips-check ip daddr @cluster-ips reject"),
        "{after}"
    );
    assert!(!after.contains(DROP), "{after}");
}

#[test]
fn service_cidrs_in_the_first_resync_are_in_the_first_sync() {
    let (mut s, rec) = syncer();
    let mut objects = seed_objects(&["192.168.169.166"]);
    objects.push(kubernetes("10.96.0.0/12"));
    s.handle(SourceEvent::Resync(objects));
    sync(&mut s).expect("first sync");
    let written = rec.scripts.lock().expect("lock").concat();
    assert!(written.contains(DROP), "{written}");
}
