//! Metrics read from the kernel's packet counters at each scrape: upstream's
//! `kubeproxy_iptables_ct_state_invalid_dropped_packets_total` and
//! `kubeproxy_iptables_localhost_nodeports_accepted_packets_total` (nfacct counters, iptables
//! mode). The mode says which counters it created (`NodeMode::packet_counters`); nothing here
//! knows the mode. A counter that cannot be read is left out of that scrape, as upstream's
//! collector does.

use std::sync::{Arc, OnceLock};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::MetricType;

use ferry_dataplane::mode::CounterMetric;

/// Where a metric's value comes from.
#[derive(Clone, Debug)]
enum Source {
    /// The kernel's counter.
    Kernel,
    /// A fixed value (the metrics reference shows the metrics with one).
    #[cfg(test)]
    Fixed(u64),
}

/// The collector: empty until the mode's counters are given.
#[derive(Clone, Debug, Default)]
pub(super) struct KernelCounters {
    counters: Arc<OnceLock<(Vec<CounterMetric>, Source)>>,
}

impl KernelCounters {
    /// Reads `counters` from the kernel from now on (the first call wins).
    pub(super) fn serve(&self, counters: Vec<CounterMetric>) {
        let _ = self.counters.set((counters, Source::Kernel));
    }

    /// Serves `counters`, each at `value` (the first call wins).
    #[cfg(test)]
    pub(super) fn serve_fixed(&self, counters: Vec<CounterMetric>, value: u64) {
        let _ = self.counters.set((counters, Source::Fixed(value)));
    }
}

impl Collector for KernelCounters {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some((counters, source)) = self.counters.get() else {
            return Ok(());
        };
        for c in counters {
            let value = match source {
                Source::Kernel => match c.read() {
                    Ok(v) => v,
                    Err(e) => {
                        tracing::debug!("{} left out of this scrape: {e}", c.metric);
                        continue;
                    }
                },
                #[cfg(test)]
                Source::Fixed(v) => *v,
            };
            // Declared without `_total`: OpenMetrics adds it to a counter's sample.
            let name = c.metric.strip_suffix("_total").unwrap_or(c.metric);
            let e = encoder.encode_descriptor(name, c.help, None, MetricType::Counter)?;
            ConstCounter::new(value).encode(e)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use ferry_dataplane::iptables::COUNTER_METRICS;
    use ferry_dataplane::mode::FailureCounter;

    use crate::metrics::Metrics;

    #[test]
    fn each_counter_is_an_unlabelled_counter_and_absent_until_the_mode_gives_it() {
        let m = Metrics::new(FailureCounter::IptablesRestore);
        assert!(!m.encode().contains("kubeproxy_iptables_"));
        m.serve_fixed_counter_metrics(COUNTER_METRICS.to_vec(), 7);
        let text = m.encode();
        for name in [
            "kubeproxy_iptables_ct_state_invalid_dropped_packets",
            "kubeproxy_iptables_localhost_nodeports_accepted_packets",
        ] {
            assert!(text.contains(&format!("# TYPE {name} counter\n")), "{text}");
            assert!(text.contains(&format!("\n{name}_total 7\n")), "{text}");
        }
    }
}
