//! Drill 6, kernel-side limits, as far as this kernel lets a network namespace provoke them:
//! - **missing tool**: Ferry restarted over its own rules with `nft` / `iptables-*` gone from
//!   PATH must say which tool (and package) is missing and leave the last good rules serving;
//!   a good Ferry started afterwards converges;
//! - **read-only /proc/sys** (a mount namespace): Ferry must still program its rules (it writes
//!   no sysctl in nftables and iptables modes; IPVS mode's sysctls need the qemu guest);
//! - **huge batch**: one first sync of many Services in nftables mode (one netlink batch with
//!   an ack per message): no `ENOBUFS`, every frontend programmed;
//! - **conntrack table full**: provoked only when `nf_conntrack_max` is writable in a network
//!   namespace; the row says when it is not.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::drill::{settle, Mode, Options, Stage};
use crate::lab::cluster::{Cluster, Layout};
use crate::lab::probe::{served, Served};
use crate::lab::Ferry;
use crate::report::{secs, Row};

mod conntrack;

const DRILL: &str = "6. kernel-side limits";

/// Every variant: one row each.
pub fn run(o: &Options) -> Vec<Row> {
    let mut rows = Vec::new();
    for &mode in &o.modes {
        rows.push(or_failed(missing_tool(o, mode), "missing tool", mode));
    }
    rows.push(or_failed(
        read_only_sysctls(o),
        "read-only /proc/sys",
        Mode::Nftables,
    ));
    rows.push(or_failed(huge_batch(o), "huge batch", Mode::Nftables));
    rows.push(or_failed(
        conntrack::full_table(o),
        "conntrack table full",
        Mode::Nftables,
    ));
    rows
}

fn or_failed(r: anyhow::Result<Row>, variant: &str, mode: Mode) -> Row {
    r.unwrap_or_else(|e| {
        let mut row = Row::new(DRILL, &format!("{variant}, {}", mode.name()));
        row.rep(Some(format!("the drill failed: {e:#}")));
        row
    })
}

/// A shell script in `dir` whose `body` runs `ferry` (an `exec` with the script's arguments).
fn wrapper(dir: &Path, name: &str, body: &str) -> anyhow::Result<PathBuf> {
    use std::os::unix::fs::PermissionsExt as _;
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n"))?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
    Ok(path)
}

/// Probes a sample of Services: what each was served by.
fn probe(stage: &Stage, sample: &[usize], old: &[(usize, u32)]) -> anyhow::Result<Vec<Served>> {
    let expect: Vec<_> = sample
        .iter()
        .map(|&i| {
            let g = old.iter().find(|(j, _)| *j == i).map(|(_, g)| *g);
            stage.expect(i, g)
        })
        .collect();
    stage
        .net
        .client
        .block_on(async move { Ok(served(&expect, 3).await) })
}

fn missing_tool(o: &Options, mode: Mode) -> anyhow::Result<Row> {
    let n = o.services(20, 200);
    let mut stage = Stage::new(
        o,
        &format!("limits-{}", mode.name()),
        Cluster::new(n, 2, Layout::drill(false))?,
    )?;
    let mut row = Row::new(DRILL, &format!("missing tool, {}", mode.name()));
    let mut ferry = stage.start(&o.ferry, mode, &[])?;
    ferry.wait_syncs(1, Duration::from_secs(600))?;
    settle(&mut ferry);
    ferry.stop()?;
    // A change the broken Ferry cannot program: the old rules must keep serving.
    let mut rng = fastrand::Rng::with_seed(o.seed);
    let sample = stage.cluster.sample(5, &mut rng);
    let changed = sample[0];
    let old = vec![(changed, stage.cluster.generation(changed))];
    stage.cluster.bump(changed);
    stage.write(changed)?;
    let (exited, error) = start_without_tools(o, &stage, mode)?;
    let clear = error.as_deref().is_some_and(|e| e.contains("not on PATH"));
    row.rep((!(exited && clear)).then(|| format!("exited: {exited}, error: {error:?}")));
    // The changed Service answers from its old endpoints, the others from their only ones.
    let want = |i: usize| {
        if i == changed {
            Served::Old
        } else {
            Served::New
        }
    };
    let kept = probe(&stage, &sample, &old)?;
    let kept_ok = sample.iter().zip(&kept).all(|(&i, s)| *s == want(i));
    row.rep(
        (!kept_ok).then(|| format!("with the tool missing, the sample was served by {kept:?}")),
    );
    // The tool back: a good Ferry converges.
    let mut good = stage.start(&o.ferry, mode, &[])?;
    good.wait_syncs(1, Duration::from_secs(600))?;
    settle(&mut good);
    let after = probe(&stage, &sample, &[])?;
    let converged = after.iter().all(|s| *s == Served::New);
    row.rep((!converged).then(|| format!("after the restart, served by {after:?}")));
    good.stop()?;
    row.figure = format!(
        "rules kept: {}/{}; converged after: {}",
        sample
            .iter()
            .zip(&kept)
            .filter(|(&i, s)| **s == want(i))
            .count(),
        kept.len(),
        if converged { "yes" } else { "no" }
    );
    row.note(&format!(
        "Ferry exits (status non-zero, the supervisor restarts it): {}",
        error.unwrap_or_else(|| "no error logged".to_owned())
    ));
    Ok(row)
}

