//! The index: erc's rate scale, its Gray code, and how a chain of packets
//! carries it in the ECN field (the module docs' "Wire").

use crate::wire::ecn::Ecn;
/// Digits per index, one per packet of a chain: 1024 codes.
pub const DIGITS: u32 = 10;
/// The largest index: the smallest rate.
pub const MAX_INDEX: u16 = (1 << DIGITS) - 1;
/// The rate of index 1, bytes per second: 200 Gbit/s (issue 19 asks for
/// ≥ 100 Gbit/s at the top of the scale).
pub const RATE_MAX: f64 = 25e9;
/// The rate of index [`MAX_INDEX`], bytes per second: 10 kbit/s, below the
/// ~100 kbit/s the design asks for, so that 1000 flows on a 1 Mbit/s link
/// can still be told their share.
pub const RATE_MIN: f64 = 1_250.0;

/// The index whose Gray code is all ones: a chain of unmarked ECT(0)
/// packets, "no erc router". Routers never advertise it.
pub const UNSPOKEN: u16 = from_gray(MAX_INDEX);

/// The ratio between neighbouring indices' rates, as a natural log.
fn log_step() -> f64 {
    (RATE_MAX / RATE_MIN).ln() / f64::from(MAX_INDEX - 1)
}

/// The rate an index stands for, in bytes per second; none for index 0 and
/// [`UNSPOKEN`] ("no erc router"). Indices above [`MAX_INDEX`] read as it.
pub fn rate_of(index: u16) -> Option<f64> {
    (index > 0 && index != UNSPOKEN)
        .then(|| RATE_MAX * (-log_step() * f64::from(index.min(MAX_INDEX) - 1)).exp())
}

/// The index nearest to `rate` (bytes per second) on the log scale, 1 ..=
/// [`MAX_INDEX`]; rates off the scale (and NaN) take its ends.
pub fn index_of(rate: f64) -> u16 {
    if rate.is_nan() || rate <= RATE_MIN {
        return MAX_INDEX;
    }
    let steps = ((RATE_MAX / rate).ln() / log_step()).round();
    match (steps.max(0.0) as u16).saturating_add(1).min(MAX_INDEX) {
        // The next slower rate: 1.66 % less.
        UNSPOKEN => UNSPOKEN + 1,
        index => index,
    }
}

/// The Gray code of an index.
pub const fn gray(index: u16) -> u16 {
    index ^ (index >> 1)
}

/// The index a Gray code stands for.
pub const fn from_gray(code: u16) -> u16 {
    let mut i = code;
    i ^= i >> 1;
    i ^= i >> 2;
    i ^= i >> 4;
    i ^= i >> 8;
    i
}

/// The index a Gray code spells, "no router" ([`UNSPOKEN`]) as 0.
pub const fn index_of_code(code: u16) -> u16 {
    match from_gray(code) {
        UNSPOKEN => 0,
        index => index,
    }
}

/// The chain position a packet's hash gives it, 0 (most significant) ..
/// [`DIGITS`].
pub const fn position(hash: u32) -> u32 {
    hash % DIGITS
}

/// The digit of `index` at `position` (0 = most significant).
pub const fn digit(index: u16, position: u32) -> bool {
    (gray(index) >> (DIGITS - 1 - position)) & 1 == 1
}

/// The codepoint that carries a digit.
pub const fn ecn_of(digit: bool) -> Ecn {
    if digit {
        Ecn::Ect0
    } else {
        Ecn::NotEct
    }
}

/// The digit a codepoint carries; CE and ECT(1) carry none.
pub const fn digit_of(ecn: Ecn) -> Option<bool> {
    match ecn {
        Ecn::NotEct => Some(false),
        Ecn::Ect0 => Some(true),
        Ecn::Ect1 | Ecn::Ce => None,
    }
}

/// The newest digit seen at each position of a chain.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Digits {
    code: u16,
    seen: u16,
}

impl Digits {
    const ALL: u16 = MAX_INDEX;

    fn bit(position: u32) -> u16 {
        1 << (DIGITS - 1 - position % DIGITS)
    }

    /// Records `digit` at `position`; returns whether it differs from the
    /// digit seen there before.
    pub fn set(&mut self, position: u32, digit: bool) -> bool {
        let bit = Self::bit(position);
        let changed = self.seen & bit != 0 && (self.code & bit != 0) != digit;
        self.seen |= bit;
        if digit {
            self.code |= bit;
        } else {
            self.code &= !bit;
        }
        changed
    }

