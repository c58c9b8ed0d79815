//! Building [`Status`] from the agent's state: per IP family, the node view and plan (the same
//! ones the sync compiles) give the frontends, the endpoints and the policies; the mode's
//! reading of the kernel says whether each service is programmed.

use std::net::SocketAddr;

use ferry_compile::plan::{Dispatch, EndpointSet, NodePortScope};
use ferry_compile::trace::{candidates, topology_note};
use ferry_compile::{NodeCompiler, Plan, ServicePlan};
use ferry_dataplane::live::KernelReport;
use ferry_dataplane::mode::NodeMode;
use ferry_model::{ClusterState, IpFamily, NodeContext, NodeView, ServicePortView, TrafficPolicy};

use ferry_source::probe::ProbeBook;

use super::{
    probes, Backend, FamilyStatus, Frontend, History, KernelState, KernelSummary, Policy,
    SourceStatus, Status,
};
use crate::config::Config;

/// What [`collect`] reads.
pub struct Inputs<'a> {
    /// The configuration.
    pub config: &'a Config,
    /// The mode, prepared on this node (its reading of the kernel).
    pub mode: &'a dyn NodeMode,
    /// The families this node programs.
    pub families: &'a [IpFamily],
    /// The cluster state the syncs compile.
    pub state: &'a ClusterState,
    /// The syncs so far.
    pub history: &'a History,
    /// The source.
    pub source: SourceStatus,
    /// The readiness probes' results (standalone mode; `None` with the Kubernetes API).
    pub probes: Option<&'a ProbeBook>,
}

/// The status of the node, as of now (the kernel is read now).
pub fn collect(inputs: &Inputs<'_>) -> Status {
    let mut families = Vec::new();
    let mut frontends = Vec::new();
    for &family in inputs.families {
        let context = NodeContext {
            node_name: inputs.config.node_name.clone(),
            family,
        };
        let compile = inputs.config.compile_config(family);
        let compiler = NodeCompiler::new(inputs.state, &context, &compile);
        let kernel = inputs
            .mode
            .kernel(&compiler, inputs.state)
            .map_err(|e| format!("{e:#}"));
        let view = compiler.view(inputs.state);
        let plan = compiler.plan_of(&view);
        frontends.extend(frontends_of(&view, &plan, &kernel, inputs.probes));
        families.push(FamilyStatus {
            kernel: summary(&kernel),
            ..inputs.history.family(family)
        });
    }
    Status {
        version: crate::version::VERSION.to_owned(),
        node: inputs.config.node_name.clone(),
        mode: inputs.mode.describe(),
        source: inputs.source.clone(),
        families,
        conntrack: inputs.config.conntrack_applied.clone(),
        frontends,
    }
}

fn summary(kernel: &Result<KernelReport, String>) -> KernelSummary {
    match kernel {
        Ok(k) => KernelSummary {
            present: k.present,
            error: None,
            stray: k.stray.clone(),
        },
        Err(e) => KernelSummary {
            present: false,
            error: Some(e.clone()),
            stray: Vec::new(),
        },
    }
}

/// Every frontend of every service port of one family's view.
pub(super) fn frontends_of(
    view: &NodeView,
    plan: &Plan,
    kernel: &Result<KernelReport, String>,
    book: Option<&ProbeBook>,
) -> Vec<Frontend> {
    let mut out = Vec::new();
    for (name, sp) in &plan.services {
        let Some(sview) = view.services.get(name) else {
            continue;
        };
        let kernel = kernel_state(kernel, sp);
        let frontend = |kind: &str, address: String, external: bool| {
            let (policy, dispatch) = match (&sp.external, external) {
                (Some(ext), true) => (ext.policy, ext.dispatch),
                _ => (sview.internal_policy, sp.internal),
            };
            Frontend {
                kind: kind.to_owned(),
                address,
                protocol: name.protocol.as_str().to_owned(),
                service: name.service.to_string(),
                port: name.port.clone(),
                policy: Policy {
                    traffic_policy: policy_name(policy).to_owned(),
                    affinity_seconds: sp.affinity,
                    topology: topology(sview),
                    answers_on: None,
                    source_ranges: Vec::new(),
                },
                dispatch: dispatch_name(dispatch).to_owned(),
                endpoint_set: match dispatch {
                    Dispatch::Forward(set) => Some(set_name(set).to_owned()),
                    _ => None,
                },
                backends: backends(sview, dispatch, book),
                kernel: kernel.clone(),
            }
        };
        out.push(frontend("ClusterIP", sock(sp.cluster_ip, sp.port), false));
        if let Some(np) = sp.node_port {
            let mut f = frontend("NodePort", format!("*:{np}"), true);
            f.policy.answers_on = Some(answers_on(&plan.node_ports));
            out.push(f);
        }
        for ip in &sp.external_ips {
            out.push(frontend("ExternalIP", sock(*ip, sp.port), true));
        }
        for ip in &sp.load_balancer_ips {
            let mut f = frontend("LoadBalancerIP", sock(*ip, sp.port), true);
            f.policy.source_ranges = sview
                .load_balancer_source_ranges
                .iter()
                .map(ToString::to_string)
                .collect();
            out.push(f);
        }
    }
    out
}

