//! Rates, sizes and durations as every ecnq command line, link spec and
//! scenario file writes them: tc(8)'s words and meanings, one parser.
//!
//! * rates, in bits per second: `bit`, `kbit`, `mbit`, `gbit`, `tbit`
//!   (powers of 1000) and `kibit`, `mibit`, `gibit` (powers of 1024);
//! * sizes, in bytes: a bare number, `b`, `k`/`kb`, `m`/`mb`, `g`/`gb`,
//!   `t`/`tb` (powers of 1024, as tc counts buffers), or in bits: `kbit`,
//!   `mbit`, `gbit`;
//! * durations: `s`/`sec`, `ms`/`msec`, `us`/`usec`, `ns`/`nsec`.
//!
//! Words are case-insensitive, as in tc. A word that means different things
//! in different tools is an error that names the word to write instead:
//! `mbps` is megabytes per second to tc but megabits to iperf and the
//! papers; a bare rate is bytes per second to tc and bits to other tools,
//! a bare time microseconds to tc and an easy slip for milliseconds.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// What every `--help` that takes a quantity says about its units.
pub const UNITS_HELP: &str = "Units are tc(8)'s: rates in bit, kbit, mbit, gbit, tbit \
(bits per second, powers of 1000); sizes in b, kb, mb, gb (bytes, powers of 1024; a bare number is bytes); \
times in s, ms, us, ns.";

/// A quantity that did not parse; the message names the field's word.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnitError(String);

impl UnitError {
    fn new(msg: impl Into<String>) -> UnitError {
        UnitError(msg.into())
    }
}

impl fmt::Display for UnitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UnitError {}

/// Splits `12.5mbit` into `(12.5, "mbit")` with the unit lower-cased.
/// `what` names the quantity and `example` shows one, for the error.
fn number_and_unit(word: &str, what: &str, example: &str) -> Result<(f64, String), UnitError> {
    let word = word.trim();
    let (number, unit) = word.split_at(number_len(word));
    match number.parse::<f64>() {
        Ok(v) if v.is_finite() => Ok((v, unit.trim().to_ascii_lowercase())),
        _ => Err(UnitError::new(format!(
            "`{word}` is not a {what} (write e.g. `{example}`)"
        ))),
    }
}

