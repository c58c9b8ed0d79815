//! Manifest loading tests: files on disk (temporary directories) → objects and errors.

use std::fs;
use std::path::Path;

use ferry_model::Object;

use crate::InvalidObject;

mod bytes;
mod documents;
mod events;
mod hostile;
mod load;
mod memory;
mod refresh;
mod watch;
mod yaml;

/// Writes `text` to `root/rel`, creating directories.
fn write(root: &Path, rel: &str, text: &str) {
    let path = root.join(rel);
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).unwrap_or_else(|e| panic!("mkdir {}: {e}", parent.display()));
    }
    fs::write(&path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
}

fn temp_dir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"))
}

/// `Kind ns/name` of every object, in order.
fn names(objects: &[Object]) -> Vec<String> {
    objects
        .iter()
        .map(|o| o.key().object_ref().to_string())
        .collect()
}

/// Every error as text.
fn texts(errors: &[InvalidObject]) -> Vec<String> {
    errors.iter().map(ToString::to_string).collect()
}

/// A ClusterIP Service `ns/name` on `ip`:`port` (port `http`).
fn service_yaml(ns: &str, name: &str, ip: &str, port: u32) -> String {
    format!(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: {name}\n  namespace: {ns}\nspec:\n  \
         clusterIP: {ip}\n  ports:\n  - name: http\n    port: {port}\n"
    )
}

/// Writes a ClusterIP Service `dev/name` on `ip`:`port` ([`service_yaml`]) to `root/rel`.
fn write_service(root: &Path, rel: &str, name: &str, ip: &str, port: u32) {
    write(root, rel, &service_yaml("dev", name, ip, port));
}

/// The one error in `errors`; panics unless there is exactly one.
fn only_error(errors: &[InvalidObject]) -> &InvalidObject {
    let [error] = errors else {
        panic!("one error expected: {errors:?}")
    };
    error
}

/// An EndpointSlice `ns/name` of Service `svc` with one endpoint `addr`:8080.
fn slice_yaml(ns: &str, name: &str, svc: &str, addr: &str) -> String {
    format!(
        "apiVersion: discovery.k8s.io/v1\nkind: EndpointSlice\nmetadata:\n  name: {name}\n  \
         namespace: {ns}\n  labels:\n    kubernetes.io/service-name: {svc}\naddressType: IPv4\n\
         ports:\n- name: http\n  port: 8080\nendpoints:\n- addresses: [\"{addr}\"]\n"
    )
}

/// A Node with one InternalIP.
fn node_yaml(name: &str, ip: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\nstatus:\n  addresses:\n  - type: \
         InternalIP\n    address: {ip}\n"
    )
}

/// The port of Service `name` in `objects`.
fn service_port(objects: &[Object], name: &str) -> Option<u16> {
    objects.iter().find_map(|o| match o {
        Object::Service(s) if &*s.name.name == name => s.ports.first().map(|p| p.port),
        _ => None,
    })
}
