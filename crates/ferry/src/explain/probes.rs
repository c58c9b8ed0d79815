//! Readiness probes in `ferry explain`. Explain runs no probe: offline, a Pod with a probe
//! Ferry runs is judged by its status, and each of its endpoints says so. With `--live`, the
//! running agent's results (its `/status`) judge the Pods as the agent does, so the trace
//! matches the kernel, and a probe holding an endpoint back is why it is out.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use ferry_compile::trace::{Candidate, Trace};
use ferry_model::{Pod, TargetKind};
use ferry_source::pods::{is_probed, EndpointController, PodKey, ReadinessUpdate, Verdicts};
use ferry_source::probe::Target;

use crate::config::Config;
use crate::status::client::fetch_status;
use crate::status::probes::{from_status, AgentProbes};

/// What explain knows of the readiness probes.
#[derive(Debug)]
pub enum Probes {
    /// Nothing: offline.
    Offline,
    /// The running agent's results.
    Agent(AgentProbes),
    /// `--live`, but the agent could not be asked (why).
    Unavailable(String),
}

impl Probes {
    /// Asks the agent on this node, at its metrics address.
    pub fn ask_agent(config: &Config) -> Self {
        let Some(address) = config.metrics_bind_address else {
            return Probes::Unavailable("its metrics server is disabled".to_owned());
        };
        let address = reachable(address);
        match fetch_status(&address.to_string()) {
            Ok(status) => Probes::Agent(from_status(&status)),
            Err(e) => Probes::Unavailable(format!("the agent at {address} did not answer: {e}")),
        }
    }

    /// The agent's verdicts (none when it was not asked).
    pub fn verdicts(&self) -> &[ReadinessUpdate] {
        match self {
            Probes::Agent(agent) => &agent.verdicts,
            _ => &[],
        }
    }
}

/// Where to reach a server bound to `address` from this host: a wildcard bind is reached on
/// loopback.
fn reachable(address: SocketAddr) -> SocketAddr {
    match address.ip() {
        IpAddr::V4(ip) if ip.is_unspecified() => {
            SocketAddr::new(Ipv4Addr::LOCALHOST.into(), address.port())
        }
        IpAddr::V6(ip) if ip.is_unspecified() => {
            SocketAddr::new(Ipv6Addr::LOCALHOST.into(), address.port())
        }
        _ => address,
    }
}

/// Says under each endpoint of a Pod with a readiness probe what explain knows of the probe;
/// with the agent's results, a probe that holds the endpoint back is why it is out.
pub fn annotate(trace: &mut Trace, controller: &EndpointController, probes: &Probes) {
    for c in &mut trace.candidates {
        annotate_one(c, controller, probes);
    }
    if let Some(variant) = &mut trace.iptables_variant {
        annotate(variant, controller, probes);
    }
}

fn annotate_one(c: &mut Candidate, controller: &EndpointController, probes: &Probes) {
    let Some(key) = c
        .target
        .as_ref()
        .filter(|t| t.kind == TargetKind::Pod)
        .map(|t| PodKey::new(&*t.namespace, &*t.name))
    else {
        return;
    };
    match probes {
        Probes::Agent(agent) => {
            if let (true, Some(reason)) = (c.not_ready, agent.reasons.get(&key)) {
                c.excluded = Some(reason.clone());
            }
            if let Some(lines) = agent.lines.get(&key) {
                c.note = Some(format!("the agent's {}", lines.join("; ")));
            }
        }
        Probes::Offline | Probes::Unavailable(_) => {
            c.note = controller
                .pod(&key)
                .and_then(|pod| offline_note(&key, pod, probes));
        }
    }
}

/// Why explain judged a probed Pod by its status, and how.
fn offline_note(key: &PodKey, pod: &Pod, probes: &Probes) -> Option<String> {
    let probed: Vec<String> = pod
        .containers
        .iter()
        .filter(|c| is_probed(c))
        .map(|c| {
            match c
                .readiness_probe
                .as_ref()
                .map(|p| Target::resolve(pod, c, p))
            {
                Some(Ok(target)) => format!("{} ({target})", c.name),
                _ => c.name.to_string(),
            }
        })
        .collect();
    if probed.is_empty() {
        return None;
    }
    let judged = if Verdicts::default().pod_ready(key, pod) {
        "counts as ready (its status says it is running and ready)"
    } else {
        "counts as not ready (a probed container starts not ready unless its status says it is \
         running and ready)"
    };
    let ask = match probes {
        Probes::Unavailable(_) => "the agent could not be asked",
        _ => "`ferry explain --live` on the node asks the running agent",
    };
    Some(format!(
        "readiness probe of {} not run by explain: until probed, the Pod {judged}; {ask}",
        probed.join(", ")
    ))
}

#[cfg(test)]
mod tests;
