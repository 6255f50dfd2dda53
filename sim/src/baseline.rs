//! The simulator's loss-based baselines: NewReno and Cubic, both the core's
//! own laws. Both react to a loss or a CE mark at most once per round trip,
//! and both start in slow start.

/// The NewReno baseline is the core's classic law (RFC 6582 window
/// arithmetic, loss and CE as congestion), the same one ecnq senders fall
/// back to.
pub type NewReno = ecnq::classic::ClassicLaw;

/// The Cubic baseline is the core's Cubic law (RFC 8312), the one erc keeps
/// beside its advertised rate.
pub type Cubic = ecnq::cubic::CubicLaw;

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use ecnq::signal::{Congestion, Law, LawConfig, Mode, RttSample};

    use super::*;

    const MSS: u64 = 1000;

    fn rtt() -> RttSample {
        RttSample::uniform(Duration::from_millis(100))
    }

    #[test]
    fn reno_halves_once_per_round_trip() {
        let mut law = NewReno::new(LawConfig::with_mss(MSS));
        let t = Duration::from_secs(1);
        law.on_ack(t, 10 * MSS, &rtt());
        assert_eq!(law.window(), 20 * MSS, "slow start doubles per window");
        law.on_congestion(t, t, Congestion::Loss, &rtt());
        assert_eq!(law.window(), 10 * MSS);
        // A second loss from the same flight does nothing.
        law.on_congestion(t + Duration::from_millis(5), t, Congestion::Ce, &rtt());
        assert_eq!(law.window(), 10 * MSS);
        // After recovery: one packet per window of acks.
        let later = t + Duration::from_secs(1);
        law.on_ack(later, 10 * MSS, &rtt());
        assert_eq!(law.window(), 11 * MSS);
        assert_eq!(law.mode(), Mode::CongestionAvoidance);
    }
}
