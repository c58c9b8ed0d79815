//! Reading one source file: its tokens without comments, literals and test code, and the paths
//! it names inside its own crate.

use std::collections::BTreeSet;

use super::Module;

/// The tokens of a file without its `#[cfg(test)]` items: test code is not part of the graph.
pub fn tokens(text: &str) -> Vec<String> {
    let all = lex(text);
    let mut out = Vec::with_capacity(all.len());
    let mut i = 0;
    while i < all.len() {
        if all[i..].starts_with(&CFG_TEST.map(String::from)) {
            i += CFG_TEST.len();
            while all.get(i).is_some_and(|t| t == "#") {
                i = matching(&all, i + 1, "[", "]") + 1;
            }
            let end = all[i..]
                .iter()
                .position(|t| t == "{" || t == ";")
                .map_or(all.len(), |p| i + p);
            i = match all.get(end).map(String::as_str) {
                Some("{") => matching(&all, end, "{", "}") + 1,
                _ => end + 1,
            };
        } else {
            out.push(all[i].clone());
            i += 1;
        }
    }
    out
}

const CFG_TEST: [&str; 7] = ["#", "[", "cfg", "(", "test", ")", "]"];

/// Splits source text into identifiers, `::` and single punctuation, without comments, string
/// and character literals (so a `crate::` in a doc comment or a message is no edge).
fn lex(text: &str) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && chars.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 1;
                } else if chars[i] == '*' && chars.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 1;
                    if depth == 0 {
                        i += 1;
                        break;
                    }
                }
                i += 1;
            }
        } else if c == 'r' && (next == Some('#') || next == Some('"')) && is_raw_string(&chars, i) {
            i = skip_raw_string(&chars, i);
        } else if c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != '"' {
                i += if chars[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if c == '\'' {
            // A character literal ('x', '\n', '\u{..}'), or else a lifetime: skip just the quote.
            if next == Some('\\') {
                i += 2;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if chars.get(i + 2) == Some(&'\'') {
                i += 3;
            } else {
                i += 1;
            }
        } else if c.is_alphanumeric() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(chars[start..i].iter().collect());
        } else if c == ':' && next == Some(':') {
            out.push("::".to_string());
            i += 2;
        } else {
            if !c.is_whitespace() {
                out.push(c.to_string());
            }
            i += 1;
        }
    }
    out
}

fn is_raw_string(chars: &[char], at: usize) -> bool {
    let before_ok = at == 0 || !(chars[at - 1].is_alphanumeric() || chars[at - 1] == '_');
    let mut j = at + 1;
    while chars.get(j) == Some(&'#') {
        j += 1;
    }
    before_ok && chars.get(j) == Some(&'"')
}

fn skip_raw_string(chars: &[char], at: usize) -> usize {
    let mut j = at + 1;
    let mut hashes = 0;
    while chars.get(j) == Some(&'#') {
        hashes += 1;
        j += 1;
    }
    j += 1;
    while j < chars.len() {
        if chars[j] == '"' && (1..=hashes).all(|k| chars.get(j + k) == Some(&'#')) {
            return j + 1 + hashes;
        }
        j += 1;
    }
    j
}

/// One path a file names inside its own crate.
pub struct Named {
    /// The path from the crate root.
    pub path: Vec<String>,
    /// The name it is known by here (the last segment, or the alias of `as`).
    pub name: String,
    /// Whether it comes from a `pub use` (a re-export that others may go through).
    pub reexport: bool,
}

