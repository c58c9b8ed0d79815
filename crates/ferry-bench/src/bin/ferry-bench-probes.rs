//! `ferry-bench-probes`: what standalone mode's readiness probes cost at scale.
//!
//! In a throw-away network namespace (its loopback is all of 127.0.0.0/8), one child process
//! serves HTTP on `0.0.0.0:56010` (200 to every request, `Connection: close`), another runs
//! Ferry's Pod stage exactly as `ferry run` will: a Resync of S Services × M Pods each (every
//! Pod with the seed's `httpGet /hello` readiness probe, no initial delay, the given period,
//! a distinct 127.x.y.z address, so no 4-tuple is reused while sockets sit in TIME_WAIT), the
//! real prober ([`NetworkCheck`], at most 64 probes at once), verdicts fed back into the
//! EndpointSlice controller. After a warm-up of two periods (the first period spreads the
//! probes with kubelet's start-up jitter and turns every Pod ready), it measures one window:
//! CPU time of the probing process (user + system, `getrusage`), probes run, and memory
//! (VmRSS before the Pods were loaded and after the window). Needs root.
//!
//! ```text
//! cargo build --release -p ferry-bench --bin ferry-bench-probes
//! ./target/release/ferry-bench-probes            # 10 000 endpoints (1 000 × 10), period 10 s
//! ./target/release/ferry-bench-probes 2000 5 20 1  # endpoints, period s, window s, pods/service
//! ```

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use ferry_bench::measure::memory_mib;
use ferry_bench::netns::{self, Netns, PREFIX};
use ferry_model::fixtures::{mk_http_probe, mk_node, mk_pod, mk_service, with_selector};
use ferry_model::Object;
use ferry_source::pods::{self, StageOptions};
use ferry_source::probe::{NetworkCheck, ProbeBook, DEFAULT_MAX_CONCURRENT};
use ferry_source::SourceEvent;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::mpsc;

const PORT: u16 = 56010;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("__serve") => serve(),
        Some("__probe") => {
            let n = |i: usize| -> anyhow::Result<u64> {
                args.get(i)
                    .context("missing argument")?
                    .parse()
                    .context("a number")
            };
            probe(n(1)? as usize, n(2)?, n(3)?, n(4)? as usize)
        }
        _ => {
            let n = |i: usize, default: u64| -> anyhow::Result<u64> {
                args.get(i).map_or(Ok(default), |a| {
                    a.parse()
                        .context("usage: ferry-bench-probes [ENDPOINTS] [PERIOD_S] [WINDOW_S] [PODS_PER_SERVICE]")
                })
            };
            orchestrate(
                n(0, 10_000)? as usize,
                n(1, 10)?,
                n(2, 30)?,
                n(3, 10)? as usize,
            )
        }
    }
}

/// Runs the server and the prober in a fresh namespace and prints the prober's figures.
fn orchestrate(
    endpoints: usize,
    period: u64,
    window: u64,
    per_service: usize,
) -> anyhow::Result<()> {
    anyhow::ensure!(
        nix::unistd::geteuid().is_root(),
        "needs root (network namespaces)"
    );
    let ns = Netns::create(&format!("{PREFIX}{}-probes", std::process::id()))?;
    netns::run(&mut ns.command("ip", ["link", "set", "lo", "up"]))?;
    let me = std::env::current_exe().context("own path")?;
    let mut server = ns
        .command(&me, ["__serve"])
        .spawn()
        .context("start the server")?;
    std::thread::sleep(Duration::from_millis(300));
    let args = [
        endpoints.to_string(),
        period.to_string(),
        window.to_string(),
        per_service.to_string(),
    ];
    let status = ns
        .command(&me, ["__probe"].into_iter().map(String::from).chain(args))
        .status()
        .context("run the prober");
    let _ = server.kill();
    let _ = server.wait();
    anyhow::ensure!(status?.success(), "the prober failed");
    Ok(())
}

/// The pods' HTTP server: 200 to every request, then close.
fn serve() -> anyhow::Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()?;
    rt.block_on(async {
        let listener = tokio::net::TcpListener::bind(("0.0.0.0", PORT)).await?;
        loop {
            let (mut conn, _) = listener.accept().await?;
            tokio::spawn(async move {
                let mut buf = [0u8; 2048];
                let mut seen = Vec::new();
                while !seen.ends_with(b"\r\n\r\n") {
                    match conn.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = conn
                    .write_all(
                        b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n",
                    )
                    .await;
            });
        }
    })
}

