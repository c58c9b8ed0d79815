//! `convert::pod` (and the probe inside it), and the Service fields the Pod controller reads.

use ferry_model::fixtures::ip;
use ferry_model::{
    ContainerPort, HttpGetAction, HttpScheme, PodPhase, PortRef, ProbeHandler, Protocol,
};
use k8s_openapi::api::core::v1::{Pod, Service};
use serde_json::{json, Value};

use super::{assert_rejected, from_json};
use crate::convert::{pod, service};

const POD: &str = "Pod dev/url-analysis-4rt9d";

/// The seed's url-analysis pod on k8s-node2, with its readiness probe, running and ready.
fn seed_pod() -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "url-analysis-4rt9d", "namespace": "dev",
                     "labels": {"app": "url-analysis"}},
        "spec": {
            "nodeName": "k8s-node2",
            "containers": [{
                "name": "url-analysis", "image": "addenda1998/url-analysis:v1.0",
                "ports": [{"name": "http", "containerPort": 56010}],
                "readinessProbe": {"httpGet": {"path": "/hello", "port": 56010},
                                   "initialDelaySeconds": 15, "periodSeconds": 10},
            }],
        },
        "status": {
            "phase": "Running", "podIP": "192.168.169.166",
            "podIPs": [{"ip": "192.168.169.166"}],
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{"name": "url-analysis", "ready": true, "restartCount": 0,
                                   "image": "", "imageID": "",
                                   "state": {"running": {"startedAt": "2021-11-21T13:03:14Z"}}}],
        },
    })
}

/// `value` with the field at `pointer` set (added to its parent object if missing).
fn with(mut value: Value, pointer: &str, new: Value) -> Value {
    let (parent, key) = pointer.rsplit_once('/').expect("a pointer");
    let parent = value.pointer_mut(parent).expect("parent in the seed pod");
    match parent {
        Value::Object(map) => {
            map.insert(key.to_owned(), new);
        }
        other => *other.pointer_mut(&format!("/{key}")).expect("array entry") = new,
    }
    value
}

fn rejected(value: Value, field: &str, reason: &str) {
    assert_rejected(pod(&from_json::<Pod>(value)), POD, field, reason);
}

#[test]
fn the_seed_pod_converts_with_its_probe_and_status() {
    let converted = pod(&from_json(seed_pod())).expect("valid");
    assert_eq!(converted.labels.get("app"), Some("url-analysis"));
    assert_eq!(converted.node_name.as_deref(), Some("k8s-node2"));
    assert_eq!(converted.ips, vec![ip("192.168.169.166")]);
    assert_eq!(converted.phase, PodPhase::Running);
    assert!(converted.ready);
    assert_eq!(converted.deletion_timestamp, None);
    let c = &converted.containers[0];
    assert_eq!(
        c.ports,
        vec![ContainerPort {
            name: "http".into(),
            port: 56010,
            protocol: Protocol::Tcp
        }]
    );
    assert_eq!((c.ready, c.started_at), (Some(true), Some(1_637_499_794)));
    let want = ferry_model::fixtures::mk_http_probe("/hello", 56010, 15, 10);
    assert_eq!(c.readiness_probe, Some(want));
}

#[test]
fn a_pod_without_status_has_no_ip_and_is_not_ready() {
    let mut value = seed_pod();
    value.as_object_mut().expect("object").remove("status");
    let converted = pod(&from_json(value)).expect("valid");
    assert!(converted.ips.is_empty());
    assert!(!converted.ready);
    assert_eq!(converted.phase, PodPhase::Unknown);
}

#[test]
fn sidecars_come_after_the_containers_and_plain_init_containers_are_left_out() {
    let value = with(
        seed_pod(),
        "/spec/initContainers",
        json!([{"name": "init", "ports": [{"name": "x", "containerPort": 1}]},
               {"name": "proxy", "restartPolicy": "Always",
                "ports": [{"name": "admin", "containerPort": 9901}]}]),
    );
    let converted = pod(&from_json(value)).expect("valid");
    let names: Vec<(&str, bool)> = converted
        .containers
        .iter()
        .map(|c| (&*c.name, c.sidecar))
        .collect();
    assert_eq!(names, [("url-analysis", false), ("proxy", true)]);
}

