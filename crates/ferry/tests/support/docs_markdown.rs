//! Reading the book's Markdown as mdBook does: the anchors its headings get and the links a
//! page holds (code blocks and code spans are not links).

use std::collections::BTreeSet;

use pulldown_cmark::{Event, Options, Parser, Tag, TagEnd};

/// A link (or image) of a page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Link {
    /// As written: `../modes.md#syncing`, `#masquerade`, `https://…`.
    pub dest: String,
    /// 1-based line of the page.
    pub line: usize,
}

fn options() -> Options {
    Options::ENABLE_TABLES
        | Options::ENABLE_FOOTNOTES
        | Options::ENABLE_STRIKETHROUGH
        | Options::ENABLE_HEADING_ATTRIBUTES
}

/// mdBook's id of a heading with this text (mdbook-html's `id_from_content`).
pub fn id_from_content(content: &str) -> String {
    content
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|ch| {
            if ch.is_alphanumeric() || ch == '_' || ch == '-' {
                Some(ch)
            } else if ch.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

/// Every anchor of a page: its headings' ids (`{#id}` or from the text, a repeated id numbered
/// `-1`, `-2` … as mdBook does) and the `id="…"` of raw HTML anchors.
pub fn anchors(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut heading: Option<(Option<String>, String)> = None;
    for event in Parser::new_ext(text, options()) {
        match event {
            Event::Start(Tag::Heading { id, .. }) => {
                heading = Some((id.map(|i| i.to_string()), String::new()));
            }
            Event::Text(t) | Event::Code(t) => {
                if let Some((_, content)) = heading.as_mut() {
                    content.push_str(&t);
                }
            }
            Event::End(TagEnd::Heading(_)) => {
                if let Some((id, content)) = heading.take() {
                    let id = id.unwrap_or_else(|| id_from_content(&content));
                    let mut unique = id.clone();
                    let mut n = 0;
                    while !out.insert(unique.clone()) {
                        n += 1;
                        unique = format!("{id}-{n}");
                    }
                }
            }
            Event::Html(html) | Event::InlineHtml(html) => {
                out.extend(html_ids(&html));
            }
            _ => {}
        }
    }
    out
}

fn html_ids(html: &str) -> Vec<String> {
    html.split("id=\"")
        .skip(1)
        .filter_map(|rest| rest.split('"').next())
        .map(str::to_owned)
        .collect()
}

/// Every link and image of a page.
pub fn links(text: &str) -> Vec<Link> {
    let line_of = |offset: usize| text[..offset].matches('\n').count() + 1;
    Parser::new_ext(text, options())
        .into_offset_iter()
        .filter_map(|(event, range)| match event {
            Event::Start(Tag::Link { dest_url, .. } | Tag::Image { dest_url, .. }) => Some(Link {
                dest: dest_url.to_string(),
                line: line_of(range.start),
            }),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anchors_are_mdbooks() {
        let a = anchors("# `ferry status`\n## Why this layout (measured)\n## A\n## A\n");
        assert!(a.contains("ferry-status"), "{a:?}");
        assert!(a.contains("why-this-layout-measured"), "{a:?}");
        assert!(a.contains("a") && a.contains("a-1"), "{a:?}");
    }

    #[test]
    fn links_skip_code() {
        let l = links("[a](x.md#y)\n\n```\n[b](no.md)\n```\n`[c](no.md)` ![i](p.png)\n");
        let dests: Vec<&str> = l.iter().map(|l| l.dest.as_str()).collect();
        assert_eq!(dests, ["x.md#y", "p.png"]);
        assert_eq!(l[1].line, 6);
    }
}
