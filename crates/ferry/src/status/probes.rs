//! Readiness probes in the status (standalone mode): each endpoint's Pod (its `targetRef`)
//! looked up in the [`ProbeBook`]; and back, the verdicts `ferry explain --live` reads from an
//! agent's status.

use std::collections::BTreeMap;

use ferry_model::{EndpointView, TargetKind};
use ferry_source::pods::{PodKey, ReadinessUpdate};
use ferry_source::probe::book::{join_reasons, rfc3339};
use ferry_source::probe::{Outcome, ProbeBook, ProbeStatus};

use super::{ContainerProbe, Status};

/// `ContainerProbe::state` of a container whose probe made it ready.
pub const READY: &str = "ready";
/// … whose probe made it not ready.
pub const NOT_READY: &str = "not ready";
/// … whose probe has not reached a threshold yet (the Pod's status decides meanwhile).
pub const PENDING: &str = "pending";
/// … whose probe Ferry does not run (`exec`, or a probe that cannot be resolved).
pub const NOT_RUN: &str = "not run";

/// The Pod behind an endpoint: its `targetRef`, when that names a Pod.
pub fn pod_of(e: &EndpointView) -> Option<PodKey> {
    let r = e.target.as_ref()?.target_ref.as_ref()?;
    (r.kind == TargetKind::Pod).then(|| PodKey::new(&*r.namespace, &*r.name))
}

/// Every probe of a Pod's containers, as the status shows them.
pub fn of_pod(book: &ProbeBook, pod: &PodKey) -> Vec<ContainerProbe> {
    book.of_pod(pod)
        .map(|(container, status)| container_probe(container, status))
        .collect()
}

fn container_probe(container: &str, status: &ProbeStatus) -> ContainerProbe {
    let reason = status.not_ready_reason(container);
    match status {
        ProbeStatus::NotRun { reason } => ContainerProbe {
            container: container.to_owned(),
            state: NOT_RUN.to_owned(),
            reason: Some(reason.clone()),
            ..ContainerProbe::default()
        },
        ProbeStatus::Probing {
            target,
            verdict,
            last,
            run,
            failing_since,
        } => ContainerProbe {
            container: container.to_owned(),
            state: match verdict {
                Some(true) => READY,
                Some(false) => NOT_READY,
                None => PENDING,
            }
            .to_owned(),
            target: Some(target.clone()),
            last_result: last.as_ref().map(|(o, _)| o.label().to_owned()),
            last_message: last.as_ref().and_then(|(o, _)| match o {
                Outcome::Success => None,
                Outcome::Failure(m) | Outcome::Error(m) => Some(m.clone()),
            }),
            last_time: last.as_ref().map(|(_, at)| rfc3339(*at)),
            in_a_row: *run,
            failing_since: failing_since.map(rfc3339),
            reason,
        },
    }
}

/// What an agent's probes found, per Pod, read back from its status: the verdicts (to judge
/// the Pods as the agent does) and why each Pod held back is not ready.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct AgentProbes {
    /// Each probed container's verdict (`None`: no verdict yet, its status decides).
    pub verdicts: Vec<ReadinessUpdate>,
    /// Per Pod, why its probes hold it back (`not ready: readiness probe failing since …`).
    pub reasons: BTreeMap<PodKey, String>,
    /// Per Pod, one line per probe for people.
    pub lines: BTreeMap<PodKey, Vec<String>>,
}

/// Reads the probes of every backend's Pod in `status` (each Pod once, whichever frontends
/// list it).
pub fn from_status(status: &Status) -> AgentProbes {
    let mut out = AgentProbes::default();
    let backends = status.frontends.iter().flat_map(|f| &f.backends);
    for b in backends {
        let Some(pod) = b.pod.as_deref().and_then(parse_pod) else {
            continue;
        };
        if b.probes.is_empty() || out.lines.contains_key(&pod) {
            continue;
        }
        for p in &b.probes {
            let ready = match p.state.as_str() {
                READY => Some(true),
                NOT_READY => Some(false),
                _ => None,
            };
            out.verdicts.push(ReadinessUpdate {
                pod: pod.clone(),
                container: p.container.as_str().into(),
                ready,
            });
        }
        let held_back = b.probes.iter().filter(|p| p.state != NOT_RUN);
        if let Some(reason) = join_reasons(held_back.filter_map(|p| p.reason.clone())) {
            out.reasons.insert(pod.clone(), reason);
        }
        out.lines
            .insert(pod, b.probes.iter().map(ContainerProbe::describe).collect());
    }
    out
}

/// `namespace/name`.
fn parse_pod(s: &str) -> Option<PodKey> {
    let (namespace, name) = s.split_once('/')?;
    Some(PodKey::new(namespace, name))
}

impl ContainerProbe {
    /// One line for people: `probe url-analysis (GET http://…/hello): not ready; last failure
    /// 2024-05-01T10:00:30Z: HTTP probe failed with statuscode: 503 (3 in a row)`.
    pub fn describe(&self) -> String {
        let mut line = format!("readiness probe of {}", self.container);
        if let Some(t) = &self.target {
            line.push_str(&format!(" ({t})"));
        }
        line.push_str(&format!(": {}", self.state));
        if self.state == NOT_RUN {
            if let Some(r) = &self.reason {
                line.push_str(&format!(": {r}"));
            }
            return line;
        }
        match (&self.last_result, &self.last_time) {
            (Some(result), Some(at)) => {
                line.push_str(&format!("; last {result} {at}"));
                if let Some(m) = &self.last_message {
                    line.push_str(&format!(": {m}"));
                }
                line.push_str(&format!(" ({} in a row)", self.in_a_row));
            }
            _ => line.push_str("; not run yet"),
        }
        if let Some(since) = &self.failing_since {
            line.push_str(&format!("; failing since {since}"));
        }
        line
    }
}

#[cfg(test)]
mod tests;
