//! One rule in a canonical form, so that a rule as Ferry writes it and the same rule as
//! `iptables-save` prints it back compare equal.
//!
//! iptables-save prints a rule in its own form: `-s`/`-d`/`-p` first, `/32` added, the
//! `statistic` probability as the kernel stores it (`0.1000000000` comes back as
//! `0.10000000009`), `MARK --or-mark 0x4000` as `--set-xmark 0x4000/0x4000`, defaults spelled
//! out (`REJECT --reject-with icmp-port-unreachable`, `recent --mask 255.255.255.255
//! --rsource`). [`canonical`] undoes those differences for the options Ferry's iptables layout
//! uses; a rule with any other option has no canonical form (`None`), so it never compares
//! equal to anything: a chain holding one is rewritten rather than trusted.
//!
//! What is kept apart: negation (`! -s A -d B` is not `-s A ! -d B`), every value, the order
//! of matches when one of them has a side effect (`recent --set`), the target and its options.

use std::collections::hash_map::DefaultHasher;
use std::fmt::Write as _;
use std::hash::{Hash, Hasher};
use std::net::{IpAddr, SocketAddr};

use ferry_model::IpFamily;
use ipnet::IpNet;

use super::model::ChainDigest;

mod saved;
pub use saved::SavedDigests;

/// One option: negated or not, its name, its values.
type Opt = (bool, String, Vec<String>);

/// The canonical form of one rule (without `-A CHAIN`), or `None` when it uses an option this
/// module does not know.
pub fn canonical(rule: &str, family: IpFamily) -> Option<String> {
    let Parsed {
        mut builtins,
        modules,
        target,
    } = parse(&tokenize(rule)?, family)?;
    let mut modules = modules
        .into_iter()
        .map(|(name, opts)| match_options(&name, opts, family).map(|o| (name, o)))
        .collect::<Option<Vec<_>>>()?;
    // Matches without side effects are ANDed: their order does not matter, and iptables-nft
    // prints some of them in its own order. With a side effect (`recent --set`) it does.
    let side_effect = modules.iter().any(|(name, opts)| {
        name == "recent"
            && opts
                .iter()
                .any(|(_, o, _)| RECENT_CHANGES.contains(&o.as_str()))
    });
    if !side_effect {
        modules.sort();
    }
    builtins.sort();
    // A rule without a target only counts packets (upstream writes some for their comment).
    let target = match target {
        Some((name, opts)) => Some((target_options(&name, opts, family)?, name)),
        None => None,
    };
    let mut out = String::new();
    for opt in &builtins {
        push(&mut out, opt);
    }
    for (name, opts) in &modules {
        let _ = write!(out, " -m {name}");
        for opt in opts {
            push(&mut out, opt);
        }
    }
    if let Some((opts, name)) = &target {
        let _ = write!(out, " -j {name}");
        for opt in opts {
            push(&mut out, opt);
        }
    }
    Some(out)
}

/// A rule's words sorted by what they belong to: the built-in matches (`-s`, `-d`, `-p`, `-i`,
/// `-o`), each `-m` match with the options that follow it, the target with its options.
struct Parsed {
    builtins: Vec<Opt>,
    modules: Vec<(String, Vec<Opt>)>,
    target: Option<(String, Vec<Opt>)>,
}

fn parse(tokens: &[String], family: IpFamily) -> Option<Parsed> {
    let mut p = Parsed {
        builtins: Vec::new(),
        modules: Vec::new(),
        target: None,
    };
    let mut negated = false;
    let mut i = 0;
    while i < tokens.len() {
        let tok = tokens[i].as_str();
        i += 1;
        if tok == "!" {
            negated = true;
            continue;
        }
        let neg = std::mem::take(&mut negated);
        let builtin = match tok {
            "-s" | "--source" => Some("-s"),
            "-d" | "--destination" => Some("-d"),
            "-p" | "--protocol" => Some("-p"),
            "-i" | "--in-interface" => Some("-i"),
            "-o" | "--out-interface" => Some("-o"),
            _ => None,
        };
        if let Some(name) = builtin {
            let value = tokens.get(i)?;
            i += 1;
            let value = match name {
                "-s" | "-d" => address(value, family)?,
                _ => value.to_ascii_lowercase(),
            };
            p.builtins.push((neg, name.to_owned(), vec![value]));
            continue;
        }
        match tok {
            "-m" | "--match" | "-j" | "--jump" => {
                if neg || p.target.is_some() {
                    return None;
                }
                let named = (tokens.get(i)?.clone(), Vec::new());
                i += 1;
                if matches!(tok, "-m" | "--match") {
                    p.modules.push(named);
                } else {
                    p.target = Some(named);
                }
            }
            opt if opt.starts_with("--") => {
                let mut values = Vec::new();
                while i < tokens.len() && !tokens[i].starts_with('-') && tokens[i] != "!" {
                    values.push(tokens[i].clone());
                    i += 1;
                }
                let owner = match p.target.as_mut() {
                    Some((_, opts)) => opts,
                    None => &mut p.modules.last_mut()?.1,
                };
                owner.push((neg, opt.to_owned(), values));
            }
            _ => return None,
        }
    }
    (!negated).then_some(p)
}

