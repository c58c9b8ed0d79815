//! `manifest::load`: one read, no memory.

use std::path::Path;

use ferry_model::{Object, TrafficPolicy};

use super::{
    names, node_yaml, only_error, service_yaml, slice_yaml, temp_dir, texts, write, write_service,
};
use crate::manifest::load;

#[test]
fn multi_document_yaml_lists_json_and_nested_directories_are_read() {
    let dir = temp_dir();
    let root = dir.path();
    let deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\n";
    let config_map = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\ndata: {}\n";
    let doc_a = service_yaml("dev", "web", "10.96.0.10", 80);
    write(
        root,
        "a.yaml",
        &format!("{doc_a}---\n{deployment}---\n---\n{config_map}"),
    );
    write(
        root,
        "sub/b.yml",
        &format!(
            "apiVersion: v1\nkind: List\nitems:\n- {}- {}",
            indent(&service_yaml("dev", "api", "10.96.0.11", 81)),
            indent(&slice_yaml("dev", "web-abc", "web", "10.0.0.1")),
        ),
    );
    write(
        root,
        "sub/deeper/c.json",
        r#"{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"},
            "status": {"addresses": [{"type": "InternalIP", "address": "192.168.0.1"}]}}"#,
    );
    write(root, "notes.txt", "not a manifest");
    write_service(root, ".hidden/x.yaml", "hidden", "10.96.0.99", 80);

    let scan = load(root);
    assert_eq!(texts(&scan.errors), Vec::<String>::new());
    assert_eq!(
        names(&scan.objects),
        [
            "Service dev/api",
            "Service dev/web",
            "EndpointSlice dev/web-abc",
            "Node n1"
        ]
    );
}

/// Indents a YAML mapping as a list item's body.
fn indent(yaml: &str) -> String {
    let mut lines = yaml.lines();
    let first = lines.next().unwrap_or_default();
    let rest: String = lines.map(|l| format!("  {l}\n")).collect();
    format!("{first}\n{rest}")
}

#[test]
fn typed_list_items_take_their_kind_from_the_list() {
    let dir = temp_dir();
    write(
        dir.path(),
        "svc.json",
        r#"{"apiVersion": "v1", "kind": "ServiceList", "items": [
            {"metadata": {"name": "web", "namespace": "dev"},
             "spec": {"clusterIP": "10.96.0.10", "ports": [{"port": 80}]}}]}"#,
    );
    let scan = load(dir.path());
    assert_eq!(texts(&scan.errors), Vec::<String>::new());
    assert_eq!(names(&scan.objects), ["Service dev/web"]);
}

#[test]
fn a_bad_object_does_not_stop_the_others() {
    let dir = temp_dir();
    let bad = service_yaml("dev", "bad", "10.96.0.12", 70000);
    let good = service_yaml("dev", "good", "10.96.0.13", 80);
    write(dir.path(), "svc.yaml", &format!("{bad}---\n{good}"));
    let scan = load(dir.path());
    assert_eq!(names(&scan.objects), ["Service dev/good"]);
    let file = dir.path().join("svc.yaml");
    assert_eq!(
        texts(&scan.errors),
        [format!(
            "{}: Service dev/bad: spec.ports[0].port: must be between 1 and 65535, got 70000",
            file.display()
        )]
    );
}

