//! The cluster as the API serves it (Services, EndpointSlices, Nodes) and as manifest files.

use std::path::Path;

use anyhow::Context as _;
use serde_json::{json, Value};

use super::{
    node_cidr, node_ip, yaml, Cluster, Extra, Format, NODES, PORT, STREAM_PORT,
    STREAM_SERVICE_PORT, TARGET_PORT,
};

impl Cluster {
    /// Service `i` as the API serves it.
    pub fn service_object(&self, i: usize) -> Value {
        let ip = self.cluster_ip(i).to_string();
        let name = self.name(i);
        let ns = self.namespace();
        let mut s = ferry_testkit::objects::service(ns, &name, &ip, PORT, TARGET_PORT);
        let Some(extra) = self.extra_of(i) else {
            return s;
        };
        s["spec"]["ports"] = json!([
            { "name": "http", "protocol": "TCP", "port": PORT, "targetPort": TARGET_PORT },
            { "name": "stream", "protocol": "TCP", "port": STREAM_SERVICE_PORT, "targetPort": STREAM_PORT },
        ]);
        match extra {
            Extra::NodePortCluster | Extra::NodePortLocal => {
                let (http, stream) = extra.node_ports().unwrap_or_default();
                let policy = if extra == Extra::NodePortLocal {
                    "Local"
                } else {
                    "Cluster"
                };
                s["spec"]["type"] = json!("NodePort");
                s["spec"]["externalTrafficPolicy"] = json!(policy);
                s["spec"]["ports"][0]["nodePort"] = json!(http);
                s["spec"]["ports"][1]["nodePort"] = json!(stream);
            }
            Extra::Affinity => {
                s["spec"]["sessionAffinity"] = json!("ClientIP");
                s["spec"]["sessionAffinityConfig"] =
                    json!({ "clientIP": { "timeoutSeconds": 10800 } });
            }
        }
        s
    }

    /// Service `i`'s EndpointSlice as the API serves it.
    pub fn slice_object(&self, i: usize) -> Value {
        let addresses: Vec<String> = self
            .endpoints_of(i)
            .iter()
            .map(ToString::to_string)
            .collect();
        let nodes: Vec<String> = (0..self.endpoints).map(|j| self.node_of(i, j)).collect();
        let endpoints: Vec<(&str, bool, &str)> = addresses
            .iter()
            .zip(&nodes)
            .map(|(a, n)| (a.as_str(), true, n.as_str()))
            .collect();
        let name = self.name(i);
        let mut slice = ferry_testkit::objects::endpoint_slice(
            self.namespace(),
            &format!("{name}-x7k2q"),
            &name,
            TARGET_PORT,
            &endpoints,
        );
        if self.extra_of(i).is_some() {
            slice["ports"] = json!([
                { "name": "http", "protocol": "TCP", "port": TARGET_PORT },
                { "name": "stream", "protocol": "TCP", "port": STREAM_PORT },
            ]);
        }
        slice
    }

    /// The Node objects (`node-1` is Ferry's, at the node's client-side address).
    pub fn node_objects(&self) -> Vec<Value> {
        (0..NODES)
            .map(|n| ferry_testkit::objects::node(&format!("node-{n}"), &node_ip(n), &node_cidr(n)))
            .collect()
    }

    /// Service `i`'s manifest file name.
    pub fn file_name(&self, i: usize) -> String {
        match self.layout.format {
            Format::Yaml => format!("{}.yaml", self.name(i)),
            Format::Json => format!("{}.json", self.name(i)),
        }
    }

    /// Service `i`'s manifest: the Service and its EndpointSlice.
    pub fn manifest(&self, i: usize) -> String {
        match self.layout.format {
            Format::Yaml => yaml::manifest(self, i),
            Format::Json => json!({
                "apiVersion": "v1",
                "kind": "List",
                "items": [self.service_object(i), self.slice_object(i)],
            })
            .to_string(),
        }
    }

    /// Writes every manifest (and the Nodes' file) into `dir`.
    pub fn write_all(&self, dir: &Path) -> anyhow::Result<()> {
        let (file, nodes) = match self.layout.format {
            Format::Yaml => ("nodes.yaml", yaml::nodes()),
            Format::Json => {
                let list =
                    json!({ "apiVersion": "v1", "kind": "List", "items": self.node_objects() });
                ("nodes.json", list.to_string())
            }
        };
        std::fs::write(dir.join(file), nodes)?;
        for i in self.all() {
            std::fs::write(dir.join(self.file_name(i)), self.manifest(i))
                .with_context(|| format!("writing {}", self.file_name(i)))?;
        }
        Ok(())
    }

    /// Writes Service `i`'s manifest atomically: staged in `stage` (same filesystem), renamed
    /// into `dir`.
    pub fn write_one(&self, dir: &Path, stage: &Path, i: usize) -> anyhow::Result<()> {
        let name = self.file_name(i);
        let staged = stage.join(&name);
        std::fs::write(&staged, self.manifest(i))
            .with_context(|| format!("writing {}", staged.display()))?;
        std::fs::rename(&staged, dir.join(&name)).context("renaming into place")?;
        Ok(())
    }

    /// Every object, for the fake API server.
    pub fn objects(&self) -> Vec<Value> {
        let mut all = self.node_objects();
        for i in self.all() {
            all.push(self.service_object(i));
            all.push(self.slice_object(i));
        }
        all
    }
}
