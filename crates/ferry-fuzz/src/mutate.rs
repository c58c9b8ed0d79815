//! Mutations, chosen by a seeded generator: the same seed and corpus give the same inputs.
//! Byte-level ones (bit flips, interesting bytes, inserts, deletes, copies, splices of two
//! entries) find framing and length bugs; YAML-aware ones (a key line duplicated, deep
//! nesting, huge or odd numbers, invalid UTF-8, anchors and aliases, tokens of the syntax)
//! reach the parsers' and converters' corners that random bytes rarely do.

/// Inputs never grow past this (a deep nesting of 20 000 levels fits).
pub const MAX_LEN: usize = 128 * 1024;

/// Tokens of YAML, JSON and Kubernetes objects, inserted whole.
const TOKENS: &[&str] = &[
    ": ",
    "- ",
    "---\n",
    "...\n",
    "{",
    "}",
    "[",
    "]",
    ",",
    "\"",
    "'",
    "\t",
    "\n",
    "#",
    "&a ",
    "*a",
    "<<: *a\n",
    "!!str ",
    "!!binary ",
    "!!int ",
    "? ",
    "|\n",
    ">-\n",
    "null",
    "~",
    "true",
    "kind: List\nitems:\n",
    "apiVersion: v1\n",
    "kind: Service\n",
    "kind: EndpointSlice\n",
    "kind: Endpoints\n",
    "kind: Node\n",
    "kind: Pod\n",
    "clusterIP: ",
    "ports:\n",
    "port: ",
    "targetPort: ",
    "protocol: ",
    "addresses: ",
    "namespace: ",
    "name: ",
    "ipFamilies: ",
    "externalTrafficPolicy: Local\n",
    "sessionAffinity: ClientIP\n",
    "type: LoadBalancer\n",
    "\"::1\"",
    "0.0.0.0/0",
    "fe80::/10",
    "--",
    "=",
    "--proxy-mode=",
    "--config=",
    "--cluster-cidr=",
    "--nodeport-addresses=",
    "--masquerade-all",
];

/// Numbers that break parsers and converters.
const NUMBERS: &[&str] = &[
    "0",
    "-1",
    "65535",
    "65536",
    "2147483647",
    "2147483648",
    "4294967296",
    "-9223372036854775808",
    "18446744073709551616",
    "100000000000000000000000",
    "1e400",
    "0x7fffffff",
    "0o777",
    ".nan",
    "-.inf",
    "1_000",
    "00080",
    "+80",
];

/// Bytes that are not UTF-8 (or odd UTF-8).
const BAD_UTF8: &[&[u8]] = &[
    b"\xff",
    b"\xfe\xff",
    b"\xc3\x28",
    b"\xe2\x82",
    b"\xf0\x9f\x92",
    b"\xed\xa0\x80",
    b"\x00",
    b"\xef\xbb\xbf",
    b"\xc0\xaf",
];

/// Mutates `input` by 1–4 mutations; `other` is another corpus entry, for splices.
pub fn mutate(rng: &mut fastrand::Rng, input: &mut Vec<u8>, other: &[u8]) {
    for _ in 0..rng.usize(1..=4) {
        one(rng, input, other);
    }
    input.truncate(MAX_LEN);
}

