//! Link specifications in tc / netem words (DESIGN.md §4):
//! `rate 20mbit delay 20ms 2ms loss 0.5% reorder 1% duplicate 0.1% limit 100`.
//!
//! Units follow tc(8): rates in `bit`, `kbit`, `mbit`, `gbit`, `tbit` (powers
//! of 1000; a bare number is bit/s) or `bps`, `kbps`, `mbps`, `gbps` (bytes
//! per second); times in `s`, `ms`, `us`, `ns` (a bare number is µs, as in
//! tc); sizes in `b`, `kb`/`k`, `mb`/`m`, `gb`/`g` (powers of 1024). `limit`
//! with a bare number counts packets, as in netem; with a size unit
//! (`limit 64kb`) it counts bytes.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// How much the link buffer holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// At most this many packets queued.
    Packets(u64),
    /// At most this many bytes queued.
    Bytes(u64),
}

/// netem's default queue limit: 1000 packets.
pub const DEFAULT_LIMIT: Limit = Limit::Packets(1000);

/// One direction of an emulated link.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkSpec {
    /// Serialization rate in bit/s; `None` is unlimited (no queueing delay).
    pub rate: Option<u64>,
    /// Propagation delay.
    pub delay: Duration,
    /// Delay jitter: each packet's delay is uniform in delay ± jitter
    /// (never below zero; packet order is kept).
    pub jitter: Duration,
    /// Random loss probability, 0..=1.
    pub loss: f64,
    /// Probability that a packet skips the propagation delay (netem's
    /// `reorder`: it overtakes the packets still in flight).
    pub reorder: f64,
    /// Probability that a packet is duplicated.
    pub duplicate: f64,
    /// Buffer limit.
    pub limit: Limit,
}

impl Default for LinkSpec {
    /// An unlimited, lossless, zero-delay link with netem's default buffer.
    fn default() -> Self {
        LinkSpec {
            rate: None,
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            loss: 0.0,
            reorder: 0.0,
            duplicate: 0.0,
            limit: DEFAULT_LIMIT,
        }
    }
}

/// A link spec that could not be parsed; the message says what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpecError(String);

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid link spec: {}", self.0)
    }
}

impl std::error::Error for SpecError {}

fn err<T>(msg: impl Into<String>) -> Result<T, SpecError> {
    Err(SpecError(msg.into()))
}

/// Splits `12.5mbit` into (12.5, "mbit"); errors name the word.
fn number_and_unit<'a>(word: &'a str, what: &str) -> Result<(f64, &'a str), SpecError> {
    let split = word
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(word.len());
    let (num, unit) = word.split_at(split);
    match num.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok((v, unit)),
        _ => err(format!("`{word}` is not a {what}")),
    }
}

/// A rate in bit/s.
pub fn parse_rate(word: &str) -> Result<u64, SpecError> {
    let (value, unit) = number_and_unit(word, "rate (e.g. 20mbit)")?;
    let scale = match unit.to_ascii_lowercase().as_str() {
        "" | "bit" => 1.0,
        "kbit" => 1e3,
        "mbit" => 1e6,
        "gbit" => 1e9,
        "tbit" => 1e12,
        "bps" => 8.0,
        "kbps" => 8e3,
        "mbps" => 8e6,
        "gbps" => 8e9,
        _ => {
            return err(format!(
                "unknown rate unit `{unit}` in `{word}` (use bit, kbit, mbit, gbit, tbit, or bps, kbps, mbps, gbps for bytes/s)"
            ))
        }
    };
    let bits = value * scale;
    if bits < 1.0 {
        return err(format!("rate `{word}` must be at least 1 bit/s"));
    }
    Ok(bits.round() as u64)
}

