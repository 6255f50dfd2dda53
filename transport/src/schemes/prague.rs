//! Prague — the L4S scalable sender (draft-briscoe-iccrg-prague-congestion-
//! control; RFC 9331 §4.3, RFC 9332), ecnq's baseline for router-assisted ECN
//! as networks deploy it, and an L4S router's marking for it.
//!
//! * **Marker**: L4S step marking: CE on an ECT packet that arrives while the
//!   queue holds more than [`STEP`] of the link's capacity (RFC 9332's native
//!   L4S threshold, about 1 ms).
//! * **Decoder**: the fraction of CE-marked packets, smoothed over about
//!   [`FRACTION_PACKETS`] packets; the receiver reports it, since quinn hands
//!   its controller no ECN counts.
//! * **Law**: DCTCP-style: α ← (1 − g)·α + g·F once per round, F the reported
//!   CE fraction, g = 1/16; a round with CE reduces the window by α/2; one
//!   packet of additive increase per round, less for RTTs under
//!   [`REFERENCE_RTT`] so that they gain rate no faster than a flow at that
//!   RTT (Prague's RTT independence); loss halves, as Reno does, unless the
//!   lost packet was sent before the last reduction, CE's or loss's (one
//!   congestion event, one reduction). Packets
//!   are ECT(1), the L4S identifier. The window is paced once a round trip
//!   has been measured (the Prague draft requires pacing): at twice window
//!   / srtt in slow start, at window / srtt after, in bursts of at most
//!   [`BURST`]. A burst of more than a millisecond of the link's capacity
//!   meets the L4S step and is marked; an unpaced first flight would end
//!   slow start at a few packets.
//! * **Classic ECN fallback** (RFC 9331 §4.3, the Prague draft's fall-back
//!   on a classic ECN bottleneck): an RFC 3168 AQM marks from a queue of
//!   several milliseconds, an L4S one from about one. A marked round whose
//!   smallest RTT stood more than [`CLASSIC_QUEUE`] above the minimum
//!   counts toward a classic bottleneck, one below it against; while most
//!   recent marked rounds count toward it, a marked round halves the
//!   window, as Reno answers CE, instead of taking α/2 off it, and as Reno
//!   does at most once per round trip (RFC 3168 §6.1.2): only a CE on a
//!   packet sent after the last reduction halves again. Without the
//!   fallback Prague starves Cubic with ECN at such an AQM (guarded by
//!   `marks_over_a_standing_queue_of_milliseconds_are_answered_as_reno` and
//!   sim/tests/l4s_goals.rs `prague_falls_back_at_a_classic_ecn_aqm`).

use std::time::Duration;

use crate::signal::load::LoadFactor;
use crate::signal::{
    Congestion, Decoder, Feedback, Law, LawConfig, LinkState, LossEpoch, Marker, Mode, PacketMarks,
    RttSample, Window,
};
use crate::wire::ecn::{Ecn, SchemeTag, WireScheme};

/// Prague's DSCP pool tag, so that an ecnq receiver reports its CE fraction
/// (docs/design.md §2, tag table; L4S routers ignore the DSCP and go by ECT(1)).
pub const WIRE: WireScheme = WireScheme::new(5);
/// The L4S step: CE while the queue exceeds this much of the link's
/// capacity (RFC 9332 §A.2: a native L4S AQM marks from about 1 ms).
pub const STEP: Duration = Duration::from_millis(1);
/// g, the gain of α's moving average (RFC 8257 §4.2, DCTCP's 1/16; the
/// Prague draft keeps it).
pub const G: f64 = 1.0 / 16.0;
/// Prague's reference RTT: a flow with a shorter RTT grows its rate as fast
/// as one with this RTT does, not faster (Prague draft, RTT independence):
/// its window grows by (RTT / reference)² packets per round.
pub const REFERENCE_RTT: Duration = Duration::from_millis(25);
/// Slow start paces at this multiple of window / srtt, since it sends two
/// packets for each one acked; congestion avoidance at window / srtt
/// (Linux tcp_prague, `prague_update_pacing_rate`: 200 % while the window
/// is under half of ssthresh, 100 % after).
pub const SLOW_START_PACING: f64 = 2.0;
/// The longest burst of the pacing: well under the L4S step, so that a
/// sender's own bursts are not marked (Linux tcp_prague,
/// `prague_burst_shift`: 2⁻¹² s).
pub const BURST: Duration = Duration::from_micros(250);
/// Marks that arrive over a queue that stood at least this long (the
/// marked round's smallest RTT over the minimum) come from a classic AQM: between the L4S step's 1 ms and
/// the 5 ms and more that classic AQMs aim at (CoDel's target, RFC 8289
/// §4.4; PIE's 15 ms, RFC 8033). Linux's tcp_prague measures its queue
/// against a reference of about 2 ms.
pub const CLASSIC_QUEUE: Duration = Duration::from_millis(3);
/// Each marked round moves the classic score by this much toward 1 (a
/// classic bottleneck) or 0; above one half Prague answers as Reno.
const CLASSIC_STEP: f64 = 0.25;
/// The receiver's CE fraction averages over about this many packets.
pub const FRACTION_PACKETS: f64 = 16.0;
/// Reported fractions travel in units of 1/10 000.
const LEVEL_SCALE: f64 = 10_000.0;

