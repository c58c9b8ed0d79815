//! Drill 4, other rule writers: while a client keeps opening connections to a few ClusterIPs,
//! other programs rewrite the node's ruleset — `nft flush ruleset`, Ferry's table (or chains)
//! deleted, `iptables -t nat -F`, a firewalld-style reload (`iptables-restore` of a whole
//! ruleset), another table hooked at Ferry's priorities. Ferry must repair its rules within
//! one sync period and never touch what it does not own: a stand-in CNI (an nft table, and in
//! iptables mode a chain and its jump) is put back by the drill when a fault removed it, as the
//! CNI would, and must be exactly as it was after Ferry's repair. Figure: seconds without
//! working Services per fault.

use std::time::{Duration, Instant};

use crate::drill::{settle, Mode, Options, Stage};
use crate::lab::cluster::{Cluster, Layout};
use crate::lab::probe::{served, Expect, Served};
use crate::lab::watch::{Timeline, Watch};
use crate::report::{secs, Row};

/// The faults, in the order they are made.
const FAULTS: [&str; 5] = [
    "nft flush ruleset",
    "delete Ferry's table or chains",
    "iptables -t nat -F",
    "firewalld-style iptables-restore",
    "another table at Ferry's priorities",
];

/// The stand-in CNI's nft table.
const CNI_TABLE: &str = "table ip cni-standin {
	set pods {
		type ipv4_addr
		flags interval
		elements = { 10.64.0.0/12 }
	}

	chain forward {
		type filter hook forward priority filter; policy accept;
		ip saddr @pods accept
	}

	chain postrouting {
		type nat hook postrouting priority srcnat + 10; policy accept;
		ip saddr @pods ip daddr 192.0.2.0/24 masquerade
	}
}
";

/// Runs the drill in `mode`.
pub fn run(o: &Options, mode: Mode) -> anyhow::Result<Row> {
    let n = o.services(50, 1_000);
    let period = if o.quick { 2 } else { 10 };
    let reps = o.repetitions(1, 3);
    let stage = Stage::new(
        o,
        &format!("writers-{}", mode.name()),
        Cluster::new(n, 10, Layout::drill(false))?,
    )?;
    let mut row = Row::new("4. other rule writers", mode.name());
    install_cni(&stage, mode)?;
    let cni = cni_snapshot(&stage, mode)?;
    let sync_period = format!("--sync-period={period}s");
    let mut ferry = stage.start(&o.ferry, mode, &[&sync_period])?;
    ferry.wait_syncs(1, Duration::from_secs(600))?;
    settle(&mut ferry);
    let mut rng = fastrand::Rng::with_seed(o.seed);
    let targets: Vec<Expect> = stage
        .cluster
        .sample(5, &mut rng)
        .into_iter()
        .map(|i| stage.expect(i, None))
        .collect();
    let watch = Watch::start(
        stage.net.client.name(),
        targets.clone(),
        Duration::from_millis(20),
    );
    std::thread::sleep(Duration::from_millis(500));
    let marks = inflict(
        &stage,
        mode,
        &targets,
        &watch,
        (reps, period),
        &cni,
        &mut row,
    )?;
    let timeline = watch.finish()?;
    ferry.stop()?;
    score(&mut row, &timeline, &marks, period);
    row.note(&format!("{n} × 10; {}", row_note_faults(&timeline, &marks)));
    Ok(row)
}

/// One fault made: which, the watch's times around it (from the fault to a sync period after
/// the repair), and whether it removed the stand-in CNI's rules too.
struct Mark {
    fault: &'static str,
    from: Duration,
    to: Duration,
    cni_removed: bool,
}

