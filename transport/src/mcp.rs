//! MCP — Multimodal Control Protocol (Podlesny & Gorinsky, "Multimodal
//! Congestion Control for Low Stable-State Queuing", WUCSE-2006-41).

use crate::load::LoadFactor;
use crate::meter::IntervalStats;

/// U = (N + Q) / (C·T), Q the minimum queue of the period (MCP paper eq. 1).
pub fn utilization(stats: &IntervalStats, capacity: f64) -> LoadFactor {
    let demand = stats.arrived_bytes as f64 + stats.queue_min as f64;
    LoadFactor::new(demand / (capacity * stats.length.as_secs_f64()))
}

use std::time::Duration;

use crate::ecn::Ecn;
use crate::signal::{LinkState, Marker, PacketMarks};

/// Utilization below 48 % is code `00` (MCP paper Fig. 2, scaling mode).
pub const SCALING_BOUND: f64 = 0.48;
/// Utilization below 88 % is code `01` (MCP paper §IV-E, enhancing mode).
pub const ENHANCING_BOUND: f64 = 0.88;
/// Utilization below 98 % is code `10`; at or above, `11` (MCP paper Fig. 2).
pub const OVERLOAD_BOUND: f64 = 0.98;

/// The two-bit utilization code of MCP paper §IV-E: `00` [0, 0.48), `01`
/// [0.48, 0.88), `10` [0.88, 0.98), `11` [0.98, ∞).
pub fn code_of(utilization: LoadFactor) -> Ecn {
    match utilization.get() {
        u if u < SCALING_BOUND => Ecn::NotEct,
        u if u < ENHANCING_BOUND => Ecn::Ect1,
        u if u < OVERLOAD_BOUND => Ecn::Ect0,
        _ => Ecn::Ce,
    }
}

/// MCP router marking (MCP paper §IV-A.3 and §IV-D.2): raise the packet's
/// code to the link's, and propagate fairing requests.
///
/// A packet with both the fairing and the this-path bit set is a request. From
/// then until the end of the next measurement period, every MCP packet
/// forwarded into the link whose code is `01` or `10` gets its fairing bit
/// set. With `e` the last completed period when the request arrives, period
/// `e + 1` is in progress and `e + 2` is "the next period": propagation lasts
/// while the last completed period is below `e + 2`. Routers never set the
/// this-path bit, so propagated bits cannot trigger more propagation.
#[derive(Clone, Copy, Debug, Default)]
pub struct McpMarker {
    /// Propagate while the last completed period is below this.
    fairing_until_epoch: u64,
}

impl Marker for McpMarker {
    #[inline]
    fn mark(&mut self, _now: Duration, link: &LinkState, pkt: &mut PacketMarks) {
        // MCP's lowest code is `00`, so MCP packets are rewritten from any code.
        pkt.ecn = pkt.ecn.max(code_of(link.load.mcp));
        if pkt.tag.fairing && pkt.tag.this_path {
            self.fairing_until_epoch = self.fairing_until_epoch.max(link.load.epoch + 2);
        }
        let middle = matches!(pkt.ecn, Ecn::Ect1 | Ecn::Ect0);
        if middle && link.load.epoch < self.fairing_until_epoch {
            pkt.tag.fairing = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ecn::SchemeTag;
    use crate::meter::LinkLoad;

    const MS: Duration = Duration::from_millis(1);

    fn link(u: f64, epoch: u64) -> LinkState {
        LinkState {
            load: LinkLoad {
                mcp: LoadFactor::new(u),
                epoch,
                ..LinkLoad::default()
            },
            queue_bytes: 0,
        }
    }

    fn pkt(fairing: bool, this_path: bool) -> PacketMarks {
        PacketMarks {
            ecn: Ecn::NotEct,
            tag: SchemeTag {
                wire_id: 5,
                this_path,
                fairing,
            },
            hash: 0,
            flow: 9,
        }
    }

    #[test]
    fn codes_at_the_fig2_boundaries() {
        assert_eq!(code_of(LoadFactor::new(0.4799)), Ecn::NotEct);
        assert_eq!(code_of(LoadFactor::new(0.48)), Ecn::Ect1);
        assert_eq!(code_of(LoadFactor::new(0.8799)), Ecn::Ect1);
        assert_eq!(code_of(LoadFactor::new(0.88)), Ecn::Ect0);
        assert_eq!(code_of(LoadFactor::new(0.9799)), Ecn::Ect0);
        assert_eq!(code_of(LoadFactor::new(0.98)), Ecn::Ce);
    }

    #[test]
    fn fairing_propagates_until_the_end_of_the_next_period() {
        let mut m = McpMarker::default();
        let mut other = pkt(false, false);
        m.mark(MS, &link(0.9, 4), &mut other);
        assert!(!other.tag.fairing, "no request yet");
        // A propagated bit (this-path clear) is not a request.
        let mut relayed = pkt(true, false);
        m.mark(MS, &link(0.9, 4), &mut relayed);
        let mut other = pkt(false, false);
        m.mark(MS, &link(0.9, 4), &mut other);
        assert!(!other.tag.fairing);
        // A request during period 5 (last completed 4) lasts through period 6.
        let mut request = pkt(true, true);
        m.mark(MS, &link(0.9, 4), &mut request);
        for epoch in [4, 5] {
            let mut other = pkt(false, false);
            m.mark(MS, &link(0.9, epoch), &mut other);
            assert!(other.tag.fairing && !other.tag.this_path, "epoch {epoch}");
        }
        let mut other = pkt(false, false);
        m.mark(MS, &link(0.9, 6), &mut other);
        assert!(!other.tag.fairing, "expired");
    }

    #[test]
    fn fairing_only_in_the_middle_codes() {
        let mut m = McpMarker::default();
        m.mark(MS, &link(0.5, 1), &mut pkt(true, true));
        for (u, want) in [(0.3, false), (0.6, true), (0.9, true), (1.0, false)] {
            let mut other = pkt(false, false);
            m.mark(MS, &link(u, 1), &mut other);
            assert_eq!(other.tag.fairing, want, "utilization {u}");
        }
    }
}
