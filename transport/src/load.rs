//! The load factor: demand over capacity, as routers measure it and receivers
//! estimate it.

use std::fmt;

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
