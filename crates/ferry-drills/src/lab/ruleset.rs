//! An nftables table as `nft list table` (the kernel) or `ferry rules` (Ferry's rendering)
//! prints it, normalised so that the two compare equal when they hold the same rules.
//!
//! What differs between the two texts without meaning anything: blank lines, the order of
//! `flags` and `size` lines, base chain priorities (`-100` against `dstnat`), numbers in hex
//! or decimal (`== 0` against `== 0x00000000`), the `/32` of a single address in an interval
//! set, element comments and the order of elements. [`Ruleset::parse`] keeps each set's and
//! map's elements (as a sorted list, comments dropped) and each chain's rules (in order, the
//! `type … hook …` line dropped); [`Ruleset::differences`] names what differs.

use std::collections::BTreeMap;

/// A table's sets, maps and chains, normalised.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Ruleset {
    /// `set NAME` / `map NAME` → its elements, sorted (dynamic sets, which traffic fills,
    /// are left out).
    pub elements: BTreeMap<String, Vec<String>>,
    /// `chain NAME` → its rules, in order.
    pub chains: BTreeMap<String, Vec<String>>,
}

impl Ruleset {
    /// Parses one table's listing.
    pub fn parse(text: &str) -> Ruleset {
        let mut r = Ruleset::default();
        let mut block: Option<(String, bool)> = None;
        let mut dynamic = false;
        let mut elements: Option<String> = None;
        for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
            if let Some(acc) = elements.as_mut() {
                acc.push(' ');
                acc.push_str(line);
                if line.ends_with('}') {
                    if let (Some((name, _)), Some(all)) = (&block, elements.take()) {
                        r.elements.insert(name.clone(), split_elements(&all));
                    }
                }
                continue;
            }
            if let Some(rest) = line.strip_prefix("set ").or(line.strip_prefix("map ")) {
                let kind = &line[..3];
                block = Some((format!("{kind} {}", rest.trim_end_matches(" {")), false));
                dynamic = false;
                r.elements.insert(
                    block.as_ref().map(|b| b.0.clone()).unwrap_or_default(),
                    vec![],
                );
            } else if let Some(rest) = line.strip_prefix("chain ") {
                let name = rest.trim_end_matches(" {").to_owned();
                r.chains.insert(name.clone(), Vec::new());
                block = Some((name, true));
            } else if line == "}" {
                if dynamic {
                    if let Some((name, _)) = &block {
                        r.elements.remove(name);
                    }
                }
                block = None;
            } else if let Some((name, chain)) = &block {
                if *chain {
                    if !line.starts_with("type ") {
                        if let Some(rules) = r.chains.get_mut(name) {
                            rules.push(normalise(line));
                        }
                    }
                } else if line.starts_with("flags ") && line.contains("dynamic") {
                    dynamic = true;
                } else if let Some(rest) = line.strip_prefix("elements = {") {
                    if rest.ends_with('}') {
                        r.elements.insert(name.clone(), split_elements(rest));
                    } else {
                        elements = Some(rest.to_owned());
                    }
                }
            }
        }
        r
    }

    /// Elements and rules in all.
    pub fn size(&self) -> (usize, usize) {
        (
            self.elements.values().map(Vec::len).sum(),
            self.chains.values().map(Vec::len).sum(),
        )
    }

    /// What differs from `other`: one line per set, map or chain that differs (at most
    /// `at_most`), and the number of differing elements and rules in all.
    pub fn differences(&self, other: &Ruleset, at_most: usize) -> (Vec<String>, usize) {
        let mut lines = Vec::new();
        let mut count = 0;
        let mut note = |what: String, n: usize| {
            count += n;
            if lines.len() < at_most {
                lines.push(what);
            }
        };
        for (name, mine) in &self.elements {
            let theirs = other.elements.get(name).map(Vec::as_slice).unwrap_or(&[]);
            let only_mine: Vec<&String> = mine.iter().filter(|e| !contains(theirs, e)).collect();
            let only_theirs: Vec<&String> = theirs.iter().filter(|e| !contains(mine, e)).collect();
            if !only_mine.is_empty() || !only_theirs.is_empty() {
                note(
                    format!(
                        "{name}: {} only here (e.g. {:?}), {} only there (e.g. {:?})",
                        only_mine.len(),
                        only_mine.first(),
                        only_theirs.len(),
                        only_theirs.first()
                    ),
                    only_mine.len() + only_theirs.len(),
                );
            }
        }
        for name in other
            .elements
            .keys()
            .filter(|n| !self.elements.contains_key(*n))
        {
            note(format!("{name}: only there"), 1);
        }
        for (name, mine) in &self.chains {
            match other.chains.get(name) {
                Some(theirs) if theirs == mine => {}
                Some(theirs) => note(format!("chain {name}: {mine:?} ≠ {theirs:?}"), 1),
                None => note(format!("chain {name}: only here"), 1),
            }
        }
        for name in other
            .chains
            .keys()
            .filter(|n| !self.chains.contains_key(*n))
        {
            note(format!("chain {name}: only there"), 1);
        }
        (lines, count)
    }
}

/// Binary search in a sorted list.
fn contains(sorted: &[String], e: &String) -> bool {
    sorted.binary_search(e).is_ok()
}

/// `a, b comment "x", c }` → the normalised elements, sorted.
fn split_elements(list: &str) -> Vec<String> {
    let list = list.trim().trim_end_matches('}');
    let mut out = Vec::new();
    let mut current = String::new();
    let mut quoted = false;
    for ch in list.chars() {
        match ch {
            '"' => {
                quoted = !quoted;
                current.push(ch);
            }
            ',' if !quoted => out.push(normalise(&std::mem::take(&mut current))),
            _ => current.push(ch),
        }
    }
    if !current.trim().is_empty() {
        out.push(normalise(&current));
    }
    out.sort();
    out
}

/// One element or rule: comments dropped, hex numbers in decimal, `/32` dropped, single spaces;
/// `dnat ip to` as `dnat to` and an anonymous set of one as its element (how nft lists them in
/// an `ip` table).
fn normalise(text: &str) -> String {
    let words = words(text);
    let mut out: Vec<&str> = Vec::with_capacity(words.len());
    let mut i = 0;
    while i < words.len() {
        match &words[i..] {
            [dnat, ip, to, ..] if dnat == "dnat" && ip == "ip" && to == "to" => {
                out.extend(["dnat", "to"]);
                i += 3;
            }
            [open, one, close, ..] if open == "{" && close == "}" && !one.ends_with(',') => {
                out.push(one);
                i += 3;
            }
            [w, ..] => {
                out.push(w);
                i += 1;
            }
            [] => break,
        }
    }
    out.join(" ")
}

/// The words of an element or rule, comments dropped, numbers and addresses normalised.
fn words(text: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut tokens = text.split_whitespace();
    while let Some(t) = tokens.next() {
        if t == "comment" {
            // The comment's text runs to its closing quote.
            let mut quoted = tokens.next().unwrap_or_default().to_owned();
            while quoted.matches('"').count() < 2 {
                match tokens.next() {
                    Some(more) => quoted.push_str(more),
                    None => break,
                }
            }
            continue;
        }
        let t = t.strip_suffix("/32").unwrap_or(t);
        let word = t
            .strip_prefix("0x")
            .and_then(|h| u64::from_str_radix(h, 16).ok())
            .map_or_else(|| t.to_owned(), |n| n.to_string());
        words.push(word);
    }
    words
}

#[cfg(test)]
mod tests;
