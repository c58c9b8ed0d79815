//! The probe schedule with a fake clock and a scripted check; the checks against real servers
//! on the loopback are in `tests/network.rs`.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ferry_model::fixtures::{mk_http_probe, mk_pod};
use ferry_model::{Pod, PortRef, Probe, ProbeHandler};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::*;
use crate::pods::PodKey;

mod network;

/// The seed's probe: `GET /hello` on 56010, initial delay 15 s, period 10 s.
fn seed_probe() -> Probe {
    mk_http_probe("/hello", 56010, 15, 10)
}

fn probed_pod(name: &str, ip: &str, probe: Probe) -> Arc<Pod> {
    let mut pod = mk_pod("dev", name, "url-analysis", ip, "k8s-node2");
    pod.containers[0].readiness_probe = Some(probe);
    Arc::new(pod)
}

/// A check whose answer depends on the (fake) time since `t0`, and that counts runs in flight.
struct Scripted {
    t0: Instant,
    failing: std::ops::Range<u64>,
    takes: Duration,
    in_flight: AtomicUsize,
    most_in_flight: AtomicUsize,
}

impl Check for Scripted {
    fn check<'a>(&'a self, _target: &'a Target, _timeout: Duration) -> CheckFuture<'a> {
        Box::pin(async move {
            let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
            self.most_in_flight.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(self.takes).await;
            self.in_flight.fetch_sub(1, Ordering::SeqCst);
            if self.failing.contains(&self.t0.elapsed().as_secs()) {
                Outcome::Failure("HTTP probe failed with statuscode: 503".into())
            } else {
                Outcome::Success
            }
        })
    }
}

fn scripted(failing: std::ops::Range<u64>, takes: Duration) -> Arc<Scripted> {
    Arc::new(Scripted {
        t0: Instant::now(),
        failing,
        takes,
        in_flight: AtomicUsize::new(0),
        most_in_flight: AtomicUsize::new(0),
    })
}

#[tokio::test(start_paused = true)]
async fn initial_delay_period_and_thresholds_follow_kubelet() {
    // The check's clock starts 10 s before the test's: it fails from 25 s to 55 s of t0.
    let check = scripted(35..65, Duration::ZERO);
    let (tx, mut reports) = mpsc::channel(16);
    let mut prober = Prober::new(check.clone(), 4, tx);
    // Past the prober's first period, new workers start without jitter.
    tokio::time::advance(Duration::from_secs(10)).await;
    let t0 = Instant::now();
    let pods = [(
        PodKey::new("dev", "a"),
        probed_pod("a", "192.168.169.166", seed_probe()),
    )];
    let mut book = ProbeBook::default();
    prober.sync(pods.iter().map(|(k, p)| (k, p)), &mut book);
    let mut seen = Vec::new();
    while seen.len() < 6 {
        let r = reports.recv().await.expect("a report");
        book.record(&r, []);
        seen.push((
            t0.elapsed().as_secs(),
            r.outcome.label(),
            r.verdict,
            r.changed,
        ));
    }
    assert_eq!(
        seen,
        [
            // Ticks at 0 and 10 s fall within the 15 s initial delay; the first run is at 20 s.
            (20, "success", Some(true), true),
            // Failing from 25 s: three failures make it not ready at 50 s,
            // within one period of the failure threshold being reached.
            (30, "failure", Some(true), false),
            (40, "failure", Some(true), false),
            (50, "failure", Some(false), true),
            // Passing again from 55 s: one success (successThreshold 1) makes it ready.
            (60, "success", Some(true), true),
            (70, "success", Some(true), false),
        ]
    );
    let key = PodKey::new("dev", "a");
    assert_eq!(book.explain(&key), None);
}

#[tokio::test(start_paused = true)]
async fn failing_since_is_what_explain_says() {
    let check = scripted(0..1000, Duration::ZERO);
    let (tx, mut reports) = mpsc::channel(16);
    let mut prober = Prober::new(check, 4, tx);
    tokio::time::advance(Duration::from_secs(10)).await;
    let mut probe = seed_probe();
    probe.initial_delay_seconds = 0;
    let pods = [(
        PodKey::new("dev", "a"),
        probed_pod("a", "192.168.169.166", probe),
    )];
    let mut book = ProbeBook::default();
    prober.sync(pods.iter().map(|(k, p)| (k, p)), &mut book);
    let key = PodKey::new("dev", "a");
    let first = reports.recv().await.expect("a report");
    book.record(&first, []);
    assert!(book
        .explain(&key)
        .expect("held back")
        .starts_with("not ready: readiness probe of container app has not passed yet"));
    for _ in 0..2 {
        let r = reports.recv().await.expect("a report");
        book.record(&r, []);
    }
    let text = book.explain(&key).expect("held back");
    let since = book::rfc3339(first.at);
    assert_eq!(
        text,
        format!(
            "not ready: readiness probe failing since {since} (GET \
             http://192.168.169.166:56010/hello: HTTP probe failed with statuscode: 503; 3 \
             failures in a row)"
        )
    );
}

