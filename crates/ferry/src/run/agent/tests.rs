//! The agent answers `/status` off its task: a slow read-back of the kernel does not hold the
//! syncs (the kill drill at 10 000 Services in iptables-legacy found `/status` unanswered for
//! 90 s, and the agent syncing nothing meanwhile).

use std::collections::BTreeSet;
use std::sync::{mpsc as std_mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use ferry_compile::trace::Trace;
use ferry_compile::NodeCompiler;
use ferry_dataplane::live::{KernelReport, LiveReport};
use ferry_dataplane::mode::FailureCounter;
use ferry_dataplane::preflight::Requirements;
use ferry_dataplane::support::Unsupported;
use ferry_dataplane::{Applier, Error, SyncKind, SyncReport};
use ferry_model::fixtures::{mk_endpoint, mk_service, mk_slice};
use ferry_model::{ClusterState, IpFamily, NodeContext, Object, ServiceName};
use tokio::sync::oneshot;

use super::*;
use crate::sync::FamilySync;

/// Held by the tests that run an agent or send this process a signal: a SIGINT reaches every
/// listener in the process, so those tests do not overlap.
static SIGNALS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test]
async fn a_signal_that_comes_while_the_agent_is_busy_is_kept() {
    let _serial = SIGNALS.lock().await;
    let mut signals = Signals::new().expect("signal handlers");
    // As during a round that holds the agent: SIGINT comes, and the runtime's signal driver
    // takes it in (as the other worker thread does meanwhile), while nothing waits for it.
    let sent = std::process::Command::new("kill")
        .args(["-INT", &std::process::id().to_string()])
        .status()
        .expect("run kill");
    assert!(sent.success());
    tokio::time::sleep(Duration::from_millis(300)).await;
    tokio::time::timeout(Duration::from_secs(10), signals.recv())
        .await
        .expect("the SIGINT that came before the look is seen");
}

/// When each sync was made; the kernel is never touched.
#[derive(Default, Clone)]
struct Counting(Arc<Mutex<Vec<Instant>>>);

impl Counting {
    fn count(&self) -> usize {
        self.0.lock().expect("lock").len()
    }

    fn synced(&self, kind: SyncKind) -> Result<SyncReport, Error> {
        self.0.lock().expect("lock").push(Instant::now());
        Ok(SyncReport::nothing(kind))
    }
}

impl Applier for Counting {
    fn needs_full(&mut self, _: &NodeCompiler) -> Result<bool, Error> {
        Ok(false)
    }

    fn intact(&mut self) -> Result<bool, Error> {
        Ok(true)
    }

    fn sync_full(&mut self, _: &NodeCompiler, _: &ClusterState) -> Result<SyncReport, Error> {
        self.synced(SyncKind::Full)
    }

    fn sync_partial(
        &mut self,
        _: &NodeCompiler,
        _: &ClusterState,
        _: &BTreeSet<ServiceName>,
    ) -> Result<SyncReport, Error> {
        self.synced(SyncKind::Partial)
    }
}

/// A mode whose read-back of the kernel waits until the test lets it go (at most 10 s), and
/// notes when it returned.
struct SlowKernel {
    release: Mutex<std_mpsc::Receiver<()>>,
    returned: Arc<Mutex<Option<Instant>>>,
}

impl NodeMode for SlowKernel {
    fn describe(&self) -> String {
        "a mode with a slow kernel".to_owned()
    }

    fn supports(&self, _: IpFamily) -> Result<(), Unsupported> {
        Ok(())
    }

    fn requirements(&self) -> Requirements {
        Requirements::default()
    }

    fn applier(&self, _: IpFamily) -> Box<dyn Applier> {
        Box::new(Counting::default())
    }

    fn udp_conntrack_cleanup(&self) -> bool {
        false
    }

    fn live(&self, _: &Trace, _: &NodeCompiler, _: &ClusterState) -> Result<LiveReport, Error> {
        Err(Error::NoBaseline)
    }

    fn kernel(&self, _: &NodeCompiler, _: &ClusterState) -> Result<KernelReport, Error> {
        let release = self.release.lock().expect("lock");
        let _ = release.recv_timeout(Duration::from_secs(10));
        *self.returned.lock().expect("lock") = Some(Instant::now());
        Ok(KernelReport::default())
    }
}

fn web(endpoint: &str) -> Vec<Object> {
    vec![
        Object::from(mk_service("dev", "web", "10.96.0.10", 80)),
        Object::from(mk_slice(
            "dev",
            "web",
            8080,
            vec![mk_endpoint(endpoint, "k8s-node2")],
        )),
    ]
}

/// Waits until `syncs` has made `n` syncs (at most 1 000 looks, 10 ms apart).
async fn synced(syncs: &Counting, n: usize) {
    for _ in 0..1000 {
        if syncs.count() >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_change_is_synced_while_a_status_waits_for_the_kernel() {
    let syncs = Counting::default();
    let context = NodeContext {
        node_name: "k8s-node2".into(),
        family: IpFamily::V4,
    };
    let family = FamilySync::new(
        context,
        Default::default(),
        Box::new(syncs.clone()) as Box<dyn Applier>,
    );
    let _serial = SIGNALS.lock().await;
    let (release, released) = std_mpsc::channel();
    let returned = Arc::new(Mutex::new(None));
    let config = Config {
        node_name: "k8s-node2".into(),
        min_sync_period: Duration::ZERO,
        ..Config::default()
    };
    let parts = Parts {
        config,
        mode_entry: &MODES[0],
        mode: Arc::new(SlowKernel {
            release: Mutex::new(released),
            returned: returned.clone(),
        }),
        families: vec![IpFamily::V4],
        syncer: Syncer::new(vec![family]),
        health: ProxyHealth::new(Duration::from_secs(60)),
        metrics: Metrics::new(FailureCounter::NftablesSync),
        presence: None,
        source: "a test".into(),
        probes: None,
        leftovers: None,
    };
    let mut agent = parts.start();
    // Never clean up after other modes: that would touch this machine's rules.
    agent.other_modes_cleaned = true;
    let (events, events_rx) = mpsc::channel(8);
    let (status, status_rx) = mpsc::channel(4);
    let test = async {
        events
            .send(SourceEvent::Resync(web("10.64.0.1")))
            .await
            .expect("agent");
        synced(&syncs, 1).await;
        let (reply, answer) = oneshot::channel();
        status.send(reply).await.expect("agent");
        events
            .send(SourceEvent::Apply(web("10.64.0.2")[1].clone()))
            .await
            .expect("agent");
        synced(&syncs, 2).await;
        let _ = release.send(());
        let answered = answer.await.is_ok();
        drop(events);
        answered
    };
    let (_, answered) = tokio::join!(agent.run(events_rx, status_rx), test);
    assert!(answered, "the status was answered");
    let syncs = syncs.0.lock().expect("lock").clone();
    let returned = returned.lock().expect("lock").expect("the kernel was read");
    assert_eq!(syncs.len(), 2, "the first sync and the change's");
    assert!(
        syncs[1] < returned,
        "the change waited for the status's read-back of the kernel"
    );
}
