//! `ferry-bench-userspace`: the userspace proxy against kernel NAT, in the same lab and run.
//!
//! Three network namespaces (client, node, server; see `lab.rs`). On the node, first Ferry's
//! nftables-mode table (the kernel DNATs to the endpoint), then the userspace mode's table
//! and Ferry's userspace engine in a process of its own. The same client runs against both:
//! bulk TCP throughput (1 and 4 streams), new connections per second (64 concurrent loops of
//! connect, one byte each way, close), and, through the proxy only, the proxy's resident
//! memory before and after 10 000 idle proxied connections. The proxy's CPU time during each
//! measurement is printed too. All processes share this machine's cores. Needs root.
//!
//! ```text
//! cargo run -p ferry-bench --release --bin ferry-bench-userspace -- --runs 3
//! ```

mod lab;
mod load;
mod proxy;
mod scale;

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::SocketAddr;
use std::process::{Child, ChildStdin, ChildStdout, Stdio};

use anyhow::{bail, ensure, Context as _};
use clap::{Parser, Subcommand};

use ferry_bench::netns::{self, Netns};

#[derive(Parser)]
#[command(about = "Userspace proxy vs kernel NAT: throughput, connection rate, idle memory")]
struct Args {
    /// Seconds per throughput or rate measurement.
    #[arg(long, default_value_t = 5)]
    secs: u64,
    /// Concurrent connection loops of the rate measurement.
    #[arg(long, default_value_t = 64)]
    concurrency: usize,
    /// Idle connections for the memory measurement.
    #[arg(long, default_value_t = 10_000)]
    idle: usize,
    /// Repetitions (each one kernel NAT, then userspace).
    #[arg(long, default_value_t = 1)]
    runs: usize,
    /// Service counts of the scale measurement (10 endpoints each; `--scale` alone: none).
    #[arg(long, value_delimiter = ',', num_args = 0.., default_value = "1000,10000")]
    scale: Vec<usize>,
    /// How the proxy copies TCP bytes: `splice` (Ferry's) or `buffered` (for comparison).
    #[arg(long, default_value = "splice")]
    copy: String,
    #[command(subcommand)]
    role: Option<Role>,
}

/// The processes the benchmark starts inside its namespaces.
#[derive(Subcommand)]
enum Role {
    #[command(hide = true)]
    Server,
    #[command(hide = true)]
    Proxy { copy: String },
    #[command(hide = true)]
    Bulk {
        to: SocketAddr,
        streams: usize,
        secs: u64,
    },
    #[command(hide = true)]
    Rate {
        to: SocketAddr,
        concurrency: usize,
        secs: u64,
    },
    #[command(hide = true)]
    Idle { to: SocketAddr, n: usize },
    #[command(hide = true)]
    Scale { services: usize, endpoints: usize },
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    match args.role {
        Some(Role::Server) => load::server(lab::SERVER),
        Some(Role::Proxy { copy }) => proxy::proxy(&copy),
        Some(Role::Bulk { to, streams, secs }) => load::bulk(to, streams, secs),
        Some(Role::Rate {
            to,
            concurrency,
            secs,
        }) => load::rate(to, concurrency, secs),
        Some(Role::Idle { to, n }) => load::idle(to, n),
        Some(Role::Scale {
            services,
            endpoints,
        }) => scale::scale(services, endpoints),
        None => bench(&args),
    }
}

