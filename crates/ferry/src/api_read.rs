//! `ferry rules` and `ferry explain` without `--manifests`: one read of the Kubernetes API
//! (`--kubeconfig`, `--master`, `clientConnection.kubeconfig` of `--config`, or in-cluster)
//! through the agent's own source, so they see the objects the agent does: its Services and
//! EndpointSlices (kube-proxy's label selector), its own Node and the ServiceCIDRs (waited for
//! here, unless the API server refuses them).

use std::time::Duration;

use ferry_model::Object;
use ferry_source::kube::{connect, Connection, KubeSource};
use ferry_source::SourceEvent;
use tokio::sync::mpsc;

use crate::config::Config;

/// How long a command waits for the API server (the agent waits for ever; a command says why
/// it cannot answer).
const WAIT: Duration = Duration::from_secs(10);

/// Every object the agent of `config`'s node would read first (its first `Resync`), or why
/// they could not be read. Each invalid object is one warning on stderr, and is left out.
pub fn read(config: &Config) -> Result<Vec<Object>, String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a runtime: {e}"))?;
    runtime.block_on(async {
        let connection = Connection {
            kubeconfig: config.kubeconfig.clone(),
            master: config.master.clone(),
            rate: config.api_rate(),
        };
        let client = tokio::time::timeout(WAIT, connect(&connection))
            .await
            .map_err(|_| {
                format!(
                    "the Kubernetes API server did not answer within {}s",
                    WAIT.as_secs()
                )
            })?
            .map_err(|e| e.to_string())?;
        let (tx, mut rx) = mpsc::channel(4);
        let source = KubeSource::new(client, config.node_name.clone()).waiting_for_service_cidrs();
        let watching = tokio::spawn(source.run(tx, |e| eprintln!("warning: {e}")));
        let first = tokio::time::timeout(WAIT, rx.recv()).await;
        watching.abort();
        match first {
            Ok(Some(SourceEvent::Resync(objects))) => Ok(objects),
            Ok(_) => Err("the Kubernetes API source ended before its first list".to_owned()),
            Err(_) => Err(format!(
                "listing Services, EndpointSlices, Node {} and ServiceCIDRs took more than {}s",
                config.node_name,
                WAIT.as_secs()
            )),
        }
    })
}
