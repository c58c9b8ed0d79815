//! The proxy: Ferry's userspace engine serving the lab's plan on the node, answering `rss`
//! and `cpu` on stdin.

use std::io::BufRead as _;

use anyhow::ensure;

use ferry_dataplane::userspace::{CopyMode, ProxiedPort, ProxyConfig, UserspaceProxy};
use ferry_model::IpFamily;

use crate::lab;

/// Resident memory of this process, in KiB (`VmRSS`).
pub fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// CPU time used by this process (user + system), in seconds.
fn cpu_secs() -> f64 {
    use nix::sys::resource::{getrusage, UsageWho};
    getrusage(UsageWho::RUSAGE_SELF).map_or(0.0, |u| {
        let t = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 + tv.tv_usec() as f64 / 1e6;
        t(u.user_time()) + t(u.system_time())
    })
}

/// This process's open-files limit (the engine raised it as far as it could).
fn nofile() -> u64 {
    use nix::sys::resource::{getrlimit, Resource};
    getrlimit(Resource::RLIMIT_NOFILE).map_or(0, |(soft, _)| soft)
}

/// Serves until stdin closes, copying TCP bytes the `copy` way (`splice`, `buffered`).
pub fn proxy(copy: &str) -> anyhow::Result<()> {
    let copy = match copy {
        "splice" => CopyMode::Splice,
        "buffered" => CopyMode::Buffered,
        other => anyhow::bail!("--copy {other:?}: expected splice or buffered"),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let plan = lab::plan();
    let ports = lab::proxy_ports(&plan);
    let config = ProxyConfig {
        copy,
        ..ProxyConfig::default()
    };
    let mut engine = UserspaceProxy::new(config, rt.handle().clone());
    let served = plan
        .services
        .values()
        .map(|sp| ProxiedPort {
            plan: sp.clone(),
            proxy_port: ports.get(&sp.name),
            localhost_node_port: false,
        })
        .collect();
    let report = engine.sync_full(IpFamily::V4, plan.local.cidrs(), served);
    ensure!(report.failed.is_empty(), "{:?}", report.failed);
    println!("ready");
    for line in std::io::stdin().lock().lines() {
        match line?.trim() {
            "rss" => println!("{}", rss_kib()),
            "cpu" => println!("{:.3}", cpu_secs()),
            "nofile" => println!("{}", nofile()),
            "metrics" => {
                for m in engine.metrics() {
                    println!(
                        "{} active={} connections={} errors={} dial_failures={}",
                        m.name, m.active, m.connections, m.errors, m.dial_failures
                    );
                }
                println!("end");
            }
            _ => println!("?"),
        }
    }
    Ok(())
}
