//! etcd's history compacted on demand, so a resuming watch gets `410 Gone`.

use ferry_lab::netns;

use super::{ControlPlane, ControlPlaneError, Result};

impl ControlPlane {
    /// Compacts etcd's history up to its current revision (etcd's JSON gateway, from inside the
    /// control plane's namespace), and returns that revision: a watch resuming from an older
    /// resourceVersion that the API server cannot serve from its cache gets `410 Gone`.
    pub fn compact_etcd(&self) -> Result<u64> {
        let post = |path: &str, body: &str| -> Result<String> {
            let out = netns::run(&mut netns::exec_command(
                &self.ns,
                "curl",
                [
                    "-sS",
                    "--max-time",
                    "10",
                    "-X",
                    "POST",
                    &format!("http://127.0.0.1:2379{path}"),
                    "-d",
                    body,
                ],
            ))
            .map_err(|e| ControlPlaneError::Kubectl {
                args: format!("(curl etcd {path})"),
                detail: e.to_string(),
            })?;
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        };
        // A put advances the revision past everything the API server wrote.
        post(
            "/v3/kv/put",
            r#"{"key":"ZmVycnktbGFiL2NvbXBhY3Q=","value":"MQ=="}"#,
        )?;
        let range = post("/v3/kv/range", r#"{"key":"ZmVycnktbGFiL2NvbXBhY3Q="}"#)?;
        let revision = serde_json::from_str::<serde_json::Value>(&range)
            .ok()
            .and_then(|v| {
                v.pointer("/header/revision")
                    .and_then(|r| r.as_str().and_then(|s| s.parse().ok()).or(r.as_u64()))
            })
            .ok_or_else(|| ControlPlaneError::Kubectl {
                args: "(curl etcd /v3/kv/range)".into(),
                detail: format!("no header.revision in {range}"),
            })?;
        post(
            "/v3/kv/compaction",
            &format!(r#"{{"revision":"{revision}","physical":true}}"#),
        )?;
        Ok(revision)
    }
}
