//! The standard process metrics every Prometheus client exports (and Kubernetes components,
//! kube-proxy's dashboards among them, read): `process_cpu_seconds_total`,
//! `process_resident_memory_bytes`, `process_virtual_memory_bytes`,
//! `process_start_time_seconds`, `process_open_fds`, `process_max_fds`, read from `/proc/self`
//! at each scrape. Go's `go_*` runtime metrics (goroutines, GC) have no honest equivalent in a
//! Rust process and are not exported.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

/// One reading of this process.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Reading {
    pub cpu_seconds: f64,
    pub resident_bytes: u64,
    pub virtual_bytes: u64,
    pub start_time_seconds: f64,
    pub open_fds: u64,
    pub max_fds: Option<u64>,
}

/// Reads `/proc/self` (and the boot time, which process start times count from).
pub fn read() -> procfs::ProcResult<Reading> {
    use procfs::WithCurrentSystemInfo as _;
    let me = procfs::process::Process::myself()?;
    let stat = me.stat()?;
    let ticks = procfs::ticks_per_second() as f64;
    let max_fds = match me.limits()?.max_open_files.soft_limit {
        procfs::process::LimitValue::Value(n) => Some(n),
        procfs::process::LimitValue::Unlimited => None,
    };
    Ok(Reading {
        cpu_seconds: (stat.utime + stat.stime) as f64 / ticks,
        resident_bytes: stat.rss_bytes().get(),
        virtual_bytes: stat.vsize,
        start_time_seconds: procfs::boot_time_secs()? as f64 + stat.starttime as f64 / ticks,
        open_fds: me.fd_count()? as u64,
        max_fds,
    })
}

/// The collector, read at each scrape; a failed read exports nothing (and is logged at debug).
#[derive(Debug)]
struct ProcessCollector;

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let r = match read() {
            Ok(r) => r,
            Err(e) => {
                tracing::debug!("process metrics: cannot read /proc/self: {e}");
                return Ok(());
            }
        };
        let counter = ConstCounter::new(r.cpu_seconds);
        counter.encode(encoder.encode_descriptor(
            "process_cpu_seconds",
            "Total user and system CPU time spent in seconds.",
            None,
            counter.metric_type(),
        )?)?;
        let gauges = [
            (
                "process_resident_memory_bytes",
                "Resident memory size in bytes.",
                r.resident_bytes as f64,
            ),
            (
                "process_virtual_memory_bytes",
                "Virtual memory size in bytes.",
                r.virtual_bytes as f64,
            ),
            (
                "process_start_time_seconds",
                "Start time of the process since unix epoch in seconds.",
                r.start_time_seconds,
            ),
            (
                "process_open_fds",
                "Number of open file descriptors.",
                r.open_fds as f64,
            ),
        ];
        let max = r.max_fds.map(|m| {
            (
                "process_max_fds",
                "Maximum number of open file descriptors.",
                m as f64,
            )
        });
        for (name, help, value) in gauges.into_iter().chain(max) {
            let gauge = ConstGauge::new(value);
            gauge.encode(encoder.encode_descriptor(name, help, None, gauge.metric_type())?)?;
        }
        Ok(())
    }
}

/// Registers the process metrics.
pub fn register(registry: &mut Registry) {
    registry.register_collector(Box::new(ProcessCollector));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_reads_as_itself() {
        let before = read().expect("read /proc/self");
        let after = read().expect("read /proc/self");
        // Other tests of this binary open and close files meanwhile: only that some are open.
        assert!(after.open_fds >= 3, "{after:?}");
        assert!(
            after.max_fds.is_none_or(|m| m >= after.open_fds),
            "{after:?}"
        );
        assert!(after.resident_bytes > 1 << 20, "{after:?}");
        assert!(after.virtual_bytes >= after.resident_bytes, "{after:?}");
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_secs_f64();
        // Started before now, and not before this test binary was built a day ago.
        assert!(
            after.start_time_seconds <= now + 1.0 && after.start_time_seconds > now - 86_400.0,
            "{after:?} at {now}"
        );
        assert!(after.cpu_seconds >= before.cpu_seconds);
    }
}