/// Every path a file names inside its own crate.
pub fn crate_paths(module: &Module, modules: &[Module], tokens: &[String]) -> Vec<Named> {
    let children: BTreeSet<&str> = modules
        .iter()
        .filter(|m| m.path.len() == module.path.len() + 1 && m.path.starts_with(&module.path))
        .filter_map(|m| m.path.last().map(String::as_str))
        .collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < tokens.len() {
        if tokens[i] == "use" {
            let reexport = i > 0 && (tokens[i - 1] == "pub" || tokens[i - 1] == ")");
            let end = tokens[i..]
                .iter()
                .position(|t| t == ";")
                .map_or(tokens.len(), |p| i + p);
            let mut paths = Vec::new();
            expand_use(&tokens[i + 1..end], &mut Vec::new(), &mut paths);
            for (path, name) in paths {
                let relative = path.first().is_some_and(|p| children.contains(p.as_str()));
                let path = if relative {
                    [vec!["self".to_string()], path].concat()
                } else {
                    path
                };
                if let Some(path) = absolute(&module.path, &path) {
                    out.push(Named {
                        path,
                        name,
                        reexport,
                    });
                }
            }
            i = end;
        } else if ["crate", "super", "self"].contains(&tokens[i].as_str())
            && tokens.get(i + 1).is_some_and(|t| t == "::")
            && (i == 0 || (tokens[i - 1] != "$" && tokens[i - 1] != "::"))
        {
            let mut path = vec![tokens[i].clone()];
            let mut j = i + 1;
            while tokens.get(j).is_some_and(|t| t == "::")
                && tokens.get(j + 1).is_some_and(|t| is_ident(t))
            {
                path.push(tokens[j + 1].clone());
                j += 2;
            }
            let name = path.last().cloned().unwrap_or_default();
            if let Some(path) = absolute(&module.path, &path) {
                out.push(Named {
                    path,
                    name,
                    reexport: false,
                });
            }
            i = j;
        }
        i += 1;
    }
    out
}

fn is_ident(token: &str) -> bool {
    token
        .chars()
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_')
}

/// Expands a use tree (`a::{b, c::{self, D}}`) into its paths.
fn expand_use(tree: &[String], prefix: &mut Vec<String>, out: &mut Vec<(Vec<String>, String)>) {
    let mut i = 0;
    let start_len = prefix.len();
    while i < tree.len() {
        match tree[i].as_str() {
            "{" => {
                let close = matching(tree, i, "{", "}");
                for item in split_top_level(&tree[i + 1..close]) {
                    expand_use(item, prefix, out);
                }
                prefix.truncate(start_len);
                return;
            }
            "::" | "pub" | "(" | ")" | "in" => {}
            "as" => {
                let alias = tree.get(i + 1).cloned().unwrap_or_default();
                out.push((prefix.clone(), alias));
                prefix.truncate(start_len);
                return;
            }
            "self" if !prefix.is_empty() => {}
            "*" => {
                out.push((prefix.clone(), "*".to_string()));
                prefix.truncate(start_len);
                return;
            }
            name => prefix.push(name.to_string()),
        }
        i += 1;
    }
    if let Some(last) = prefix.last() {
        out.push((prefix.clone(), last.clone()));
    }
    prefix.truncate(start_len);
}

/// The index of the bracket that closes the one at `open`.
fn matching(tree: &[String], open: usize, opening: &str, closing: &str) -> usize {
    let mut depth = 0;
    for (k, token) in tree.iter().enumerate().skip(open) {
        if token == opening {
            depth += 1;
        } else if token == closing {
            depth -= 1;
        }
        if depth == 0 {
            return k;
        }
    }
    tree.len()
}

fn split_top_level(items: &[String]) -> Vec<&[String]> {
    let mut out = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (k, token) in items.iter().enumerate() {
        match token.as_str() {
            "{" => depth += 1,
            "}" => depth -= 1,
            "," if depth == 0 => {
                out.push(&items[start..k]);
                start = k + 1;
            }
            _ => {}
        }
    }
    out.push(&items[start..]);
    out.into_iter().filter(|item| !item.is_empty()).collect()
}

/// Makes a `crate::`/`super::`/`self::` path absolute; `None` for other crates' paths.
fn absolute(here: &[String], path: &[String]) -> Option<Vec<String>> {
    let mut base: Vec<String> = match path.first()?.as_str() {
        "crate" => Vec::new(),
        "self" | "super" => here.to_vec(),
        _ => return None,
    };
    let mut rest = &path[1..];
    if path[0] == "super" {
        base.pop();
    }
    while rest.first().is_some_and(|s| s == "super") {
        base.pop();
        rest = &rest[1..];
    }
    base.extend(rest.iter().cloned());
    Some(base)
}