fn sock(ip: std::net::IpAddr, port: u16) -> String {
    SocketAddr::new(ip, port).to_string()
}

fn policy_name(p: TrafficPolicy) -> &'static str {
    match p {
        TrafficPolicy::Cluster => "Cluster",
        TrafficPolicy::Local => "Local",
    }
}

fn set_name(set: EndpointSet) -> &'static str {
    match set {
        EndpointSet::Cluster => "cluster",
        EndpointSet::Local => "local",
    }
}

fn dispatch_name(d: Dispatch) -> &'static str {
    match d {
        Dispatch::Forward(_) => "forward",
        Dispatch::Drop => "drop",
        Dispatch::Reject => "reject",
    }
}

fn topology(sview: &ServicePortView) -> String {
    topology_note(Some(sview)).unwrap_or_else(|| "no topology hints used".to_owned())
}

fn answers_on(scope: &NodePortScope) -> String {
    match scope {
        NodePortScope::AllLocal => "every local address but loopback".to_owned(),
        NodePortScope::LocalWithin(nets) if nets.is_empty() => {
            "no address (this node's primary IP is unknown)".to_owned()
        }
        NodePortScope::LocalWithin(nets) => nets
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// Every endpoint, used or not by a frontend that does `dispatch`; with `book`, each one's
/// Pod's readiness probes (and a probe that holds it back is why it is not used).
fn backends(sview: &ServicePortView, dispatch: Dispatch, book: Option<&ProbeBook>) -> Vec<Backend> {
    let set = match dispatch {
        Dispatch::Forward(set) => Some(set),
        Dispatch::Drop | Dispatch::Reject => None,
    };
    let why = candidates(Some(sview), set);
    sview
        .endpoints
        .iter()
        .zip(why)
        .map(|(e, c)| {
            let pod = probes::pod_of(e);
            let held_back = match (&pod, book) {
                (Some(pod), Some(book)) if c.not_ready => book.explain(pod),
                _ => None,
            };
            Backend {
                address: e.addr.to_string(),
                node: e.node_name.as_deref().map(str::to_owned),
                zone: e.zone.as_deref().map(str::to_owned),
                ready: e.conditions.ready,
                serving: e.conditions.serving,
                terminating: e.conditions.terminating,
                local: e.is_local,
                used: set.is_some() && c.excluded.is_none(),
                excluded: match (set, c.excluded) {
                    (None, _) => Some(match dispatch {
                        Dispatch::Drop => "this frontend drops new connections".to_owned(),
                        _ => "this frontend rejects new connections".to_owned(),
                    }),
                    (Some(_), why) => held_back.or(why),
                },
                probes: match (&pod, book) {
                    (Some(pod), Some(book)) => probes::of_pod(book, pod),
                    _ => Vec::new(),
                },
                pod: pod.map(|p| p.to_string()),
            }
        })
        .collect()
}

fn kernel_state(kernel: &Result<KernelReport, String>, sp: &ServicePlan) -> KernelState {
    match kernel {
        Ok(k) => match k.services.get(&sp.name.service) {
            Some(d) if d.is_empty() => KernelState {
                state: "programmed".to_owned(),
                differences: Vec::new(),
            },
            Some(d) => KernelState {
                state: "differs".to_owned(),
                differences: d.clone(),
            },
            None => KernelState {
                state: "unknown".to_owned(),
                differences: vec!["the mode's reading of the kernel does not name it".to_owned()],
            },
        },
        Err(e) => KernelState {
            state: "unknown".to_owned(),
            differences: vec![format!("the kernel could not be read: {e}")],
        },
    }
}
