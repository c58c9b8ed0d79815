//! # ferry-fuzz: Ferry's fuzz targets and a bounded-time mutation driver on stable Rust
//!
//! A target is a plain function of bytes that must never panic, whatever the bytes
//! ([`targets`]): the manifest source's file → objects path (multi-document YAML, JSON, lists,
//! several files and their cross-file checks, re-reads), its YAML fast path against
//! serde-saphyr, the k8s-openapi → ferry-model conversion, `ferry check --config FILE` (Ferry's
//! config file, kube-proxy's KubeProxyConfiguration) and `ferry check FLAGS…` (the command
//! line, kube-proxy's flags), and the nfnetlink encoder's round trip (a delta built from the bytes, encoded, decoded with
//! netlink-packet-core's buffers and compared). A target returns a signature of what the input
//! did (which errors, how many objects); the driver keeps an input that shows a new one.
//!
//! cargo-fuzz needs nightly and Ferry builds on stable only, so [`driver`] is a plain
//! mutation fuzzer: seeded from the corpus in the repository (`corpus/<target>/`), it mutates
//! with bit flips, byte inserts and deletes, splices of two entries and YAML-aware edits
//! (duplicated keys, deep nesting, huge numbers, invalid UTF-8, anchors and aliases) chosen by
//! a seeded generator ([`mutate`]), for a bounded time. It has no coverage feedback: the
//! signature stands in for it. `ferry-drills fuzz` runs every target for N seconds and prints a
//! row each; `tests/corpus.rs` replays the corpus as a regression test.

pub mod driver;
pub mod mutate;
pub mod targets;

use std::path::{Path, PathBuf};

pub use driver::{fuzz, Crash, Stats};
pub use targets::{Target, TARGETS};

/// The corpus of `target` in this repository (`crates/ferry-fuzz/corpus/<target>`).
pub fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target)
}

/// The corpus files of `target`, sorted, with their bytes.
pub fn corpus(target: &str) -> std::io::Result<Vec<(PathBuf, Vec<u8>)>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus_dir(target))?
        .map(|e| e.map(|e| e.path()))
        .collect::<Result<_, _>>()?;
    files.sort();
    files
        .into_iter()
        .map(|f| std::fs::read(&f).map(|b| (f, b)))
        .collect()
}
