//! The syncer over the iptables dataplane: what is sent to `iptables-restore`.

use std::sync::{Arc, Mutex};

use ferry_compile::iptables::Table;
use ferry_dataplane::iptables::{IptablesDataplane, IptablesRunner};
use ferry_dataplane::{Error, SyncKind};
use ferry_model::{IpFamily, NodeContext};
use ferry_source::SourceEvent;

use ferry_model::fixtures::{mk_endpoint, mk_slice};
use ferry_model::Object;

use super::sync;
use crate::sync::{FamilySync, Syncer};

/// The core tests' seed objects, plus an endpoint for `dev/other` so that it has chains too.
fn seed_objects(endpoints: &[&str]) -> Vec<Object> {
    let mut objs = super::seed_objects(endpoints);
    objs.push(Object::from(mk_slice(
        "dev",
        "other",
        80,
        vec![mk_endpoint("192.168.36.70", "k8s-node1")],
    )));
    objs
}

/// Records every restore; every rule and chain it is asked about exists (canaries included).
#[derive(Clone, Default)]
struct Recorder {
    restores: Arc<Mutex<Vec<String>>>,
}

impl IptablesRunner for Recorder {
    fn restore(&mut self, input: &str) -> Result<(), Error> {
        self.restores.lock().expect("lock").push(input.to_owned());
        Ok(())
    }

    fn iptables(&mut self, _args: &[&str]) -> Result<bool, Error> {
        Ok(true)
    }

    fn save(&mut self, _table: Option<Table>) -> Result<String, Error> {
        Ok(String::new())
    }
}

fn syncer() -> (Syncer<IptablesDataplane<Recorder>>, Recorder) {
    let rec = Recorder::default();
    let ctx = NodeContext {
        node_name: "k8s-node2".into(),
        family: IpFamily::V4,
    };
    let s = Syncer::new(vec![FamilySync::new(
        ctx,
        Default::default(),
        IptablesDataplane::with_runner(rec.clone()),
    )]);
    (s, rec)
}

/// Chain lines (`:NAME - [0:0]`) of the nat table in a restore input.
fn nat_chain_lines(text: &str) -> Vec<&str> {
    text.lines()
        .skip_while(|l| *l != "*nat")
        .filter_map(|l| l.strip_prefix(':'))
        .filter_map(|l| l.split_whitespace().next())
        .collect()
}

#[test]
fn a_partial_sync_after_one_endpoint_change_rewrites_only_that_services_chains() {
    let (mut s, rec) = syncer();
    s.handle(SourceEvent::Resync(seed_objects(&["192.168.169.166"])));
    assert_eq!(sync(&mut s).expect("first sync").kind, SyncKind::Full);
    s.handle(SourceEvent::Resync(seed_objects(&[
        "192.168.169.166",
        "192.168.169.168",
    ])));
    let report = sync(&mut s).expect("second sync");
    assert_eq!(report.kind, SyncKind::Partial);

    let restores = rec.restores.lock().expect("lock");
    let full = &restores[0];
    let partial = &restores[1];
    // The unchanged service's chains were written by the full sync only.
    let other: Vec<&str> = full
        .lines()
        .filter(|l| l.contains("dev/other:http cluster IP") && l.starts_with("-A KUBE-SERVICES"))
        .collect();
    assert_eq!(other.len(), 1, "{full}");
    let other_chain = other[0].split_whitespace().last().expect("chain name");
    assert!(full.contains(&format!(":{other_chain} ")), "{full}");
    assert!(!partial.contains(&format!(":{other_chain} ")), "{partial}");
    assert!(
        !partial.contains(&format!("-A {other_chain} ")),
        "unchanged service untouched:\n{partial}"
    );
    // Top-level chains, the changed service's dispatch chain and the new endpoint's chain.
    let written = nat_chain_lines(partial);
    let per_service: Vec<&str> = written
        .iter()
        .copied()
        .filter(|c| c.starts_with("KUBE-SVC-") || c.starts_with("KUBE-SEP-"))
        .collect();
    assert_eq!(per_service.len(), 2, "{partial}");
    assert!(
        partial.contains("--to-destination 192.168.169.168:56010"),
        "{partial}"
    );
    assert!(
        !partial.contains("--to-destination 192.168.169.166:56010"),
        "the unchanged endpoint's chain is kept:\n{partial}"
    );
    assert!(!partial.contains("KUBE-PROXY-CANARY"), "{partial}");
}

#[test]
fn deleting_a_service_deletes_its_chains_in_a_partial_sync() {
    let (mut s, rec) = syncer();
    s.handle(SourceEvent::Resync(seed_objects(&["192.168.169.166"])));
    sync(&mut s).expect("sync");
    let mut objs = seed_objects(&["192.168.169.166"]);
    objs.remove(0);
    s.handle(SourceEvent::Resync(objs));
    assert_eq!(sync(&mut s).expect("sync").kind, SyncKind::Partial);
    let last = rec
        .restores
        .lock()
        .expect("lock")
        .last()
        .cloned()
        .unwrap_or_default();
    assert!(last.contains("-X KUBE-SVC-"), "{last}");
    assert!(last.contains("-X KUBE-SEP-"), "{last}");
    assert!(last.contains("-X KUBE-EXT-"), "{last}");
}
