//! The bounded-time driver: corpus-seeded mutation of one target, deterministic from a seed
//! (the inputs depend only on the seed and the corpus; how many run depends on the time).

use std::collections::HashSet;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::mutate::mutate;
use crate::targets::{quiet_panics, Target};

/// The in-memory corpus stops growing here.
const MAX_CORPUS: usize = 10_000;
/// Distinct crashes kept (a crash is known by its message).
const MAX_CRASHES: usize = 16;

/// One crash: the input and what happened.
#[derive(Debug, Clone)]
pub struct Crash {
    /// The input that crashed the target.
    pub input: Vec<u8>,
    /// The panic (message and place), or how `ferry` died.
    pub message: String,
}

/// What one run found.
#[derive(Debug, Clone, Default)]
pub struct Stats {
    /// Inputs run (the seeds included).
    pub execs: u64,
    /// Seconds spent.
    pub seconds: f64,
    /// Corpus entries it started from.
    pub seeds: usize,
    /// Corpus entries at the end: the seeds and the inputs that showed a new signature.
    pub corpus: usize,
    /// Distinct crashes (first input of each).
    pub crashes: Vec<Crash>,
}

impl Stats {
    /// Inputs per second.
    pub fn execs_per_second(&self) -> f64 {
        self.execs as f64 / self.seconds.max(1e-9)
    }
}

/// Runs `target` for `budget`: every seed first, then mutants of the growing corpus. With
/// `last`, each input is written there before it runs: what an abort (a stack overflow, a
/// panic while panicking) leaves for the post-mortem.
pub fn fuzz(
    target: &Target,
    ferry: Option<&Path>,
    seeds: Vec<Vec<u8>>,
    budget: Duration,
    seed: u64,
    last: Option<&Path>,
) -> Stats {
    let _quiet = quiet_panics();
    let start = Instant::now();
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut stats = Stats {
        seeds: seeds.len(),
        ..Stats::default()
    };
    let mut corpus: Vec<Vec<u8>> = Vec::new();
    let mut seen = HashSet::new();
    let mut crashed = HashSet::new();
    let mut pending = seeds.into_iter();
    while start.elapsed() < budget {
        let input = match pending.next() {
            Some(s) => s,
            None if corpus.is_empty() => Vec::new(),
            None => {
                let mut input = corpus[rng.usize(..corpus.len())].clone();
                let other = &corpus[rng.usize(..corpus.len())];
                mutate(&mut rng, &mut input, other);
                input
            }
        };
        stats.execs += 1;
        if let Some(last) = last {
            // Best effort: a failed write loses only the post-mortem.
            let _ = std::fs::write(last, &input);
        }
        match target.exec(ferry, &input) {
            Ok(sig) => {
                if seen.insert(sig) && corpus.len() < MAX_CORPUS {
                    corpus.push(input);
                }
            }
            Err(message) => {
                if crashed.insert(message.clone()) && stats.crashes.len() < MAX_CRASHES {
                    stats.crashes.push(Crash { input, message });
                }
            }
        }
    }
    stats.seconds = start.elapsed().as_secs_f64();
    stats.corpus = corpus.len();
    stats
}