/// L4S step marking (see the module docs).
#[derive(Clone, Copy, Debug, Default)]
pub struct PragueMarker;

impl Marker for PragueMarker {
    fn mark(&mut self, _now: Duration, link: &LinkState, pkt: &mut PacketMarks) {
        let step = link.capacity * STEP.as_secs_f64();
        if pkt.ecn.is_ect() && link.queue_bytes as f64 > step {
            pkt.ecn = Ecn::Ce;
        }
    }
}

/// The receiver's CE fraction (see the module docs).
#[derive(Clone, Copy, Debug, Default)]
pub struct PragueDecoder {
    fraction: f64,
    seen: bool,
}

impl Decoder for PragueDecoder {
    fn on_packet(&mut self, _now: Duration, ecn: Ecn, _tag: SchemeTag, _hash: u32) -> bool {
        let before = self.level();
        let marked = if ecn == Ecn::Ce { 1.0 } else { 0.0 };
        self.fraction += (marked - self.fraction) / FRACTION_PACKETS;
        self.seen = true;
        self.level() != before
    }

    fn estimate(&self, _now: Duration) -> Feedback {
        Feedback {
            level: self.level(),
            load: LoadFactor::new(self.fraction),
            fairing: false,
        }
    }
}

impl PragueDecoder {
    fn level(&self) -> u16 {
        (self.fraction.clamp(0.0, 1.0) * LEVEL_SCALE).round() as u16
    }
}

/// The highest level the decoder reports: a fraction of 1.
pub const MAX_LEVEL: u16 = LEVEL_SCALE as u16;

/// The Prague sender (see the module docs).
#[derive(Clone, Debug)]
pub struct PragueLaw {
    config: LawConfig,
    cwnd: Window,
    ssthresh: f64,
    alpha: f64,
    /// The receiver's latest CE fraction.
    fraction: f64,
    /// When the current round started.
    round_start: Option<Duration>,
    /// Whether a CE arrived in this round.
    marked: bool,
    /// The smoothed RTT of the last ACK, once there was one.
    srtt: Option<Duration>,
    /// How much the recent marked rounds look like a classic AQM's, 0 to 1.
    classic: f64,
    /// The smallest RTT sample of the current round: the queue that stood
    /// through it.
    round_min_rtt: Option<Duration>,
    /// The congestion event last answered: a marked round's reduction or
    /// a loss halving.
    answered: LossEpoch,
    /// Whether a CE of this round came on a packet sent after it: a new
    /// congestion event.
    marked_since_reduction: bool,
}

impl PragueLaw {
    /// A Prague sender: slow start until the first CE or loss.
    pub fn new(config: LawConfig) -> PragueLaw {
        PragueLaw {
            cwnd: Window::new(config, Mode::SlowStart),
            ssthresh: f64::INFINITY,
            alpha: 1.0,
            fraction: 0.0,
            round_start: None,
            marked: false,
            srtt: None,
            classic: 0.0,
            round_min_rtt: None,
            answered: LossEpoch::default(),
            marked_since_reduction: false,
            config,
        }
    }

    /// α, the smoothed CE fraction.
    pub fn alpha(&self) -> f64 {
        self.alpha
    }

    /// Whether the marks look like a classic RFC 3168 AQM's, so that
    /// Prague answers them as Reno does.
    pub fn classic_ecn(&self) -> bool {
        self.classic > 0.5
    }