/// A child process started in a namespace, spoken to line by line.
struct Proc {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Proc {
    fn start(ns: &Netns, args: &[String]) -> anyhow::Result<Proc> {
        let exe = std::env::current_exe()?;
        let mut child = ns
            .command(exe, args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .with_context(|| format!("start {args:?} in {}", ns.name()))?;
        Ok(Proc {
            stdin: child.stdin.take(),
            stdout: BufReader::new(child.stdout.take().context("stdout")?),
            child,
        })
    }

    fn line(&mut self) -> anyhow::Result<String> {
        let mut l = String::new();
        if self.stdout.read_line(&mut l)? == 0 {
            bail!("child ended: {:?}", self.child.wait()?);
        }
        Ok(l.trim().to_owned())
    }

    fn ask(&mut self, what: &str) -> anyhow::Result<String> {
        let stdin = self.stdin.as_mut().context("stdin closed")?;
        writeln!(stdin, "{what}")?;
        self.line()
    }

    /// Closes stdin and waits for the process to end.
    fn finish(mut self) -> anyhow::Result<()> {
        drop(self.stdin.take());
        self.child.wait()?;
        Ok(())
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One client measurement: its output line.
fn client(lab: &lab::Lab, args: &[String]) -> anyhow::Result<String> {
    let mut p = Proc::start(&lab.client, args)?;
    let out = p.line()?;
    p.finish()?;
    Ok(out)
}

fn svc(i: usize) -> String {
    format!("{}:80", lab::SERVICES[i].1)
}

/// Figures of one path (kernel NAT or userspace) in one run.
#[derive(Default, Clone)]
struct Figures {
    gbit_1: f64,
    gbit_4: f64,
    conn_per_sec: f64,
    conn_failed: u64,
    proxy_cpu: [f64; 3],
}

fn measure(lab: &lab::Lab, args: &Args, proxy: &mut Option<Proc>) -> anyhow::Result<Figures> {
    let mut f = Figures::default();
    let secs = args.secs.to_string();
    let cpu = |p: &mut Option<Proc>| -> anyhow::Result<f64> {
        p.as_mut().map_or(Ok(0.0), |p| Ok(p.ask("cpu")?.parse()?))
    };
    for (i, streams) in [(0usize, 1usize), (1, 4)] {
        let before = cpu(proxy)?;
        let out = client(
            lab,
            &["bulk".into(), svc(0), streams.to_string(), secs.clone()],
        )?;
        let gbit: f64 = out
            .parse()
            .with_context(|| format!("bulk printed {out:?}"))?;
        f.proxy_cpu[i] = (cpu(proxy)? - before) / args.secs as f64;
        if streams == 1 {
            f.gbit_1 = gbit;
        } else {
            f.gbit_4 = gbit;
        }
    }
    let before = cpu(proxy)?;
    let conc = args.concurrency.to_string();
    let out = client(lab, &["rate".into(), svc(1), conc, secs])?;
    f.proxy_cpu[2] = (cpu(proxy)? - before) / args.secs as f64;
    let mut it = out.split_whitespace();
    f.conn_per_sec = it.next().context("rate")?.parse()?;
    f.conn_failed = it.next().context("failures")?.parse()?;
    Ok(f)
}

/// The proxy's resident memory (KiB) before and after idle connections through it.
struct Idle {
    before: u64,
    after: u64,
    opened: usize,
}

/// One run: both paths.
struct Row {
    run: usize,
    kernel: Figures,
    user: Figures,
    idle: Idle,
}

/// The proxy's RSS before and after `n` idle connections through it.
fn idle_memory(lab: &lab::Lab, proxy: &mut Proc, n: usize) -> anyhow::Result<Idle> {
    let before: u64 = proxy.ask("rss")?.parse()?;
    let mut idle = Proc::start(&lab.client, &["idle".into(), svc(2), n.to_string()])?;
    let opened = idle.line()?;
    let opened: usize = opened
        .strip_prefix("open ")
        .context("idle client")?
        .parse()?;
    std::thread::sleep(std::time::Duration::from_secs(1));
    let after: u64 = proxy.ask("rss")?.parse()?;
    idle.finish()?;
    Ok(Idle {
        before,
        after,
        opened,
    })
}

fn bench(args: &Args) -> anyhow::Result<()> {
    ensure!(
        nix::unistd::geteuid().is_root(),
        "needs root (network namespaces)"
    );
    netns::reap_stale()?;
    let lab = lab::Lab::build()?;
    let mut server = Proc::start(&lab.server, &["server".into()])?;
    ensure!(server.line()? == "ready", "server did not start");
    let plan = lab::plan();
    let mut rows = Vec::new();
    for run in 1..=args.runs {
        lab::load_kernel_nat(&lab.node, &plan)?;
        let kernel = measure(&lab, args, &mut None)?;
        lab::load_userspace(&lab.node, &plan)?;
        let mut proxy = Proc::start(&lab.node, &["proxy".into(), args.copy.clone()])?;
        ensure!(proxy.line()? == "ready", "proxy did not start");
        let mut some = Some(proxy);
        let user = measure(&lab, args, &mut some)?;
        let mut proxy = some.take().context("proxy")?;
        // Two sockets per proxied connection, and a few more for the rest of the process.
        let nofile: usize = proxy.ask("nofile")?.parse()?;
        let fits = nofile.saturating_sub(100) / 2;
        if args.idle > fits {
            eprintln!("note: the proxy's open-files limit is {nofile} (raising it needs CAP_SYS_RESOURCE): {fits} idle connections instead of {}", args.idle);
        }
        let idle = idle_memory(&lab, &mut proxy, args.idle.min(fits))?;
        proxy.finish()?;
        rows.push(Row {
            run,
            kernel,
            user,
            idle,
        });
    }
    if !rows.is_empty() {
        report(args, &rows);
    }
    drop(server);
    drop(lab);
    scale_report(&args.scale)
}

/// The scale measurement, each N in a namespace and process of its own: compile (plan, proxy
/// ports, rules), the rules' full sync (nftables mode's applier), opening every listener, a
/// full resync of the engine, one endpoint change, and the process's RSS before compiling
/// (the cluster state) and at the end.
fn scale_report(counts: &[usize]) -> anyhow::Result<()> {
    if counts.is_empty() {
        return Ok(());
    }
    println!(
        "userspace mode at scale (10 endpoints per service, one TCP port each; proxy ports in \
         the default portRange, n = listeners opened)"
    );
    println!(
        "{:>6}  {:>10}  {:>13}  {:>30}  {:>16}  {:>15}  {:>18}",
        "N",
        "compile ms",
        "rules sync ms",
        "listeners ms (n)",
        "engine resync ms",
        "1 endpoint ms",
        "RSS KiB"
    );
    for &n in counts {
        let ns = Netns::create(&format!("{}{}-us-scale", netns::PREFIX, std::process::id()))?;
        let out = netns::run(&mut ns.command(
            std::env::current_exe()?,
            ["scale".to_owned(), n.to_string(), "10".to_owned()],
        ))?;
        let f: Vec<&str> = out.split_whitespace().collect();
        ensure!(f.len() == 9, "scale printed {out:?}");
        println!(
            "{n:>6}  {:>10}  {:>13}  {:>30}  {:>16}  {:>15}  {:>18}",
            f[0],
            f[1],
            format!("{} ({} in {})", f[2], f[7], f[8]),
            f[3],
            f[4],
            format!("{} → {}", f[5], f[6])
        );
    }
    Ok(())
}

fn print_path(run: usize, path: &str, f: &Figures, cpu: String, mem: String) {
    println!(
        "{run:>3}  {path:>9}  {:>16.2}  {:>16.2}  {:>14.0}  {:>8}  {cpu:>21}  {mem:>26}",
        f.gbit_1, f.gbit_4, f.conn_per_sec, f.conn_failed
    );
}

fn report(args: &Args, rows: &[Row]) {
    println!(
        "userspace proxy ({} copy) vs kernel NAT ({} s per figure, rate with {} concurrent loops)",
        args.copy, args.secs, args.concurrency
    );
    println!(
        "{:>3}  {:>9}  {:>16}  {:>16}  {:>14}  {:>8}  {:>21}  {:>26}",
        "run",
        "path",
        "1 stream Gbit/s",
        "4 streams Gbit/s",
        "new conn/s",
        "failed",
        "proxy CPU (1/4/rate)",
        "idle conns: RSS KiB before → after"
    );
    for Row {
        run,
        kernel: k,
        user: u,
        idle,
    } in rows
    {
        print_path(*run, "kernel", k, "-".to_owned(), String::new());
        let cpu = format!(
            "{:.2}/{:.2}/{:.2}",
            u.proxy_cpu[0], u.proxy_cpu[1], u.proxy_cpu[2]
        );
        let extra = idle.after.saturating_sub(idle.before) as f64 / 1024.0;
        let mem = format!(
            "{}: {} → {} (+{extra:.1} MiB)",
            idle.opened, idle.before, idle.after
        );
        print_path(*run, "userspace", u, cpu, mem);
        println!(
            "     userspace/kernel: {:.0} % (1 stream), {:.0} % (4 streams), {:.0} % (conn/s)",
            100.0 * u.gbit_1 / k.gbit_1,
            100.0 * u.gbit_4 / k.gbit_4,
            100.0 * u.conn_per_sec / k.conn_per_sec
        );
        // What the proxy process itself spent (its syscalls; softirq work done for its
        // sockets in other contexts is not counted): a lower bound of its cost per unit.
        println!(
            "     proxy process CPU: {:.3} core per Gbit/s (1 stream), {:.0} µs per new connection",
            u.proxy_cpu[0] / u.gbit_1.max(1e-9),
            1e6 * u.proxy_cpu[2] / u.conn_per_sec.max(1e-9)
        );
    }
}