fn one(rng: &mut fastrand::Rng, b: &mut Vec<u8>, other: &[u8]) {
    let at = rng.usize(..=b.len());
    match rng.u8(..13) {
        0 if !b.is_empty() => {
            let i = rng.usize(..b.len());
            b[i] ^= 1 << rng.u8(..8);
        }
        1 if !b.is_empty() => {
            let i = rng.usize(..b.len());
            b[i] = *rng
                .choice(&[0u8, 0x7f, 0x80, 0xff, b' ', b'\n', b':', b'-', b'"'])
                .unwrap_or(&0);
        }
        2 => {
            let n = rng.usize(1..=8);
            let bytes: Vec<u8> = (0..n).map(|_| rng.u8(..)).collect();
            b.splice(at..at, bytes);
        }
        3 if !b.is_empty() => {
            let end = (at + rng.usize(1..=16)).min(b.len());
            b.drain(at.min(end)..end);
        }
        4 if !b.is_empty() => {
            let start = rng.usize(..b.len());
            let end = (start + rng.usize(1..=64)).min(b.len());
            let copy = b[start..end].to_vec();
            b.splice(at..at, copy);
        }
        5 if !other.is_empty() => {
            // Splice: our head, the other entry's tail.
            let from = rng.usize(..other.len());
            b.truncate(at);
            b.extend_from_slice(&other[from..]);
        }
        6 => duplicate_line(rng, b),
        7 => {
            let depth = *rng.choice(&[16usize, 200, 1_000, 20_000]).unwrap_or(&16);
            let (open, close) = *rng
                .choice(&[("[", "]"), ("{a: ", "}"), ("- ", "")])
                .unwrap_or(&("[", "]"));
            let mut nest = open.repeat(depth).into_bytes();
            nest.extend_from_slice(close.repeat(depth).as_bytes());
            b.splice(at..at, nest);
        }
        8 => replace_number(rng, b),
        9 => {
            let bad = *rng.choice(BAD_UTF8).unwrap_or(&&b"\xff"[..]);
            b.splice(at..at, bad.iter().copied());
        }
        10 => {
            let token = *rng.choice(TOKENS).unwrap_or(&"");
            b.splice(at..at, token.bytes());
        }
        11 => indent_line(rng, b),
        _ if !other.is_empty() => {
            // A line of another entry, inserted at a line start.
            let lines: Vec<&[u8]> = other.split_inclusive(|&c| c == b'\n').collect();
            let line = rng.choice(&lines).copied().unwrap_or_default().to_vec();
            let at = line_start(b, at);
            b.splice(at..at, line);
        }
        _ => b.push(rng.u8(..)),
    }
}

/// The start of the line holding `at`.
fn line_start(b: &[u8], at: usize) -> usize {
    b[..at.min(b.len())]
        .iter()
        .rposition(|&c| c == b'\n')
        .map_or(0, |i| i + 1)
}

/// Byte ranges of the lines of `b` (newline included).
fn lines(b: &[u8]) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = 0;
    for (i, &c) in b.iter().enumerate() {
        if c == b'\n' {
            out.push((start, i + 1));
            start = i + 1;
        }
    }
    if start < b.len() {
        out.push((start, b.len()));
    }
    out
}

/// A line written twice (a duplicate key, or an item twice).
fn duplicate_line(rng: &mut fastrand::Rng, b: &mut Vec<u8>) {
    let all = lines(b);
    if let Some(&(start, end)) = rng.choice(&all) {
        let line = b[start..end].to_vec();
        b.splice(end..end, line);
    }
}

/// A line indented by more or fewer spaces.
fn indent_line(rng: &mut fastrand::Rng, b: &mut Vec<u8>) {
    let all = lines(b);
    if let Some(&(start, _)) = rng.choice(&all) {
        if rng.bool() {
            b.splice(start..start, std::iter::repeat_n(b' ', rng.usize(1..=4)));
        } else if b.get(start) == Some(&b' ') {
            b.remove(start);
        }
    }
}

/// A run of digits replaced by an odd number (or one inserted where there is none).
fn replace_number(rng: &mut fastrand::Rng, b: &mut Vec<u8>) {
    let number = rng.choice(NUMBERS).copied().unwrap_or("0").as_bytes();
    let starts: Vec<usize> = (0..b.len())
        .filter(|&i| b[i].is_ascii_digit() && (i == 0 || !b[i - 1].is_ascii_digit()))
        .collect();
    match rng.choice(&starts) {
        Some(&start) => {
            let end = (start..b.len())
                .find(|&i| !b[i].is_ascii_digit())
                .unwrap_or(b.len());
            b.splice(start..end, number.iter().copied());
        }
        None => {
            let at = rng.usize(..=b.len());
            b.splice(at..at, number.iter().copied());
        }
    }
}