    /// Closes a round once a smoothed RTT has passed: α follows the
    /// receiver's CE fraction, and a round with CE reduces the window.
    fn end_round_if_due(&mut self, now: Duration, rtt: &RttSample) {
        let start = *self.round_start.get_or_insert(now);
        let round_min = self.round_min_rtt.map_or(rtt.latest, |m| m.min(rtt.latest));
        self.round_min_rtt = Some(round_min);
        if now < start + rtt.smoothed {
            return;
        }
        self.round_min_rtt = None;
        self.alpha += G * (self.fraction - self.alpha);
        if self.marked {
            let queue = round_min.saturating_sub(rtt.min);
            let step = if queue > CLASSIC_QUEUE {
                CLASSIC_STEP
            } else {
                -CLASSIC_STEP
            };
            self.classic = (self.classic + step).clamp(0.0, 1.0);
            // At a classic AQM, as Reno: halve at most once per round trip
            // (RFC 9331 §4.3, RFC 3168 §6.1.2). CE on packets sent before
            // the last reduction still arrives in the round after it and
            // belongs to the congestion event already answered; halving
            // again for it cut the window about twice as often as Reno's.
            let reduction = if !self.classic_ecn() {
                Some(self.alpha / 2.0)
            } else if self.marked_since_reduction {
                Some(0.5)
            } else {
                None
            };
            if let Some(reduction) = reduction {
                self.cwnd.set(self.cwnd.bytes() * (1.0 - reduction));
                self.ssthresh = self.cwnd.bytes();
                self.cwnd.set_mode(Mode::CongestionAvoidance);
                self.answered.start(now);
            }
        }
        self.marked = false;
        self.marked_since_reduction = false;
        self.round_start = Some(now);
    }
}

impl Law for PragueLaw {
    fn on_ack(&mut self, now: Duration, acked_bytes: u64, rtt: &RttSample) {
        self.on_rtt(rtt);
        self.end_round_if_due(now, rtt);
        if self.cwnd.in_recovery(now, rtt) {
            return;
        }
        let acked = acked_bytes as f64;
        if self.cwnd.bytes() < self.ssthresh {
            self.cwnd.set(self.cwnd.bytes() + acked);
            self.cwnd.set_mode(Mode::SlowStart);
            return;
        }
        // One packet per round, (RTT / reference)² under the reference.
        let mss = self.config.mss as f64;
        let scale = (rtt.smoothed.as_secs_f64() / REFERENCE_RTT.as_secs_f64())
            .min(1.0)
            .powi(2);
        self.cwnd
            .set(self.cwnd.bytes() + scale * mss * acked / self.cwnd.bytes());
        self.cwnd.set_mode(Mode::CongestionAvoidance);
    }

    fn on_rtt(&mut self, rtt: &RttSample) {
        self.srtt = Some(rtt.smoothed).filter(|srtt| !srtt.is_zero());
    }

    fn on_feedback(&mut self, _now: Duration, feedback: Feedback, _rtt: &RttSample) {
        self.fraction = feedback.load.get().min(1.0);
    }

    fn on_congestion(&mut self, now: Duration, sent: Duration, kind: Congestion, _rtt: &RttSample) {
        match kind {
            Congestion::Ce => {
                self.marked = true;
                if self.answered.is_new(sent) {
                    self.marked_since_reduction = true;
                }
                if self.cwnd.bytes() < self.ssthresh {
                    // The first CE ends slow start; the round's end reduces.
                    self.ssthresh = self.cwnd.bytes();
                }
            }
            Congestion::Loss => {
                // One congestion event, one reduction, whether CE or loss
                // answered it (RFC 9002 §7.3.2; Linux does not enter loss
                // recovery's reduction while an ECN one is under way): a
                // loss of a packet sent before the last reduction is part
                // of the event it answered.
                if self.answered.is_new(sent) && self.cwnd.halve_on_congestion(now, sent) {
                    self.ssthresh = self.cwnd.bytes();
                    self.answered.start(now);
                }
            }
        }
    }

    fn window(&self) -> u64 {
        self.cwnd.whole_bytes()
    }

    fn pacing_rate(&self) -> Option<f64> {
        let factor = if self.cwnd.bytes() < self.ssthresh / 2.0 {
            SLOW_START_PACING
        } else {
            1.0
        };
        self.srtt
            .map(|srtt| factor * self.cwnd.bytes() / srtt.as_secs_f64())
    }

    fn pacing_burst(&self) -> Option<Duration> {
        Some(BURST)
    }

    fn mode(&self) -> Mode {
        self.cwnd.mode()
    }

    fn tag(&self) -> SchemeTag {
        SchemeTag::new(WIRE.id())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);
    const MSS: u64 = 1000;

    fn rtt(ms: u64) -> RttSample {
        RttSample::uniform(MS * ms as u32)
    }

