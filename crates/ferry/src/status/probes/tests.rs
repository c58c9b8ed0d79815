//! Probes in the status: each backend names its Pod and shows its probes; a probe that holds
//! an endpoint back is why it is not used; `ferry explain --live` reads it all back.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use ferry_compile::NodeCompiler;
use ferry_dataplane::live::KernelReport;
use ferry_model::fixtures::*;
use ferry_model::{IpFamily, NodeContext, Object, Pod, ServiceName};
use ferry_source::pods::{EndpointController, PodKey, ReadinessUpdate};
use ferry_source::probe::{Outcome, ProbeBook, ProbeReport};
use ferry_source::SourceEvent;

use super::super::build::frontends_of;
use super::super::{text, SourceStatus, Status};
use super::*;
use crate::config::Config;

const T0: u64 = 1_714_557_600; // 2024-05-01T10:00:00Z

fn probed(name: &str, ip: &str) -> Pod {
    let mut pod = mk_pod("dev", name, "web", ip, "k8s-node2");
    pod.containers[0].readiness_probe = Some(mk_http_probe("/hello", 8080, 0, 10));
    pod
}

/// dev/web: port 80 → 8080 of the Pods labelled app=web.
fn web() -> ferry_model::Service {
    let mut svc = with_selector(mk_service("dev", "web", "172.30.0.10", 80), "web");
    svc.ports[0].target_port = ferry_model::PortRef::Number(8080);
    svc
}

fn key(name: &str) -> PodKey {
    PodKey::new("dev", name)
}

fn report(pod: &str, outcome: Outcome, secs: u64, run: u32, verdict: bool) -> ProbeReport {
    ProbeReport {
        pod: key(pod),
        container: "app".into(),
        outcome,
        at: SystemTime::UNIX_EPOCH + Duration::from_secs(T0 + secs),
        run,
        verdict: Some(verdict),
        changed: false,
    }
}

/// dev/web selecting web-a (probe passing) and web-b (failing three times since T0 + 10 s),
/// as the agent's Pod stage would have recorded them.
fn book() -> ProbeBook {
    let mut book = ProbeBook::default();
    let web = [ServiceName::new("dev", "web")];
    for (pod, ip) in [("web-a", "10.0.1.1"), ("web-b", "10.0.1.2")] {
        book.probing(&key(pod), "app", format!("GET http://{ip}:8080/hello"));
    }
    book.record(&report("web-a", Outcome::Success, 0, 1, true), &web);
    let fail = || Outcome::Failure("HTTP probe failed with statuscode: 503".into());
    for (i, secs) in [10, 20, 30].into_iter().enumerate() {
        book.record(&report("web-b", fail(), secs, i as u32 + 1, false), &web);
    }
    book
}

/// The state the agent programs: the Pods' slices, web-b judged not ready by its probe.
fn frontends(book: Option<&ProbeBook>) -> Vec<super::super::Frontend> {
    let mut controller = EndpointController::new();
    let objects = vec![
        Object::from(web()),
        Object::from(mk_node("k8s-node2", "192.168.0.2", "10.0.1.0/24")),
        Object::from(probed("web-a", "10.0.1.1")),
        Object::from(probed("web-b", "10.0.1.2")),
    ];
    let mut events = controller.handle(SourceEvent::Resync(objects)).events;
    for (pod, ready) in [("web-a", true), ("web-b", false)] {
        let update = ReadinessUpdate {
            pod: key(pod),
            container: "app".into(),
            ready: Some(ready),
        };
        events.extend(controller.readiness(&update).events);
    }
    let state = crate::rules::state_of(events);
    let context = NodeContext {
        node_name: "k8s-node2".into(),
        family: IpFamily::V4,
    };
    let config = Config {
        node_name: "k8s-node2".into(),
        ..Config::default()
    };
    let compile = config.compile_config(IpFamily::V4);
    let compiler = NodeCompiler::new(&state, &context, &compile);
    let view = compiler.view(&state);
    let kernel = Ok(KernelReport {
        present: true,
        services: BTreeMap::from([(ServiceName::new("dev", "web"), Vec::new())]),
        stray: Vec::new(),
    });
    frontends_of(&view, &compiler.plan_of(&view), &kernel, book)
}