#[tokio::test(start_paused = true)]
async fn probes_run_at_most_max_concurrent_at_once_and_spread_over_the_first_period() {
    let check = scripted(0..0, Duration::from_millis(500));
    let (tx, mut reports) = mpsc::channel(1024);
    let mut prober = Prober::new(check.clone(), 4, tx);
    let mut probe = seed_probe();
    probe.initial_delay_seconds = 0;
    let pods: Vec<(PodKey, Arc<Pod>)> = (0..40)
        .map(|i| {
            let name = format!("p{i}");
            (
                PodKey::new("dev", &name),
                probed_pod(&name, &format!("10.0.0.{i}"), probe.clone()),
            )
        })
        .collect();
    let t0 = Instant::now();
    prober.sync(pods.iter().map(|(k, p)| (k, p)), &mut ProbeBook::default());
    assert_eq!(prober.len(), 40);
    let mut first_runs = Vec::new();
    while first_runs.len() < 40 {
        reports.recv().await.expect("a report");
        first_runs.push(t0.elapsed());
    }
    assert_eq!(check.most_in_flight.load(Ordering::SeqCst), 4);
    // With jitter the first runs do not all land at once (40 runs of 0.5 s, 4 at a time, would
    // otherwise end in lock-step batches at 0.5 s, 1 s, …).
    let distinct: std::collections::BTreeSet<Duration> = first_runs.iter().copied().collect();
    assert!(distinct.len() > 10, "{first_runs:?}");
}

#[tokio::test(start_paused = true)]
async fn a_changed_probe_restarts_its_worker_and_withdraws_the_verdict() {
    let (tx, _reports) = mpsc::channel(16);
    let mut prober = Prober::new(scripted(0..0, Duration::ZERO), 4, tx);
    let key = PodKey::new("dev", "a");
    let mut book = ProbeBook::default();
    let pod = probed_pod("a", "10.0.0.1", seed_probe());
    assert!(prober.sync([(&key, &pod)], &mut book).is_empty());
    assert!(
        prober.sync([(&key, &pod)], &mut book).is_empty(),
        "unchanged: kept"
    );
    let mut other = seed_probe();
    other.period_seconds = 5;
    let changed = probed_pod("a", "10.0.0.1", other);
    let withdrawn = prober.sync([(&key, &changed)], &mut book);
    assert_eq!(withdrawn.len(), 1);
    assert_eq!(withdrawn[0].ready, None);
    let withdrawn = prober.sync([], &mut book);
    assert_eq!((withdrawn.len(), prober.len()), (1, 0));
}

#[tokio::test(start_paused = true)]
async fn exec_probes_are_not_run_and_say_so() {
    let (tx, _reports) = mpsc::channel(16);
    let mut prober = Prober::new(scripted(0..0, Duration::ZERO), 4, tx);
    let key = PodKey::new("dev", "a");
    let mut probe = seed_probe();
    probe.handler = ProbeHandler::Exec;
    let pod = probed_pod("a", "10.0.0.1", probe);
    let mut book = ProbeBook::default();
    prober.sync([(&key, &pod)], &mut book);
    assert!(prober.is_empty());
    let Some(ProbeStatus::NotRun { reason }) = book.get(&key, "app") else {
        panic!("not run: {:?}", book.get(&key, "app"))
    };
    assert!(
        reason.contains("not supported in standalone mode"),
        "{reason}"
    );
}

#[tokio::test(start_paused = true)]
async fn the_stage_turns_probe_verdicts_into_slice_updates() {
    use ferry_model::fixtures::{mk_node, mk_service, with_selector};
    use ferry_model::Object;

    use crate::pods::{self, StageOptions};
    use crate::SourceEvent;

    let (source, input) = mpsc::channel(4);
    let (output, mut state) = mpsc::channel(16);
    let book = Arc::new(std::sync::Mutex::new(ProbeBook::default()));
    let options = StageOptions {
        check: scripted(0..0, Duration::ZERO),
        max_concurrent: 4,
        book: book.clone(),
    };
    tokio::spawn(pods::run(input, output, options, |_| {}));
    let mut svc = with_selector(
        mk_service("dev", "url-analysis", "10.96.198.86", 8080),
        "url-analysis",
    );
    svc.ports[0].target_port = PortRef::Number(56010);
    let mut pod = (*probed_pod("a", "192.168.169.166", seed_probe())).clone();
    pod.containers[0].ready = None;
    let objects = vec![
        Object::from(svc),
        Object::from(mk_node("k8s-node2", "10.1.1.9", "192.168.169.128/26")),
        Object::from(pod),
    ];
    source
        .send(SourceEvent::Resync(objects))
        .await
        .expect("send");
    let ready = |event: &SourceEvent| -> Vec<bool> {
        let slices: Vec<&ferry_model::EndpointSlice> = match event {
            SourceEvent::Resync(objects) => objects
                .iter()
                .filter_map(|o| match o {
                    Object::EndpointSlice(s) => Some(&**s),
                    _ => None,
                })
                .collect(),
            SourceEvent::Apply(Object::EndpointSlice(s)) => vec![&**s],
            other => panic!("unexpected {other:?}"),
        };
        slices
            .iter()
            .flat_map(|s| s.endpoints.iter().map(|e| e.conditions.ready))
            .collect()
    };
    let t0 = Instant::now();
    let first = state.recv().await.expect("the resync");
    assert_eq!(ready(&first), [false], "not ready before its first probe");
    let next = state.recv().await.expect("a slice update");
    assert_eq!(ready(&next), [true]);
    // Not before the initial delay (15 s); at most one period (plus the start-up jitter) later.
    let waited = t0.elapsed();
    assert!(
        waited >= Duration::from_secs(15) && waited <= Duration::from_secs(35),
        "{waited:?}"
    );
    let book = book.lock().expect("book");
    let counted: Vec<_> = book.counters().map(|(s, c)| (s.to_string(), c)).collect();
    assert_eq!(counted, [("dev/url-analysis".to_owned(), (1, 0, 0))]);
}