/// The length of the number that starts `word`: digits and a point, then
/// an exponent if one follows (`1e3kb`; the `e` of a unit such as `1eb`
/// is no exponent, as in strtod).
fn number_len(word: &str) -> usize {
    let bytes = word.as_bytes();
    let mantissa = bytes
        .iter()
        .position(|&c| !(c.is_ascii_digit() || c == b'.'))
        .unwrap_or(bytes.len());
    let mut i = mantissa;
    if matches!(bytes.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(bytes.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let digits = bytes[i..].iter().take_while(|c| c.is_ascii_digit()).count();
        if digits > 0 {
            return i + digits;
        }
    }
    mantissa
}

fn no_unit(word: &str, what: &str, words: &str) -> UnitError {
    UnitError::new(format!(
        "`{word}` has no unit; write the {what} with one of {words}"
    ))
}

/// A rate in bits per second.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
pub struct Rate(f64);

impl Rate {
    /// Bits per second.
    pub const fn bits_per_sec(self) -> f64 {
        self.0
    }
}

const RATE_WORDS: &str = "bit, kbit, mbit, gbit, tbit";

impl FromStr for Rate {
    type Err = UnitError;

    /// A positive rate such as `20mbit`.
    fn from_str(word: &str) -> Result<Rate, UnitError> {
        let (value, unit) = number_and_unit(word, "rate", "20mbit")?;
        let scale = match unit.as_str() {
            "bit" => 1.0,
            "kbit" => 1e3,
            "mbit" => 1e6,
            "gbit" => 1e9,
            "tbit" => 1e12,
            "kibit" => 1024.0,
            "mibit" => 1024.0 * 1024.0,
            "gibit" => 1024.0 * 1024.0 * 1024.0,
            "" => return Err(no_unit(word, "rate", RATE_WORDS)),
            bytes @ ("bps" | "kbps" | "mbps" | "gbps" | "tbps") => {
                let bits = format!("{}bit", &bytes[..bytes.len() - 3]);
                return Err(UnitError::new(format!(
                    "`{word}` is ambiguous: tc(8) reads `{bytes}` as bytes per second, \
                     iperf and the papers as bits; write `{value}{bits}` for bits per second \
                     or `{}{bits}` for bytes",
                    value * 8.0
                )));
            }
            _ => {
                return Err(UnitError::new(format!(
                    "unknown rate unit `{unit}` in `{word}` (use {RATE_WORDS})"
                )))
            }
        };
        let bits = value * scale;
        if bits < 1.0 {
            return Err(UnitError::new(format!(
                "rate `{word}` must be at least 1 bit/s"
            )));
        }
        Ok(Rate(bits))
    }
}

/// A size in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Size(u64);

impl Size {
    /// Bytes.
    pub const fn bytes(self) -> u64 {
        self.0
    }
}

const SIZE_WORDS: &str = "b, kb, mb, gb, tb (bytes, powers of 1024) or kbit, mbit, gbit";

impl FromStr for Size {
    type Err = UnitError;

    /// A size such as `64kb` (65 536 bytes) or `1500b`.
    fn from_str(word: &str) -> Result<Size, UnitError> {
        let (value, unit) = number_and_unit(word, "size", "64kb")?;
        let kib = 1024.0;
        let scale = match unit.as_str() {
            "" | "b" => 1.0,
            "k" | "kb" | "kib" => kib,
            "m" | "mb" | "mib" => kib * kib,
            "g" | "gb" | "gib" => kib * kib * kib,
            "t" | "tb" | "tib" => kib * kib * kib * kib,
            "bit" => 1.0 / 8.0,
            "kbit" => 1e3 / 8.0,
            "mbit" => 1e6 / 8.0,
            "gbit" => 1e9 / 8.0,
            _ => {
                return Err(UnitError::new(format!(
                    "unknown size unit `{unit}` in `{word}` (use {SIZE_WORDS})"
                )))
            }
        };
        let bytes = value * scale;
        if bytes > u64::MAX as f64 / 2.0 {
            return Err(UnitError::new(format!("size `{word}` is too large")));
        }
        Ok(Size(bytes.round() as u64))
    }
}

const TIME_WORDS: &str = "s, ms, us, ns";

/// A duration such as `20ms`, `1.5s` or `250us`, rounded to whole
/// nanoseconds; at most `max` (`None`: no limit) so a typo such as `20s`
/// for `20ms` in a field that is never that long is caught.
pub fn parse_duration(word: &str, max: Option<Duration>) -> Result<Duration, UnitError> {
    let (value, unit) = number_and_unit(word, "time", "20ms")?;
    let scale = match unit.as_str() {
        "s" | "sec" | "secs" => 1e9,
        "ms" | "msec" | "msecs" => 1e6,
        "us" | "usec" | "usecs" | "µs" => 1e3,
        "ns" | "nsec" | "nsecs" => 1.0,
        "" => return Err(no_unit(word, "time", TIME_WORDS)),
        _ => {
            return Err(UnitError::new(format!(
                "unknown time unit `{unit}` in `{word}` (use {TIME_WORDS})"
            )))
        }
    };
    let nanos = value * scale;
    let limit = max.map_or(u64::MAX as f64 / 2.0, |m| m.as_nanos() as f64);
    if nanos > limit {
        return Err(UnitError::new(match max {
            Some(m) => format!("time `{word}` is longer than {}", ShowDuration(m)),
            None => format!("time `{word}` is too long"),
        }));
    }
    Ok(Duration::from_nanos(nanos.round() as u64))
}

/// Shows a duration in the largest of s, ms, us, ns that keeps it exact
/// (so it parses back to the same value): `20ms`, `1500us`, `2s`.
#[derive(Clone, Copy, Debug)]
pub struct ShowDuration(pub Duration);

impl fmt::Display for ShowDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nanos = self.0.as_nanos();
        let units = [(1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "us")];
        let (scale, unit) = units
            .into_iter()
            .find(|&(scale, _)| nanos >= scale && nanos % scale == 0)
            .unwrap_or((1, "ns"));
        write!(f, "{}{unit}", nanos / scale)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rate(s: &str) -> Result<f64, String> {
        s.parse::<Rate>()
            .map(Rate::bits_per_sec)
            .map_err(|e| e.to_string())
    }

    fn size(s: &str) -> Result<u64, String> {
        s.parse::<Size>()
            .map(Size::bytes)
            .map_err(|e| e.to_string())
    }

    fn time(s: &str) -> Result<Duration, String> {
        parse_duration(s, Some(Duration::from_secs(3600))).map_err(|e| e.to_string())
    }

    #[test]
    fn rates_in_tc_words() {
        assert_eq!(rate("20mbit"), Ok(20e6));
        assert_eq!(rate("20Mbit"), Ok(20e6));
        assert_eq!(rate("1.5gbit"), Ok(1.5e9));
        assert_eq!(rate("100kbit"), Ok(100e3));
        assert_eq!(rate("1kibit"), Ok(1024.0));
        assert!(rate("0.5bit").unwrap_err().contains("at least 1 bit/s"));
    }

    #[test]
    fn words_that_mean_two_things_name_the_right_word() {
        let e = rate("20mbps").unwrap_err();
        assert!(e.contains("ambiguous"), "{e}");
        assert!(e.contains("`20mbit`") && e.contains("`160mbit`"), "{e}");
        let e = rate("100kbps").unwrap_err();
        assert!(e.contains("`100kbit`") && e.contains("`800kbit`"), "{e}");
        assert!(rate("50").unwrap_err().contains("has no unit"));
        assert_eq!(size("1500"), Ok(1500));
        assert!(time("40").unwrap_err().contains("has no unit"));
    }

    #[test]
    fn sizes_count_in_powers_of_1024() {
        assert_eq!(size("64kb"), Ok(65_536));
        assert_eq!(size("64K"), Ok(65_536));
        assert_eq!(size("1.5mb"), Ok(1_572_864));
        assert_eq!(size("1500b"), Ok(1500));
        assert_eq!(size("8kbit"), Ok(1000));
        assert!(size("3furlongs").unwrap_err().contains("unknown size unit"));
        assert_eq!(size("1e3kb"), Ok(1_024_000));
        assert_eq!(size("2e-1k"), Ok(205));
        assert!(size("1e30gb").unwrap_err().contains("too large"));
        assert!(size("1eb").unwrap_err().contains("unknown size unit `eb`"));
    }

    #[test]
    fn durations_and_their_limit() {
        assert_eq!(time("20ms"), Ok(Duration::from_millis(20)));
        assert_eq!(time("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(time("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(time("7ns"), Ok(Duration::from_nanos(7)));
        assert!(time("2h").unwrap_err().contains("unknown time unit"));
        assert!(time("3601s").unwrap_err().contains("longer than 3600s"));
        assert!(time("ms").unwrap_err().contains("is not a time"));
    }

    #[test]
    fn shown_durations_parse_back() {
        for d in [
            Duration::from_millis(20),
            Duration::from_micros(1500),
            Duration::from_secs(2),
            Duration::from_nanos(3),
        ] {
            let shown = ShowDuration(d).to_string();
            assert_eq!(time(&shown), Ok(d), "{shown}");
        }
    }
}
