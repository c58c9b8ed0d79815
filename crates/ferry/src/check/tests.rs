use std::path::Path;

use super::*;

fn run_check(files: &[(&str, &str)], flags: impl FnOnce(&mut RunArgs)) -> (Report, Vec<String>) {
    let dir = tempfile::tempdir().expect("tempdir");
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).expect("write");
    }
    let mut args = RunArgs {
        manifests: Some(dir.path().to_path_buf()),
        hostname_override: Some("k8s-node1".to_owned()),
        cluster_cidr: Some("10.0.0.0/8".to_owned()),
        ..RunArgs::default()
    };
    flags(&mut args);
    let report = check(&args);
    let prefix = format!("{}/", dir.path().display());
    let lines = report
        .findings
        .iter()
        .map(|f| f.to_string().replace(&prefix, ""))
        .collect();
    (report, lines)
}

const SVC_A: &str = "apiVersion: v1\nkind: Service\nmetadata: {name: a, namespace: dev}\nspec:\n  type: NodePort\n  clusterIP: 10.96.0.10\n  ports: [{name: http, port: 80, nodePort: 30080}]\n";

fn has(lines: &[String], needle: &str) -> bool {
    lines.iter().any(|l| l.contains(needle))
}

#[test]
fn duplicate_cluster_ips_and_node_ports_across_services_are_errors_naming_both() {
    let b = "apiVersion: v1\nkind: Service\nmetadata: {name: b, namespace: dev}\nspec:\n  type: NodePort\n  clusterIP: 10.96.0.10\n  ports: [{name: http, port: 81, nodePort: 30080}]\n";
    let (report, lines) = run_check(&[("svc.yaml", &format!("{SVC_A}---\n{b}"))], |_| {});
    assert!(
        has(&lines, "error: svc.yaml: document 2: Service dev/b: spec.clusterIPs[0]: 10.96.0.10 is already the ClusterIP of Service dev/a (")
            && has(&lines, "svc.yaml: document 1)"),
        "{lines:#?}"
    );
    assert!(
        has(
            &lines,
            "Service dev/b: spec.ports[0].nodePort: 30080 is already a NodePort of Service dev/a"
        ),
        "{lines:#?}"
    );
    assert_eq!(report.errors(), 2, "{lines:#?}");
}

#[test]
fn a_node_port_of_a_service_named_like_the_start_of_the_holders_name_is_an_error() {
    // The holder dev/ab, then dev/a: not the same Service, though one name starts the other.
    let ab = SVC_A
        .replace("name: a,", "name: ab,")
        .replace("10.96.0.10", "10.96.0.12");
    let (report, lines) = run_check(&[("svc.yaml", &format!("{ab}---\n{SVC_A}"))], |_| {});
    assert!(
        has(
            &lines,
            "Service dev/a: spec.ports[0].nodePort: 30080 is already a NodePort of Service dev/ab"
        ),
        "{lines:#?}"
    );
    assert_eq!(report.errors(), 1, "{lines:#?}");
}

#[test]
fn misspelled_fields_name_the_likely_field_and_every_error_of_an_object_is_reported() {
    let bad = "apiVersion: v1\nkind: Service\nmetadata: {name: bad, namespace: dev}\nspec:\n  type: NodePort\n  clusterIP: 10.96.0.11\n  clusterIp: 10.96.0.11\n  externalTrafficPolicy: Sometimes\n  sessionAffinity: Sticky\n  ports: [{name: http, port: 80, nodePort: 30081, nodeport: 30081}]\n";
    let (_, lines) = run_check(&[("bad.yaml", bad)], |_| {});
    assert!(has(&lines, "error: bad.yaml: document 1: Service dev/bad: spec.clusterIp: unknown field of Service (did you mean \"clusterIP\"?)"), "{lines:#?}");
    assert!(
        has(
            &lines,
            "spec.ports[0].nodeport: unknown field of Service (did you mean \"nodePort\"?)"
        ),
        "{lines:#?}"
    );
    assert!(
        has(&lines, "Service dev/bad: spec.externalTrafficPolicy: "),
        "{lines:#?}"
    );
    assert!(
        has(&lines, "Service dev/bad: spec.sessionAffinity: "),
        "{lines:#?}"
    );
}

