//! upstream's nfacct counters of iptables mode (pkg/proxy/iptables, pkg/proxy/metrics): created
//! at start in the node's network namespace, named by the rule that drops packets conntrack
//! marks invalid and by the rules that count connections to localhost NodePorts, and read at
//! each scrape as `kubeproxy_iptables_ct_state_invalid_dropped_packets_total` and
//! `kubeproxy_iptables_localhost_nodeports_accepted_packets_total`. Without nfacct (or when a
//! counter cannot be created) the rules do without the match and the metric is not exported,
//! as upstream's; one warning says so. They are never deleted (upstream's cleanup leaves them).

use ferry_compile::iptables::{CT_STATE_INVALID_COUNTER, LOCALHOST_NODE_PORTS_COUNTER};
use ferry_compile::NfacctCounters;

use crate::mode::{CounterMetric, PacketCounters};
use crate::nfacct::{Nfacct, NfacctError};

/// Both counters, with upstream's metric names and help texts.
pub const METRICS: [CounterMetric; 2] = [
    CounterMetric {
        metric: "kubeproxy_iptables_ct_state_invalid_dropped_packets_total",
        help: "packets dropped by iptables to work around conntrack problems",
        nfacct: CT_STATE_INVALID_COUNTER,
    },
    CounterMetric {
        metric: "kubeproxy_iptables_localhost_nodeports_accepted_packets_total",
        help: "Number of packets accepted on nodeports of loopback interface",
        nfacct: LOCALHOST_NODE_PORTS_COUNTER,
    },
];

/// Creates the counters that do not exist yet (those that do keep their counts).
pub(super) fn create() -> PacketCounters {
    let mut created = PacketCounters::default();
    let mut acct = match open() {
        Ok(acct) => acct,
        Err(e) => {
            tracing::warn!(
                "nfacct is not available ({e}): iptables rules count no packets, and the \
                 kubeproxy_iptables_*_packets_total metrics are not exported"
            );
            return created;
        }
    };
    let mut failed = Vec::new();
    for m in METRICS {
        match acct.ensure(m.nfacct) {
            Ok(()) => created.metrics.push(m),
            Err(e) => failed.push(e.to_string()),
        }
    }
    if !failed.is_empty() {
        tracing::warn!(
            "{}: the rules do without those counters, and their metrics are not exported",
            failed.join("; ")
        );
    }
    let has = |name| created.metrics.iter().any(|m| m.nfacct == name);
    created.rules = NfacctCounters {
        ct_state_invalid: has(CT_STATE_INVALID_COUNTER),
        localhost_node_ports: has(LOCALHOST_NODE_PORTS_COUNTER),
    };
    created
}

/// The socket, once a get has shown the kernel has nfacct (upstream's check: anything but
/// "no such counter" means it has not).
fn open() -> Result<Nfacct, NfacctError> {
    let mut acct = Nfacct::open()?;
    match acct.get(CT_STATE_INVALID_COUNTER) {
        Err(e) if !e.is_not_found() => Err(e),
        _ => Ok(acct),
    }
}
