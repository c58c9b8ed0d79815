//! Drill 7, soak: `ferry run` (any mode but IPVS; manifests; the default `minSyncPeriod` of
//! 1 s)
//! takes 100 endpoint changes per second for a long while — 30 minutes at 10 000 Services × 10
//! endpoints in the full mode. Each change replaces one endpoint of a Service (spread over the
//! whole cluster) with an address never used before, written as a new manifest renamed into
//! place, the way the end-to-end benchmark's churn writes them.
//!
//! `VmRSS` of `ferry run` is read every few seconds: the figure is its growth from the end of
//! the first sync to the end of the churn. Once the churn stops and Ferry has gone quiet, the
//! kernel's table must equal what `ferry rules` renders for the final manifests (compared
//! normalised, see [`crate::lab::ruleset`]): every change made it, none was missed. In
//! iptables mode, whose `iptables-save` writes rules in its own form, every ClusterIP's DNAT
//! destinations in the nat table must be its Service's final endpoints instead. A sample
//! of ClusterIPs, changed ones included, must then answer from their final endpoints only (in
//! userspace mode the table holds one portal per Service and Ferry's process the endpoints:
//! there the probes are what checks the changes).

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use crate::drill::{Mode, Options, Stage};
use crate::lab::cluster::{Cluster, Layout};
use crate::lab::probe::{served, Served};
use crate::lab::ruleset::Ruleset;
use crate::lab::Ferry;
use crate::report::{secs, Row};

mod iptables;

/// Endpoint changes per second (the figure).
const RATE: u32 = 100;
/// How often `VmRSS` is read.
const RSS_EVERY: Duration = Duration::from_secs(5);
/// Longest wait for the first sync, and for Ferry to go quiet after the churn.
const SYNC_TIMEOUT: Duration = Duration::from_secs(1800);
/// How long without a sync counts as quiet (the default `minSyncPeriod` is 1 s).
const QUIET: Duration = Duration::from_secs(3);
/// [`Cluster::change`] has this many fresh addresses in the pod range.
const MAX_CHANGES: u64 = 500_000;
/// ClusterIPs probed at the end, and connections to each.
const PROBED: usize = 30;
const ASKS: usize = 4;

/// What the churn saw.
#[derive(Debug, Default)]
struct Churn {
    changes: usize,
    rss: Vec<f64>,
    took: Duration,
}

/// Runs the drill in `mode`.
pub fn run(o: &Options, mode: Mode) -> anyhow::Result<Row> {
    let n = o.services(1_000, 10_000);
    let seconds = o.seconds(20, 1_800);
    anyhow::ensure!(
        seconds * u64::from(RATE) <= MAX_CHANGES,
        "at most {} s of churn at {RATE} changes/s (fresh pod addresses run out)",
        MAX_CHANGES / u64::from(RATE)
    );
    let cluster = Cluster::new(n, 10, Layout::drill(false))?;
    let mut stage = Stage::new(o, &format!("soak-{}", mode.name()), cluster)?;
    let mut row = Row::new("7. soak", mode.name());
    // The default minSyncPeriod: changes coalesce as they would on a busy node.
    let flags: Vec<String> = stage
        .flags(mode)
        .into_iter()
        .filter(|f| !f.starts_with("--min-sync-period"))
        .collect();
    let mut ferry = Ferry::start(&o.ferry, stage.net.node.name(), &flags, &stage.log)?;
    ferry.wait_syncs(1, SYNC_TIMEOUT)?;
    quiet(&mut ferry)?;
    let first_syncs = ferry.syncs().len();
    let churn = churn(&mut stage, &mut ferry, Duration::from_secs(seconds))?;
    let waited = quiet(&mut ferry)?;
    let syncs = ferry.syncs().len() - first_syncs;
    let hwm = ferry.memory_mib("VmHWM:")?;

    // Userspace mode's kernel table holds one portal per Service, its endpoints are Ferry's:
    // there the probes check them.
    let per_service = if mode == Mode::Userspace { 1 } else { 10 };
    let compared = match mode.iptables() {
        None => compare(o, &stage, &flags, n * per_service, &mut row)?,
        Some(ipt) => compare_iptables(&stage, ipt, n, &mut row)?,
    };
    if let Some(bad) = probe(&stage)? {
        row.rep(Some(bad));
    }
    if !ferry.is_running() {
        row.rep(Some(format!("ferry exited:\n{}", ferry.tail(5))));
    }
    ferry.stop()?;
    describe(&mut row, n, &churn, &compared, (syncs, hwm, waited));
    if mode == Mode::Userspace {
        row.note("userspace: the kernel holds one portal per Service, the endpoints are Ferry's own (the probes check them)");
    }
    Ok(row)
}

