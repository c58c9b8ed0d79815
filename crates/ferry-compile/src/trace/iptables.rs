//! The iptables objects behind each step, named as upstream kube-proxy's iptables mode (and
//! Ferry's `--proxy-mode iptables`) names them, for `iptables -t nat -vnL …`.

use crate::iptables::names::{
    endpoint_chain, service_chain, EXTERNAL_PREFIX, FIREWALL_PREFIX, KUBE_EXTERNAL_SERVICES,
    KUBE_MARK_MASQ, KUBE_NODEPORTS, KUBE_POSTROUTING, KUBE_PROXY_FIREWALL, KUBE_SERVICES,
    LOCAL_PREFIX, SVC_PREFIX,
};
use crate::plan::EndpointSet;

use super::{Frontend, NodePortAnswer, Step, StepKind, Trace, Verdict};

impl Trace {
    /// The iptables chains involved in `step`.
    pub(crate) fn iptables_objects(&self, step: &Step) -> Vec<String> {
        let Some(name) = &self.service else {
            return vec![format!("nat {KUBE_SERVICES} (no rule matches)")];
        };
        let svc = service_chain(SVC_PREFIX, name);
        let svl = service_chain(LOCAL_PREFIX, name);
        let ext = service_chain(EXTERNAL_PREFIX, name);
        let fw = service_chain(FIREWALL_PREFIX, name);
        let firewalled = self.steps.iter().any(|s| {
            matches!(
                s.kind,
                StepKind::FirewallAllowed | StepKind::FirewallDropped
            )
        });
        let external = self.frontend != Some(Frontend::ClusterIp);
        let forwarded_set = self.steps.iter().find_map(|s| match s.kind {
            StepKind::Forward(set) => Some(set),
            _ => None,
        });
        match step.kind {
            StepKind::Dispatch => match (self.frontend, forwarded_set) {
                (Some(Frontend::NodePort), _) => {
                    vec![format!("nat {KUBE_SERVICES} → {KUBE_NODEPORTS} → {ext}")]
                }
                (Some(Frontend::ExternalIp), _) => vec![format!("nat {KUBE_SERVICES} → {ext}")],
                (Some(Frontend::LoadBalancerIp), _) if firewalled => {
                    vec![format!("nat {KUBE_SERVICES} → {fw}")]
                }
                (Some(Frontend::LoadBalancerIp), _) => {
                    vec![format!("nat {KUBE_SERVICES} → {ext}")]
                }
                (_, Some(EndpointSet::Local)) => vec![format!("nat {KUBE_SERVICES} → {svl}")],
                (_, Some(EndpointSet::Cluster)) => vec![format!("nat {KUBE_SERVICES} → {svc}")],
                (_, None) => vec![format!("filter {KUBE_SERVICES}")],
            },
            StepKind::Masquerade => {
                let from = if external { ext } else { svc };
                vec![
                    format!("nat {from} → {KUBE_MARK_MASQ} (MARK or 0x4000)"),
                    format!("nat {KUBE_POSTROUTING} (MASQUERADE --random-fully)"),
                ]
            }
            StepKind::ShortCircuit => vec![
                format!("nat {ext} → {svc}"),
                format!("nat {KUBE_MARK_MASQ} for the node's own traffic (-m addrtype --src-type LOCAL)"),
            ],
            StepKind::Affinity(set, timeout) => {
                let chain = match set {
                    EndpointSet::Cluster => &svc,
                    EndpointSet::Local => &svl,
                };
                let mut out = vec![format!(
                    "nat {chain} (-m recent --rcheck --seconds {timeout} --reap, one rule per endpoint, before the random choice)"
                )];
                if let Verdict::Forwarded { targets } = &self.verdict {
                    out.extend(targets.iter().map(|t| {
                        let ep = &t.addr;
                        let sep = endpoint_chain(name, ep);
                        format!("nat {sep} (-m recent --name {sep} --set, on the DNAT to {ep})")
                    }));
                }
                out
            }
            StepKind::Forward(set) => {
                let chain = match set {
                    EndpointSet::Cluster => svc,
                    EndpointSet::Local => svl,
                };
                let mut out = vec![format!("nat {chain} (-m statistic --mode random)")];
                if let Verdict::Forwarded { targets } = &self.verdict {
                    out.extend(targets.iter().map(|t| {
                        format!("nat {} (DNAT to {})", endpoint_chain(name, &t.addr), t.addr)
                    }));
                }
                out
            }
            StepKind::FirewallAllowed => {
                let src = step
                    .objects
                    .iter()
                    .find_map(|o| o.strip_prefix("set firewall-allow element "))
                    .and_then(|k| k.rsplit(" . ").next())
                    .unwrap_or("?");
                vec![format!("nat {fw} (-s {src} -j {ext})")]
            }
            StepKind::FirewallDropped => vec![
                format!("nat {KUBE_SERVICES} → {fw} (no rule matches: not DNATed)"),
                format!("filter {KUBE_PROXY_FIREWALL} (DROP: traffic not accepted by {fw})"),
            ],
            StepKind::Hairpin => {
                let me = self.candidates.iter().find(|c| c.addr.ip() == self.packet.src);
                match me {
                    Some(c) => vec![format!(
                        "nat {} (-s {} -j {KUBE_MARK_MASQ})",
                        endpoint_chain(name, &c.addr),
                        c.addr.ip()
                    )],
                    None => vec![format!("nat {KUBE_MARK_MASQ}")],
                }
            }
            StepKind::Dropped if external => vec![
                format!("nat {ext} (no rule matches)"),
                format!("filter {KUBE_EXTERNAL_SERVICES} (DROP: has no local endpoints)"),
            ],
            StepKind::Dropped => vec![format!("filter {KUBE_SERVICES} (DROP: has no local endpoints)")],
            StepKind::Rejected if external => {
                vec![format!("filter {KUBE_EXTERNAL_SERVICES} (REJECT: has no endpoints)")]
            }
            StepKind::Rejected => vec![format!("filter {KUBE_SERVICES} (REJECT: has no endpoints)")],
            StepKind::NodePortNotHere(answer) => self.node_port_not_here(answer),
            // Ferry's userspace proxy: the same listener whatever the mode.
            StepKind::Proxied(_) | StepKind::LocalhostNodePort => step.objects.clone(),
            StepKind::DeliveredLocally => Vec::new(),
            StepKind::LocalAddressFilter => self.local_address_filter(),
            StepKind::UnknownPort | StepKind::NotAService | StepKind::UnallocatedServiceIp => {
                vec![format!("nat {KUBE_SERVICES} (no rule matches)")]
            }
        }
    }

    /// The `KUBE-EXTERNAL-SERVICES` rule filtering the NodePort on every local address.
    fn local_address_filter(&self) -> Vec<String> {
        let target = match self.verdict {
            Verdict::Rejected => "REJECT: has no endpoints",
            _ => "DROP: has no local endpoints",
        };
        let p = &self.packet;
        let proto = p.protocol.as_str();
        vec![format!(
            "filter {KUBE_EXTERNAL_SERVICES} (-m addrtype --dst-type LOCAL -p {proto} --dport {}: {target})",
            p.port
        )]
    }

    /// Why no `KUBE-NODEPORTS` jump matches the destination.
    fn node_port_not_here(&self, answer: NodePortAnswer) -> Vec<String> {
        let why = match answer {
            NodePortAnswer::NotLocal => "-m addrtype --dst-type LOCAL: not a local address",
            NodePortAnswer::Loopback => "loopback destinations never jump",
            NodePortAnswer::OutOfScope | NodePortAnswer::Answers => {
                "the jumps' -d prefixes (nodePortAddresses) leave it out"
            }
        };
        vec![format!(
            "nat {KUBE_SERVICES} (no jump to {KUBE_NODEPORTS} matches: {why})"
        )]
    }
}
