//! The floor for iptables mode: a plain `iptables-restore` (no `--noflush`) of exactly what
//! `ferry rules --proxy-mode iptables` prints, into a fresh namespace, per backend; and what
//! printing it costs `ferry rules` (time, peak memory).

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::Context as _;

use crate::netns::{Netns, PREFIX};

/// The printed rules and what printing them cost.
#[derive(Debug, Clone)]
pub struct Printed {
    /// `ferry rules` output.
    pub text: String,
    /// How long `ferry rules` ran.
    pub took: Duration,
    /// Its peak RSS (MiB).
    pub peak_mib: f64,
}

/// Runs `ferry rules --proxy-mode iptables` over `manifests` through `peak` (this benchmark's
/// own `__peak` wrapper, which reports the peak RSS of the command it runs on stderr's last
/// line).
pub fn print_rules(peak: &Path, ferry: &Path, flags: &[String]) -> anyhow::Result<Printed> {
    let t = Instant::now();
    let out = Command::new(peak)
        .arg("__peak")
        .arg(ferry)
        .args(["rules", "--proxy-mode", "iptables"])
        .args(flags)
        .stdin(Stdio::null())
        .output()
        .context("running ferry rules")?;
    let took = t.elapsed();
    let stderr = String::from_utf8_lossy(&out.stderr);
    anyhow::ensure!(out.status.success(), "ferry rules failed: {stderr}");
    let peak_mib = stderr
        .lines()
        .last()
        .and_then(|l| l.strip_prefix("peak_rss_kib="))
        .and_then(|v| v.trim().parse::<f64>().ok())
        .context("no peak RSS from __peak")?
        / 1024.0;
    Ok(Printed {
        text: String::from_utf8(out.stdout).context("ferry rules printed invalid UTF-8")?,
        took,
        peak_mib,
    })
}

/// Times `iptables-<backend>-restore` of `text` into a fresh namespace.
pub fn plain_restore(backend: &str, text: &str) -> anyhow::Result<Duration> {
    let name = format!("{PREFIX}{}-floor-{backend}", std::process::id());
    let ns = Netns::create(&name)?;
    // The nfacct counters the rules count into, as `ferry run` creates them before its first
    // restore (not timed).
    ferry_lab::netns::run_in(ns.name(), || -> anyhow::Result<()> {
        let mut nfacct = ferry_dataplane::nfacct::Nfacct::open()?;
        for name in [
            ferry_compile::iptables::CT_STATE_INVALID_COUNTER,
            ferry_compile::iptables::LOCALHOST_NODE_PORTS_COUNTER,
        ] {
            nfacct.ensure(name)?;
        }
        Ok(())
    })??;
    let t = Instant::now();
    restore_in(ns.name(), &format!("iptables-{backend}-restore"), &[], text)?;
    Ok(t.elapsed())
}

/// The floor for a change: a `--noflush` restore that adds one chain with one rule into the
/// node's nat table as Ferry left it (median of three; each chain removed again). On
/// iptables-nft the kernel then checks the whole chain graph reachable from the built-in
/// chains, whatever the change, so this is what any one-endpoint change costs at least.
pub fn change_floor(ns: &str, backend: &str) -> anyhow::Result<Duration> {
    let program = format!("iptables-{backend}-restore");
    let mut times = Vec::new();
    for i in 0..3 {
        let chain = format!("KUBE-BENCH-FLOOR-{i}");
        let add = format!("*nat\n:{chain} - [0:0]\n-A {chain} -j RETURN\nCOMMIT\n");
        let t = Instant::now();
        restore_in(ns, &program, &["--noflush"], &add)?;
        times.push(t.elapsed());
        let remove = format!("*nat\n:{chain} - [0:0]\n-X {chain}\nCOMMIT\n");
        restore_in(ns, &program, &["--noflush"], &remove)?;
    }
    times.sort();
    Ok(times[1])
}

/// `ip netns exec NS PROGRAM -w 5 ARGS…` with `input` on its standard input.
fn restore_in(ns: &str, program: &str, args: &[&str], input: &str) -> anyhow::Result<()> {
    let mut child = Command::new("ip")
        .args(["netns", "exec", ns, program, "-w", "5"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {program}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin.write_all(input.as_bytes())?;
    }
    let out = child.wait_with_output()?;
    anyhow::ensure!(
        out.status.success(),
        "{program} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

/// `__peak CMD ARGS…`: runs the command with inherited stdio, then prints its peak RSS as
/// `peak_rss_kib=N` on stderr; exits with the command's status.
pub fn peak_main(command: &[String]) -> anyhow::Result<i32> {
    let (program, args) = command.split_first().context("__peak needs a command")?;
    let status = Command::new(program)
        .args(args)
        .status()
        .with_context(|| format!("running {program}"))?;
    let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)?;
    eprintln!("peak_rss_kib={}", usage.max_rss());
    Ok(status.code().unwrap_or(1))
}
