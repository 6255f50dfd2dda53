//! The load factor: demand over capacity, as routers measure it and receivers
//! estimate it; and what a router's meter hands its markers each interval.

use std::fmt;
use std::ops::{Index, IndexMut};
use std::time::Duration;

/// VCP's measurement interval t_ρ = 200 ms (VCP ns-2 release, docs/design.md §2);
/// also BMCC's t_p (BMCC paper Table 1) and MCP's T (MCP paper §IV-A.1).
pub const DEFAULT_INTERVAL: Duration = Duration::from_millis(200);

/// A load factor (1.0 = demand equals the target capacity).
///
/// Always finite and non-negative: NaN and negatives become 0, and values are
/// capped at [`LoadFactor::MAX`], so a bad measurement can never poison a law.
#[derive(Clone, Copy, Debug, Default, PartialEq, PartialOrd)]
pub struct LoadFactor(f64);

impl LoadFactor {
    /// The largest load factor represented (10 000 × capacity).
    pub const MAX: f64 = 1e4;
    /// Zero load.
    pub const ZERO: LoadFactor = LoadFactor(0.0);

    /// A load factor from a ratio; out-of-range input is clamped as documented.
    pub fn new(ratio: f64) -> LoadFactor {
        if ratio.is_nan() || ratio <= 0.0 {
            LoadFactor(0.0)
        } else {
            LoadFactor(ratio.min(Self::MAX))
        }
    }

    /// The ratio.
    pub fn get(self) -> f64 {
        self.0
    }
}

impl fmt::Display for LoadFactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.1}%", self.0 * 100.0)
    }
}

/// What happened on the link during one completed interval.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct IntervalStats {
    /// Index of the interval since the meter started (the first is 0).
    pub epoch: u64,
    /// Interval length.
    pub length: Duration,
    /// Bytes offered to the link (counted before tail drop): λ.
    pub arrived_bytes: u64,
    /// Packets offered to the link.
    pub arrived_packets: u64,
    /// Bytes that left the link.
    pub departed_bytes: u64,
    /// Smallest queue seen, in bytes (MCP's Q).
    pub queue_min: u64,
    /// Largest queue seen, in bytes.
    pub queue_max: u64,
    /// Time-weighted average queue, in bytes (BMCC's q_av).
    pub queue_avg: f64,
    /// Persistent queue: the smallest of the queue samples taken every t_q,
    /// in bytes — the part of the queue that did not drain (VCP's q̃).
    pub queue_persistent: u64,
    /// Whether the router could not watch the link for part of the
    /// interval ([`crate::router::meter::LoadFactorMeter::disregard`]): its load figures are the
    /// previous interval's.
    pub disregarded: bool,
}

impl IntervalStats {
    /// Offered load over capacity, λ / (C·t_p).
    pub fn offered(&self, capacity: f64) -> f64 {
        self.arrived_bytes as f64 / (capacity * self.length.as_secs_f64())
    }

    /// Departures over capacity: the link utilization.
    pub fn utilization(&self, capacity: f64) -> f64 {
        self.departed_bytes as f64 / (capacity * self.length.as_secs_f64())
    }
}

/// A load formula's place in a [`LinkLoad`]. A scheme module with a
/// formula of its own picks it, as it picks its DSCP tag, and the
/// registry's [`FORMULAS`](crate::schemes::registry::FORMULAS) lists it
/// (and checks that no two share one).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Formula(u8);

impl Formula {
    /// The formula at place `id`, below [`LinkLoad::CAPACITY`].
    pub const fn new(id: u8) -> Formula {
        assert!((id as usize) < LinkLoad::CAPACITY);
        Formula(id)
    }

    /// Its place in [`LinkLoad::factors`].
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

/// Every formula's load figure for the last completed interval.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LinkLoad {
    /// The interval these figures come from; markers use it to time MCP's
    /// fairing propagation. Zero until the first interval closes.
    pub epoch: u64,
    /// The figures, by [`Formula`]; places no formula has stay zero.
    /// The registry's [`LinkLoad::iter`] lists the formulas' figures.
    pub factors: [LoadFactor; LinkLoad::CAPACITY],
}

impl LinkLoad {
    /// Room for this many formulas: a fixed array keeps link state `Copy`
    /// without this module naming the registry, which names it.
    pub const CAPACITY: usize = 8;
}

impl Index<Formula> for LinkLoad {
    type Output = LoadFactor;

    fn index(&self, formula: Formula) -> &LoadFactor {
        &self.factors[formula.index()]
    }
}

impl IndexMut<Formula> for LinkLoad {
    fn index_mut(&mut self, formula: Formula) -> &mut LoadFactor {
        &mut self.factors[formula.index()]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clamps_bad_values() {
        assert_eq!(LoadFactor::new(f64::NAN).get(), 0.0);
        assert_eq!(LoadFactor::new(-3.0).get(), 0.0);
        assert_eq!(LoadFactor::new(f64::INFINITY).get(), LoadFactor::MAX);
        assert_eq!(LoadFactor::new(0.85).get(), 0.85);
        assert_eq!(LoadFactor::new(0.855).to_string(), "85.5%");
    }
}
