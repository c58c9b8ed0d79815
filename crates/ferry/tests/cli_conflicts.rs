//! Addresses and ports written twice in manifests, through the binary: `ferry check` names
//! every conflict, `ferry rules` renders the first Service and skips the other, naming it. No
//! root needed (neither command touches the kernel).

use std::path::Path;
use std::process::Command;

/// Runs ferry on `dir`; exit code, stdout, stderr.
fn ferry(command: &str, dir: &Path) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ferry"))
        .args([command, "--hostname-override", "n1", "--manifests"])
        .arg(dir)
        .output()
        .expect("run ferry");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A Service `dev/name` on ClusterIP `ip` with `spec` (YAML flow entries) and `status`.
fn service(name: &str, ip: &str, spec: &str, status: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Service\nmetadata: {{name: {name}, namespace: dev}}\n\
         spec: {{clusterIP: {ip}, {spec}}}\nstatus: {{{status}}}\n"
    )
}

#[test]
fn a_node_port_or_external_frontend_written_twice_is_named_and_the_first_kept() {
    let dir = tempfile::tempdir().expect("tempdir");
    let http = |port: u16, node_port: u16| {
        format!("ports: [{{name: http, port: {port}, nodePort: {node_port}}}]")
    };
    let files = [
        // The holder: a node port and an external frontend.
        (
            "a.yaml",
            service("a", "10.96.0.10", &format!("type: NodePort, externalIPs: [192.0.2.1], {}", http(80, 30080)), ""),
        ),
        // Its external IP and port.
        (
            "b.yaml",
            service("b", "10.96.0.11", "externalIPs: [192.0.2.1], ports: [{name: http, port: 80}]", ""),
        ),
        // Its node port, for UDP; the external IP on another port is fine.
        (
            "c.yaml",
            service("c", "10.96.0.12", "type: NodePort, externalIPs: [192.0.2.1], ports: [{name: dns, port: 443, protocol: UDP, nodePort: 30080}]", ""),
        ),
        // Its external IP and port as a load-balancer IP (after an entry without an IP).
        (
            "d.yaml",
            service("d", "10.96.0.13", &format!("type: LoadBalancer, {}", http(80, 30081)),
                "loadBalancer: {ingress: [{hostname: lb.example}, {ip: 192.0.2.1}]}"),
        ),
        // One node port for TCP and UDP in one Service: legal.
        (
            "e.yaml",
            service("e", "10.96.0.14", "type: NodePort, ports: [{name: dns-tcp, port: 53, nodePort: 30053}, {name: dns, port: 53, protocol: UDP, nodePort: 30053}]", ""),
        ),
        // e's ClusterIP and port as an external IP (which the API server lets through).
        (
            "f.yaml",
            service("f", "10.96.0.15", "externalIPs: [10.96.0.14], ports: [{name: dns-tcp, port: 53}]", ""),
        ),
    ];
    for (name, text) in &files {
        std::fs::write(dir.path().join(name), text).expect("write");
    }

    let (code, stdout, stderr) = ferry("check", dir.path());
    eprintln!("{stdout}");
    assert_eq!(code, 1, "{stdout}{stderr}");
    for needle in [
        "Service dev/b: spec.externalIPs[0]: 192.0.2.1 with port 80/TCP (spec.ports[0]) is \
         already a ClusterIP, external or load-balancer IP and port of Service dev/a (",
        "Service dev/c: spec.ports[0].nodePort: 30080 is already a NodePort of Service dev/a",
        "Service dev/d: status.loadBalancer.ingress[1].ip: 192.0.2.1 with port 80/TCP",
        "Service dev/f: spec.externalIPs[0]: 10.96.0.14 with port 53/TCP (spec.ports[0]) is \
         already a ClusterIP, external or load-balancer IP and port of Service dev/e (",
        "ferry check: 4 problem(s)",
    ] {
        assert!(stdout.contains(needle), "{needle}\n{stdout}");
    }

    let (code, stdout, stderr) = ferry("rules", dir.path());
    eprintln!("{stderr}");
    assert_eq!(code, 0, "{stderr}");
    for needle in [
        "b.yaml: Service dev/b: spec.externalIPs[0]: external IP 192.0.2.1 with port 80/TCP \
         (spec.ports[0]) is already Service dev/a's (in ",
        "c.yaml: Service dev/c: spec.ports[0].nodePort: NodePort 30080 is already Service \
         dev/a's (in ",
        "d.yaml: Service dev/d: status.loadBalancer.ingress: load-balancer IP 192.0.2.1 with \
         port 80/TCP (spec.ports[0]) is already Service dev/a's (in ",
        "f.yaml: Service dev/f: spec.externalIPs[0]: external IP 10.96.0.14 with port 53/TCP \
         (spec.ports[0]) is already Service dev/e's (in ",
    ] {
        assert!(stderr.contains(needle), "{needle}\n{stderr}");
    }
    for (ip, rendered) in [
        ("10.96.0.10", true),
        ("10.96.0.11", false),
        ("10.96.0.12", false),
        ("10.96.0.13", false),
        ("10.96.0.14", true),
        ("10.96.0.15", false),
    ] {
        assert_eq!(stdout.contains(ip), rendered, "{ip}\n{stdout}");
    }
}