/// What the comparison of the kernel's rules with the final state found.
struct Compared {
    /// Differing elements and rules (Services in iptables mode).
    missed: usize,
    /// What was compared, and how much differed.
    summary: String,
}

/// Compares the node's `ip ferry` table with what `ferry rules` renders for the manifests
/// (`flags`: those of the `ferry run`); a difference is a failed repetition, and so is a
/// rendering of fewer than `at_least` elements.
fn compare(
    o: &Options,
    stage: &Stage,
    flags: &[String],
    at_least: usize,
    row: &mut Row,
) -> anyhow::Result<Compared> {
    let kernel = stage
        .net
        .node
        .exec("nft", ["list", "table", "ip", "ferry"])?;
    let mut rules_args = vec!["rules".to_owned()];
    rules_args.extend(flags.iter().cloned());
    let rendered = stage
        .net
        .node
        .exec(&o.ferry.display().to_string(), &rules_args)?;
    let rendered = Ruleset::parse(&rendered);
    let (lines, missed) = rendered.differences(&Ruleset::parse(&kernel), 3);
    row.rep((missed != 0).then(|| format!("kernel ≠ ferry rules: {}", lines.join("; "))));
    let (elements, rules) = rendered.size();
    // Every endpoint (portal in userspace mode) is one element of a map: fewer means nothing
    // was really compared.
    if elements < at_least {
        row.rep(Some(format!(
            "ferry rules rendered {elements} elements, fewer than {at_least}"
        )));
    }
    Ok(Compared {
        missed,
        summary: format!(
            "kernel = ferry rules: {missed} of {elements} elements and {rules} rules differ"
        ),
    })
}

/// Compares each ClusterIP's DNAT destinations in the node's nat table (`ipt`: the backend's
/// program) with its Service's final endpoints, for all `n` Services; each Service that
/// differs is a missed change.
fn compare_iptables(stage: &Stage, ipt: &str, n: usize, row: &mut Row) -> anyhow::Result<Compared> {
    let save = stage.net.node.exec(&format!("{ipt}-save"), ["-t", "nat"])?;
    let kernel = iptables::endpoints_by_cluster_ip(&save);
    let mut differ = Vec::new();
    let mut elements = 0;
    for i in 0..n {
        let want = stage.expect(i, None);
        elements += want.new.len();
        let endpoints: BTreeSet<Ipv4Addr> = want.new.iter().copied().collect();
        let found = kernel.get(&want.target);
        if found != Some(&endpoints) {
            differ.push(format!(
                "{} DNATs to {found:?}, want {endpoints:?}",
                want.target
            ));
        }
    }
    row.rep((!differ.is_empty()).then(|| {
        format!(
            "kernel ≠ final endpoints for {} Services: {}",
            differ.len(),
            differ[..differ.len().min(3)].join("; ")
        )
    }));
    let rules = save.lines().filter(|l| l.starts_with("-A ")).count();
    Ok(Compared {
        missed: differ.len(),
        summary: format!(
            "kernel = final endpoints (iptables-save): {} of {n} Services differ ({elements} \
             endpoints, {rules} nat rules)",
            differ.len()
        ),
    })
}