/// Makes every fault `reps` times, each followed by the wait for the repair and a sync
/// `period`; a fault not repaired within three periods, or one after which the CNI's rules
/// differ from `cni` (taken before Ferry started), is a failed repetition of `row`.
fn inflict(
    stage: &Stage,
    mode: Mode,
    targets: &[Expect],
    watch: &Watch,
    (reps, period): (usize, u64),
    cni: &str,
    row: &mut Row,
) -> anyhow::Result<Vec<Mark>> {
    let limit = Duration::from_secs(3 * period);
    let mut marks = Vec::new();
    for _ in 0..reps {
        for fault in FAULTS {
            let from = watch.now();
            make(stage, mode, fault)?;
            let cni_removed = cni_snapshot(stage, mode)? != cni;
            if cni_removed {
                install_cni(stage, mode)?;
            }
            let repaired = wait_repaired(stage, targets, limit)?;
            // Long enough for a periodic resync to have run over the repaired rules.
            std::thread::sleep(Duration::from_secs(period) + Duration::from_millis(500));
            let to = watch.now();
            let cni_after = cni_snapshot(stage, mode)?;
            let mut why = Vec::new();
            if !repaired {
                why.push(format!("not repaired within {}", secs(limit.as_secs_f64())));
            }
            if cni_after != cni {
                why.push(format!("the CNI's rules changed:\n{cni_after}"));
            }
            marks.push(Mark {
                fault,
                from,
                to,
                cni_removed,
            });
            row.rep((!why.is_empty()).then(|| format!("{fault}: {}", why.join("; "))));
        }
    }
    Ok(marks)
}

/// The figure: the longest time without working Services after a fault; each fault that
/// left them down longer than a sync period (and 2 s of slack) is a failure.
fn score(row: &mut Row, timeline: &Timeline, marks: &[Mark], period: u64) {
    let mut worst = Duration::ZERO;
    for m in marks {
        let out = timeline.outage(m.from, m.to);
        worst = worst.max(out);
        if out > Duration::from_secs(period + 2) {
            row.failures += 1;
            row.note(&format!(
                "{}: {} without Services, more than a sync period",
                m.fault,
                secs(out.as_secs_f64())
            ));
        }
    }
    row.figure = format!(
        "seconds without working Services: max {} (syncPeriod {period} s)",
        secs(worst.as_secs_f64())
    );
}

/// Each fault's time without working Services (the last round's, see [`dedup_last`]).
fn row_note_faults(timeline: &Timeline, marks: &[Mark]) -> String {
    let per_fault: Vec<String> = marks
        .iter()
        .map(|m| {
            let removed = if m.cni_removed {
                " (it removed the CNI's rules too)"
            } else {
                ""
            };
            let out = timeline.outage(m.from, m.to);
            format!("{}: {}{removed}", m.fault, secs(out.as_secs_f64()))
        })
        .collect();
    dedup_last(&per_fault, FAULTS.len())
}

/// The last repetition's figure per fault (each repetition makes every fault once).
fn dedup_last(per_fault: &[String], faults: usize) -> String {
    per_fault[per_fault.len().saturating_sub(faults)..].join(", ")
}

