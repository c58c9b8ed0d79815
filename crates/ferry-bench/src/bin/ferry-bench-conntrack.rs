//! `ferry-bench-conntrack`: how long the UDP conntrack cleanup takes on a busy conntrack table.
//!
//! For each N, in a throw-away network namespace: loads N UDP entries (`conntrack -R`) towards
//! 100 UDP ClusterIPs, each DNATed to one of four endpoints, 1 % of them to a fifth endpoint
//! that has just been removed; then times one cleanup that checks every frontend (one dump,
//! filter, one delete per stale entry: what a full sync does) and one that finds nothing stale
//! (the dump and filter alone). `conntrack -L -p udp` of the same table is timed for comparison.
//! Needs root.
//!
//! ```text
//! cargo run -p ferry-bench --release --bin ferry-bench-conntrack -- 10000 100000
//! ```

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::fs::File;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use nix::sched::{setns, CloneFlags};

use ferry_bench::netns::{self, Netns, PREFIX};
use ferry_compile::conntrack::{Frontend, StaleFlowFilter};
use ferry_dataplane::conntrack::{delete_stale_udp, CleanupReport};
use ferry_model::IpFamily;

const SERVICES: u32 = 100;
const LIVE: [Ipv4Addr; 4] = [
    Ipv4Addr::new(10, 0, 1, 1),
    Ipv4Addr::new(10, 0, 1, 2),
    Ipv4Addr::new(10, 0, 1, 3),
    Ipv4Addr::new(10, 0, 1, 4),
];
const REMOVED: Ipv4Addr = Ipv4Addr::new(10, 0, 9, 9);

fn cluster_ip(i: u32) -> Ipv4Addr {
    Ipv4Addr::new(10, 96, 0, (i % SERVICES + 1) as u8)
}

/// `conntrack -R` input: N entries, client 172.16.x.y:port → ClusterIP:53 → endpoint:5353.
fn entries(n: u32) -> String {
    let mut s = String::new();
    for i in 0..n {
        let client = Ipv4Addr::from(u32::from(Ipv4Addr::new(172, 16, 0, 0)) + i / 50_000);
        let sport = 10_000 + i % 50_000;
        let reply = if i % 100 == 0 {
            REMOVED
        } else {
            LIVE[(i % 4) as usize]
        };
        let _ = writeln!(
            s,
            "-I -p udp -s {client} -d {} --sport {sport} --dport 53 -r {reply} -q {client} --reply-port-src 5353 --reply-port-dst {sport} -t 600",
            cluster_ip(i)
        );
    }
    s
}

fn filters(keep_removed: bool) -> Vec<StaleFlowFilter> {
    // The endpoints answer on 5353 (`--reply-port-src` above).
    let endpoint = |ip: Ipv4Addr| SocketAddr::new(IpAddr::V4(ip), 5353);
    let mut keep: BTreeSet<SocketAddr> = LIVE.iter().copied().map(endpoint).collect();
    if keep_removed {
        keep.insert(endpoint(REMOVED));
    }
    (0..SERVICES)
        .map(|i| StaleFlowFilter {
            frontend: Frontend::Address(SocketAddr::from((cluster_ip(i), 53))),
            keep: keep.clone(),
        })
        .collect()
}

/// Runs one cleanup on a thread inside the namespace.
fn cleanup(ns: &Netns, filters: &[StaleFlowFilter]) -> anyhow::Result<(CleanupReport, Duration)> {
    let file = File::open(netns::path(ns.name())).context("open the namespace")?;
    std::thread::scope(|s| {
        s.spawn(move || {
            setns(&file, CloneFlags::CLONE_NEWNET).context("setns")?;
            let started = Instant::now();
            let report = delete_stale_udp(IpFamily::V4, filters)?;
            Ok((report, started.elapsed()))
        })
        .join()
        .map_err(|_| anyhow::anyhow!("cleanup thread panicked"))?
    })
}

fn measure(n: u32) -> anyhow::Result<()> {
    let ns = Netns::create(&format!("{PREFIX}{}-ct{n}", std::process::id()))?;
    let input = std::env::temp_dir().join(format!("ferry-bench-ct-{}-{n}.txt", std::process::id()));
    std::fs::write(&input, entries(n))?;
    let started = Instant::now();
    let loaded =
        netns::run(&mut ns.command("conntrack", [std::ffi::OsStr::new("-R"), input.as_os_str()]));
    let _ = std::fs::remove_file(&input);
    loaded.context("conntrack -R")?;
    let load = started.elapsed();
    let started = Instant::now();
    netns::run(&mut ns.command("conntrack", ["-L", "-p", "udp"]))?;
    let tool = started.elapsed();
    let (nothing, t_nothing) = cleanup(&ns, &filters(true))?;
    let (stale, t_stale) = cleanup(&ns, &filters(false))?;
    let left = netns::run(&mut ns.command("conntrack", ["-C"]))?;
    println!(
        "{n:>8} {:>10.0} {:>16.1} {:>8} {:>14.1} {:>8} {:>8} {:>14.1} {:>8}",
        load.as_secs_f64() * 1e3,
        tool.as_secs_f64() * 1e3,
        nothing.dumped,
        t_nothing.as_secs_f64() * 1e3,
        stale.stale,
        stale.deleted,
        t_stale.as_secs_f64() * 1e3,
        left.trim(),
    );
    Ok(())
}

fn main() -> anyhow::Result<()> {
    anyhow::ensure!(
        nix::unistd::geteuid().is_root(),
        "needs root (network namespaces)"
    );
    let sizes: Vec<u32> = match std::env::args()
        .skip(1)
        .map(|a| a.parse())
        .collect::<Result<Vec<u32>, _>>()
    {
        Ok(v) if !v.is_empty() => v,
        Ok(_) => vec![10_000, 100_000],
        Err(e) => anyhow::bail!("usage: ferry-bench-conntrack [N…]: {e}"),
    };
    let ok = Command::new("conntrack").arg("--version").output().is_ok();
    anyhow::ensure!(ok, "needs the conntrack tool (to load the entries)");
    println!(
        "{:>8} {:>10} {:>16} {:>8} {:>14} {:>8} {:>8} {:>14} {:>8}",
        "entries",
        "load ms",
        "conntrack -L ms",
        "dumped",
        "no-stale ms",
        "stale",
        "deleted",
        "cleanup ms",
        "left"
    );
    for n in sizes {
        measure(n)?;
    }
    Ok(())
}