/// The row's figure and notes; `after` is (syncs during the churn, `VmHWM`, time to quiet).
fn describe(row: &mut Row, n: usize, churn: &Churn, c: &Compared, after: (usize, f64, Duration)) {
    let (syncs, hwm, waited) = after;
    let (start, end) = (churn.rss[0], churn.rss[churn.rss.len() - 1]);
    let max = churn.rss.iter().copied().fold(f64::MIN, f64::max);
    // Where the growth happened: VmRSS after each quarter of the churn.
    let quarters: Vec<String> = (1..=4)
        .map(|q| format!("{:.1}", churn.rss[(churn.rss.len() - 1) * q / 4]))
        .collect();
    row.figure = format!(
        "RSS growth: {:+.1} MiB; missed changes: {}",
        end - start,
        c.missed
    );
    row.note(&format!(
        "{n} × 10, {} of churn: {} changes ({:.0}/s), {syncs} syncs; VmRSS start {start:.1} \
         MiB, end {end:.1} MiB, max {max:.1} MiB, by quarter {} MiB (VmHWM {hwm:.1} MiB, {} \
         samples); quiet {} \
         after the last change; {}; {PROBED} ClusterIPs probed",
        secs(churn.took.as_secs_f64()),
        churn.changes,
        churn.changes as f64 / churn.took.as_secs_f64(),
        quarters.join(" / "),
        churn.rss.len(),
        secs(waited.as_secs_f64()),
        c.summary,
    ));
}

/// [`RATE`] changes a second for `duration`, `VmRSS` read every [`RSS_EVERY`] (first just
/// before the churn, last just after it).
fn churn(stage: &mut Stage, ferry: &mut Ferry, duration: Duration) -> anyhow::Result<Churn> {
    let mut out = Churn::default();
    let total = u64::from(RATE) * duration.as_secs();
    let every = Duration::from_secs(1) / RATE;
    out.rss.push(ferry.memory_mib("VmRSS:")?);
    let began = Instant::now();
    let mut next_rss = began + RSS_EVERY;
    for k in 0..total as usize {
        // An absolute schedule: a late change is made at once, so the rate holds on average.
        let due = began + every * k as u32;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
        if Instant::now() >= next_rss {
            anyhow::ensure!(
                ferry.is_running(),
                "ferry exited during the churn:\n{}",
                ferry.tail(20)
            );
            out.rss.push(ferry.memory_mib("VmRSS:")?);
            next_rss += RSS_EVERY;
        }
        let service = stage.cluster.changed_service(k);
        stage.cluster.change(service);
        stage.write(service)?;
        out.changes += 1;
    }
    out.took = began.elapsed();
    out.rss.push(ferry.memory_mib("VmRSS:")?);
    Ok(out)
}

/// Waits until Ferry has gone [`QUIET`] without a sync; the time waited.
fn quiet(ferry: &mut Ferry) -> anyhow::Result<Duration> {
    let start = Instant::now();
    let mut seen = ferry.syncs().len();
    let mut since = Instant::now();
    while since.elapsed() < QUIET {
        anyhow::ensure!(
            start.elapsed() < SYNC_TIMEOUT,
            "ferry never went quiet:\n{}",
            ferry.tail(20)
        );
        std::thread::sleep(Duration::from_millis(100));
        let now = ferry.syncs().len();
        if now != seen {
            (seen, since) = (now, Instant::now());
        }
    }
    Ok(start.elapsed())
}

/// Probes [`PROBED`] ClusterIPs (changed ones among them): each must answer from its final
/// endpoints only.
fn probe(stage: &Stage) -> anyhow::Result<Option<String>> {
    let mut rng = fastrand::Rng::with_seed(7);
    let picked = stage.cluster.sample(PROBED, &mut rng);
    let expect: Vec<_> = picked.iter().map(|&i| stage.expect(i, None)).collect();
    let verdicts = stage
        .net
        .client
        .block_on(async { Ok(served(&expect, ASKS).await) })?;
    Ok(verdicts
        .iter()
        .position(|v| *v != Served::New)
        .map(|i| format!("{} served by {:?}", expect[i].target, verdicts[i])))
}
