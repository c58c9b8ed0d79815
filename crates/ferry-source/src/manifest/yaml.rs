//! A YAML stream → its documents as JSON values.
//!
//! serde-saphyr decides what a manifest means and what is wrong with it. Its serde layer,
//! though, costs twice what its parser does (on the 1.9 KB Service + EndpointSlice files of
//! the 10 000-Service benchmark: 107 µs per file into `serde_json::Value`, 104 µs into
//! `IgnoredAny`, 40 µs for the parser's events alone), and reading the files is most of
//! `ferry run`'s start-up. So the documents are first built straight from the events of the
//! parser serde-saphyr itself runs (granit-parser, which serde-saphyr re-exports), for the
//! plain shape manifests have: block or flow mappings and sequences of scalars whose meaning
//! is not in doubt. At the first thing outside that shape (an anchor, an alias, a tag, a merge
//! key, a duplicate key, a non-string key, a null, a float, a number spelled in any but the
//! plain decimal way, a YAML 1.1 boolean, nesting deeper than [`MAX_DEPTH`], a syntax error)
//! the whole stream is handed to serde-saphyr instead, so every answer that is not the fast
//! path's own is serde-saphyr's, errors included. The fuzz target `yaml` checks that the fast
//! path never disagrees with serde-saphyr.

use serde_json::{Map, Value};
use serde_saphyr::granit_parser::{Event, Options, Parser, ScalarStyle};

/// How many events aliases may replay in one YAML stream.
pub(super) const MAX_ALIAS_EVENTS: usize = 10_000;

/// The deepest nesting the fast path builds (serde-saphyr's default budget refuses past 64).
pub const MAX_DEPTH: usize = 32;

/// Above this size a stream goes to serde-saphyr, whose budgets are counted in bytes of
/// scalars (64 MiB) and in documents (see [`reference`]).
const MAX_FAST_BYTES: usize = 16 << 20;

/// Every non-empty document of a YAML stream, or why it cannot be read.
pub fn parse(text: &str) -> Result<Vec<Value>, String> {
    match fast(text) {
        Some(documents) => Ok(documents),
        None => reference(text),
    }
}

/// serde-saphyr's reading of a YAML stream: every non-empty document. Its default budget
/// allows 1024 documents per stream; a generated manifest of a large cluster has far more.
/// Aliases are held to a few thousand replayed events: manifests written by hand share a label
/// block or two, and the default (a million) let a 1 KiB alias bomb cost ~200 MiB and seconds
/// of CPU before it was refused (drill 5, docs/reliability.md).
pub fn reference(text: &str) -> Result<Vec<Value>, String> {
    let options = serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_documents: 1_000_000,
            max_nodes: 50_000_000,
            max_events: 100_000_000,
            max_recorded_anchor_events: MAX_ALIAS_EVENTS,
        },
    };
    serde_saphyr::from_multiple_with_options::<Value>(text, options).map_err(|e| {
        let message = e.without_snippet().to_string();
        let message = message.lines().next().unwrap_or_default().to_owned();
        match e.location() {
            Some(at) => {
                let (line, column) = (at.line(), at.column());
                // The message may end with the location again; say it once, up front.
                let suffix = format!(" at line {line}, column {column}");
                let message = message.strip_suffix(&suffix).unwrap_or(&message);
                format!("not valid YAML: line {line}, column {column}: {message}")
            }
            None => format!("not valid YAML: {message}"),
        }
    })
}

/// A collection being built.
enum Open {
    /// A mapping, with the key whose value comes next.
    Mapping(Map<String, Value>, Option<String>),
    Sequence(Vec<Value>),
}

