//! `ferry-fuzz TARGET [SECONDS] [SEED] [FERRY]`: one target for a while, outside the drills (a
//! longer campaign, or a crash being chased). Crash inputs go to `fuzz-<target>-crash-<n>` in
//! the working directory, the input being run to `fuzz-<target>-last`.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let names: Vec<&str> = ferry_fuzz::TARGETS.iter().map(|t| t.name).collect();
    let Some(target) = args.first().and_then(|n| ferry_fuzz::targets::by_name(n)) else {
        eprintln!(
            "usage: ferry-fuzz TARGET [SECONDS] [SEED] [FERRY]  (targets: {})",
            names.join(", ")
        );
        return ExitCode::from(2);
    };
    let seconds = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(60);
    let seed = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(0);
    let ferry = args.get(3).map(PathBuf::from);
    let seeds = match ferry_fuzz::corpus(target.name) {
        Ok(files) => files.into_iter().map(|(_, b)| b).collect(),
        Err(e) => {
            eprintln!("ferry-fuzz: the corpus of {}: {e}", target.name);
            return ExitCode::from(2);
        }
    };
    let last = PathBuf::from(format!("fuzz-{}-last", target.name));
    let budget = Duration::from_secs(seconds);
    let stats = ferry_fuzz::fuzz(target, ferry.as_deref(), seeds, budget, seed, Some(&last));
    println!(
        "{}: {} inputs in {:.0} s ({:.0}/s), corpus {} -> {}, {} crashes",
        target.name,
        stats.execs,
        stats.seconds,
        stats.execs_per_second(),
        stats.seeds,
        stats.corpus,
        stats.crashes.len()
    );
    for (n, c) in stats.crashes.iter().enumerate() {
        let file = format!("fuzz-{}-crash-{n}", target.name);
        if let Err(e) = std::fs::write(&file, &c.input) {
            eprintln!("ferry-fuzz: writing {file}: {e}");
        }
        println!("crash ({file}): {}", c.message);
    }
    if stats.crashes.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