#[test]
fn probe_handlers_and_defaults_convert() {
    let cases = [
        (
            json!({"tcpSocket": {"port": "http"}}),
            ProbeHandler::TcpSocket {
                host: None,
                port: PortRef::Name("http".into()),
            },
        ),
        (
            json!({"grpc": {"port": 9090, "service": "ready"}}),
            ProbeHandler::Grpc {
                port: 9090,
                service: "ready".into(),
            },
        ),
        (json!({"exec": {"command": ["true"]}}), ProbeHandler::Exec),
        (
            json!({"httpGet": {"scheme": "HTTPS", "host": "10.0.0.1", "path": "healthz",
                              "port": "http",
                              "httpHeaders": [{"name": "X-Probe", "value": "ferry"}]}}),
            ProbeHandler::HttpGet(HttpGetAction {
                scheme: HttpScheme::Https,
                host: Some("10.0.0.1".into()),
                path: "/healthz".into(),
                port: PortRef::Name("http".into()),
                headers: vec![("X-Probe".into(), "ferry".into())],
            }),
        ),
    ];
    for (probe, handler) in cases {
        let value = with(seed_pod(), "/spec/containers/0/readinessProbe", probe);
        let converted = pod(&from_json(value)).expect("valid");
        let probe = converted.containers[0]
            .readiness_probe
            .clone()
            .expect("probe");
        assert_eq!(probe.handler, handler);
        assert_eq!(
            (
                probe.initial_delay_seconds,
                probe.period_seconds,
                probe.timeout_seconds
            ),
            (0, 10, 1)
        );
        assert_eq!((probe.success_threshold, probe.failure_threshold), (1, 3));
    }
}

#[test]
fn bad_fields_are_named() {
    let probe = "/spec/containers/0/readinessProbe";
    let cases: Vec<(Value, &str, &str)> = vec![
        (
            with(seed_pod(), "/spec/containers", json!([])),
            "spec.containers",
            "at least one",
        ),
        (
            with(seed_pod(), "/spec/containers/0/name", json!("")),
            "spec.containers[0].name",
            "must be set",
        ),
        (
            with(
                seed_pod(),
                "/spec/containers/0/ports/0/containerPort",
                json!(0),
            ),
            "spec.containers[0].ports[0].containerPort",
            "between 1 and 65535",
        ),
        (
            with(seed_pod(), "/spec/containers/0/ports/0/name", json!("HTTP")),
            "spec.containers[0].ports[0].name",
            "port name",
        ),
        (
            with(
                seed_pod(),
                "/spec/containers/0/ports/0/protocol",
                json!("ICMP"),
            ),
            "spec.containers[0].ports[0].protocol",
            "ICMP",
        ),
        (
            with(seed_pod(), "/status/podIP", json!("192.168.169.999")),
            "status.podIP",
            "IP address",
        ),
        (
            with(seed_pod(), "/status/podIP", json!("192.168.169.1")),
            "status.podIP",
            "must equal status.podIPs[0]",
        ),
        (
            with(
                seed_pod(),
                "/status/podIPs",
                json!([{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}]),
            ),
            "status.podIPs[1].ip",
            "one IP per family",
        ),
        (
            with(seed_pod(), "/status/phase", json!("Sleeping")),
            "status.phase",
            "Sleeping",
        ),
        (
            with(seed_pod(), probe, json!({"periodSeconds": 5})),
            "spec.containers[0].readinessProbe",
            "must have one of",
        ),
        (
            with(
                seed_pod(),
                probe,
                json!({"exec": {}, "tcpSocket": {"port": 1}}),
            ),
            "spec.containers[0].readinessProbe",
            "only one",
        ),
        (
            with(
                seed_pod(),
                &format!("{probe}/httpGet/port"),
                json!("no_such"),
            ),
            "spec.containers[0].readinessProbe.httpGet.port",
            "port name",
        ),
        (
            with(seed_pod(), &format!("{probe}/httpGet/scheme"), json!("FTP")),
            "spec.containers[0].readinessProbe.httpGet.scheme",
            "FTP",
        ),
        (
            with(
                seed_pod(),
                &format!("{probe}/httpGet/httpHeaders"),
                json!([{"name": "a b", "value": ""}]),
            ),
            "spec.containers[0].readinessProbe.httpGet.httpHeaders[0].name",
            "header name",
        ),
        (
            with(seed_pod(), &format!("{probe}/periodSeconds"), json!(-1)),
            "spec.containers[0].readinessProbe.periodSeconds",
            "greater than or equal to 1",
        ),
        (
            with(
                seed_pod(),
                &format!("{probe}/initialDelaySeconds"),
                json!(-5),
            ),
            "spec.containers[0].readinessProbe.initialDelaySeconds",
            "greater than or equal to 0",
        ),
        (
            with(seed_pod(), probe, json!({"grpc": {"port": 70000}})),
            "spec.containers[0].readinessProbe.grpc.port",
            "between 1 and 65535",
        ),
    ];
    for (value, field, reason) in cases {
        rejected(value, field, reason);
    }
}