#[test]
fn service_cidrs_are_read_and_a_bad_one_names_its_file_and_field() {
    let dir = temp_dir();
    let cidr = |name: &str, cidrs: &str| {
        format!(
            "apiVersion: networking.k8s.io/v1\nkind: ServiceCIDR\nmetadata:\n  name: {name}\n\
             spec:\n  cidrs: {cidrs}\n"
        )
    };
    let good = cidr("kubernetes", r#"["172.30.0.0/16", "fd00:172:30::/112"]"#);
    let bad = cidr("extra", r#"["172.31.0.0/16", "172.32.0.0/16"]"#);
    write(dir.path(), "cidrs.yaml", &format!("{good}---\n{bad}"));
    let scan = load(dir.path());
    assert_eq!(names(&scan.objects), ["ServiceCIDR kubernetes"]);
    let file = dir.path().join("cidrs.yaml");
    let error = only_error(&scan.errors);
    assert_eq!(error.file.as_deref(), Some(file.as_path()));
    assert_eq!(error.object.to_string(), "ServiceCIDR extra");
    assert_eq!(error.field, "spec.cidrs[1]");
}

#[test]
fn a_field_of_the_wrong_type_is_named() {
    let dir = temp_dir();
    let text = service_yaml("dev", "web", "10.96.0.10", 80).replace("port: 80", "port: eighty");
    write(dir.path(), "svc.yaml", &text);
    let scan = load(dir.path());
    assert!(scan.objects.is_empty());
    let error = only_error(&scan.errors);
    assert_eq!(error.object.to_string(), "Service dev/web");
    assert_eq!(error.field, "spec.ports[0].port");
}

#[test]
fn malformed_yaml_names_the_file_line_and_column_and_skips_only_that_file() {
    let dir = temp_dir();
    write_service(dir.path(), "a.yaml", "a", "10.96.0.10", 80);
    write(
        dir.path(),
        "b.yaml",
        "apiVersion: v1\nkind: Service\nmetadata: {name: [\n",
    );
    write_service(dir.path(), "c.yaml", "c", "10.96.0.12", 80);
    let scan = load(dir.path());
    assert_eq!(names(&scan.objects), ["Service dev/a", "Service dev/c"]);
    let error = only_error(&scan.errors);
    assert!(error.is_file_error());
    let text = error.to_string();
    let prefix = format!(
        "{}: not valid YAML: line ",
        dir.path().join("b.yaml").display()
    );
    assert!(text.starts_with(&prefix), "{text}");
    assert!(text.contains(", column "), "{text}");
}

#[test]
fn malformed_json_names_the_file() {
    let dir = temp_dir();
    write(dir.path(), "a.json", "{\"apiVersion\": \"v1\",");
    let scan = load(dir.path());
    let error = only_error(&scan.errors);
    assert!(
        error.to_string().contains("a.json: not valid JSON: "),
        "{error}"
    );
}

#[test]
fn documents_that_are_not_objects_are_reported() {
    let dir = temp_dir();
    write(
        dir.path(),
        "a.yaml",
        "- just\n- a list\n---\nmetadata: {name: x}\n",
    );
    let scan = load(dir.path());
    let errors = texts(&scan.errors);
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(errors[0].ends_with(
        "document 1: not a Kubernetes object (want a mapping with apiVersion and kind)"
    ));
    assert!(
        errors[1].ends_with("document 2: apiVersion must be set"),
        "{errors:?}"
    );
}

#[test]
fn slice_without_its_service_is_reported_and_skipped() {
    let dir = temp_dir();
    write(
        dir.path(),
        "a.yaml",
        &slice_yaml("dev", "web-abc", "web", "10.0.0.1"),
    );
    let scan = load(dir.path());
    assert!(scan.objects.is_empty());
    let error = only_error(&scan.errors);
    let want = "EndpointSlice dev/web-abc: metadata.labels[kubernetes.io/service-name]: Service \
                dev/web is not in the manifests";
    assert!(error.to_string().ends_with(want), "{error}");
}

#[test]
fn slice_of_an_ignored_or_invalid_service_is_not_dangling() {
    let dir = temp_dir();
    let headless = service_yaml("dev", "web", "None", 80);
    let invalid = service_yaml("dev", "api", "10.96.0.11", 0);
    let slices = [
        slice_yaml("dev", "web-abc", "web", "10.0.0.1"),
        slice_yaml("dev", "api-abc", "api", "10.0.0.2"),
    ];
    write(
        dir.path(),
        "a.yaml",
        &format!(
            "{headless}---\n{invalid}---\n{}---\n{}",
            slices[0], slices[1]
        ),
    );
    let scan = load(dir.path());
    assert_eq!(
        names(&scan.objects),
        ["EndpointSlice dev/api-abc", "EndpointSlice dev/web-abc"]
    );
    assert_eq!(
        scan.errors.len(),
        1,
        "only the invalid Service: {:?}",
        texts(&scan.errors)
    );
}

#[test]
fn endpoints_are_mirrored_and_need_their_service() {
    let dir = temp_dir();
    let endpoints = "apiVersion: v1\nkind: Endpoints\nmetadata:\n  name: web\n  namespace: dev\n\
                     subsets:\n- addresses: [{ip: 10.0.0.1, nodeName: n1}]\n  ports: [{name: http, port: 8080}]\n";
    write(dir.path(), "ep.yaml", endpoints);
    let scan = load(dir.path());
    let error = only_error(&scan.errors);
    assert!(
        error
            .to_string()
            .contains("Endpoints dev/web: metadata.name: Service dev/web"),
        "{error}"
    );

    write_service(dir.path(), "svc.yaml", "web", "10.96.0.10", 80);
    let scan = load(dir.path());
    assert_eq!(texts(&scan.errors), Vec::<String>::new());
    assert_eq!(
        names(&scan.objects),
        ["Service dev/web", "EndpointSlice dev/web-mirror-0"]
    );
}

#[test]
fn duplicate_objects_keep_the_first() {
    let dir = temp_dir();
    write_service(dir.path(), "a.yaml", "web", "10.96.0.10", 80);
    write_service(dir.path(), "b.yaml", "web", "10.96.0.10", 81);
    let scan = load(dir.path());
    assert_eq!(super::service_port(&scan.objects, "web"), Some(80));
    let text = only_error(&scan.errors).to_string();
    assert!(
        text.starts_with(&format!(
            "{}: Service dev/web: metadata.name: duplicate",
            dir.path().join("b.yaml").display()
        )),
        "{text}"
    );
}

#[test]
fn a_single_file_can_be_loaded_and_a_missing_path_is_reported() {
    let dir = temp_dir();
    write_service(dir.path(), "svc.txt", "web", "10.96.0.10", 80);
    assert_eq!(
        names(&load(&dir.path().join("svc.txt")).objects),
        ["Service dev/web"]
    );

    let scan = load(&dir.path().join("missing"));
    assert!(scan.objects.is_empty());
    let error = only_error(&scan.errors);
    assert!(
        error.is_file_error() && error.reason.starts_with("cannot read"),
        "{error}"
    );
}

#[test]
fn many_documents_fit_the_raised_budget() {
    let dir = temp_dir();
    let docs: Vec<String> = (0..1500)
        .map(|i| node_yaml(&format!("n{i}"), "192.168.0.1"))
        .collect();
    write(dir.path(), "nodes.yaml", &docs.join("---\n"));
    let scan = load(dir.path());
    assert_eq!(texts(&scan.errors), Vec::<String>::new());
    assert_eq!(scan.objects.len(), 1500);
}

#[test]
fn the_seed_example_loads() {
    let seed = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/seed");
    let scan = load(&seed);
    assert_eq!(texts(&scan.errors), Vec::<String>::new());
    assert_eq!(
        names(&scan.objects),
        [
            "Service dev/url-analysis",
            "EndpointSlice dev/url-analysis-7x2kq",
            "Node k8s-master",
            "Node k8s-node1",
            "Node k8s-node2",
        ]
    );
    for object in &scan.objects {
        match object {
            Object::Service(s) => {
                assert_eq!(
                    s.cluster_ips,
                    vec![ferry_model::fixtures::ip("10.96.198.86")]
                );
                assert_eq!(s.ports[0].node_port, Some(32223));
                assert_eq!(s.external_traffic_policy, TrafficPolicy::Cluster);
            }
            Object::EndpointSlice(s) => {
                assert_eq!(s.endpoints.len(), 2);
                assert!(s
                    .endpoints
                    .iter()
                    .all(|e| e.conditions.ready && e.node_name() == Some("k8s-node2")));
                assert_eq!(s.ports[0].port, 56010);
                assert!(s.trigger_time.is_some());
            }
            Object::Node(n) => assert_eq!(n.pod_cidrs.len(), 1, "{}", n.name),
            Object::Pod(p) => panic!("the seed has no Pod, got {}", p.name),
            Object::ServiceCidr(c) => panic!("the seed has no ServiceCIDR, got {}", c.name),
        }
    }
}

#[test]
fn objects_read_together_share_their_names_and_endpoint_locations() {
    let dir = temp_dir();
    for (file, svc, ip, addr) in [
        ("a.yaml", "a", "10.96.0.10", "10.0.0.1"),
        ("b.yaml", "b", "10.96.0.11", "10.0.0.2"),
    ] {
        let slice = slice_yaml("dev", &format!("{svc}-x"), svc, addr) + "  nodeName: node-1\n";
        let text = format!("{}---\n{slice}", service_yaml("dev", svc, ip, 80));
        write(dir.path(), file, &text);
    }
    let objects = load(dir.path()).objects;
    let services: Vec<_> = objects
        .iter()
        .filter_map(|o| match o {
            Object::Service(s) => Some(s.clone()),
            _ => None,
        })
        .collect();
    let slices: Vec<_> = objects
        .iter()
        .filter_map(|o| match o {
            Object::EndpointSlice(s) => Some(s.clone()),
            _ => None,
        })
        .collect();
    assert_eq!((services.len(), slices.len()), (2, 2), "{objects:?}");
    let dev = &services[0].name.namespace;
    for slice in &slices {
        assert!(
            std::sync::Arc::ptr_eq(&slice.namespace, dev),
            "one namespace string"
        );
        assert!(std::sync::Arc::ptr_eq(&slice.service.namespace, dev));
        let service = services.iter().find(|s| s.name == slice.service);
        let service = service.unwrap_or_else(|| panic!("no Service for {slice:?}"));
        assert!(
            std::sync::Arc::ptr_eq(&slice.service.name, &service.name.name),
            "the slice names its Service with the Service's own string"
        );
    }
    let location = |i: usize| slices[i].endpoints[0].location.clone();
    let (first, second) = (location(0), location(1));
    assert_eq!(
        first.as_ref().and_then(|l| l.node_name.as_deref()),
        Some("node-1")
    );
    assert!(
        matches!((&first, &second), (Some(x), Some(y)) if std::sync::Arc::ptr_eq(x, y)),
        "endpoints on one node share one location across slices and files"
    );
}

#[test]
fn identities_share_their_strings_with_the_objects_read_with_them() {
    use std::sync::Arc;
    let mut names = ferry_model::Interner::default();
    let mut read = |svc: &str, ip: &str| {
        let text = format!(
            "{}---\n{}",
            service_yaml("dev", svc, ip, 80),
            slice_yaml("dev", &format!("{svc}-x"), svc, "10.0.0.1")
        );
        match load::read_text(Path::new("f.yaml"), &text, &mut names) {
            load::FileRead::Docs(docs) => docs,
            _ => panic!("not read"),
        }
    };
    let (a, b) = (read("a", "10.96.0.10"), read("b", "10.96.0.11"));
    let id = |docs: &[load::Doc], i: usize| docs[i].id.clone().expect("an identity");
    let objects = |docs: &[load::Doc], i: usize| docs[i].outcome.clone().expect("valid");
    let (svc_a, slice_a, svc_b) = (id(&a, 0), id(&a, 1), id(&b, 0));
    assert!(Arc::ptr_eq(&svc_a.kind, &svc_b.kind), "one kind string");
    assert!(
        Arc::ptr_eq(&svc_a.namespace, &slice_a.namespace),
        "one namespace string"
    );
    match (&objects(&a, 0)[0], &objects(&a, 1)[0]) {
        (Object::Service(s), Object::EndpointSlice(e)) => {
            assert!(
                Arc::ptr_eq(&svc_a.name, &s.name.name),
                "the Service's own name"
            );
            assert!(Arc::ptr_eq(&slice_a.name, &e.name), "the slice's own name");
            assert!(Arc::ptr_eq(&svc_a.namespace, &e.namespace));
        }
        other => panic!("{other:?}"),
    }
}
