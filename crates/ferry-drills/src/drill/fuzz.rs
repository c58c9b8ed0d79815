//! Drill 5b, fuzzing: every `ferry-fuzz` target for a bounded time (3 s each in the short mode,
//! 60 s otherwise, or `--seconds`), seeded from its corpus in the repository, deterministic
//! from the drill's seed. One row per target: inputs run, crashes, inputs per second, corpus
//! growth. Each crash's input is written to the logs directory for a regression test, and the
//! input being run to `fuzz-<target>-last` (what an abort, which no panic handler sees, leaves).

use std::time::Duration;

use ferry_fuzz::targets::Target;

use super::Options;
use crate::report::Row;

/// Runs every target, one row each.
pub fn run(o: &Options) -> Vec<Row> {
    ferry_fuzz::TARGETS
        .iter()
        .enumerate()
        .map(|(i, t)| {
            one(o, t, o.seed.wrapping_add(i as u64)).unwrap_or_else(|e| {
                let mut row = Row::new(DRILL, t.name);
                row.rep(Some(format!("the drill failed: {e:#}")));
                row
            })
        })
        .collect()
}

const DRILL: &str = "5b. fuzzing";

fn one(o: &Options, target: &Target, seed: u64) -> anyhow::Result<Row> {
    let seeds: Vec<Vec<u8>> = ferry_fuzz::corpus(target.name)?
        .into_iter()
        .map(|(_, bytes)| bytes)
        .collect();
    let budget = Duration::from_secs(o.seconds(3, 60));
    let last = o.logs.join(format!("fuzz-{}-last", target.name));
    let stats = ferry_fuzz::fuzz(target, Some(&o.ferry), seeds, budget, seed, Some(&last));
    let mut row = Row::new(DRILL, target.name);
    row.repetitions = stats.execs as usize;
    row.failures = stats.crashes.len();
    row.figure = format!("{:.0} execs/s", stats.execs_per_second());
    row.note(&format!(
        "{:.0} s, corpus {} → {} (new signatures), seed {seed}",
        stats.seconds, stats.seeds, stats.corpus
    ));
    for (n, crash) in stats.crashes.iter().enumerate() {
        let file = o.logs.join(format!("fuzz-{}-crash-{n}", target.name));
        std::fs::write(&file, &crash.input)?;
        if n < 3 {
            let message: String = crash.message.chars().take(300).collect();
            row.note(&format!("crash ({}): {message}", file.display()));
        }
    }
    Ok(row)
}
