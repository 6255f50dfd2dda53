//! MCP — Multimodal Control Protocol (Podlesny & Gorinsky, "Multimodal
//! Congestion Control for Low Stable-State Queuing", WUCSE-2006-41).

use crate::load::LoadFactor;
use crate::meter::IntervalStats;

/// U = (N + Q) / (C·T), Q the minimum queue of the period (MCP paper eq. 1).
pub fn utilization(stats: &IntervalStats, capacity: f64) -> LoadFactor {
    let demand = stats.arrived_bytes as f64 + stats.queue_min as f64;
    LoadFactor::new(demand / (capacity * stats.length.as_secs_f64()))
}