/// The digest of a chain's rules in canonical form (`None`: one has none).
pub fn canonical_digest<'a>(
    rules: impl IntoIterator<Item = &'a str>,
    family: IpFamily,
) -> Option<ChainDigest> {
    let mut d = Digest::default();
    for rule in rules {
        d.add(rule, family)?;
    }
    Some(d.finish())
}

/// A chain's [`ChainDigest`] in canonical form, built rule by rule: one hashing for the rules
/// Ferry writes ([`canonical_digest`]) and those iptables-save prints ([`SavedDigests`]).
#[derive(Debug, Default)]
struct Digest {
    hasher: DefaultHasher,
    rules: usize,
}

impl Digest {
    /// Adds the next rule; `None` when it has no canonical form.
    fn add(&mut self, rule: &str, family: IpFamily) -> Option<()> {
        canonical(rule, family)?.hash(&mut self.hasher);
        self.rules += 1;
        Some(())
    }

    fn finish(self) -> ChainDigest {
        ChainDigest {
            rules: self.rules,
            digest: self.hasher.finish(),
        }
    }
}

/// `recent` options that change its list.
const RECENT_CHANGES: [&str; 3] = ["--set", "--update", "--remove"];

fn push(out: &mut String, (neg, name, values): &Opt) {
    out.push(' ');
    if *neg {
        out.push_str("! ");
    }
    out.push_str(name);
    for v in values {
        let _ = write!(out, " {v:?}");
    }
}

/// Splits a rule into words, as a shell would: double quotes group, a backslash escapes.
fn tokenize(rule: &str) -> Option<Vec<String>> {
    let mut tokens = Vec::new();
    let mut chars = rule.chars().peekable();
    loop {
        while chars.peek().is_some_and(|c| c.is_whitespace()) {
            chars.next();
        }
        if chars.peek().is_none() {
            return Some(tokens);
        }
        let mut word = String::new();
        let mut quoted = false;
        while let Some(c) = chars.next() {
            match c {
                '"' => quoted = !quoted,
                '\\' => word.push(chars.next()?),
                c if c.is_whitespace() && !quoted => break,
                c => word.push(c),
            }
        }
        if quoted {
            return None;
        }
        tokens.push(word);
    }
}

/// An address or prefix with its prefix length, host bits cleared.
fn address(value: &str, family: IpFamily) -> Option<String> {
    let net = match value.parse::<IpNet>() {
        Ok(net) => net.trunc(),
        Err(_) => IpNet::from(value.parse::<IpAddr>().ok()?),
    };
    let right_family = match family {
        IpFamily::V4 => net.addr().is_ipv4(),
        IpFamily::V6 => net.addr().is_ipv6(),
    };
    right_family.then(|| net.to_string())
}

/// A mark or mask as the kernel holds it.
fn mark(value: &str) -> Option<u32> {
    match value.strip_prefix("0x") {
        Some(hex) => u32::from_str_radix(hex, 16).ok(),
        None => value.parse().ok(),
    }
}

/// `value[/mask]` of `-m mark --mark`.
fn mark_and_mask(value: &str) -> Option<String> {
    let (v, m) = value.split_once('/').unwrap_or((value, "0xffffffff"));
    Some(format!("0x{:x}/0x{:x}", mark(v)?, mark(m)?))
}

fn one(values: &[String]) -> Option<&str> {
    match values {
        [v] => Some(v),
        _ => None,
    }
}