#[test]
fn each_backend_names_its_pod_and_shows_its_probe() {
    let book = book();
    let fs = frontends(Some(&book));
    let [a, b] = &fs[0].backends[..] else {
        panic!("two backends: {fs:?}")
    };
    assert_eq!(a.pod.as_deref(), Some("dev/web-a"));
    assert!(a.used);
    assert_eq!(a.probes[0].state, READY);
    assert_eq!(a.probes[0].last_result.as_deref(), Some("success"));
    assert_eq!(a.probes[0].reason, None);

    assert!(!b.used);
    let why = "not ready: readiness probe failing since 2024-05-01T10:00:10Z (GET \
               http://10.0.1.2:8080/hello: HTTP probe failed with statuscode: 503; 3 failures in \
               a row)";
    assert_eq!(b.excluded.as_deref(), Some(why));
    let p = &b.probes[0];
    assert_eq!(
        (p.state.as_str(), p.in_a_row, p.failing_since.as_deref()),
        (NOT_READY, 3, Some("2024-05-01T10:00:10Z"))
    );
    assert_eq!(p.last_time.as_deref(), Some("2024-05-01T10:00:30Z"));
}

#[test]
fn without_the_book_backends_still_name_their_pod() {
    let fs = frontends(None);
    let b = &fs[0].backends[1];
    assert_eq!(b.pod.as_deref(), Some("dev/web-b"));
    assert_eq!(b.excluded.as_deref(), Some("not ready"));
    assert!(b.probes.is_empty());
}

fn status(book: &ProbeBook) -> Status {
    Status {
        version: "0".into(),
        node: "k8s-node2".into(),
        mode: "nftables mode".into(),
        source: SourceStatus {
            description: "manifests m".into(),
            problem: None,
        },
        families: Vec::new(),
        conntrack: Vec::new(),
        frontends: frontends(Some(book)),
    }
}

#[test]
fn the_text_shows_each_probe_under_its_backend() {
    let text = text::render(&status(&book()));
    assert!(
        text.contains(
            "    => 10.0.1.1:8080         ready, local (node k8s-node2, Pod dev/web-a)\n          \
             readiness probe of app (GET http://10.0.1.1:8080/hello): ready; last success \
             2024-05-01T10:00:00Z (1 in a row)\n"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "(node k8s-node2, Pod dev/web-b): not used: not ready: readiness probe failing since \
             2024-05-01T10:00:10Z"
        ),
        "{text}"
    );
    assert!(
        text.contains(
            "readiness probe of app (GET http://10.0.1.2:8080/hello): not ready; last failure \
             2024-05-01T10:00:30Z: HTTP probe failed with statuscode: 503 (3 in a row); failing \
             since 2024-05-01T10:00:10Z\n"
        ),
        "{text}"
    );
}

#[test]
fn explain_reads_the_verdicts_and_reasons_back_from_the_json() {
    let json = serde_json::to_string(&status(&book())).expect("json");
    let back: Status = serde_json::from_str(&json).expect("parse");
    let probes = from_status(&back);
    let verdict = |pod: &str, ready| ReadinessUpdate {
        pod: key(pod),
        container: "app".into(),
        ready,
    };
    assert_eq!(
        probes.verdicts,
        [verdict("web-a", Some(true)), verdict("web-b", Some(false))]
    );
    assert_eq!(probes.reasons.keys().collect::<Vec<_>>(), [&key("web-b")]);
    assert!(probes.reasons[&key("web-b")].starts_with("not ready: readiness probe failing since"));
}

#[test]
fn an_exec_probe_is_shown_as_not_run_and_holds_nothing_back() {
    let mut book = book();
    book.not_run(
        &key("web-a"),
        "sidecar",
        "exec probes are not supported".into(),
    );
    let p = &of_pod(&book, &key("web-a"))[1];
    assert_eq!(
        p.describe(),
        "readiness probe of sidecar: not run: exec probes are not supported"
    );
    let probes = from_status(&status(&book));
    assert_eq!(probes.reasons.len(), 1);
    assert_eq!(probes.verdicts.len(), 3);
}
