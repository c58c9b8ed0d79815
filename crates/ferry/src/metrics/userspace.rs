//! `ferry_userspace_*`: the per-service-port counters of Ferry's userspace proxy (the
//! userspace mode, localhost NodePorts), read from the mode at each scrape. The mode says
//! whether it runs the proxy (`NodeMode::proxy_metrics`); nothing here knows the mode.

use std::sync::{Arc, OnceLock};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;

use ferry_dataplane::userspace::{names, PortMetrics, Stats};
use ferry_model::IpFamily;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PortLabels {
    namespace: String,
    service: String,
    port: String,
    protocol: String,
    ip_family: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FamilyLabels {
    ip_family: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BytesLabels {
    #[prometheus(flatten)]
    port: PortLabels,
    direction: String,
}

fn labels(m: &PortMetrics) -> PortLabels {
    PortLabels {
        namespace: m.name.service.namespace.to_string(),
        service: m.name.service.name.to_string(),
        port: m.name.port.clone(),
        protocol: m.name.protocol.as_str().to_owned(),
        ip_family: m.family.as_str().to_owned(),
    }
}

/// Where the counters come from.
#[derive(Clone, Debug)]
enum Source {
    /// The mode's proxy.
    Proxy(Stats),
    /// Fixed counters (the metrics reference shows every family with its labels), and no
    /// service port without a proxy port.
    #[cfg(test)]
    Fixed(Vec<PortMetrics>),
}

/// The collector: empty until the mode's proxy counters are given.
#[derive(Clone, Debug, Default)]
pub(super) struct ProxyCollector {
    stats: Arc<OnceLock<Source>>,
}

impl ProxyCollector {
    /// Reads `stats` from now on (the first call wins).
    pub(super) fn serve(&self, stats: Stats) {
        let _ = self.stats.set(Source::Proxy(stats));
    }

    /// Serves `ports` as they are (the first call wins).
    #[cfg(test)]
    pub(super) fn serve_fixed(&self, ports: Vec<PortMetrics>) {
        let _ = self.stats.set(Source::Fixed(ports));
    }
}

/// A counter's name as declared (OpenMetrics adds `_total` when it samples it).
fn counter_name(name: &str) -> &str {
    name.strip_suffix("_total").unwrap_or(name)
}

type Value = fn(&PortMetrics) -> u64;

impl Collector for ProxyCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let (ports, without_port) = match self.stats.get() {
            None => return Ok(()),
            Some(Source::Proxy(stats)) => (stats.snapshot(), stats.without_proxy_port()),
            #[cfg(test)]
            Some(Source::Fixed(ports)) => (ports.clone(), vec![(IpFamily::V4, 0)]),
        };
        encode_without_port(&mut encoder, &without_port)?;
        let active = encoder.encode_descriptor(
            names::ACTIVE,
            "Proxied TCP connections and UDP associations open now",
            None,
            MetricType::Gauge,
        )?;
        let mut active = active;
        for m in &ports {
            let v = i64::try_from(m.active).unwrap_or(i64::MAX);
            ConstGauge::new(v).encode(active.encode_family(&labels(m))?)?;
        }
        let counters: [(&str, &str, Value); 3] = [
            (
                names::CONNECTIONS,
                "TCP connections and UDP associations proxied to an endpoint",
                |m| m.connections,
            ),
            (
                names::ERRORS,
                "Connections or datagrams that could not be proxied",
                |m| m.errors,
            ),
            (
                names::DIAL_FAILURES,
                "Failed dial attempts to an endpoint (each retried on the next one)",
                |m| m.dial_failures,
            ),
        ];
        for (name, help, value) in counters {
            let mut e =
                encoder.encode_descriptor(counter_name(name), help, None, MetricType::Counter)?;
            for m in &ports {
                ConstCounter::new(value(m)).encode(e.encode_family(&labels(m))?)?;
            }
        }
        let mut e = encoder.encode_descriptor(
            counter_name(names::BYTES),
            "Bytes copied by the proxy, by direction",
            None,
            MetricType::Counter,
        )?;
        for m in &ports {
            for (direction, v) in [
                ("to_endpoint", m.bytes_to_endpoint),
                ("to_client", m.bytes_to_client),
            ] {
                let l = BytesLabels {
                    port: labels(m),
                    direction: direction.to_owned(),
                };
                ConstCounter::new(v).encode(e.encode_family(&l)?)?;
            }
        }
        Ok(())
    }
}

/// [`names::WITHOUT_PROXY_PORT`], per family synced (the userspace mode's; none for localhost
/// NodePorts, which need no proxy port).
fn encode_without_port(
    encoder: &mut DescriptorEncoder,
    counts: &[(IpFamily, u64)],
) -> Result<(), std::fmt::Error> {
    if counts.is_empty() {
        return Ok(());
    }
    let mut e = encoder.encode_descriptor(
        names::WITHOUT_PROXY_PORT,
        "Service ports the last sync left without a proxy port (portRange full, or the port \
         could not be listened on): their frontends are rejected",
        None,
        MetricType::Gauge,
    )?;
    for (family, n) in counts {
        let labels = FamilyLabels {
            ip_family: family.as_str().to_owned(),
        };
        let v = i64::try_from(*n).unwrap_or(i64::MAX);
        ConstGauge::new(v).encode(e.encode_family(&labels)?)?;
    }
    Ok(())
}