/// The documents of `text` when every one is a mapping of the plain shape (see the module
/// documentation); `None` sends the stream to serde-saphyr.
pub fn fast(text: &str) -> Option<Vec<Value>> {
    if text.len() > MAX_FAST_BYTES {
        return None;
    }
    let mut options = Options::default();
    options.emit_comments = false;
    let mut documents = Vec::new();
    let mut open: Vec<Open> = Vec::new();
    for event in Parser::new_from_str_with_options(text, options) {
        let (event, _) = event.ok()?;
        let value = match event {
            Event::StreamStart | Event::DocumentStart(..) | Event::DocumentEnd => continue,
            Event::StreamEnd => break,
            Event::MappingStart(_, 0, None) | Event::SequenceStart(_, 0, None) => {
                // A collection as a mapping's key is not the plain shape.
                if open.len() == MAX_DEPTH || matches!(open.last(), Some(Open::Mapping(_, None))) {
                    return None;
                }
                open.push(match event {
                    Event::MappingStart(..) => Open::Mapping(Map::new(), None),
                    _ => Open::Sequence(Vec::new()),
                });
                continue;
            }
            Event::MappingEnd => match open.pop()? {
                Open::Mapping(map, None) => Value::Object(map),
                _ => return None,
            },
            Event::SequenceEnd => match open.pop()? {
                Open::Sequence(items) => Value::Array(items),
                Open::Mapping(..) => return None,
            },
            Event::Scalar(text, style, 0, None) => {
                if let Some(Open::Mapping(map, key @ None)) = open.last_mut() {
                    let text = key_text(&text, style)?;
                    if map.contains_key(&text) {
                        return None;
                    }
                    *key = Some(text);
                    continue;
                }
                scalar(&text, style)?
            }
            // Anchors, aliases, tags and whatever else the parser may say.
            _ => return None,
        };
        match open.last_mut() {
            None if value.is_object() && documents.len() < 1_000_000 => documents.push(value),
            None => return None,
            Some(Open::Sequence(items)) => items.push(value),
            Some(Open::Mapping(map, key)) => {
                map.insert(key.take()?, value);
            }
        }
    }
    open.is_empty().then_some(documents)
}

/// A mapping key: quoted, or plain and read as the same text by every YAML schema.
fn key_text(text: &str, style: ScalarStyle) -> Option<String> {
    match scalar(text, style)? {
        Value::String(s) => Some(s),
        _ => None,
    }
}

/// A scalar in a value's place, when its meaning is not in doubt.
fn scalar(text: &str, style: ScalarStyle) -> Option<Value> {
    match style {
        ScalarStyle::SingleQuoted
        | ScalarStyle::DoubleQuoted
        | ScalarStyle::Literal
        | ScalarStyle::Folded => Some(Value::String(text.to_owned())),
        ScalarStyle::Plain => plain(text),
    }
}

/// Plain words that YAML 1.1 or 1.2 (or Rust's float syntax, which serde-saphyr falls back
/// on) read as something other than a string, in any letter case.
const NOT_WORDS: [&str; 12] = [
    "y", "yes", "n", "no", "on", "off", "true", "false", "null", "nan", "inf", "infinity",
];

/// A plain scalar: a word that is only a word, `true`/`false`, a decimal integer written the
/// plain way, or dot-separated digits (an IPv4 address); anything else is left to serde-saphyr.
fn plain(text: &str) -> Option<Value> {
    let bytes = text.as_bytes();
    let first = *bytes.first()?;
    if first.is_ascii_alphabetic() {
        return match text {
            "true" => Some(Value::Bool(true)),
            "false" => Some(Value::Bool(false)),
            _ if NOT_WORDS.iter().any(|w| text.eq_ignore_ascii_case(w)) => None,
            _ => Some(Value::String(text.to_owned())),
        };
    }
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    // No leading zero, no sign but `-`, no `_`, and small enough for any integer type.
    let decimal = |s: &str| digits(s) && s.len() <= 18 && (s == "0" || !s.starts_with('0'));
    if decimal(text) {
        return text.parse::<u64>().ok().map(Value::from);
    }
    if let Some(magnitude) = text.strip_prefix('-') {
        if decimal(magnitude) && magnitude != "0" {
            return text.parse::<i64>().ok().map(Value::from);
        }
    }
    // A float has one dot at most.
    let mut parts = text.split('.');
    if first.is_ascii_digit() && parts.clone().count() > 2 && parts.all(digits) {
        return Some(Value::String(text.to_owned()));
    }
    None
}
