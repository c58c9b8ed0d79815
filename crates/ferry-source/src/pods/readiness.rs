//! A Pod's readiness in standalone mode: its status, overridden by Ferry's readiness probes.

use std::collections::BTreeMap;

use ferry_model::{Container, Pod, ProbeHandler};

use super::PodKey;

/// A readiness probe's verdict about one container, as the prober reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadinessUpdate {
    /// The Pod.
    pub pod: PodKey,
    /// The container's name.
    pub container: Box<str>,
    /// `Some(true)`: the probe passed `successThreshold` times in a row; `Some(false)`: it failed
    /// `failureThreshold` times in a row; `None`: no verdict (the probe stopped, or restarted
    /// for a changed Pod), so the Pod's status speaks for the container again.
    pub ready: Option<bool>,
}

/// True when Ferry runs this container's readiness probe (`httpGet`, `tcpSocket`, `grpc`).
/// `exec` probes need the container runtime, which only kubelet has: the Pod's own status
/// stays in charge of such a container.
pub fn is_probed(container: &Container) -> bool {
    container
        .readiness_probe
        .as_ref()
        .is_some_and(|p| !matches!(p.handler, ProbeHandler::Exec))
}

/// The probes' verdicts, per Pod and container.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Verdicts {
    by_pod: BTreeMap<PodKey, BTreeMap<Box<str>, bool>>,
}

impl Verdicts {
    /// Records an update; returns true when it changed a verdict.
    pub fn record(&mut self, update: &ReadinessUpdate) -> bool {
        match update.ready {
            Some(ready) => {
                let containers = self.by_pod.entry(update.pod.clone()).or_default();
                containers.insert(update.container.clone(), ready) != Some(ready)
            }
            None => {
                let Some(containers) = self.by_pod.get_mut(&update.pod) else {
                    return false;
                };
                let changed = containers.remove(&update.container).is_some();
                if containers.is_empty() {
                    self.by_pod.remove(&update.pod);
                }
                changed
            }
        }
    }

    /// Keeps only the verdicts about Pods for which `keep` is true.
    pub fn retain(&mut self, mut keep: impl FnMut(&PodKey) -> bool) {
        self.by_pod.retain(|pod, _| keep(pod));
    }

    /// Forgets every verdict about a Pod (it is gone).
    pub fn forget(&mut self, pod: &PodKey) {
        self.by_pod.remove(pod);
    }

    /// The verdict about one container.
    pub fn get(&self, pod: &PodKey, container: &str) -> Option<bool> {
        self.by_pod.get(pod)?.get(container).copied()
    }

    /// Whether a Pod is ready, as kubelet would set its `Ready` condition:
    /// - without a probed container, the Pod's `Ready` condition as written;
    /// - otherwise every container must be ready: a probed one by its verdict, an unprobed one
    ///   by its `containerStatuses[].ready` (or the Pod's `Ready` condition when not listed).
    ///
    /// Before its first verdict, a probed container counts as ready only when its status says it
    /// is running (`state.running.startedAt`) and ready: kubelet, restarting, keeps such a
    /// container's readiness too; any other container starts not ready, as with kubelet.
    pub fn pod_ready(&self, key: &PodKey, pod: &Pod) -> bool {
        if !pod.containers.iter().any(is_probed) {
            return pod.ready;
        }
        pod.containers.iter().all(|c| {
            let from_status = c.ready.unwrap_or(pod.ready);
            if !is_probed(c) {
                return from_status;
            }
            self.get(key, &c.name)
                .unwrap_or(from_status && c.started_at.is_some())
        })
    }
}