/// A time.
pub fn parse_time(word: &str) -> Result<Duration, SpecError> {
    let (value, unit) = number_and_unit(word, "time (e.g. 20ms)")?;
    let scale = match unit.to_ascii_lowercase().as_str() {
        "s" | "sec" | "secs" => 1.0,
        "ms" | "msec" | "msecs" => 1e-3,
        "" | "us" | "usec" | "usecs" => 1e-6,
        "ns" | "nsec" | "nsecs" => 1e-9,
        _ => {
            return err(format!(
                "unknown time unit `{unit}` in `{word}` (use s, ms, us or ns)"
            ))
        }
    };
    let secs = value * scale;
    if secs > 3600.0 {
        return err(format!("time `{word}` is longer than an hour"));
    }
    Ok(Duration::from_secs_f64(secs))
}

/// A size in bytes (powers of 1024).
pub fn parse_size(word: &str) -> Result<u64, SpecError> {
    let (value, unit) = number_and_unit(word, "size (e.g. 64kb)")?;
    let scale = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1024.0,
        "m" | "mb" => 1024.0 * 1024.0,
        "g" | "gb" => 1024.0 * 1024.0 * 1024.0,
        _ => {
            return err(format!(
                "unknown size unit `{unit}` in `{word}` (use b, kb, mb or gb)"
            ))
        }
    };
    Ok((value * scale).round() as u64)
}

/// A percentage `0.5%` (the `%` may be left out) as a probability.
fn parse_percent(word: &str, keyword: &str) -> Result<f64, SpecError> {
    let num = word.strip_suffix('%').unwrap_or(word);
    match num.parse::<f64>() {
        Ok(p) if (0.0..=100.0).contains(&p) => Ok(p / 100.0),
        Ok(_) => err(format!("{keyword} `{word}` must be between 0% and 100%")),
        Err(_) => err(format!("{keyword} needs a percentage, got `{word}`")),
    }
}

fn looks_numeric(word: &str) -> bool {
    word.starts_with(|c: char| c.is_ascii_digit() || c == '.')
}

/// The words a spec may contain.
const KEYWORDS: [&str; 6] = ["rate", "delay", "loss", "reorder", "duplicate", "limit"];

impl FromStr for LinkSpec {
    type Err = SpecError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut spec = LinkSpec::default();
        let mut seen: Vec<&str> = Vec::new();
        let mut words = s.split_whitespace().peekable();
        while let Some(keyword) = words.next() {
            let Some(keyword) = KEYWORDS
                .into_iter()
                .find(|k| k.eq_ignore_ascii_case(keyword))
            else {
                return err(format!(
                    "unknown word `{keyword}` (expected rate, delay, loss, reorder, duplicate or limit)"
                ));
            };
            if seen.contains(&keyword) {
                return err(format!("`{keyword}` given twice"));
            }
            seen.push(keyword);
            if keyword == "loss" && words.peek() == Some(&"random") {
                words.next();
            }
            let Some(value) = words.next() else {
                return err(format!("`{keyword}` needs a value"));
            };
            match keyword {
                "rate" => spec.rate = Some(parse_rate(value)?),
                "delay" => {
                    spec.delay = parse_time(value)?;
                    if let Some(jitter) = words.next_if(|w| looks_numeric(w)) {
                        spec.jitter = parse_time(jitter)?;
                    }
                }
                "loss" => spec.loss = parse_percent(value, "loss")?,
                "reorder" => spec.reorder = parse_percent(value, "reorder")?,
                "duplicate" => spec.duplicate = parse_percent(value, "duplicate")?,
                _ => {
                    let limit = if value.chars().all(|c| c.is_ascii_digit()) {
                        Limit::Packets(
                            value
                                .parse()
                                .or_else(|_| err(format!("limit `{value}` is too large")))?,
                        )
                    } else {
                        Limit::Bytes(parse_size(value)?)
                    };
                    if matches!(limit, Limit::Packets(0) | Limit::Bytes(0)) {
                        return err("limit must be greater than zero");
                    }
                    spec.limit = limit;
                }
            }
        }
        if spec.reorder > 0.0 && spec.delay.is_zero() {
            return err("reorder needs a delay to reorder against (as in netem)");
        }
        Ok(spec)
    }
}

