//! Quantities as scenario files and the command line write them, parsed by
//! `ecnq::units` (tc(8)'s words, one parser for every ecnq tool): `"20mbit"`,
//! `"250ms"`, `"1500b"`; plus the simulator's own buffer words, `"50pkt"`
//! and `"1bdp"`. The newtypes hold the numbers the engine uses and read
//! themselves from TOML strings.

use std::fmt;
use std::str::FromStr;

use ecnq::units::{self, UnitError};
use serde::{Deserialize, Deserializer};

use crate::engine::Nanos;

/// A time span in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
pub struct Time(pub Nanos);

impl FromStr for Time {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Time, UnitError> {
        units::parse_duration(s, None).map(|d| Time(d.as_nanos() as Nanos))
    }
}

/// A link rate in bits per second.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
pub struct Rate(pub f64);

impl FromStr for Rate {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Rate, UnitError> {
        s.parse::<units::Rate>().map(|r| Rate(r.bits_per_sec()))
    }
}

/// A size in bytes.
#[derive(Clone, Copy, Debug, PartialEq, PartialOrd)]
pub struct Bytes(pub u64);

impl FromStr for Bytes {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Bytes, UnitError> {
        s.parse::<units::Size>().map(|b| Bytes(b.bytes()))
    }
}

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
    fn from_str(s: &str) -> Result<Buffer, String> {
        let word = s.trim().to_ascii_lowercase();
        let count = |unit: &str| {
            word.strip_suffix(unit)
                .and_then(|n| n.trim().parse::<f64>().ok())
                .filter(|v| v.is_finite() && *v >= 0.0)
        };
        if let Some(n) = ["packets", "pkts", "pkt"].into_iter().find_map(count) {
            return Ok(Buffer::Packets(n.round() as u64));
        }
        if let Some(x) = count("bdp") {
            return Ok(Buffer::Bdp(x));
        }
        s.parse::<Bytes>().map(|b| Buffer::Bytes(b.0)).map_err(|e| {
            format!("{e}; or a buffer in packets (`50pkt`) or bandwidth-delay products (`1bdp`)")
        })
    }
}

/// Reads a quantity from a TOML string with its `FromStr`.
fn from_text<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: FromStr,
    T::Err: fmt::Display,
{
    let s = String::deserialize(d)?;
    s.parse().map_err(serde::de::Error::custom)
}

macro_rules! deserialize_from_text {
    ($($t:ty),*) => {$(
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                from_text(d)
            }
        }
    )*};
}

deserialize_from_text!(Time, Rate, Bytes, Buffer);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ecnq_units_and_buffer_words() {
        assert_eq!("250ms".parse::<Time>(), Ok(Time(250_000_000)));
        assert_eq!("1.5s".parse::<Time>(), Ok(Time(1_500_000_000)));
        assert_eq!("20Mbit".parse::<Rate>(), Ok(Rate(20e6)));
        assert_eq!("30000b".parse::<Bytes>(), Ok(Bytes(30_000)));
        assert_eq!("64kb".parse::<Bytes>(), Ok(Bytes(65_536)));
        assert_eq!("50pkt".parse::<Buffer>(), Ok(Buffer::Packets(50)));
        assert_eq!("15000b".parse::<Buffer>(), Ok(Buffer::Bytes(15_000)));
        assert_eq!("0.5bdp".parse::<Buffer>(), Ok(Buffer::Bdp(0.5)));
    }

    #[test]
    fn rejects_garbage_with_a_message() {
        let e = "20Mbitt".parse::<Rate>().unwrap_err().to_string();
        assert!(e.contains("20Mbitt"), "{e}");
        assert!("20mbps"
            .parse::<Rate>()
            .unwrap_err()
            .to_string()
            .contains("ambiguous"));
        assert!("fast".parse::<Time>().is_err());
        assert!("-3s".parse::<Time>().is_err());
        assert!("0Mbit".parse::<Rate>().is_err());
        let e = "10 apples".parse::<Buffer>().unwrap_err();
        assert!(e.contains("50pkt"), "{e}");
    }
}