#[test]
fn duplicate_container_and_port_names_are_named() {
    let two = |a: Value, b: Value| with(seed_pod(), "/spec/containers", json!([a, b]));
    let c = |name: &str, port: &str| json!({"name": name, "ports": [{"name": port, "containerPort": 80}]});
    rejected(
        two(c("a", "x"), c("a", "y")),
        "spec.containers[1].name",
        "duplicate name \"a\"",
    );
    rejected(
        two(c("a", "x"), c("b", "x")),
        "spec.containers[1].ports[0].name",
        "duplicate name \"x\"",
    );
}

fn service_spec(extra: Value) -> Service {
    let mut spec = json!({"clusterIP": "10.96.0.10", "ports": [{"name": "http", "port": 80}]});
    if let (Some(spec), Value::Object(extra)) = (spec.as_object_mut(), extra) {
        spec.extend(extra);
    }
    from_json(json!({"apiVersion": "v1", "kind": "Service",
                     "metadata": {"name": "web", "namespace": "dev"}, "spec": spec}))
}

#[test]
fn a_service_keeps_its_selector_target_ports_and_publish_not_ready_addresses() {
    let svc = service(&service_spec(json!({
        "selector": {"app": "web"}, "publishNotReadyAddresses": true,
        "ports": [{"name": "http", "port": 80, "targetPort": "http"},
                  {"name": "dns", "port": 53, "protocol": "UDP"}],
    })))
    .expect("valid")
    .expect("not ignored");
    assert_eq!(
        svc.selector.map(|s| s.to_string()).as_deref(),
        Some("app=web")
    );
    assert!(svc.publish_not_ready_addresses);
    let targets: Vec<PortRef> = svc.ports.iter().map(|p| p.target_port.clone()).collect();
    assert_eq!(targets, [PortRef::Name("http".into()), PortRef::Number(53)]);
}

#[test]
fn an_empty_selector_is_no_selector_and_a_bad_target_port_is_named() {
    let svc = service(&service_spec(json!({"selector": {}})))
        .expect("valid")
        .expect("not ignored");
    assert_eq!(svc.selector, None);
    let bad = service_spec(json!({"ports": [{"name": "http", "port": 80, "targetPort": "8080"}]}));
    assert_rejected(
        service(&bad),
        "Service dev/web",
        "spec.ports[0].targetPort",
        "port name",
    );
}

#[test]
fn hostname_and_subdomain_are_read_for_the_endpoints_hostname() {
    let converted = pod(&from_json(seed_pod())).expect("valid");
    assert_eq!((converted.hostname, converted.subdomain), (None, None));
    let named = with(seed_pod(), "/spec/hostname", json!("url-0"));
    let named = with(named, "/spec/subdomain", json!("url-analysis"));
    let converted = pod(&from_json(named)).expect("valid");
    assert_eq!(converted.hostname.as_deref(), Some("url-0"));
    assert_eq!(converted.subdomain.as_deref(), Some("url-analysis"));
}
