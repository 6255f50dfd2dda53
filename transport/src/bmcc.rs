//! BMCC — Binary Marking Congestion Control with ADPM (Qazi, Andrew & Znati,
//! "Two bits are enough"; Sorathiya & Zambare, "Performance Analysis of Binary
//! Marking Congestion Control Protocol"; DESIGN.md §2 "Scheme notes").

use crate::load::LoadFactor;
use crate::meter::IntervalStats;

/// k_1 = 0.5, how fast the queue drains (BMCC paper Table 1).
pub const K1: f64 = 0.5;

/// The router's load-factor parameters (BMCC paper eq. 1.1).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LoadParams {
    /// γ_l ≤ 1, target utilization. The BMCC paper gives no value; ecnq uses
    /// VCP's capacity-dependent γ ([`crate::vcp::gamma_for_capacity`]).
    pub gamma: f64,
    /// k_1, weight of the average queue.
    pub k1: f64,
}

impl LoadParams {
    /// γ as for VCP, k_1 = 0.5.
    pub fn for_capacity(capacity: f64) -> LoadParams {
        LoadParams {
            gamma: crate::vcp::gamma_for_capacity(capacity),
            k1: K1,
        }
    }

    /// f = (λ + k_1·q_av) / (γ·C·t_p) (BMCC paper eq. 1.1).
    pub fn load_factor(&self, stats: &IntervalStats, capacity: f64) -> LoadFactor {
        let demand = stats.arrived_bytes as f64 + self.k1 * stats.queue_avg;
        LoadFactor::new(demand / (self.gamma * capacity * stats.length.as_secs_f64()))
    }
}