    #[test]
    fn the_step_marks_ect_over_one_millisecond_of_queue() {
        let mut m = PragueMarker;
        let mut link = LinkState {
            capacity: 1e6,
            queue_bytes: 999,
            ..LinkState::default()
        };
        let mut pkt = PacketMarks {
            ecn: Ecn::Ect1,
            tag: SchemeTag::new(WIRE.id()),
            hash: 0,
            flow: 0,
        };
        m.mark(MS, &link, &mut pkt);
        assert_eq!(pkt.ecn, Ecn::Ect1);
        link.queue_bytes = 1001;
        m.mark(MS, &link, &mut pkt);
        assert_eq!(pkt.ecn, Ecn::Ce);
    }

    #[test]
    fn the_decoder_reports_the_ce_fraction() {
        let mut d = PragueDecoder::default();
        for i in 0..400 {
            let ecn = if i % 4 == 0 { Ecn::Ce } else { Ecn::Ect1 };
            d.on_packet(MS, ecn, SchemeTag::new(WIRE.id()), 0);
        }
        let f = d.estimate(MS).load.get();
        assert!((f - 0.25).abs() < 0.07, "{f}");
        assert!(d.estimate(MS).level <= MAX_LEVEL);
    }

    #[test]
    fn a_marked_round_reduces_by_half_of_alpha() {
        let mut law = PragueLaw::new(LawConfig::with_mss(MSS));
        let r = rtt(100);
        // Slow start to 40 packets, then a CE ends it.
        law.on_ack(MS, 30 * MSS, &r);
        assert_eq!(law.window(), 40 * MSS);
        law.on_congestion(MS * 2, MS, Congestion::Ce, &r);
        // The receiver saw 10 % CE for a long time: α settles near 0.1.
        for round in 1..200u32 {
            law.on_feedback(MS * 100 * round, fb(0.1), &r);
            law.on_ack(MS * 100 * round, 0, &r);
        }
        assert!((law.alpha() - 0.1).abs() < 0.01, "α {}", law.alpha());
        let before = law.window() as f64;
        // Also a CE on a packet sent before the last reduction: the L4S
        // response answers every marked round.
        law.on_congestion(MS * 20_050, MS, Congestion::Ce, &r);
        law.on_ack(MS * 20_100, 0, &r);
        let after = law.window() as f64;
        assert!((after / before - 0.95).abs() < 0.01, "{before} -> {after}");
    }

    /// Marked rounds over a queue that stood 10 ms through them read as a
    /// classic AQM: after three, a marked round halves the window. Marked
    /// rounds over the L4S step's millisecond turn it back.
    #[test]
    fn marks_over_a_standing_queue_of_milliseconds_are_answered_as_reno() {
        let mut law = PragueLaw::new(LawConfig::with_mss(MSS));
        let base = MS * 40;
        let standing = |queue: Duration| RttSample {
            smoothed: base + queue,
            min: base,
            latest: base + queue,
        };
        // Leave slow start at 100 packets.
        law.on_ack(MS, 90 * MSS, &standing(MS));
        law.on_congestion(MS, MS, Congestion::Ce, &standing(MS));
        let mut now = MS;
        // One round: a window acked, CE if `marked`; returns the window's
        // change at the round's end.
        let mut round = |law: &mut PragueLaw, queue: Duration, marked: bool| {
            let r = standing(queue);
            now += base + queue;
            law.on_feedback(now, fb(0.02), &r);
            law.on_ack(now, law.window(), &r);
            if marked {
                law.on_congestion(now, now, Congestion::Ce, &r);
            }
            now += base + queue;
            let before = law.window() as f64;
            law.on_ack(now, 0, &r);
            law.window() as f64 / before
        };
        // α falls toward the 2 % the receiver reports.
        for _ in 0..80 {
            round(&mut law, MS, false);
        }
        let l4s = round(&mut law, MS, true);
        assert!(l4s > 0.97, "{l4s}");
        for _ in 0..3 {
            round(&mut law, MS * 10, true);
        }
        assert!(law.classic_ecn());
        let classic = round(&mut law, MS * 10, true);
        assert!((classic - 0.5).abs() < 0.01, "{classic}");
        // Unmarked rounds change nothing; L4S marks turn it back.
        round(&mut law, MS * 10, false);
        assert!(law.classic_ecn());
        round(&mut law, MS, true);
        round(&mut law, MS, true);
        assert!(!law.classic_ecn());
    }

