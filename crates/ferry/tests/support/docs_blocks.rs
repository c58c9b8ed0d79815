//! Blocks of the book that show what Ferry prints, kept true by a test. A marker comment
//! names the source, the fenced block right after it shows it:
//!
//! - `<!-- generated: ferry ARGS -->`: the block is `$ ferry ARGS` followed by what the command
//!   prints (a `mermaid` block: only what it prints);
//! - `<!-- generated: file PATH -->`: the block is the file (a golden file another test keeps
//!   true), PATH from the repository's root;
//! - `<!-- excerpt: ferry ARGS -->` (or `excerpt: file PATH`): every line of the block but `…`
//!   is a line of what the command prints (of the file), in the same order.
//!
//! Generated blocks can be rewritten (`FERRY_BLESS=1`); excerpts are checked only.

/// Where a block's text comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// `ferry ARGS`.
    Command(Vec<String>),
    /// A file of the repository.
    File(String),
}

/// One marked block of a page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Block {
    /// Where its text comes from.
    pub source: Source,
    /// An excerpt (checked line by line) rather than the whole output.
    pub excerpt: bool,
    /// The fence's language (`text`, `mermaid` …).
    pub lang: String,
    /// The block's lines, between the fences: `start..end` of the page's lines.
    pub start: usize,
    /// See `start`.
    pub end: usize,
    /// 1-based line of the marker.
    pub line: usize,
}

/// A marker line's block, or an error naming the line.
pub fn blocks(text: &str) -> Result<Vec<Block>, String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let Some((excerpt, source)) = marker(lines[i]) else {
            i += 1;
            continue;
        };
        let line = i + 1;
        let source = source.map_err(|e| format!("line {line}: {e}"))?;
        let open = (i + 1..lines.len())
            .find(|&j| !lines[j].trim().is_empty())
            .filter(|&j| lines[j].starts_with("```"))
            .ok_or_else(|| format!("line {line}: the marker is not followed by a ``` block"))?;
        let close = (open + 1..lines.len())
            .find(|&j| lines[j].trim_end() == "```")
            .ok_or_else(|| format!("line {}: the block is not closed", open + 1))?;
        out.push(Block {
            source,
            excerpt,
            lang: lines[open].trim_start_matches('`').trim().to_owned(),
            start: open + 1,
            end: close,
            line,
        });
        i = close + 1;
    }
    Ok(out)
}

/// Render-only subcommands: nothing a page says may touch the kernel.
const ALLOWED: &[&str] = &["rules", "explain", "check"];

fn marker(line: &str) -> Option<(bool, Result<Source, String>)> {
    let body = line
        .trim()
        .strip_prefix("<!--")?
        .strip_suffix("-->")?
        .trim();
    let (excerpt, rest) = if let Some(r) = body.strip_prefix("generated:") {
        (false, r)
    } else {
        (true, body.strip_prefix("excerpt:")?)
    };
    let words: Vec<String> = rest.split_whitespace().map(str::to_owned).collect();
    let source = match words.split_first() {
        Some((w, [path])) if w == "file" => Ok(Source::File(path.clone())),
        Some((w, args)) if w == "ferry" => match args.first() {
            Some(sub) if ALLOWED.contains(&sub.as_str()) && !args.iter().any(|a| a == "--live") => {
                Ok(Source::Command(args.to_vec()))
            }
            _ => Err(format!(
                "only `ferry {}` (without --live) may be run for a page",
                ALLOWED.join("|")
            )),
        },
        _ => Err(format!("unknown marker {body:?}")),
    };
    Some((excerpt, source))
}

/// What a generated block must hold, from the command's output or the file.
pub fn expected(block: &Block, output: &str) -> String {
    match (&block.source, block.lang.as_str()) {
        (Source::Command(args), lang) if lang != "mermaid" => {
            format!("$ ferry {}\n{output}", args.join(" "))
        }
        _ => output.to_owned(),
    }
}

/// Whether every line of `excerpt` but `…` is a line of `full`, in order (trailing spaces
/// ignored); else the first line that is not.
pub fn excerpt_mismatch<'a>(excerpt: &'a str, full: &str) -> Option<&'a str> {
    let mut full = full.lines().map(str::trim_end);
    excerpt
        .lines()
        .map(str::trim_end)
        .filter(|l| l.trim() != "…")
        .find(|want| !full.any(|have| have == *want))
}

/// The page with each block's lines replaced by `texts` (in the order of `blocks`).
pub fn rewrite(text: &str, blocks: &[Block], texts: &[String]) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::new();
    let mut next = 0;
    for (block, new) in blocks.iter().zip(texts) {
        for l in &lines[next..block.start] {
            out.push_str(l);
            out.push('\n');
        }
        out.push_str(new);
        if !new.ends_with('\n') {
            out.push('\n');
        }
        next = block.end;
    }
    for l in &lines[next..] {
        out.push_str(l);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = "a\n<!-- generated: ferry rules --manifests x -->\n```text\nold\n```\nb\n\
                        <!-- excerpt: ferry explain --to y -->\n\n```\n1\n…\n3\n```\n";

    #[test]
    fn markers_and_their_blocks() {
        let b = blocks(PAGE).expect("valid");
        assert_eq!(b.len(), 2);
        assert_eq!(
            b[0].source,
            Source::Command(vec!["rules".into(), "--manifests".into(), "x".into()])
        );
        assert_eq!((b[0].start, b[0].end, b[0].lang.as_str()), (3, 4, "text"));
        assert!(b[1].excerpt && b[1].line == 7);
        let page = rewrite(
            PAGE,
            &b[..1],
            &["$ ferry rules --manifests x\nnew\n".to_owned()],
        );
        assert!(
            page.contains("```text\n$ ferry rules --manifests x\nnew\n```\nb\n"),
            "{page}"
        );
    }

    #[test]
    fn only_render_commands_may_run() {
        assert!(blocks("<!-- generated: ferry cleanup -->\n```\n```\n").is_err());
        assert!(blocks("<!-- generated: ferry explain --live -->\n```\n```\n").is_err());
        assert!(blocks("<!-- generated: ferry rules -->\ntext\n").is_err());
    }

    #[test]
    fn excerpts_keep_order() {
        assert_eq!(excerpt_mismatch("1\n…\n3", "1\n2\n3\n"), None);
        assert_eq!(excerpt_mismatch("3\n1", "1\n2\n3\n"), Some("1"));
    }
}
