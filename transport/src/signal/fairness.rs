//! The max-min fair split that erc's routers advertise and the bottleneck's
//! policer enforces.

/// The max-min fair split of a capacity: flows asking less than their
/// share keep what they ask; the others share what is left equally.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MaxMin {
    /// What the flows held at the share split.
    pub remaining: f64,
    /// How many flows are held at the share (ask for more than it).
    pub limited: usize,
}

impl MaxMin {
    /// Water-fills `capacity` among flows asking `demands` (∞: as much as
    /// they can get); sorts `demands`.
    pub fn split(capacity: f64, demands: &mut [f64]) -> MaxMin {
        demands.sort_by(f64::total_cmp);
        let mut remaining = capacity;
        let mut limited = demands.len();
        for &demand in demands.iter() {
            if demand * limited as f64 >= remaining {
                break;
            }
            remaining -= demand;
            limited -= 1;
        }
        MaxMin { remaining, limited }
    }

    /// The share of each limited flow, if any flow is limited.
    pub fn share(&self) -> Option<f64> {
        (self.limited > 0).then(|| self.remaining / self.limited as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_min_leaves_small_demands_alone() {
        let mut demands = [30.0, 10.0, f64::INFINITY, f64::INFINITY];
        let split = MaxMin::split(100.0, &mut demands);
        // 30 is exactly the share: it counts among the flows held there.
        assert_eq!(
            split,
            MaxMin {
                remaining: 90.0,
                limited: 3
            }
        );
        assert_eq!(split.share(), Some(30.0));
        let mut small = [10.0, 20.0];
        assert_eq!(MaxMin::split(100.0, &mut small).share(), None);
    }
}