    /// At a classic AQM Prague halves as Reno does, at most once per round
    /// trip (RFC 9331 §4.3, RFC 3168 §6.1.2): the CE marks of packets sent
    /// before a halving, which arrive in the round after it, do not halve
    /// again; a CE on a packet sent after it does.
    #[test]
    fn a_classic_halving_answers_the_marks_of_packets_sent_before_it() {
        let mut law = PragueLaw::new(LawConfig::with_mss(MSS));
        // 40 ms of path and 10 ms of standing queue: a classic AQM's.
        let r = RttSample {
            smoothed: MS * 50,
            min: MS * 40,
            latest: MS * 50,
        };
        let mut t = MS;
        // Slow start to 100 packets; the first round starts.
        law.on_ack(t, 90 * MSS, &r);
        // Three marked rounds over the standing queue make it classic; the
        // third halves.
        let mut before = 0;
        for _ in 0..3 {
            before = law.window();
            law.on_congestion(t + MS, t + MS, Congestion::Ce, &r);
            t += r.smoothed;
            law.on_ack(t, 0, &r);
        }
        assert!(law.classic_ecn());
        assert_eq!(law.window(), before / 2);
        let halved_at = t;
        // The next round brings CE for packets sent before the halving.
        let before = law.window();
        law.on_congestion(t + MS * 10, halved_at - MS * 10, Congestion::Ce, &r);
        law.on_congestion(t + MS * 20, halved_at, Congestion::Ce, &r);
        t += r.smoothed;
        law.on_ack(t, 0, &r);
        assert_eq!(law.window(), before, "halved twice for one event");
        assert!(law.classic_ecn());
        // The round after it, CE for a packet sent after the halving.
        law.on_congestion(t + MS * 10, halved_at + MS, Congestion::Ce, &r);
        t += r.smoothed;
        law.on_ack(t, 0, &r);
        assert_eq!(law.window(), before / 2);
    }

    /// A loss and the CE marks of one congestion event reduce the window
    /// once: a loss of a packet sent before an α/2 reduction is part of
    /// the event that reduction answered; one sent after it halves.
    #[test]
    fn a_loss_in_the_event_a_ce_reduction_answered_does_not_halve_again() {
        let mut law = PragueLaw::new(LawConfig::with_mss(MSS));
        let r = rtt(40);
        let mut t = MS;
        law.on_ack(t, 90 * MSS, &r);
        law.on_feedback(t, fb(1.0), &r);
        law.on_congestion(t + MS, t + MS, Congestion::Ce, &r);
        t += r.smoothed;
        law.on_ack(t, 0, &r);
        let reduced_at = t;
        let before = law.window();
        assert!(before < 100 * MSS, "the CE round reduced: {before}");
        law.on_congestion(t + MS, reduced_at - MS, Congestion::Loss, &r);
        assert_eq!(law.window(), before, "reduced twice for one event");
        law.on_congestion(t + MS * 2, reduced_at + MS, Congestion::Loss, &r);
        assert_eq!(law.window(), before / 2);
    }

    fn fb(fraction: f64) -> Feedback {
        Feedback {
            level: (fraction * LEVEL_SCALE) as u16,
            load: LoadFactor::new(fraction),
            fairing: false,
        }
    }

    #[test]
    fn the_window_is_paced_once_a_round_trip_is_known() {
        let mut law = PragueLaw::new(LawConfig::with_mss(MSS));
        assert_eq!(law.pacing_rate(), None);
        // The handshake's RTT, before any data was acked.
        law.on_rtt(&rtt(40));
        // Slow start: two packets out for each one acked.
        let per_rtt = law.window() as f64 / 0.040;
        let rate = law.pacing_rate().unwrap();
        assert!((rate - 2.0 * per_rtt).abs() < 1e-6, "{rate}");
        // After slow start, the window once per round trip.
        law.on_congestion(MS * 2, MS, Congestion::Ce, &rtt(40));
        let rate = law.pacing_rate().unwrap();
        assert!((rate - per_rtt).abs() < 1e-6, "{rate}");
        assert_eq!(law.pacing_burst(), Some(BURST));
    }

    #[test]
    fn short_rtts_grow_as_if_at_the_reference_rtt() {
        let grow = |rtt_ms: u64| {
            let mut law = PragueLaw::new(LawConfig::with_mss(MSS));
            law.on_congestion(MS, MS, Congestion::Loss, &rtt(rtt_ms));
            let start = law.window();
            // One window of acks, well after recovery.
            law.on_ack(MS * 10_000, start, &rtt(rtt_ms));
            law.window() - start
        };
        assert_eq!(grow(100), MSS, "one packet per round at 100 ms");
        // At 5 ms, (5 / 25)² of a packet per round: the rate grows as fast
        // as a 25 ms flow's.
        assert_eq!(grow(5), MSS / 25);
    }
}