/// Polls until every target answers from its endpoints, or `limit` passes.
fn wait_repaired(stage: &Stage, targets: &[Expect], limit: Duration) -> anyhow::Result<bool> {
    let start = Instant::now();
    while start.elapsed() < limit {
        let v = stage
            .net
            .client
            .block_on(async { Ok(served(targets, 1).await) })?;
        if v.iter().all(|s| *s == Served::New) {
            return Ok(true);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(false)
}

/// Makes one fault in the node namespace.
fn make(stage: &Stage, mode: Mode, fault: &str) -> anyhow::Result<()> {
    let node = &stage.net.node;
    let ipt = mode.iptables().unwrap_or("iptables-nft");
    match fault {
        "nft flush ruleset" => {
            node.exec("nft", ["flush", "ruleset"])?;
        }
        "delete Ferry's table or chains" => match mode.iptables() {
            None => {
                node.exec("nft", ["delete", "table", "ip", "ferry"])?;
            }
            Some(ipt) => delete_kube_chains(stage, ipt)?,
        },
        "iptables -t nat -F" => {
            node.exec(ipt, ["-t", "nat", "-F"])?;
        }
        "firewalld-style iptables-restore" => {
            let restore = format!("{ipt}-restore");
            let text = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n\
                        -A INPUT -i lo -j ACCEPT\nCOMMIT\n*nat\n:PREROUTING ACCEPT [0:0]\n\
                        :INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\nCOMMIT\n\
                        *mangle\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n\
                        :OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\nCOMMIT\n";
            let file = stage.stage.join("firewalld.rules");
            std::fs::write(&file, text)?;
            node.exec(&restore, [file.display().to_string()])?;
        }
        "another table at Ferry's priorities" => {
            node.exec(
                "nft",
                [
                    "add table ip other-writer; \
                     add chain ip other-writer nat-pre { type nat hook prerouting priority -100; policy accept; }; \
                     add rule ip other-writer nat-pre tcp dport 9 counter accept; \
                     add chain ip other-writer nat-out { type nat hook output priority -100; policy accept; }; \
                     add rule ip other-writer nat-out tcp dport 9 counter accept; \
                     add chain ip other-writer nat-post { type nat hook postrouting priority 100; policy accept; }; \
                     add chain ip other-writer filter-forward { type filter hook forward priority 0; policy accept; }; \
                     add rule ip other-writer filter-forward ct state established,related accept",
                ],
            )?;
        }
        other => anyhow::bail!("unknown fault {other}"),
    }
    Ok(())
}

/// Deletes every `KUBE-` chain of nat, filter and mangle and the jumps to them, one
/// `iptables-restore --noflush` transaction per table (a script of single commands would race
/// with Ferry's own repairs).
fn delete_kube_chains(stage: &Stage, ipt: &str) -> anyhow::Result<()> {
    let node = &stage.net.node;
    for table in ["nat", "filter", "mangle"] {
        let save = node.exec(&format!("{ipt}-save"), ["-t", table])?;
        let chains: Vec<&str> = save
            .lines()
            .filter_map(|l| l.strip_prefix(':'))
            .filter_map(|l| l.split_whitespace().next())
            .filter(|c| c.starts_with("KUBE-"))
            .collect();
        let mut input = format!("*{table}\n");
        for c in &chains {
            input.push_str(&format!(":{c} - [0:0]\n"));
        }
        for line in save
            .lines()
            .filter(|l| l.starts_with("-A ") && l.contains("-j KUBE-"))
        {
            let rule = line.trim_start_matches("-A ");
            if !rule.starts_with("KUBE-") {
                input.push_str(&format!("-D {rule}\n"));
            }
        }
        for c in &chains {
            input.push_str(&format!("-X {c}\n"));
        }
        input.push_str("COMMIT\n");
        let file = stage.stage.join(format!("delete-{table}.rules"));
        std::fs::write(&file, input)?;
        node.exec(
            &format!("{ipt}-restore"),
            ["--noflush", &file.display().to_string()],
        )?;
    }
    Ok(())
}

/// Installs the stand-in CNI: its nft table, and in iptables mode its filter chain and jump.
fn install_cni(stage: &Stage, mode: Mode) -> anyhow::Result<()> {
    let node = &stage.net.node;
    let (_, tables, _) = node.exec_status("nft", ["list", "tables"])?;
    if tables.contains("table ip cni-standin") {
        node.exec("nft", ["delete", "table", "ip", "cni-standin"])?;
    }
    let file = stage.stage.join("cni.nft");
    std::fs::write(&file, CNI_TABLE)?;
    node.exec("nft", ["-f", &file.display().to_string()])?;
    if let Some(ipt) = mode.iptables() {
        if node
            .exec_status(ipt, ["-t", "filter", "-S", "CNI-FORWARD"])?
            .0
        {
            node.exec(ipt, ["-t", "filter", "-F", "CNI-FORWARD"])?;
        } else {
            node.exec(ipt, ["-t", "filter", "-N", "CNI-FORWARD"])?;
        }
        node.exec(
            ipt,
            [
                "-t",
                "filter",
                "-A",
                "CNI-FORWARD",
                "-s",
                "10.64.0.0/12",
                "-j",
                "ACCEPT",
            ],
        )?;
        if !node
            .exec_status(ipt, ["-t", "filter", "-C", "FORWARD", "-j", "CNI-FORWARD"])?
            .0
        {
            node.exec(ipt, ["-t", "filter", "-A", "FORWARD", "-j", "CNI-FORWARD"])?;
        }
    }
    Ok(())
}

/// The stand-in CNI's rules as the kernel holds them.
fn cni_snapshot(stage: &Stage, mode: Mode) -> anyhow::Result<String> {
    let node = &stage.net.node;
    let (_, mut out, _) = node.exec_status("nft", ["list", "table", "ip", "cni-standin"])?;
    if let Some(ipt) = mode.iptables() {
        let save = node.exec(&format!("{ipt}-save"), ["-t", "filter"])?;
        for l in save.lines().filter(|l| l.contains("CNI-FORWARD")) {
            out.push_str(l);
            out.push('\n');
        }
    }
    Ok(out)
}