#[test]
fn slice_port_names_no_service_port_has_are_warnings() {
    let slice = "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: a-1\n  namespace: dev\n  labels: {kubernetes.io/service-name: a}\naddressType: IPv4\nports: [{name: htp, port: 8080}]\nendpoints: [{addresses: [10.0.0.5]}]\n";
    let (report, lines) = run_check(&[("a.yaml", &format!("{SVC_A}---\n{slice}"))], |_| {});
    assert!(has(&lines, "warning: a.yaml: document 2: EndpointSlice dev/a-1: ports[0].name: \"htp\" is not the name of a port of Service dev/a (its ports: \"http\")"), "{lines:#?}");
    assert_eq!(report.errors(), 0, "{lines:#?}");
}

#[test]
fn an_unknown_node_is_named_with_the_likely_one() {
    let node = "apiVersion: v1\nkind: Node\nmetadata: {name: k8s-node2}\nstatus:\n  addresses: [{type: InternalIP, address: 10.1.1.9}]\n";
    let (_, lines) = run_check(&[("n.yaml", node), ("s.yaml", SVC_A)], |a| {
        a.hostname_override = Some("k8s-node3".to_owned());
    });
    assert!(has(&lines, "warning: no Node named \"k8s-node3\" in the manifests; they define k8s-node2 (did you mean \"k8s-node2\"?): this node's addresses, pod CIDR and zone are unknown"), "{lines:#?}");
}

#[test]
fn empty_inputs_are_said() {
    let (report, lines) = run_check(&[], |_| {});
    assert!(has(&lines, "no manifests here"), "{lines:#?}");
    assert_eq!(report.errors(), 0);
    let (_, lines) = run_check(&[("empty.yaml", "")], |_| {});
    assert!(has(&lines, "no manifests here"), "{lines:#?}");
}

#[test]
fn the_summary_names_the_running_mode() {
    let (report, _) = run_check(&[("s.yaml", SVC_A)], |a| {
        a.proxy_mode = Some("iptables".to_owned())
    });
    assert!(
        report.summary[0].ends_with("node k8s-node1, iptables mode (--proxy-mode)"),
        "{:?}",
        report.summary
    );
    let json = to_json(&report);
    assert_eq!(json["ok"], true);
    assert_eq!(json["objects"]["Services"], 1);
}

#[test]
fn the_seed_checks_clean() {
    let seed = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/seed");
    let report = check(&RunArgs {
        manifests: Some(seed),
        hostname_override: Some("k8s-node2".to_owned()),
        cluster_cidr: Some("192.168.0.0/16".to_owned()),
        ..RunArgs::default()
    });
    assert_eq!(report.findings, Vec::new());
}

#[test]
fn skipped_objects_each_port_and_a_duplicate_clusterip_once_are_reported() {
    let docs = "apiVersion: v1\nkind: Service\nmetadata: {name: a, namespace: dev}\nspec:\n  \
                type: NodePort\n  clusterIP: 10.96.0.5\n  ports:\n  \
                - {name: px, port: 80, nodePort: 99999}\n  \
                - {name: py, port: 81, nodePort: 30081, protocol: TPC}\n\
                ---\napiVersion: v2\nkind: Service\nmetadata: {name: c, namespace: dev}\n\
                ---\napiVersion: v1\nkind: Servce\nmetadata: {name: d, namespace: dev}\n\
                ---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: e, namespace: dev}\n\
                ---\napiVersion: v1\nkind: Service\nmetadata: {name: f, namespace: dev}\n\
                spec:\n  clusterIP: 10.96.0.9\n  ports:\n  - {port: 80}\n\
                ---\napiVersion: v1\nkind: Service\nmetadata: {name: g, namespace: dev}\n\
                spec:\n  clusterIP: 10.96.0.9\n  ports:\n  - {port: 80}\n";
    let (_, lines) = run_check(&[("s.yaml", docs)], |_| {});
    for want in [
        "Service dev/a: spec.ports[0].nodePort: must be between 1 and 65535, got 99999",
        "Service dev/a: spec.ports[1].protocol: unsupported protocol \"TPC\"",
        "warning: s.yaml: document 2: Service dev/c: apiVersion: skipped: Ferry reads Service of apiVersion v1, not \"v2\"",
        "warning: s.yaml: document 3: Servce dev/d: kind: skipped: \"Servce\" is not a kind Ferry reads (did you mean Service?)",
    ] {
        assert!(has(&lines, want), "{want}: {lines:#?}");
    }
    assert!(!has(&lines, "Deployment"), "{lines:#?}");
    let dup = lines.iter().filter(|l| l.contains("Service dev/g")).count();
    assert_eq!(dup, 1, "{lines:#?}");
}
