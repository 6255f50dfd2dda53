//! Classic ECN: what paths and peers without ecnq feedback get.
//!
//! * Router ([`ClassicMarker`]): untagged ECT traffic (kernel TCP, vanilla
//!   QUIC) is CE-marked instead of waiting to be dropped once the queue is at
//!   or over a marking threshold (RFC 3168 §5, with a step threshold as in
//!   DCTCP); Not-ECT traffic is only queued (docs/design.md §2 "DSCP scheme tag").
//! * Sender ([`ClassicLaw`]): NewReno (RFC 9002 §7 / RFC 6582) with CE and loss
//!   both as congestion, at most one reduction per round trip and no growth
//!   during the round trip after it.

use std::time::Duration;

use crate::signal::{
    Congestion, Feedback, Law, LawConfig, LinkState, Marker, Mode, PacketMarks, RttSample, Window,
};
use crate::wire::ecn::{Ecn, SchemeTag};

/// CE instead of drop for ECT packets once the queue reaches a threshold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClassicMarker {
    /// Queue length in bytes at which ECT packets are marked CE.
    pub threshold: u64,
}

impl Marker for ClassicMarker {
    #[inline]
    fn mark(&mut self, _now: Duration, link: &LinkState, pkt: &mut PacketMarks) {
        if pkt.ecn.is_ect() && link.queue_bytes >= self.threshold {
            pkt.ecn = Ecn::Ce;
        }
    }
}

/// NewReno: slow start, congestion avoidance, halving once per round trip on
/// loss or CE. Scheme feedback is ignored.
#[derive(Clone, Debug)]
pub struct ClassicLaw {
    config: LawConfig,
    cwnd: Window,
    ssthresh: f64,
}

impl ClassicLaw {
    /// A NewReno sender.
    pub fn new(config: LawConfig) -> ClassicLaw {
        ClassicLaw {
            cwnd: Window::new(config, Mode::SlowStart),
            ssthresh: f64::INFINITY,
            config,
        }
    }
}

impl Law for ClassicLaw {
    fn on_ack(&mut self, now: Duration, acked_bytes: u64, rtt: &RttSample) {
        if self.cwnd.in_recovery(now, rtt) {
            return;
        }
        let acked = acked_bytes as f64;
        let grown = if self.cwnd.bytes() < self.ssthresh {
            self.cwnd.set_mode(Mode::SlowStart);
            self.cwnd.bytes() + acked
        } else {
            self.cwnd.set_mode(Mode::CongestionAvoidance);
            self.cwnd.bytes() + self.config.mss as f64 * acked / self.cwnd.bytes()
        };
        self.cwnd.set(grown);
    }

    fn on_feedback(&mut self, _now: Duration, _feedback: Feedback, _rtt: &RttSample) {}

    fn on_congestion(
        &mut self,
        now: Duration,
        sent: Duration,
        _kind: Congestion,
        _rtt: &RttSample,
    ) {
        if self.cwnd.halve_on_congestion(now, sent) {
            self.ssthresh = self.cwnd.bytes();
        }
    }

    fn window(&self) -> u64 {
        self.cwnd.whole_bytes()
    }

    fn mode(&self) -> Mode {
        self.cwnd.mode()
    }

    fn tag(&self) -> SchemeTag {
        SchemeTag::UNTAGGED
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signal::load::LinkLoad;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn marks_ect_only_over_threshold() {
        let mut m = ClassicMarker { threshold: 10_000 };
        let mut pkt = PacketMarks {
            ecn: Ecn::Ect0,
            tag: SchemeTag::UNTAGGED,
            hash: 0,
            flow: 0,
        };
        let below = LinkState {
            load: LinkLoad::default(),
            queue_bytes: 9_999,
            ..LinkState::default()
        };
        let over = LinkState {
            queue_bytes: 10_000,
            ..below
        };
        m.mark(MS, &below, &mut pkt);
        assert_eq!(pkt.ecn, Ecn::Ect0);
        m.mark(MS, &over, &mut pkt);
        assert_eq!(pkt.ecn, Ecn::Ce);
        pkt.ecn = Ecn::NotEct;
        m.mark(MS, &over, &mut pkt);
        assert_eq!(pkt.ecn, Ecn::NotEct, "Not-ECT is never marked");
    }

    #[test]
    fn newreno_slow_start_then_halving_once_per_round() {
        let cfg = LawConfig::with_mss(1000);
        let rtt = RttSample::uniform(MS * 50);
        let mut law = ClassicLaw::new(cfg);
        assert_eq!(law.window(), 10_000);
        law.on_ack(MS, 10_000, &rtt);
        assert_eq!(law.window(), 20_000);
        assert_eq!(law.mode(), Mode::SlowStart);
        law.on_congestion(MS * 2, MS, Congestion::Ce, &rtt);
        assert_eq!(law.window(), 10_000);
        // A second loss from the same flight changes nothing.
        law.on_congestion(MS * 3, MS, Congestion::Loss, &rtt);
        assert_eq!(law.window(), 10_000);
        // Congestion avoidance: one MSS per window acked.
        law.on_ack(MS * 60, 10_000, &rtt);
        assert_eq!(law.window(), 11_000);
        assert_eq!(law.mode(), Mode::CongestionAvoidance);
        // A loss of a packet sent after the reduction reduces again.
        law.on_congestion(MS * 70, MS * 65, Congestion::Loss, &rtt);
        assert_eq!(law.window(), 5_500);
    }

    #[test]
    fn the_law_halves_once_per_round_trip() {
        let mss = 1000;
        let rtt = RttSample::uniform(Duration::from_millis(100));
        let mut law = ClassicLaw::new(LawConfig::with_mss(mss));
        let t = Duration::from_secs(1);
        law.on_ack(t, 10 * mss, &rtt);
        assert_eq!(law.window(), 20 * mss, "slow start doubles per window");
        law.on_congestion(t, t, Congestion::Loss, &rtt);
        assert_eq!(law.window(), 10 * mss);
        // A second signal from the same flight does nothing.
        law.on_congestion(t + MS * 5, t, Congestion::Ce, &rtt);
        assert_eq!(law.window(), 10 * mss);
        // After recovery: one packet per window of acks.
        law.on_ack(t + Duration::from_secs(1), 10 * mss, &rtt);
        assert_eq!(law.window(), 11 * mss);
        assert_eq!(law.mode(), Mode::CongestionAvoidance);
    }
}
