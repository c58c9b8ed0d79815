//! The book (`docs/`) and the README stay true: every page is in the book's contents, every
//! internal link and anchor resolves, and every block that shows Ferry's output is what Ferry
//! prints today (`FERRY_BLESS=1` rewrites generated blocks; see `support/docs_blocks.rs`).

use std::path::{Component, Path, PathBuf};
use std::process::Command;

#[path = "support/docs_blocks.rs"]
mod docs_blocks;
#[path = "support/docs_markdown.rs"]
mod docs_markdown;

use docs_blocks::{Block, Source};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the repository")
}

fn book_src() -> PathBuf {
    repo().join("docs/src")
}

/// Files under `dir` ending in `.md`, sorted.
fn markdown_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).expect("read the book's directory") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The book's pages and the README.
fn pages() -> Vec<PathBuf> {
    let mut out = markdown_files(&book_src());
    out.push(readme());
    out
}

fn readme() -> PathBuf {
    repo().join("README.md")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn shown(path: &Path) -> String {
    path.strip_prefix(repo())
        .unwrap_or(path)
        .display()
        .to_string()
}

/// `base/rel` with `.` and `..` resolved (without touching the file system).
fn join(base: &Path, rel: &str) -> PathBuf {
    let mut out = PathBuf::new();
    for c in base.join(rel).components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

#[test]
fn every_page_is_in_the_contents_and_no_note_is_left_outside_the_book() {
    let summary = book_src().join("SUMMARY.md");
    let listed: Vec<PathBuf> = docs_markdown::links(&read(&summary))
        .into_iter()
        .map(|l| join(&book_src(), &l.dest))
        .collect();
    let mut problems = Vec::new();
    for page in markdown_files(&book_src()) {
        if page != summary && !listed.contains(&page) {
            problems.push(format!("{}: not in docs/src/SUMMARY.md", shown(&page)));
        }
    }
    for entry in std::fs::read_dir(repo().join("docs")).expect("docs/") {
        let path = entry.expect("an entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.ends_with(".md") {
            problems.push(format!(
                "{}: outside the book; move it under docs/src/ (git mv) and list it in \
                 docs/src/SUMMARY.md",
                shown(&path)
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// What is wrong with one link of `page` (`None`: it resolves).
fn link_problem(page: &Path, dest: &str) -> Option<String> {
    if dest.starts_with("http://") || dest.starts_with("https://") || dest.starts_with("mailto:") {
        return (page == readme())
            .then(|| "the README links nothing outside the repository".to_owned());
    }
    let (file, anchor) = dest.split_once('#').unwrap_or((dest, ""));
    let base = page.parent().expect("a page's directory").to_path_buf();
    let target = if file.is_empty() {
        page.to_path_buf()
    } else {
        join(&base, file)
    };
    if page.starts_with(book_src()) && !target.starts_with(book_src()) {
        return Some(
            "leaves the book (mdBook publishes only docs/src/): name the file as `code` instead"
                .to_owned(),
        );
    }
    if !target.exists() {
        return Some(format!("{} does not exist", shown(&target)));
    }
    let is_markdown = target.extension().is_some_and(|e| e == "md");
    if anchor.is_empty() || !is_markdown {
        return None;
    }
    let anchors = docs_markdown::anchors(&read(&target));
    (!anchors.contains(anchor)).then(|| format!("{} has no section #{anchor}", shown(&target)))
}

#[test]
fn internal_links_and_anchors_resolve() {
    let mut problems = Vec::new();
    for page in pages() {
        let text = read(&page);
        for link in docs_markdown::links(&text) {
            if let Some(p) = link_problem(&page, &link.dest) {
                problems.push(format!(
                    "{}:{}: {}: {p}",
                    shown(&page),
                    link.line,
                    link.dest
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "broken links:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_readme_is_short_and_stays_inside_the_repository() {
    let text = read(&readme());
    for bad in ["../shared", "/work/", "seed 004", "the seed's", "the seed "] {
        assert!(!text.contains(bad), "README.md mentions {bad:?}");
    }
    let lines = text.lines().count();
    assert!(lines <= 200, "README.md has {lines} lines (at most 200)");
}

/// The README's test command, the one CI runs.
const TEST_COMMAND: &str = "cargo test --workspace -- --include-ignored";

#[test]
fn ci_runs_the_readmes_test_command() {
    let readme = read(&readme());
    let ci = read(&repo().join(".ci/run"));
    let runs = |text: &str| text.lines().any(|l| l.trim() == TEST_COMMAND);
    assert!(runs(&readme), "README.md does not give `{TEST_COMMAND}`");
    assert!(runs(&ci), ".ci/run does not run `{TEST_COMMAND}`");
}

/// What a block's source gives today.
fn source_text(block: &Block) -> String {
    match &block.source {
        Source::File(path) => read(&repo().join(path)),
        Source::Command(args) => {
            let out = Command::new(env!("CARGO_BIN_EXE_ferry"))
                .args(args)
                .current_dir(repo())
                .output()
                .expect("run ferry");
            String::from_utf8(out.stdout).expect("utf-8 output")
        }
    }
}

#[test]
fn blocks_showing_ferrys_output_are_what_it_prints() {
    let bless = std::env::var_os("FERRY_BLESS").is_some();
    let mut problems = Vec::new();
    for page in pages() {
        let text = read(&page);
        let blocks = match docs_blocks::blocks(&text) {
            Ok(b) => b,
            Err(e) => {
                problems.push(format!("{}: {e}", shown(&page)));
                continue;
            }
        };
        let lines: Vec<&str> = text.lines().collect();
        let mut texts = Vec::new();
        for block in &blocks {
            let mut have = lines[block.start..block.end].join("\n");
            have.push('\n');
            let want = docs_blocks::expected(block, &source_text(block));
            let at = format!("{}:{}", shown(&page), block.line);
            if block.excerpt {
                if let Some(line) = docs_blocks::excerpt_mismatch(&have, &want) {
                    problems.push(format!("{at}: excerpt line not printed (in order): {line}"));
                }
                texts.push(have);
            } else {
                if have != want && !bless {
                    problems.push(format!("{at}: block differs from what it shows:\n{want}"));
                }
                texts.push(want);
            }
        }
        let new = docs_blocks::rewrite(&text, &blocks, &texts);
        if bless && new != text {
            std::fs::write(&page, new).expect("rewrite the page");
        }
    }
    assert!(
        problems.is_empty(),
        "{}\n(FERRY_BLESS=1 cargo test -p ferry --test docs rewrites generated blocks)",
        problems.join("\n")
    );
}

/// The headline figures the book repeats live once, in `docs/src/figures/*.txt` (each page that
/// states one includes it with mdBook's `{{#include}}`), and each of their measurements is a
/// figure of the performance page, where it was measured: a snippet that drifts from the
/// measurements, or one nobody includes, fails here.
#[test]
fn repeated_figures_come_from_one_snippet_measured_on_the_performance_page() {
    let src = book_src();
    let performance = read(&src.join("performance.md"));
    let pages: Vec<String> = pages().iter().map(|p| read(p)).collect();
    let mut snippets: Vec<_> = std::fs::read_dir(src.join("figures"))
        .expect("docs/src/figures")
        .map(|e| e.expect("entry").path())
        .collect();
    snippets.sort();
    assert!(!snippets.is_empty());
    for path in snippets {
        let name = path
            .file_name()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        let text = std::fs::read_to_string(&path).expect("snippet");
        assert!(
            !text.ends_with('\n'),
            "{name}: a trailing newline would end a table row"
        );
        let measured = measurements(&text);
        assert!(!measured.is_empty(), "{name}: no measurement in {text:?}");
        for m in measured {
            assert!(
                performance.contains(&m),
                "{name}: {m:?} is not on performance.md"
            );
        }
        let include = format!("figures/{name}}}}}");
        assert!(
            pages.iter().any(|p| p.contains(&include)),
            "{name}: no page includes it"
        );
    }
}

/// Numbers with a unit (`7.05 s`, `274 ms`, `0.37–0.59 s`): the number part, as written.
fn measurements(text: &str) -> Vec<String> {
    let words: Vec<&str> = text.split_whitespace().collect();
    words
        .windows(2)
        .filter(|w| {
            matches!(
                w[1].trim_end_matches([',', ')', ';']),
                "s" | "ms" | "MiB" | "µs"
            )
        })
        .filter(|w| w[0].starts_with(|c: char| c.is_ascii_digit()))
        .map(|w| w[0].to_owned())
        .collect()
}