impl fmt::Display for LinkSpec {
    /// Back in netem words (rates in bit/s, times in µs: exact and re-parsable).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut parts = Vec::new();
        if let Some(rate) = self.rate {
            parts.push(format!("rate {rate}bit"));
        }
        if !self.delay.is_zero() || !self.jitter.is_zero() {
            let mut delay = format!("delay {}us", self.delay.as_micros());
            if !self.jitter.is_zero() {
                delay += &format!(" {}us", self.jitter.as_micros());
            }
            parts.push(delay);
        }
        for (name, p) in [
            ("loss", self.loss),
            ("reorder", self.reorder),
            ("duplicate", self.duplicate),
        ] {
            if p > 0.0 {
                parts.push(format!("{name} {}%", p * 100.0));
            }
        }
        parts.push(match self.limit {
            Limit::Packets(n) => format!("limit {n}"),
            Limit::Bytes(n) => format!("limit {n}b"),
        });
        f.write_str(&parts.join(" "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_issue_example() {
        let spec: LinkSpec = "rate 20mbit delay 20ms 2ms loss 0.5% limit 100"
            .parse()
            .unwrap();
        assert_eq!(spec.rate, Some(20_000_000));
        assert_eq!(spec.delay, Duration::from_millis(20));
        assert_eq!(spec.jitter, Duration::from_millis(2));
        assert!((spec.loss - 0.005).abs() < 1e-12);
        assert_eq!(spec.limit, Limit::Packets(100));
        assert_eq!(spec.reorder, 0.0);
    }

    #[test]
    fn units() {
        assert_eq!(parse_rate("1gbit"), Ok(1_000_000_000));
        assert_eq!(parse_rate("1.5mbit"), Ok(1_500_000));
        assert_eq!(parse_rate("100kbps"), Ok(800_000));
        assert_eq!(parse_rate("9600"), Ok(9600));
        assert_eq!(parse_time("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_time("250"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_size("64kb"), Ok(65_536));
        let spec: LinkSpec = "limit 64kb loss random 1 duplicate 2% delay 5ms reorder 25%"
            .parse()
            .unwrap();
        assert_eq!(spec.limit, Limit::Bytes(65_536));
        assert!((spec.loss - 0.01).abs() < 1e-12);
        assert!((spec.reorder - 0.25).abs() < 1e-12);
        assert_eq!(spec.rate, None);
        assert_eq!("".parse::<LinkSpec>(), Ok(LinkSpec::default()));
    }

    #[test]
    fn display_round_trips() {
        for text in [
            "rate 20mbit delay 20ms 2ms loss 0.5% limit 100",
            "delay 5ms reorder 25% duplicate 1% limit 64kb",
            "",
        ] {
            let spec: LinkSpec = text.parse().unwrap();
            assert_eq!(spec.to_string().parse::<LinkSpec>(), Ok(spec), "{text}");
        }
    }

    #[test]
    fn errors_say_what_is_wrong() {
        let cases = [
            ("rate", "`rate` needs a value"),
            ("rate 20mbits", "unknown rate unit `mbits`"),
            ("rate fast", "`fast` is not a rate"),
            ("rate 0bit", "at least 1 bit/s"),
            ("delay 20 parsecs", "unknown word `parsecs`"),
            ("delay 20xs", "unknown time unit `xs`"),
            ("loss 120%", "between 0% and 100%"),
            ("loss lots", "loss needs a percentage"),
            ("limit 0", "greater than zero"),
            ("limit 10 limit 20", "`limit` given twice"),
            ("limit 10parsecs", "unknown size unit"),
            ("reorder 5%", "reorder needs a delay"),
            ("bandwidth 10mbit", "unknown word `bandwidth`"),
        ];
        for (text, want) in cases {
            let e = text.parse::<LinkSpec>().unwrap_err().to_string();
            assert!(e.contains(want), "{text:?}: {e:?} lacks {want:?}");
            assert!(e.starts_with("invalid link spec: "));
        }
    }
}