/// S Services of `per_service` probed Pods each, on one Node.
fn cluster(endpoints: usize, period: u64, per_service: usize) -> Vec<Object> {
    let mut objects = vec![Object::from(mk_node(
        "node-a",
        "192.168.0.1",
        "127.0.0.0/8",
    ))];
    for s in 0..endpoints.div_ceil(per_service) {
        let app = format!("app-{s}");
        let ip = format!("172.30.{}.{}", s / 250, s % 250 + 1);
        objects.push(Object::from(with_selector(
            mk_service("bench", &app, &ip, 80),
            &app,
        )));
    }
    for i in 0..endpoints {
        let app = format!("app-{}", i / per_service);
        let ip = format!("127.{}.{}.{}", 1 + i / 62_500, (i / 250) % 250, i % 250 + 1);
        let mut pod = mk_pod("bench", &format!("pod-{i}"), &app, &ip, "node-a");
        pod.containers[0].ready = None;
        // The seed's probe, without initial delay.
        pod.containers[0].readiness_probe = Some(mk_http_probe("/hello", PORT, 0, period as u32));
        objects.push(Object::from(pod));
    }
    objects
}

fn cpu_seconds() -> anyhow::Result<f64> {
    let u = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF)
        .context("getrusage")?;
    let t = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 + tv.tv_usec() as f64 / 1e6;
    Ok(t(u.user_time()) + t(u.system_time()))
}

/// Runs the Pod stage with real probes and prints the figures.
fn probe(endpoints: usize, period: u64, window: u64, per_service: usize) -> anyhow::Result<()> {
    let per_service = per_service.max(1);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let rss_start = memory_mib("VmRSS:")?;
    let objects = cluster(endpoints, period, per_service);
    let rss_generated = memory_mib("VmRSS:")?;
    let book = Arc::new(Mutex::new(ProbeBook::default()));
    let totals = |book: &Arc<Mutex<ProbeBook>>| {
        let book = book
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        book.counters()
            .fold((0, 0, 0), |a, (_, c)| (a.0 + c.0, a.1 + c.1, a.2 + c.2))
    };
    rt.block_on(async {
        let (source, input) = mpsc::channel(16);
        let (output, mut state) = mpsc::channel(1024);
        let options = StageOptions {
            check: Arc::new(NetworkCheck::default()),
            max_concurrent: DEFAULT_MAX_CONCURRENT,
            book: book.clone(),
        };
        tokio::spawn(pods::run(input, output, options, |_| {}));
        // The cluster state's side: count the slice updates it would apply.
        let updates = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let counted = updates.clone();
        tokio::spawn(async move {
            while state.recv().await.is_some() {
                counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        });
        let (cpu_start, started) = (cpu_seconds()?, Instant::now());
        source.send(SourceEvent::Resync(objects)).await.context("start the stage")?;
        tokio::time::sleep(Duration::from_secs(2 * period)).await;
        let warm_cpu = cpu_seconds()? - cpu_start;
        let rss_warm = memory_mib("VmRSS:")?;
        let (cpu0, wall0, probes0) = (cpu_seconds()?, Instant::now(), totals(&book));
        tokio::time::sleep(Duration::from_secs(window)).await;
        let (cpu1, wall, probes1) = (cpu_seconds()?, wall0.elapsed(), totals(&book));
        let ran = (probes1.0 + probes1.1 + probes1.2) - (probes0.0 + probes0.1 + probes0.2);
        let failed = (probes1.1 + probes1.2) - (probes0.1 + probes0.2);
        let cpu = cpu1 - cpu0;
        println!("endpoints {endpoints} ({} services × {per_service}), period {period} s, window {:.1} s", endpoints.div_ceil(per_service), wall.as_secs_f64());
        println!("probes run in the window: {ran} ({:.0}/s), failed: {failed}", ran as f64 / wall.as_secs_f64());
        println!("CPU: {:.2} s in {:.1} s = {:.1} % of one core ({:.1} µs per probe)", cpu, wall.as_secs_f64(), 100.0 * cpu / wall.as_secs_f64(), 1e6 * cpu / ran.max(1) as f64);
        println!("RSS: {rss_start:.1} MiB at start, {rss_generated:.1} MiB with the generated objects, {rss_warm:.1} MiB after warm-up, {:.1} MiB after the window (peak {:.1} MiB)", memory_mib("VmRSS:")?, memory_mib("VmHWM:")?);
        println!("warm-up ({:.0} s: first resync, every Pod turning ready): {warm_cpu:.2} s CPU", started.elapsed().as_secs_f64() - wall.as_secs_f64());
        println!("slice events handed to the cluster state: {}", updates.load(std::sync::atomic::Ordering::Relaxed));
        anyhow::Ok(())
    })
}
