//! What explain says of readiness probes: offline, how the Pod is judged; with the agent's
//! results, the probe that holds an endpoint back.

use std::collections::BTreeMap;

use ferry_model::fixtures::*;
use ferry_model::{Object, Pod, TargetRef};
use ferry_source::SourceEvent;

use super::*;

fn probed(name: &str, running_and_ready: bool) -> Pod {
    let mut pod = mk_pod("dev", name, "web", "10.0.1.1", "node-a");
    let c = &mut pod.containers[0];
    c.readiness_probe = Some(mk_http_probe("/hello", 8080, 15, 10));
    c.ready = Some(running_and_ready);
    c.started_at = running_and_ready.then_some(1_714_557_600);
    pod
}

fn controller(pods: Vec<Pod>) -> EndpointController {
    let mut c = EndpointController::new();
    let objects = pods.into_iter().map(Object::from).collect();
    c.handle(SourceEvent::Resync(objects));
    c
}

fn candidate(pod: &str, not_ready: bool) -> Candidate {
    Candidate {
        addr: "10.0.1.1:8080".parse().expect("addr"),
        node: Some("node-a".into()),
        excluded: not_ready.then(|| "not ready".to_owned()),
        not_ready,
        target: Some(TargetRef::pod("dev".into(), pod.into())),
        note: None,
    }
}

#[test]
fn offline_a_probed_pod_is_said_to_be_judged_by_its_status() {
    let pods = controller(vec![probed("fresh", false), probed("running", true)]);
    let mut fresh = candidate("fresh", true);
    annotate_one(&mut fresh, &pods, &Probes::Offline);
    assert_eq!(fresh.excluded.as_deref(), Some("not ready"));
    assert_eq!(
        fresh.note.as_deref(),
        Some(
            "readiness probe of app (GET http://10.0.1.1:8080/hello) not run by explain: until \
             probed, the Pod counts as not ready (a probed container starts not ready unless its \
             status says it is running and ready); `ferry explain --live` on the node asks the \
             running agent"
        )
    );
    let mut running = candidate("running", false);
    annotate_one(&mut running, &pods, &Probes::Unavailable("down".into()));
    let note = running.note.expect("a note");
    assert!(
        note.contains("the Pod counts as ready (its status says it is running and ready); the agent could not be asked"),
        "{note}"
    );
}

#[test]
fn a_pod_without_a_probe_ferry_runs_gets_no_note() {
    let mut exec = probed("exec", true);
    exec.containers[0]
        .readiness_probe
        .as_mut()
        .expect("probe")
        .handler = ferry_model::ProbeHandler::Exec;
    let pods = controller(vec![
        exec,
        mk_pod("dev", "plain", "web", "10.0.1.2", "node-a"),
    ]);
    for name in ["exec", "plain", "unknown"] {
        let mut c = candidate(name, false);
        annotate_one(&mut c, &pods, &Probes::Offline);
        assert_eq!(c.note, None, "{name}");
    }
}

#[test]
fn with_the_agents_results_the_failing_probe_is_why_the_endpoint_is_out() {
    let failing = "not ready: readiness probe failing since 2024-05-01T10:00:10Z (GET \
                   http://10.0.1.1:8080/hello: HTTP probe failed with statuscode: 503; 3 \
                   failures in a row)";
    let agent = AgentProbes {
        verdicts: Vec::new(),
        reasons: BTreeMap::from([(PodKey::new("dev", "web-b"), failing.to_owned())]),
        lines: BTreeMap::from([(
            PodKey::new("dev", "web-b"),
            vec!["readiness probe of app (GET http://10.0.1.1:8080/hello): not ready".to_owned()],
        )]),
    };
    let pods = controller(Vec::new());
    let mut out = candidate("web-b", true);
    annotate_one(&mut out, &pods, &Probes::Agent(agent));
    assert_eq!(out.excluded.as_deref(), Some(failing));
    assert_eq!(
        out.note.as_deref(),
        Some("the agent's readiness probe of app (GET http://10.0.1.1:8080/hello): not ready")
    );
}

#[test]
fn a_wildcard_metrics_address_is_asked_on_loopback() {
    let at = |s: &str| reachable(s.parse().expect("address")).to_string();
    assert_eq!(at("0.0.0.0:10249"), "127.0.0.1:10249");
    assert_eq!(at("[::]:10249"), "[::1]:10249");
    assert_eq!(at("10.1.1.9:10249"), "10.1.1.9:10249");
}