/// Starts Ferry with an empty PATH and waits (10 s at most) for it to exit: whether it did,
/// and its first error.
fn start_without_tools(
    o: &Options,
    stage: &Stage,
    mode: Mode,
) -> anyhow::Result<(bool, Option<String>)> {
    let tmp = tempfile::tempdir()?;
    let empty = tmp.path().join("empty-path");
    std::fs::create_dir_all(&empty)?;
    let binary = wrapper(
        tmp.path(),
        "ferry-without-tools",
        &format!("PATH={} exec {} \"$@\"", empty.display(), o.ferry.display()),
    )?;
    let mut broken = Ferry::start(
        &binary,
        stage.net.node.name(),
        &stage.flags(mode),
        &stage.log,
    )?;
    let end = Instant::now() + Duration::from_secs(10);
    while broken.is_running() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(50));
    }
    let error = broken
        .log()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .find(|l| l["level"] == "ERROR")
        .and_then(|l| l["fields"]["message"].as_str().map(str::to_owned));
    Ok((!broken.is_running(), error))
}

fn read_only_sysctls(o: &Options) -> anyhow::Result<Row> {
    let mode = Mode::Nftables;
    let n = o.services(20, 200);
    let stage = Stage::new(
        o,
        "limits-sysctl",
        Cluster::new(n, 2, Layout::drill(false))?,
    )?;
    let mut row = Row::new(DRILL, &format!("read-only /proc/sys, {}", mode.name()));
    let tmp = tempfile::tempdir()?;
    let binary = wrapper(
        tmp.path(),
        "ferry-ro-sysctl",
        &format!(
            "exec unshare --mount sh -c 'mount -o bind,ro /proc/sys /proc/sys && exec \"$0\" \"$@\"' {} \"$@\"",
            o.ferry.display()
        ),
    )?;
    let mut ferry = Ferry::start(
        &binary,
        stage.net.node.name(),
        &stage.flags(mode),
        &stage.log,
    )?;
    ferry.wait_syncs(1, Duration::from_secs(600))?;
    settle(&mut ferry);
    let differences = stage.differences(&o.ferry, n)?;
    let warnings = ferry
        .log()
        .lines()
        .filter(|l| l.contains("\"level\":\"WARN\"") || l.contains("\"level\":\"ERROR\""))
        .count();
    ferry.stop()?;
    row.rep(differences.map(|d| format!("rules not programmed: {d}")));
    row.figure = "rules programmed: yes".to_owned();
    if row.failures > 0 {
        row.figure = "rules programmed: no".to_owned();
    }
    row.note(&format!(
        "nftables and iptables modes write no sysctl ({warnings} warnings or errors logged); IPVS mode's sysctls are drilled only in the qemu guest"
    ));
    Ok(row)
}

fn huge_batch(o: &Options) -> anyhow::Result<Row> {
    let mode = Mode::Nftables;
    let n = o.services(2_000, 20_000);
    let stage = Stage::new(o, "limits-batch", Cluster::new(n, 2, Layout::drill(false))?)?;
    let mut row = Row::new(
        DRILL,
        &format!("huge batch ({n} Services), {}", mode.name()),
    );
    let mut ferry = stage.start(&o.ferry, mode, &[])?;
    let took = ferry.wait_syncs(1, Duration::from_secs(900))?;
    settle(&mut ferry);
    let log = ferry.log();
    let enobufs = log.contains("ENOBUFS") || log.contains("No buffer space");
    let differences = stage.differences(&o.ferry, n)?;
    let syncs = ferry.syncs();
    ferry.stop()?;
    row.rep(enobufs.then(|| "ENOBUFS in the log".to_owned()));
    row.rep(differences.map(|d| format!("not all programmed: {d}")));
    row.figure = format!("first sync after {}", secs(took.as_secs_f64()));
    row.note(&format!(
        "ENOBUFS: {}; syncs: {}",
        if enobufs { "yes" } else { "no" },
        syncs.len()
    ));
    Ok(row)
}
