//! The periodic round: it alone asks the kernel whether the rules are still there, and it
//! syncs fully when they are not or when the full sync period has passed.

use std::collections::BTreeSet;
use std::time::Duration;

use ferry_compile::NodeCompiler;
use ferry_dataplane::nft::NftDataplane;
use ferry_dataplane::{Applier, Error, SyncKind, SyncReport};
use ferry_model::{ClusterState, IpFamily, NodeContext, ServiceName};
use ferry_source::SourceEvent;

use super::{seed_objects, Recorder};
use crate::sync::{FamilySync, Syncer};

/// The nft applier over a recorder, answering the periodic check as told and counting the
/// checks.
struct Checked {
    inner: NftDataplane<Recorder>,
    intact: bool,
    checks: usize,
}

impl Applier for Checked {
    fn needs_full(&mut self, compiler: &NodeCompiler) -> Result<bool, Error> {
        self.inner.needs_full(compiler)
    }

    fn intact(&mut self) -> Result<bool, Error> {
        self.checks += 1;
        if !self.intact {
            self.inner.forget_installed();
        }
        Ok(self.intact)
    }

    fn sync_full(&mut self, c: &NodeCompiler, s: &ClusterState) -> Result<SyncReport, Error> {
        self.inner.sync_full(c, s)
    }

    fn sync_partial(
        &mut self,
        c: &NodeCompiler,
        s: &ClusterState,
        dirty: &BTreeSet<ServiceName>,
    ) -> Result<SyncReport, Error> {
        self.inner.sync_partial(c, s, dirty)
    }
}

fn syncer(full_sync_period: Duration) -> Syncer<Checked> {
    let ctx = NodeContext {
        node_name: "k8s-node2".into(),
        family: IpFamily::V4,
    };
    let applier = Checked {
        inner: NftDataplane::with_runner(Recorder::default()),
        intact: true,
        checks: 0,
    };
    let family = FamilySync::new(ctx, Default::default(), applier);
    let mut s = Syncer::new(vec![family.with_full_sync_period(full_sync_period)]);
    s.handle(SourceEvent::Resync(seed_objects(&["192.168.169.166"])));
    s
}

fn round(s: &mut Syncer<Checked>, periodic: bool) -> SyncKind {
    let (state, families) = s.split();
    families[0].sync(state, periodic).expect("sync").kind
}

fn checks(s: &mut Syncer<Checked>) -> usize {
    s.split().1[0].applier.checks
}

fn set_intact(s: &mut Syncer<Checked>, intact: bool) {
    s.split().1[0].applier.intact = intact;
}

#[test]
fn only_the_periodic_round_asks_the_kernel_and_rules_found_gone_are_rewritten() {
    let mut s = syncer(Duration::from_secs(3600));
    assert_eq!(round(&mut s, true), SyncKind::Full, "the first sync");
    assert_eq!(checks(&mut s), 0, "a full sync needs no check");
    assert_eq!(round(&mut s, true), SyncKind::Partial, "rules intact");
    assert_eq!(checks(&mut s), 1);
    let changed = seed_objects(&["192.168.169.170"]);
    s.handle(SourceEvent::Apply(changed[2].clone()));
    assert_eq!(round(&mut s, false), SyncKind::Partial, "a change");
    assert_eq!(
        checks(&mut s),
        1,
        "a change's round does not ask the kernel"
    );
    set_intact(&mut s, false);
    assert_eq!(round(&mut s, true), SyncKind::Full, "rules gone");
    assert_eq!(checks(&mut s), 2);
}

#[test]
fn the_periodic_round_is_full_once_the_full_sync_period_has_passed() {
    let mut s = syncer(Duration::ZERO);
    assert_eq!(round(&mut s, true), SyncKind::Full);
    assert_eq!(round(&mut s, false), SyncKind::Partial, "not periodic");
    assert_eq!(round(&mut s, true), SyncKind::Full, "the period has passed");
    assert_eq!(checks(&mut s), 0, "a full sync is due anyway: no check");
}