/// A match's options, normalized and sorted; `None` for a match or option not known here.
fn match_options(module: &str, opts: Vec<Opt>, family: IpFamily) -> Option<Vec<Opt>> {
    let mut out = Vec::new();
    let mut recent_side = false;
    let mut recent_mask = false;
    for (neg, name, values) in opts {
        let value = match (module, name.as_str()) {
            ("comment", "--comment") => values.join(" "),
            ("tcp" | "udp" | "sctp", "--dport" | "--destination-port") => {
                out.push((neg, "--dport".to_owned(), vec![one(&values)?.to_owned()]));
                continue;
            }
            ("tcp" | "udp" | "sctp", "--sport" | "--source-port") => {
                out.push((neg, "--sport".to_owned(), vec![one(&values)?.to_owned()]));
                continue;
            }
            ("statistic", "--mode") => one(&values)?.to_owned(),
            ("statistic", "--probability") => {
                // The kernel keeps the probability as a fraction of 2^31.
                let p: f64 = one(&values)?.parse().ok()?;
                format!("{}", (p * f64::from(0x8000_0000u32)).round() as u64)
            }
            ("addrtype", "--src-type" | "--dst-type") => one(&values)?.to_ascii_uppercase(),
            ("addrtype", "--limit-iface-in" | "--limit-iface-out") if values.is_empty() => {
                String::new()
            }
            ("conntrack", "--ctstate") => {
                let mut states: Vec<String> = one(&values)?
                    .split(',')
                    .map(str::to_ascii_uppercase)
                    .collect();
                states.sort();
                states.join(",")
            }
            ("mark", "--mark") => mark_and_mask(one(&values)?)?,
            ("nfacct", "--nfacct-name") => one(&values)?.to_owned(),
            ("recent", "--name") => one(&values)?.to_owned(),
            ("recent", "--seconds" | "--hitcount") => one(&values)?.to_owned(),
            ("recent", "--set" | "--rcheck" | "--update" | "--remove" | "--reap")
                if values.is_empty() =>
            {
                String::new()
            }
            ("recent", "--rsource" | "--rdest") if values.is_empty() => {
                recent_side = true;
                String::new()
            }
            ("recent", "--mask") => {
                recent_mask = true;
                one(&values)?.parse::<IpAddr>().ok()?.to_string()
            }
            _ => return None,
        };
        let values = if value.is_empty() {
            Vec::new()
        } else {
            vec![value]
        };
        out.push((neg, name, values));
    }
    if module == "recent" {
        // Defaults iptables-save spells out.
        if !recent_side {
            out.push((false, "--rsource".to_owned(), Vec::new()));
        }
        if !recent_mask {
            let full = match family {
                IpFamily::V4 => "255.255.255.255",
                IpFamily::V6 => "ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            };
            out.push((false, "--mask".to_owned(), vec![full.to_owned()]));
        }
    }
    out.sort();
    Some(out)
}

/// A target's options, normalized and sorted; `None` for a target or option not known here.
fn target_options(target: &str, opts: Vec<Opt>, family: IpFamily) -> Option<Vec<Opt>> {
    let mut out = Vec::new();
    for (neg, name, values) in opts {
        if neg {
            return None;
        }
        let (name, values) = match (target, name.as_str()) {
            ("DNAT", "--to-destination") => {
                let v = one(&values)?;
                let v = match v.parse::<SocketAddr>() {
                    Ok(sa) => sa.to_string(),
                    Err(_) => v.parse::<IpAddr>().ok()?.to_string(),
                };
                (name, vec![v])
            }
            ("MASQUERADE", "--random-fully" | "--random") if values.is_empty() => (name, values),
            ("MASQUERADE", "--to-ports") => (name, vec![one(&values)?.to_owned()]),
            ("MARK", "--or-mark") => {
                let m = mark(one(&values)?)?;
                ("--set-xmark".to_owned(), vec![format!("0x{m:x}/0x{m:x}")])
            }
            ("MARK", "--xor-mark") => {
                let m = mark(one(&values)?)?;
                ("--set-xmark".to_owned(), vec![format!("0x{m:x}/0x0")])
            }
            ("MARK", "--set-xmark") => (name, vec![mark_and_mask(one(&values)?)?]),
            ("REJECT", "--reject-with") => (name, vec![one(&values)?.to_owned()]),
            _ => return None,
        };
        out.push((false, name, values));
    }
    match target {
        "ACCEPT" | "DROP" | "RETURN" | "DNAT" | "MASQUERADE" | "MARK" => {}
        "REJECT" => {
            if !out.iter().any(|(_, n, _)| n == "--reject-with") {
                let default = match family {
                    IpFamily::V4 => "icmp-port-unreachable",
                    IpFamily::V6 => "icmp6-port-unreachable",
                };
                out.push((false, "--reject-with".to_owned(), vec![default.to_owned()]));
            }
        }
        // A jump to a chain: no options.
        chain if chain.starts_with("KUBE-") && out.is_empty() => {}
        _ => return None,
    }
    out.sort();
    Some(out)
}

#[cfg(test)]
mod tests;
