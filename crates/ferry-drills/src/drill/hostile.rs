//! The bad objects of drill 5: malformed or hostile manifests (and API objects), each with a
//! unique name (`bad-0042`) so the drill can tell whether Ferry named it.

use serde_json::{json, Value};

/// The namespace of every bad object.
pub const NAMESPACE: &str = "hostile";

/// Kinds of bad input, cycled through.
pub const KINDS: [&str; 11] = [
    "garbled YAML",
    "wrong type (port as a string)",
    "wrong type (spec as a list)",
    "huge number (port 10^23)",
    "invalid ClusterIP",
    "deep nesting (20 000 levels)",
    "duplicate keys",
    "invalid UTF-8",
    "conflicting ClusterIP",
    "invalid endpoint address",
    "alias bomb (10^9 nodes)",
];

/// The kind whose Service is valid and whose only EndpointSlice is not.
pub const BAD_SLICE: &str = KINDS[9];

/// Bad object `k`'s name.
pub fn name(k: usize) -> String {
    format!("bad-{k:04}")
}

fn service_yaml(name: &str, cluster_ip: &str, port: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n  namespace: {NAMESPACE}\nspec:\n  \
         clusterIP: {cluster_ip}\n  ports:\n  - name: http\n    port: {port}\n    targetPort: 8080\n    \
         protocol: TCP\n"
    )
}

/// Bad object `k` as a manifest file's bytes; `taken_ip` is a ClusterIP a good Service has.
pub fn manifest(k: usize, taken_ip: &str, rng: &mut fastrand::Rng) -> Vec<u8> {
    let name = name(k);
    let free_ip = format!("10.111.{}.{}", k / 250, k % 250 + 1);
    match k % KINDS.len() {
        0 => {
            let text = service_yaml(&name, &free_ip, "80");
            let lines: Vec<&str> = text.lines().collect();
            let at = rng.usize(4..lines.len());
            let mut out = lines[..at].join("\n");
            out.push_str("\n  ports: ][ {\n");
            out.push_str(&lines[at..].join("\n"));
            out.into_bytes()
        }
        1 => service_yaml(&name, &free_ip, "\"eighty\"").into_bytes(),
        2 => format!(
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n  namespace: {NAMESPACE}\nspec:\n- 1\n- 2\n"
        )
        .into_bytes(),
        3 => service_yaml(&name, &free_ip, "100000000000000000000000").into_bytes(),
        4 => service_yaml(&name, "999.1.2.3", "80").into_bytes(),
        5 => {
            let depth = 20_000;
            let mut t = service_yaml(&name, &free_ip, "80");
            t.push_str("  selector:\n    deep: ");
            t.push_str(&"[".repeat(depth));
            t.push_str(&"]".repeat(depth));
            t.push('\n');
            t.into_bytes()
        }
        6 => format!(
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n  name: {name}-twice\n  \
             namespace: {NAMESPACE}\nspec:\n  clusterIP: {free_ip}\n  ports:\n  - port: 80\n"
        )
        .into_bytes(),
        7 => {
            let mut b = service_yaml(&name, &free_ip, "80").into_bytes();
            b.extend_from_slice(b"  selector:\n    app: \"\xff\xfe\xc3\x28\"\n");
            b
        }
        8 => {
            let mut t = service_yaml(&name, taken_ip, "80");
            t.push_str(&slice_yaml(&name, "10.64.255.1"));
            t.into_bytes()
        }
        9 => {
            let mut t = service_yaml(&name, &free_ip, "80");
            t.push_str(&slice_yaml(&name, "300.1.1.1"));
            t.into_bytes()
        }
        _ => alias_bomb(&name, &free_ip).into_bytes(),
    }
}

/// A Service whose annotations hold a billion laughs: nine levels of ten aliases each.
fn alias_bomb(name: &str, free_ip: &str) -> String {
    let mut t = format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n  namespace: {NAMESPACE}\n  \
         annotations:\n    l0: &l0 [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n"
    );
    for level in 1..10 {
        let prev = format!("*l{}", level - 1);
        let items = [prev.as_str(); 10].join(",");
        t.push_str(&format!("    l{level}: &l{level} [{items}]\n"));
    }
    t.push_str(&format!(
        "spec:\n  clusterIP: {free_ip}\n  ports:\n  - port: 80\n"
    ));
    t
}

fn slice_yaml(service: &str, address: &str) -> String {
    format!(
        "---\napiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {service}-1\n  \
         namespace: {NAMESPACE}\n  labels:\n    kubernetes.io/service-name: {service}\naddressType: IPv4\n\
         ports:\n- name: http\n  port: 8080\n  protocol: TCP\nendpoints:\n- addresses: [\"{address}\"]\n  \
         conditions: {{ready: true}}\n"
    )
}

/// Bad object `k` as the API could serve it (schema-valid JSON: the API server refuses wrong
/// types, so only bad values reach a client), or `None` for kinds only a file can carry (the
/// API server also allocates each ClusterIP once: no conflict reaches a client).
pub fn api_objects(k: usize) -> Option<Vec<Value>> {
    let name = name(k);
    let free_ip = format!("10.111.{}.{}", k / 250, k % 250 + 1);
    let svc = |ip: &str, port: i64| {
        let mut s = ferry_testkit::objects::service(NAMESPACE, &name, ip, 80, 8080);
        s["spec"]["ports"][0]["port"] = json!(port);
        s
    };
    let slice = |address: &str| {
        ferry_testkit::objects::endpoint_slice(
            NAMESPACE,
            &format!("{name}-1"),
            &name,
            8080,
            &[(address, true, "node-1")],
        )
    };
    Some(match k % KINDS.len() {
        3 => vec![svc(&free_ip, 70_000)],
        4 => vec![svc("999.1.2.3", 80)],
        5 => {
            let mut s = svc(&free_ip, 80);
            s["metadata"]["annotations"] = json!({ "huge": "x".repeat(1 << 20) });
            s["spec"]["ports"][0]["protocol"] = json!("FOO");
            vec![s]
        }
        9 => vec![svc(&free_ip, 80), slice("300.1.1.1")],
        _ => return None,
    })
}
