//! Go-style durations (`30s`, `1m30s`, `500ms`, `2h`), as KubeProxyConfiguration and kube-proxy's
//! flags spell them (Go's `time.ParseDuration` and `Duration.String`).

use std::fmt;
use std::time::Duration;

use serde::de::{self, Deserializer, Visitor};
use serde::{Deserialize, Serialize, Serializer};

/// Parses a Go duration string. Fractions (`1.5s`) are accepted; negative values are not.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let bad = || format!("invalid duration {s:?} (examples: 30s, 1m30s, 500ms)");
    let s = s.trim();
    let s = s.strip_prefix('+').unwrap_or(s);
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    let mut rest = s;
    let mut total = 0f64;
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(bad)?;
        if num_len == 0 {
            return Err(bad());
        }
        let value: f64 = rest[..num_len].parse().map_err(|_| bad())?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let scale = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" | "μs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return Err(bad()),
        };
        total += value * scale;
        rest = &rest[unit_len..];
    }
    Ok(Duration::from_secs_f64(total))
}

/// Go's `Duration.String()`: `0s`, `250ms`, `1.5s`, `1m30s`, `24h0m0s`.
pub fn format_duration(d: Duration) -> String {
    let nanos = d.as_nanos();
    if nanos == 0 {
        return "0s".to_owned();
    }
    if nanos < 1_000 {
        return format!("{nanos}ns");
    }
    if nanos < 1_000_000 {
        return format!("{}µs", trim_fraction(nanos, 1_000));
    }
    if nanos < 1_000_000_000 {
        return format!("{}ms", trim_fraction(nanos, 1_000_000));
    }
    let secs = d.as_secs();
    let (h, m) = (secs / 3600, (secs % 3600) / 60);
    let s = trim_fraction(
        u128::from(secs % 60) * 1_000_000_000 + u128::from(d.subsec_nanos()),
        1_000_000_000,
    );
    match (h, m) {
        (0, 0) => format!("{s}s"),
        (0, m) => format!("{m}m{s}s"),
        (h, m) => format!("{h}h{m}m{s}s"),
    }
}

/// `value / unit` with its fraction, trailing zeros dropped (`1500 / 1000` → `1.5`).
fn trim_fraction(value: u128, unit: u128) -> String {
    let (whole, frac) = (value / unit, value % unit);
    if frac == 0 {
        return whole.to_string();
    }
    let width = unit.ilog10() as usize;
    let digits = format!("{frac:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

/// A duration as KubeProxyConfiguration holds it (`metav1.Duration`): written as Go's text;
/// read from Go's text, or from a number of nanoseconds (older `logging.flushFrequency`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct GoDuration(pub Duration);

impl GoDuration {
    /// `n` seconds.
    pub const fn from_secs(n: u64) -> Self {
        Self(Duration::from_secs(n))
    }

    /// Zero: "unset" in KubeProxyConfiguration.
    pub fn is_zero(&self) -> bool {
        self.0.is_zero()
    }

    /// `self`, or `default` when zero (upstream's defaulting).
    pub fn or(self, default: Duration) -> Self {
        if self.is_zero() {
            Self(default)
        } else {
            self
        }
    }
}

impl fmt::Display for GoDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&format_duration(self.0))
    }
}

impl Serialize for GoDuration {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_string())
    }
}

impl<'de> Deserialize<'de> for GoDuration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(GoDurationVisitor { numbers: false })
    }
}

/// For `logging.flushFrequency`: a Go duration, or a number of nanoseconds (component-base's
/// TimeOrMetaDuration). Every other duration is text only, as `metav1.Duration`.
pub fn duration_or_nanoseconds<'de, D: Deserializer<'de>>(d: D) -> Result<GoDuration, D::Error> {
    d.deserialize_any(GoDurationVisitor { numbers: true })
}

struct GoDurationVisitor {
    numbers: bool,
}

impl GoDurationVisitor {
    fn nanos<E: de::Error>(&self, v: u64) -> Result<GoDuration, E> {
        if self.numbers {
            Ok(GoDuration(Duration::from_nanos(v)))
        } else {
            Err(E::custom(format!(
                "{v} has no unit: write a duration such as {v}s or {v}ms"
            )))
        }
    }
}

impl Visitor<'_> for GoDurationVisitor {
    type Value = GoDuration;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a duration such as 30s, 1m30s or 500ms")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<GoDuration, E> {
        parse_duration(v).map(GoDuration).map_err(E::custom)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<GoDuration, E> {
        self.nanos(v)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<GoDuration, E> {
        match u64::try_from(v) {
            Ok(n) => self.nanos(n),
            Err(_) => Err(E::custom(format!(
                "invalid duration {v} (must not be negative)"
            ))),
        }
    }

    fn visit_unit<E: de::Error>(self) -> Result<GoDuration, E> {
        Ok(GoDuration::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_go_durations() {
        assert_eq!(parse_duration("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        assert!(parse_duration("30").is_err());
        assert!(parse_duration("-1s").is_err());
        assert!(parse_duration("soon").is_err());
    }

    #[test]
    fn formats_like_go() {
        for (d, text) in [
            (Duration::ZERO, "0s"),
            (Duration::from_millis(250), "250ms"),
            (Duration::from_millis(1500), "1.5s"),
            (Duration::from_secs(30), "30s"),
            (Duration::from_secs(90), "1m30s"),
            (Duration::from_secs(900), "15m0s"),
            (Duration::from_secs(3600), "1h0m0s"),
            (Duration::from_secs(86400), "24h0m0s"),
        ] {
            assert_eq!(format_duration(d), text);
            assert_eq!(parse_duration(text), Ok(d), "{text} round-trips");
        }
    }

    #[test]
    fn reads_text_and_null_and_nanoseconds_only_where_allowed() {
        let d: GoDuration = serde_json::from_str("\"5s\"").expect("text");
        assert_eq!(d, GoDuration::from_secs(5));
        assert!(
            serde_json::from_str::<GoDuration>("5000000000").is_err(),
            "no unit"
        );
        let d = duration_or_nanoseconds(&mut serde_json::Deserializer::from_str("5000000000"))
            .expect("flushFrequency takes nanoseconds");
        assert_eq!(d, GoDuration::from_secs(5));
        let d: GoDuration = serde_json::from_str("null").expect("null");
        assert!(d.is_zero());
        assert!(serde_json::from_str::<GoDuration>("\"soon\"").is_err());
    }
}