    /// Whether every position has been seen.
    pub fn complete(&self) -> bool {
        self.seen == Self::ALL
    }

    /// The index the digits spell, unseen positions read as 0, and
    /// [`UNSPOKEN`] as 0: no router.
    pub fn index(&self) -> u16 {
        index_of_code(self.code)
    }

    /// The largest index any completion of the seen digits spells: the
    /// slowest rate the chain can still turn out to advertise. An index
    /// bit is the parity of the Gray digits above and at it, so an unseen
    /// digit can always make its bit 1.
    pub fn largest_index(&self) -> u16 {
        let mut index = 0;
        let mut parity = 0;
        for position in 0..DIGITS {
            let bit = Self::bit(position);
            parity = if self.seen & bit == 0 {
                1
            } else {
                parity ^ u16::from(self.code & bit != 0)
            };
            index = index << 1 | parity;
        }
        index
    }

    /// Whether the seen digits differ: some router writes this flow's
    /// chain (a sender's own packets are all ECT(0), all digits 1).
    pub fn mixed(&self) -> bool {
        let ones = self.code & self.seen;
        ones != 0 && ones != self.seen
    }
}

/// Feedback levels from [`PARTIAL`] up are bounds, not readings: the receiver
/// has not seen a whole chain yet, and level − [`PARTIAL`] is the largest
/// index the digits seen so far can still spell. A sender may send that
/// index's rate, and its start grows no further.
pub const PARTIAL: u16 = 1 << DIGITS;
/// The highest level an erc receiver reports.
pub const MAX_LEVEL: u16 = PARTIAL + MAX_INDEX;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_scale_covers_10_kbit_to_200_gbit_in_small_steps() {
        assert_eq!(rate_of(0), None);
        assert!((rate_of(1).unwrap() - RATE_MAX).abs() < 1.0);
        assert!((rate_of(MAX_INDEX).unwrap() - RATE_MIN).abs() < 1e-6);
        let step = rate_of(500).unwrap() / rate_of(501).unwrap();
        assert!((1.016..1.017).contains(&step), "{step}");
        for index in (1..=MAX_INDEX).filter(|&i| i != UNSPOKEN) {
            assert_eq!(index_of(rate_of(index).unwrap()), index);
        }
        // "No router" is never advertised: its rate reads as the next step.
        assert_eq!(rate_of(UNSPOKEN), None);
        assert_eq!(gray(UNSPOKEN), MAX_INDEX, "all digits 1: all ECT(0)");
        let between = (rate_of(UNSPOKEN - 1).unwrap() * rate_of(UNSPOKEN + 1).unwrap()).sqrt();
        assert_eq!(index_of(between * 0.999), UNSPOKEN + 1);
        // 50 Mbit/s lies between two indices within half a step.
        let r = 6.25e6;
        let q = rate_of(index_of(r)).unwrap();
        assert!((q / r - 1.0).abs() < 0.0083, "{q}");
        assert_eq!(index_of(f64::NAN), MAX_INDEX);
        assert_eq!(index_of(1e30), 1);
        assert_eq!(index_of(0.0), MAX_INDEX);
    }

    #[test]
    fn gray_code_round_trips_and_neighbours_differ_in_one_digit() {
        for i in 0..=MAX_INDEX {
            assert_eq!(from_gray(gray(i)), i);
            if i > 0 {
                assert_eq!((gray(i) ^ gray(i - 1)).count_ones(), 1);
            }
        }
        assert_eq!(digit_of(Ecn::Ce), None);
        assert_eq!(digit_of(ecn_of(true)), Some(true));
        assert_eq!(digit_of(ecn_of(false)), Some(false));
    }

    #[test]
    fn the_largest_completion_of_a_partial_chain_bounds_the_index() {
        for index in [1, 2, 300, 511, 512, 777, MAX_INDEX] {
            let mut digits = Digits::default();
            let mut bound = digits.largest_index();
            assert_eq!(bound, MAX_INDEX);
            for p in [3, 0, 7, 1, 9, 2, 8, 4, 6, 5] {
                digits.set(p, digit(index, p));
                let next = digits.largest_index();
                assert!(
                    next >= index && next <= bound,
                    "{index}: {next} after {bound}"
                );
                bound = next;
            }
            assert_eq!(bound, index);
        }
    }
}
