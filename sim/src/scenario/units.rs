//! Quantities as scenario files write them: `"20Mbit"`, `"250ms"`, `"30KB"`,
//! `"50pkt"`. Parsing errors say what was expected, so a bad file gets a
//! one-line message pointing at the field.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer};

/// Splits `"12.5ms"` into `(12.5, "ms")`.
fn split_number(s: &str) -> Option<(f64, &str)> {
    let s = s.trim();
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == 'e' || c == '-' || c == '+'))
        .unwrap_or(s.len());
    // An exponent marker needs a digit before it; "e" alone starts a unit.
    let value: f64 = s[..end].parse().ok()?;
    (value.is_finite() && value >= 0.0).then_some((value, s[end..].trim()))
}

macro_rules! quantity {
    ($(#[$doc:meta])* $name:ident($inner:ty), $noun:literal, $hint:literal, $parse:expr) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
        pub struct $name(pub $inner);

        impl FromStr for $name {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                let parse: fn(f64, &str) -> Option<$inner> = $parse;
                split_number(s)
                    .and_then(|(v, unit)| parse(v, unit))
                    .map($name)
                    .ok_or_else(|| format!(concat!("invalid ", $noun, " `{}` (expected e.g. ", $hint, ")"), s))
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                s.parse().map_err(serde::de::Error::custom)
            }
        }
    };
}

quantity!(
    /// A time span in nanoseconds: `ns`, `us`, `ms`, `s`.
    Time(u64),
    "duration",
    "`250ms`, `1.5s`, `100us`",
    |v, unit| {
        let scale = match unit {
            "ns" => 1.0,
            "us" | "µs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            _ => return None,
        };
        Some((v * scale).round() as u64)
    }
);

quantity!(
    /// A link rate in bits per second: `bit`, `kbit`, `Mbit`, `Gbit` (or `bps`, `kbps`, `Mbps`, `Gbps`).
    Rate(f64),
    "rate",
    "`20Mbit`, `1Gbit`, `500kbps`",
    |v, unit| {
        let scale = match unit.to_ascii_lowercase().as_str() {
            "bit" | "bps" => 1.0,
            "kbit" | "kbps" => 1e3,
            "mbit" | "mbps" => 1e6,
            "gbit" | "gbps" => 1e9,
            _ => return None,
        };
        (v > 0.0).then_some(v * scale)
    }
);

quantity!(
    /// A size in bytes: `B`, `KB`, `MB`, `GB` (powers of 1000) or `KiB`, `MiB`, `GiB`.
    Bytes(u64),
    "size",
    "`1500B`, `30KB`, `3MB`",
    |v, unit| {
        let scale = match unit {
            "B" | "" => 1.0,
            "KB" | "kB" => 1e3,
            "MB" => 1e6,
            "GB" => 1e9,
            "KiB" => 1024.0,
            "MiB" => 1024.0 * 1024.0,
            "GiB" => 1024.0 * 1024.0 * 1024.0,
            _ => return None,
        };
        Some((v * scale).round() as u64)
    }
);

/// A drop-tail buffer limit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Buffer {
    /// At most this many packets wait.
    Packets(u64),
    /// At most this many bytes wait.
    Bytes(u64),
    /// This multiple of the bandwidth-delay product (the scenario's `bdp_rtt` × the link rate).
    Bdp(f64),
}

impl FromStr for Buffer {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let bad = || format!("invalid buffer `{s}` (expected e.g. `50pkt`, `64KB`, `1bdp`)");
        let (v, unit) = split_number(s).ok_or_else(bad)?;
        match unit {
            "pkt" | "pkts" | "packets" => Ok(Buffer::Packets(v.round() as u64)),
            "bdp" | "BDP" => Ok(Buffer::Bdp(v)),
            _ => s
                .parse::<Bytes>()
                .map(|b| Buffer::Bytes(b.0))
                .map_err(|_| bad()),
        }
    }
}

impl<'de> Deserialize<'de> for Buffer {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Formats a rate in bits per second with a unit.
pub struct ShowRate(pub f64);

impl fmt::Display for ShowRate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let v = self.0;
        match v {
            v if v >= 1e9 => write!(f, "{:.2}Gbit", v / 1e9),
            v if v >= 1e6 => write!(f, "{:.2}Mbit", v / 1e6),
            v if v >= 1e3 => write!(f, "{:.1}kbit", v / 1e3),
            v => write!(f, "{v:.0}bit"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units() {
        assert_eq!("250ms".parse::<Time>(), Ok(Time(250_000_000)));
        assert_eq!("1.5s".parse::<Time>(), Ok(Time(1_500_000_000)));
        assert_eq!("20Mbit".parse::<Rate>(), Ok(Rate(20e6)));
        assert_eq!("1Gbps".parse::<Rate>(), Ok(Rate(1e9)));
        assert_eq!("30KB".parse::<Bytes>(), Ok(Bytes(30_000)));
        assert_eq!("50pkt".parse::<Buffer>(), Ok(Buffer::Packets(50)));
        assert_eq!("64KB".parse::<Buffer>(), Ok(Buffer::Bytes(64_000)));
        assert_eq!("0.5bdp".parse::<Buffer>(), Ok(Buffer::Bdp(0.5)));
    }

    #[test]
    fn rejects_garbage_with_a_message() {
        let e = "20Mbitt".parse::<Rate>().unwrap_err();
        assert!(e.contains("invalid rate `20Mbitt`"), "{e}");
        assert!("fast".parse::<Time>().is_err());
        assert!("-3s".parse::<Time>().is_err());
        assert!("0Mbit".parse::<Rate>().is_err());
        assert!("10 apples".parse::<Buffer>().is_err());
    }
}
