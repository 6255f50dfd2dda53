//! The sender's law ([`ErcLaw`]): paces at the path's advertised rate,
//! with a Cubic window beside it that loss and CE cut; Cubic while no
//! router speaks.

use std::time::Duration;

use super::{index_of, rate_of, MAX_INDEX, MAX_LEVEL, PARTIAL, WIRE};
use crate::schemes::cubic::{CubicLaw, CUBIC_BETA};
use crate::signal::{Congestion, Feedback, FirstPace, Law, LawConfig, LossEpoch, Mode, RttSample};
use crate::wire::ecn::SchemeTag;
/// Where the Cubic window sits while the advertised rate limits the flow, as
/// a multiple of rate × srtt: high enough that it never binds by accident
/// when the RTT wobbles. After a loss it is reduced from the rate the flow
/// really sent, not from here.
const CUBIC_HEADROOM: f64 = 1.5;

/// The window's round trip is at most this many times the path's least,
/// plus [`FLIGHT_RTT_SLACK`]. The transport lets a rate law have twice
/// its window in flight (`session::GATED_WINDOW_CAP`), which covers the
/// receiver's ACK delay; beyond it the window is what stops a flow that
/// meets a queue its router does not know of yet (a link whose capacity
/// fell). ecnq's own, from the `cellular-*` and `rate-steps` scenarios: at
/// 2.0 the flow's own queue reached a p95 of 101, 214 and 373 ms on the
/// three traces; at 1.25 it is 76, 135 and 179 ms at the same or more
/// throughput, and the rate steps' fall drops 663 packets instead of 937
/// (tests `the_window_does_not_grow_with_the_queue_the_flow_builds`,
/// `cellular_traces_side_by_side`).
const FLIGHT_RTT_MIN_MULTIPLE: f64 = 1.25;

/// What the window's round trip may exceed the path's least by whatever
/// the path: twice the pacing burst ([`BURST`]), which the sender lets out
/// at once and its timer may delay, so that a path of a fraction of a
/// millisecond (loopback) is not held to a window of a few packets.
const FLIGHT_RTT_SLACK: Duration = Duration::from_millis(2);

/// A start's RTT rise that tells a queue: RFC 9406 (HyStart++) §4.2's
/// MIN_RTT_DIVISOR, MIN_RTT_THRESH and MAX_RTT_THRESH.
const START_RTT_DIVISOR: u32 = 8;
const START_RTT_MIN: Duration = Duration::from_millis(4);
const START_RTT_MAX: Duration = Duration::from_millis(16);

/// What a start that raised the delay keeps of its initial window before
/// its chain is read (ecnq's own). Holding the whole window keeps the
/// queue it raised on a slow link; falling all the way to the bound slows
/// the chains of newcomers that arrive close together; half does neither
/// (`erc-staggered`; test
/// `a_start_that_raises_the_delay_falls_to_the_partial_chains_bound`).
const START_HOLD: f64 = 0.5;

/// The longest ramp to a flow's first reading. A ramp spreads an increase
/// the other flows have not made room for yet; room for a newcomer was made
/// when the router counted it, a round trip or more before its chain is
/// read, so at long RTTs a ramp over the whole round trip only leaves the
/// share unused (its rate moves on ACKs, and a start has few). A step at
/// once instead raises the queue at short RTTs (`erc-staggered`; test
/// `on_a_long_path_the_first_reading_is_reached_quickly`).
const FIRST_RAMP: Duration = Duration::from_millis(50);

/// The longest burst the sender's pacing lets out at once; what quinn did
/// not ask for in time goes out later, a burst at a time
/// ([`Law::pacing_catches_up`]). Issue 20 asks for an ecnq queue of at
/// most 2 ms at p99 beside Cubic: the transport's own 5 ms bursts waited
/// longer than that, and 1 ms bursts that did not catch up fell short of
/// the rate (the README's coexistence measurements).
const BURST: Duration = Duration::from_millis(1);

/// How many halvings below the most start code's pace a start falls at
/// its first congestion event. The most code is all a router can ask, the
/// initial window over four round trips, and it asks it of a crowd of any
/// size: 1000 flows over a second on 100 Mbit/s and 40 ms share 0.4
/// packets per round trip each, six times under that pace. A start that
/// was asked the most and then meets a loss is in such a crowd. ecnq's
/// own, from `erc-flash-1000` (loss over the run 7.6 % with Cubic's β
/// alone, 4.1 % with 3, 3.7 % with 4; test
/// `a_crowd_of_a_thousand_paces_below_its_least_windows`). Starts asked
/// less than the most keep Cubic's β: the router measured what they need
/// (`a_loss_in_a_start_asked_the_most_falls_far_below_the_code`).
const CROWD_HALVINGS: i32 = 4;

/// A rate moving from one value to another over a span of time.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Ramp {
    from: f64,
    to: f64,
    start: Duration,
    span: Duration,
}

impl Ramp {
    /// A rate taken at once.
    fn step(rate: f64, now: Duration) -> Ramp {
        Ramp {
            from: rate,
            to: rate,
            start: now,
            span: Duration::ZERO,
        }
    }

    fn at(&self, now: Duration) -> f64 {
        let done = now.saturating_sub(self.start).as_secs_f64() / self.span.as_secs_f64().max(1e-9);
        self.from + (self.to - self.from) * done.min(1.0)
    }
}

/// erc's sender (see the [scheme's docs](crate::schemes::erc)).
#[derive(Clone, Debug)]
pub struct ErcLaw {
    config: LawConfig,
    cubic: CubicLaw,
    /// The index of the newest report; 0: no erc router on the path.
    index: u16,
    /// The advertised rate the flow is moving to or at.
    ramp: Option<Ramp>,
    /// The advertised part of the rate, as of the last event.
    rate: f64,
    /// While the first chain is incomplete: the slowest rate it can still
    /// advertise. The Cubic start grows no further, and the sender paces at
    /// it (through [`ErcLaw::ramp`]) once it is above what the start sends.
    bound: Option<f64>,
    /// The pace the handshake's start code asked of the initial window
    /// ([`Law::pace_first_window`]): the start paces at it, or at the
    /// partial chain's bound once that is above it, until its first chain.
    first_pace: Option<f64>,
    /// Where the start code was the most: the pace its first congestion
    /// event drops the start to ([`CROWD_HALVINGS`]).
    crowd_pace: Option<f64>,
    /// Whether the Cubic window limits the flow below the advertised rate
    /// (after a loss or CE, until it has grown back); otherwise it follows
    /// the rate.
    cubic_binds: bool,
    /// The congestion events the start answered ([`ErcLaw::slow_the_start`]).
    start_loss: LossEpoch,
    /// Whether the marks come from the peer's ACK-ECN counts
    /// ([`Law::reads_ack_counts`]).
    reads_counts: bool,
    rtt: RttSample,
}

impl ErcLaw {
    /// A new erc sender: Cubic until a router speaks.
    pub fn new(config: LawConfig) -> ErcLaw {
        ErcLaw {
            cubic: CubicLaw::new(config),
            index: 0,
            ramp: None,
            rate: 0.0,
            cubic_binds: false,
            reads_counts: false,
            start_loss: LossEpoch::default(),
            bound: None,
            first_pace: None,
            crowd_pace: None,
            rtt: RttSample::uniform(Duration::from_millis(100)),
            config,
        }
    }

    fn srtt(&self) -> f64 {
        self.rtt.smoothed.as_secs_f64().max(1e-6)
    }

    /// The round trip the window covers at the rate: the smoothed one, but
    /// no more than [`FLIGHT_RTT_MIN_MULTIPLE`] times the path's least
    /// plus [`FLIGHT_RTT_SLACK`], so that a queue the flow builds (a link
    /// whose capacity fell below what the router last measured) does not
    /// lengthen its own window.
    fn flight_rtt(&self) -> f64 {
        let min = self.rtt.min.as_secs_f64();
        if min > 0.0 {
            let most = min * FLIGHT_RTT_MIN_MULTIPLE + FLIGHT_RTT_SLACK.as_secs_f64();
            self.srtt().min(most)
        } else {
            self.srtt()
        }
    }

    fn cubic_rate(&self) -> f64 {
        self.cubic.window() as f64 / self.srtt()
    }

    /// The rate the flow sends at: the advertised rate, or less where the
    /// Cubic window binds, but no less than [`ErcLaw::floor`]; none while
    /// no router speaks.
    fn sending_rate(&self) -> Option<f64> {
        let floor = self.floor();
        self.ramp
            .map(|_| self.rate.min(self.cubic_rate()).max(floor))
    }

    /// A congestion event before the first chain lowers the start's pace
    /// by Cubic's decrease of what it sent (RFC 8312's β, once per event),
    /// with no floor of a least window and no growth until the chain is
    /// read, but never below the partial chain's bound, which the router
    /// advertises at least. Before its first chain a flow knows no share:
    /// 1000 flows over a second on 100 Mbit/s and 40 ms (a share of 0.4
    /// packets per round trip each) held the start code's pace, three times
    /// the share, or a Cubic window's least, two packets per round trip,
    /// until they read their chains, 29 packets each: three seconds of a
    /// full buffer (`erc-flash-1000`; test
    /// `a_loss_in_the_start_lowers_its_pace`). Halving the pace instead
    /// cut that crowd's loss further (7.6 % to 5.8 %) but slowed the
    /// 10 Mbit/s web mix at 70 % load (2.19 to 2.22 × processor sharing).
    /// A start asked the most by its start code falls further, to
    /// [`ErcLaw::crowd_pace`], if that is lower. Where the marks come from
    /// ACK-ECN counts, the least window holds ([`ErcLaw::floor`]).
    fn slow_the_start(&mut self, now: Duration, sent: Duration, sent_at: f64) {
        let spoke = self.ramp.is_some() || self.bound.is_some();
        if self.index != 0 || !spoke || self.reads_counts || !self.start_loss.begins(now, sent) {
            return;
        }
        let pace = (sent_at * CUBIC_BETA).min(self.crowd_pace.unwrap_or(f64::INFINITY));
        self.first_pace = Some(pace);
        let to = self.bound.map_or(pace, |bound| bound.max(pace));
        self.ramp = Some(Ramp::step(to, now));
        self.rate = to;
    }

    /// The least the flow sends while a router speaks: the least window per
    /// round trip where the router advertises its scale's floor (a link in
    /// an outage) or where the marks come from the peer's ACK-ECN counts,
    /// none elsewhere. The router's rate rides on the flow's own packets:
    /// paced at the floor (10 kbit/s) a flow took seconds to read the next
    /// rate once the link was back, while its window, the least one,
    /// already keeps the queue short (test
    /// `a_flow_told_the_floor_still_sends_its_least_window_per_round_trip`);
    /// and a count reader reads a rate only from what its peer's ACK
    /// frames acknowledge: below two packets per round trip the 10 Mbit/s
    /// web mix's flows read so seldom that they finished 17 % later with
    /// frames of two packets and 45 % later with frames of ten
    /// (`ack_counts::web_flows_read_from_counts_finish_about_as_fast_as_from_the_receiver`).
    /// Any other rate is the flow's share, even below a packet per round
    /// trip: 1000 flows on 100 Mbit/s and 40 ms share 0.4 packets each, and
    /// two per round trip kept that link's buffer full and dropping 29 %
    /// of what came (`erc-flash-1000`; test
    /// `a_flow_told_a_share_below_its_least_window_paces_at_the_share`).
    fn floor(&self) -> f64 {
        let least = self.config.min_window as f64 / self.srtt();
        match self.advertised() {
            _ if self.reads_counts => least,
            Some(to) if index_of(to) == MAX_INDEX => least,
            _ => 0.0,
        }
    }

    /// Stops a Cubic start from growing past the partial chain's bound.
    /// While the path's delay has not risen it never shrinks the window: the
    /// bound is loose until most digits are in, and a flow held under it
    /// would receive the rest of its chain ever more slowly. Once the delay
    /// has risen, the flow's own start (its initial window, on a slow link)
    /// is a queue the router cannot drain until the chain is read: the
    /// window falls to [`START_HOLD`] of the initial window, or the bound's
    /// if that is larger.
    fn limit_start(&mut self, before: u64) {
        if let Some(bound) = self.bound {
            let hold = if self.delay_rose() {
                START_HOLD * self.config.initial_window as f64
            } else {
                before as f64
            };
            self.cubic.limit(
                (bound * self.srtt())
                    .max(hold)
                    .max(self.config.min_window as f64),
            );
        }
    }

    /// Whether the latest RTT is above the minimum by HyStart++'s threshold
    /// (RFC 9406 §4.2: an eighth of the minimum, within 4–16 ms), which
    /// tells a queue from jitter.
    fn delay_rose(&self) -> bool {
        let threshold = (self.rtt.min / START_RTT_DIVISOR).clamp(START_RTT_MIN, START_RTT_MAX);
        self.rtt.latest >= self.rtt.min + threshold
    }

    /// Paces at the partial chain's bound once it is above what the start
    /// sends, unless the delay has risen, and follows it from then on, down
    /// as well as up: the router advertises at least that rate, and more
    /// packets complete the chain sooner: a newcomer on a long path held to
    /// its initial window needs about three round trips to read its first
    /// chain (`erc-staggered`; test
    /// `a_partial_chain_lets_the_start_send_the_slowest_rate_it_can_spell`).
    fn send_the_bound(&mut self, now: Duration) {
        let Some(bound) = self.bound else {
            return;
        };
        let bound = self.first_pace.map_or(bound, |pace| bound.max(pace));
        let pacing = self.ramp.is_some();
        if pacing || (bound > self.cubic_rate() && !self.delay_rose()) {
            self.ramp = Some(Ramp::step(bound, now));
            let rtt = self.rtt;
            self.advance(now, &rtt);
        }
    }

    fn advance(&mut self, now: Duration, rtt: &RttSample) {
        self.rtt = *rtt;
        if let Some(ramp) = self.ramp {
            self.rate = ramp.at(now);
            let window = self.rate * self.srtt();
            if self.cubic_binds && self.cubic.window() as f64 >= window {
                self.cubic_binds = false;
            }
            if !self.cubic_binds {
                self.cubic.set_window(CUBIC_HEADROOM * window);
            }
        }
    }

    /// The advertised rate, bytes per second, while a router speaks.
    pub fn advertised(&self) -> Option<f64> {
        self.ramp.map(|r| r.to)
    }
}

impl Law for ErcLaw {
    fn on_ack(&mut self, now: Duration, acked_bytes: u64, rtt: &RttSample) {
        let before = self.cubic.window();
        self.cubic.on_ack(now, acked_bytes, rtt);
        self.advance(now, rtt);
        self.limit_start(before);
    }

    /// A crowd's initial windows go out before any router can answer
    /// them; the start code slows this one to a pace the router expects
    /// the crowd to share (test `a_start_code_paces_the_initial_window`).
    fn pace_first_window(&mut self, now: Duration, pace: FirstPace, rtt: &RttSample) {
        if self.index != 0 || self.ramp.is_some() {
            return;
        }
        let rate = pace.rate;
        self.first_pace = Some(rate);
        self.crowd_pace = pace.most.then(|| rate / 2f64.powi(CROWD_HALVINGS));
        self.ramp = Some(Ramp::step(rate, now));
        self.advance(now, rtt);
    }

    fn reads_ack_counts(&mut self, counts: bool) {
        self.reads_counts = counts;
    }

    fn on_feedback(&mut self, now: Duration, feedback: Feedback, rtt: &RttSample) {
        self.advance(now, rtt);
        if feedback.level >= PARTIAL {
            if self.index == 0 {
                self.bound = rate_of(feedback.level.min(MAX_LEVEL) - PARTIAL);
                self.send_the_bound(now);
            }
            return;
        }
        self.bound = None;
        let index = feedback.level.min(MAX_INDEX);
        if index == self.index {
            return;
        }
        let first = self.index == 0;
        self.index = index;
        let Some(target) = rate_of(index) else {
            // The router left the path: Cubic from the rate the flow sent.
            if let Some(rate) = self.sending_rate() {
                self.cubic.set_window(rate * self.srtt());
            }
            self.ramp = None;
            self.cubic_binds = false;
            return;
        };
        // While the Cubic window binds (a loss or CE downstream), the ramp
        // moves the advertised part only: starting it at the Cubic rate
        // released the binding at once and undid the loss's reduction
        // whenever the index changed.
        let current = match self.sending_rate() {
            Some(_) if self.cubic_binds => self.rate,
            Some(rate) => rate,
            None => self.cubic_rate(),
        };
        let span = if first {
            self.rtt.smoothed.min(FIRST_RAMP)
        } else {
            self.rtt.smoothed
        };
        self.ramp = Some(if target <= current {
            Ramp::step(target, now)
        } else {
            Ramp {
                from: current.max(self.config.min_window as f64 / self.srtt()),
                to: target,
                start: now,
                span,
            }
        });
        self.advance(now, rtt);
    }

    fn on_congestion(&mut self, now: Duration, sent: Duration, kind: Congestion, rtt: &RttSample) {
        self.advance(now, rtt);
        if let Some(rate) = self.sending_rate() {
            if !self.cubic_binds {
                // Cubic's decrease applies to what the flow sent, not to
                // the headroom above it.
                self.cubic.set_window(rate * self.srtt());
            }
        }
        let sent_at = self.sending_rate().unwrap_or_else(|| self.cubic_rate());
        let before = self.cubic.window();
        self.cubic.on_congestion(now, sent, kind, rtt);
        if self.ramp.is_some() && self.cubic.window() < before {
            self.cubic_binds = true;
        }
        self.slow_the_start(now, sent, sent_at);
    }

    fn window(&self) -> u64 {
        match self.sending_rate() {
            Some(rate) => self.config.clamp(rate * self.flight_rtt()) as u64,
            None => self.cubic.window(),
        }
    }

    fn pacing_rate(&self) -> Option<f64> {
        self.sending_rate()
    }

    fn on_idle_restart(&mut self, now: Duration, _idle: Duration) {
        // The router may have handed the silent flow's share to others,
        // who send it until the flow's return reaches them: send the
        // initial window's rate for a round trip, as at the start, then
        // ramp back up over the next, rather than adding the whole old
        // rate at once. The rate moves only on ACKs, and the first come a
        // round trip after the return: a ramp over that first round trip
        // would be a step at its end.
        if let Some(ramp) = self.ramp {
            let restart = self.config.initial_window as f64 / self.srtt();
            self.ramp = Some(Ramp {
                from: restart.min(ramp.to),
                to: ramp.to,
                start: now + self.rtt.smoothed,
                span: self.rtt.smoothed,
            });
            let rtt = self.rtt;
            self.advance(now, &rtt);
        }
    }

    fn pacing_burst(&self) -> Option<Duration> {
        Some(BURST)
    }

    fn pacing_catches_up(&self) -> bool {
        // The rate is the router's share: what quinn did not ask for in
        // time goes out later, or the flow falls short of it.
        true
    }

    fn mode(&self) -> Mode {
        match self.sending_rate() {
            Some(rate) if rate >= self.rate => Mode::ExplicitRate,
            _ => self.cubic.mode(),
        }
    }

    fn tag(&self) -> SchemeTag {
        SchemeTag::new(WIRE.id())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schemes::erc::index_of;

    const MS: Duration = Duration::from_millis(1);

    /// A start code's pace of `rate`, the most a flight carries or not.
    fn code(rate: f64, most: bool) -> FirstPace {
        FirstPace { rate, most }
    }

    fn feedback(index: u16) -> Feedback {
        Feedback {
            level: index,
            ..Feedback::default()
        }
    }

    #[test]
    fn the_sender_is_cubic_until_a_router_speaks_then_paces_at_its_rate() {
        let config = LawConfig::with_mss(1_000);
        let rtt = RttSample::uniform(MS * 40);
        let mut law = ErcLaw::new(config);
        assert_eq!(law.pacing_rate(), None);
        law.on_feedback(MS, feedback(0), &rtt);
        assert_eq!(law.mode(), Mode::SlowStart);
        let index = index_of(1e6);
        let target = rate_of(index).unwrap();
        law.on_feedback(MS * 10, feedback(index), &rtt);
        // Ramped from the Cubic window's rate to the target over one srtt.
        let start = law.pacing_rate().unwrap();
        assert!(start < target / 2.0, "{start}");
        law.on_ack(MS * 30, 1_000, &rtt);
        let half = law.pacing_rate().unwrap();
        assert!(half > start && half < target, "{half}");
        law.on_ack(MS * 60, 1_000, &rtt);
        assert!((law.pacing_rate().unwrap() - target).abs() < 1.0);
        assert_eq!(law.mode(), Mode::ExplicitRate);
        // A decrease is taken at once.
        law.on_feedback(MS * 61, feedback(index + 40), &rtt);
        assert!((law.pacing_rate().unwrap() - rate_of(index + 40).unwrap()).abs() < 1.0);
    }

    #[test]
    fn a_flow_told_the_floor_still_sends_its_least_window_per_round_trip() {
        let config = LawConfig::with_mss(1_000);
        let rtt = RttSample::uniform(MS * 50);
        let mut law = ErcLaw::new(config);
        law.on_feedback(MS, feedback(index_of(1e6)), &rtt);
        law.on_feedback(MS * 2, feedback(MAX_INDEX), &rtt);
        let least = config.min_window as f64 / 0.05;
        assert!(rate_of(MAX_INDEX).unwrap() < least / 10.0);
        assert!((law.pacing_rate().unwrap() / least - 1.0).abs() < 1e-9);
        assert_eq!(law.window(), config.min_window);
    }

    #[test]
    fn a_flow_told_a_share_below_its_least_window_paces_at_the_share() {
        let config = LawConfig::with_mss(1_000);
        let rtt = RttSample::uniform(MS * 40);
        let share = 0.4 * config.mss as f64 / 0.04;
        let told = |counts: bool| {
            let mut law = ErcLaw::new(config);
            law.reads_ack_counts(counts);
            law.on_feedback(MS, feedback(index_of(1e6)), &rtt);
            law.on_feedback(MS * 2, feedback(index_of(share)), &rtt);
            assert_eq!(law.window(), config.min_window);
            law.pacing_rate().unwrap()
        };
        let share = rate_of(index_of(share)).unwrap();
        let least = config.min_window as f64 / 0.04;
        assert!(share < least / 4.0);
        assert!((told(false) / share - 1.0).abs() < 1e-9);
        // A count reader keeps its least window per round trip.
        assert!((told(true) / least - 1.0).abs() < 1e-9);
    }

    #[test]
    fn the_window_does_not_grow_with_the_queue_the_flow_builds() {
        let mut law = ErcLaw::new(LawConfig::with_mss(1_000));
        let quiet = RttSample::uniform(MS * 50);
        let index = index_of(1e6);
        law.on_feedback(MS, feedback(index), &quiet);
        law.on_ack(MS * 100, 1_000, &quiet);
        let rate = rate_of(index).unwrap();
        assert!((law.window() as f64 - rate * 0.05).abs() <= 1.0);
        // A queue of 70 ms: the window covers the least round trip and a
        // little more, not the smoothed one.
        let queued = RttSample {
            smoothed: MS * 120,
            min: MS * 50,
            latest: MS * 120,
        };
        law.on_ack(MS * 200, 1_000, &queued);
        let want = rate * (0.05 * FLIGHT_RTT_MIN_MULTIPLE + FLIGHT_RTT_SLACK.as_secs_f64());
        assert!(
            (law.window() as f64 - want).abs() <= 1.0,
            "{}",
            law.window()
        );
        assert!((law.pacing_rate().unwrap() / rate - 1.0).abs() < 1e-9);
    }

    /// On a long path the first reading is reached within [`FIRST_RAMP`]:
    /// the router made room for the flow when it counted it. Later
    /// increases still ramp over a round trip.
    #[test]
    fn on_a_long_path_the_first_reading_is_reached_quickly() {
        let rtt = RttSample::uniform(MS * 1_000);
        let mut law = ErcLaw::new(LawConfig::with_mss(1_000));
        let index = index_of(1e6);
        law.on_feedback(MS * 10, feedback(index), &rtt);
        law.on_ack(MS * 10 + FIRST_RAMP, 1_000, &rtt);
        let first = rate_of(index).unwrap();
        assert!((law.pacing_rate().unwrap() / first - 1.0).abs() < 1e-9);
        let higher = rate_of(index - 40).unwrap();
        law.on_feedback(MS * 100, feedback(index - 40), &rtt);
        law.on_ack(MS * 100 + FIRST_RAMP, 1_000, &rtt);
        let rate = law.pacing_rate().unwrap();
        assert!(rate > first && rate < 0.1 * first + 0.9 * higher, "{rate}");
        law.on_ack(MS * 1_100, 1_000, &rtt);
        assert!((law.pacing_rate().unwrap() / higher - 1.0).abs() < 1e-9);
    }

    #[test]
    fn a_start_that_raises_the_delay_falls_to_the_partial_chains_bound() {
        let config = LawConfig::with_mss(1_000);
        let initial = config.initial_window;
        let mut law = ErcLaw::new(config);
        // A partial chain that can still spell 20 kB/s at the slowest: a
        // window of 800 bytes at 40 ms, under the initial window.
        let bound = index_of(20e3);
        let quiet = RttSample::uniform(MS * 40);
        law.on_feedback(MS * 40, feedback(PARTIAL + bound), &quiet);
        // Delay as at the start: the window is held where it was.
        law.on_ack(MS * 41, 1_000, &quiet);
        assert_eq!(law.window(), initial);
        // Delay up by less than the threshold (5 ms at 40 ms): still held.
        let jitter = RttSample {
            latest: MS * 44,
            ..quiet
        };
        law.on_ack(MS * 42, 1_000, &jitter);
        assert_eq!(law.window(), initial);
        // A queue: the window falls to half the initial window, above the
        // bound's.
        let queued = RttSample {
            latest: MS * 60,
            ..quiet
        };
        law.on_ack(MS * 43, 1_000, &queued);
        assert_eq!(law.window(), initial / 2);
        // A bound above that holds the window at the bound's.
        let mut law = ErcLaw::new(config);
        law.on_feedback(MS * 40, feedback(PARTIAL + index_of(200e3)), &quiet);
        law.on_ack(MS * 41, 1_000, &queued);
        let bound = rate_of(index_of(200e3)).unwrap() * 0.040;
        assert!(
            (law.window() as f64 - bound).abs() <= 1.0,
            "{}",
            law.window()
        );
    }

    /// The slowest rate a partial chain can still spell is one the router
    /// advertises: the start paces at it once it is above what the start
    /// sends, and follows it down; not once its delay has risen.
    #[test]
    fn a_partial_chain_lets_the_start_send_the_slowest_rate_it_can_spell() {
        let config = LawConfig::with_mss(1_000);
        let quiet = RttSample::uniform(MS * 40);
        let mut law = ErcLaw::new(config);
        let bound = |rate: f64| feedback(PARTIAL + index_of(rate));
        let paced = |law: &ErcLaw| law.pacing_rate().map(index_of);
        law.on_feedback(MS * 40, bound(1e6), &quiet);
        assert_eq!(paced(&law), Some(index_of(1e6)));
        assert_eq!(law.mode(), Mode::ExplicitRate);
        law.on_feedback(MS * 41, bound(5e5), &quiet);
        assert_eq!(paced(&law), Some(index_of(5e5)));
        // The whole chain: ramped to from the bound within a round trip.
        law.on_feedback(MS * 42, feedback(index_of(2e6)), &quiet);
        law.on_ack(MS * 62, 1_000, &quiet);
        let half = law.pacing_rate().unwrap();
        assert!(half > 5e5 && half < 2e6, "{half}");
        law.on_ack(MS * 82, 1_000, &quiet);
        assert_eq!(paced(&law), Some(index_of(2e6)));
        // A bound under what the start sends changes nothing.
        let mut law = ErcLaw::new(config);
        law.on_feedback(MS * 40, bound(1e5), &quiet);
        assert_eq!(law.pacing_rate(), None);
        // Nor does one that comes once the delay has risen.
        let queued = RttSample {
            latest: MS * 60,
            ..quiet
        };
        law.on_feedback(MS * 41, bound(1e6), &queued);
        assert_eq!(law.pacing_rate(), None);
    }

    /// The start code paces the initial window; the partial chain's
    /// bound takes over only above it, and the first whole chain as usual.
    #[test]
    fn a_start_code_paces_the_initial_window() {
        let config = LawConfig::with_mss(1_000);
        let quiet = RttSample::uniform(MS * 40);
        let mut law = ErcLaw::new(config);
        let paced = |law: &ErcLaw| law.pacing_rate().map(index_of);
        let start = config.initial_window as f64 / 0.04;
        law.pace_first_window(MS * 40, code(start / 4.0, true), &quiet);
        assert_eq!(paced(&law), Some(index_of(start / 4.0)));
        let bound = |rate: f64| feedback(PARTIAL + index_of(rate));
        law.on_feedback(MS * 41, bound(start / 100.0), &quiet);
        assert_eq!(paced(&law), Some(index_of(start / 4.0)));
        law.on_feedback(MS * 42, bound(start / 2.0), &quiet);
        assert_eq!(paced(&law), Some(index_of(start / 2.0)));
        law.on_feedback(MS * 43, feedback(index_of(start)), &quiet);
        law.on_ack(MS * 93, 1_000, &quiet);
        assert_eq!(paced(&law), Some(index_of(start)));
        // Once a router has spoken, a late code changes nothing.
        law.pace_first_window(MS * 94, code(start / 4.0, true), &quiet);
        assert_eq!(paced(&law), Some(index_of(start)));
    }

    #[test]
    fn a_loss_in_the_start_lowers_its_pace() {
        let config = LawConfig::with_mss(1_000);
        let rtt = RttSample::uniform(MS * 40);
        let least = config.min_window as f64 / 0.04;
        let start = |counts: bool| {
            let mut law = ErcLaw::new(config);
            law.reads_ack_counts(counts);
            law.pace_first_window(MS * 40, code(least, false), &rtt);
            law
        };
        let mut law = start(false);
        law.on_congestion(MS * 50, MS * 45, Congestion::Loss, &rtt);
        let once = least * CUBIC_BETA;
        assert!((law.pacing_rate().unwrap() / once - 1.0).abs() < 1e-9);
        // One decrease per congestion event, none undone by ACKs or a
        // looser partial chain.
        law.on_congestion(MS * 51, MS * 46, Congestion::Loss, &rtt);
        law.on_ack(MS * 90, 1_000, &rtt);
        law.on_feedback(MS * 91, feedback(PARTIAL + index_of(once / 8.0)), &rtt);
        assert!((law.pacing_rate().unwrap() / once - 1.0).abs() < 1e-9);
        law.on_congestion(MS * 100, MS * 95, Congestion::Ce, &rtt);
        let twice = once * CUBIC_BETA;
        assert!((law.pacing_rate().unwrap() / twice - 1.0).abs() < 1e-9);
        // Never below what the partial chain says the router advertises.
        let bound = rate_of(index_of(once)).unwrap();
        law.on_feedback(MS * 101, feedback(PARTIAL + index_of(once)), &rtt);
        assert!((law.pacing_rate().unwrap() / bound - 1.0).abs() < 1e-9);
        // A reader of ACK-ECN counts keeps its least window per round trip.
        let mut law = start(true);
        law.on_congestion(MS * 50, MS * 45, Congestion::Loss, &rtt);
        law.on_congestion(MS * 100, MS * 95, Congestion::Loss, &rtt);
        assert!(law.pacing_rate().unwrap() >= least * (1.0 - 1e-9));
    }

    /// A start asked the most by its code is in a crowd the code may not
    /// have measured: its first loss drops it [`CROWD_HALVINGS`] below the
    /// code's pace, the next ones by Cubic's β. A start asked less keeps
    /// Cubic's β.
    #[test]
    fn a_loss_in_a_start_asked_the_most_falls_far_below_the_code() {
        let config = LawConfig::with_mss(1_000);
        let rtt = RttSample::uniform(MS * 40);
        let pace = config.initial_window as f64 / 0.04 / 4.0;
        let after_losses = |most: bool| {
            let mut law = ErcLaw::new(config);
            law.pace_first_window(MS * 40, code(pace, most), &rtt);
            law.on_congestion(MS * 50, MS * 45, Congestion::Loss, &rtt);
            let once = law.pacing_rate().unwrap();
            law.on_congestion(MS * 100, MS * 95, Congestion::Loss, &rtt);
            (once, law.pacing_rate().unwrap())
        };
        let crowd = pace / 2f64.powi(CROWD_HALVINGS);
        let (once, twice) = after_losses(true);
        assert!((once / crowd - 1.0).abs() < 1e-9, "{once} vs {crowd}");
        assert!((twice / (crowd * CUBIC_BETA) - 1.0).abs() < 1e-9, "{twice}");
        let (once, _) = after_losses(false);
        assert!((once / (pace * CUBIC_BETA) - 1.0).abs() < 1e-9, "{once}");
    }

    #[test]
    fn loss_holds_the_sender_under_the_advertised_rate_as_cubic_would() {
        let config = LawConfig::with_mss(1_000);
        let rtt = RttSample::uniform(MS * 40);
        let mut law = ErcLaw::new(config);
        let index = index_of(1e6);
        law.on_feedback(MS, feedback(index), &rtt);
        law.on_ack(MS * 100, 1_000, &rtt);
        let rate = law.pacing_rate().unwrap();
        law.on_congestion(MS * 101, MS * 100, Congestion::Loss, &rtt);
        let after = law.pacing_rate().unwrap();
        assert!((after / rate - 0.7).abs() < 0.02, "{after} vs {rate}");
        // A CE in the same round trip is the same congestion event.
        law.on_congestion(MS * 102, MS * 99, Congestion::Ce, &rtt);
        assert!((law.pacing_rate().unwrap() / after - 1.0).abs() < 1e-9);
        // The router's rate is never exceeded as the window regrows.
        let mut now = MS * 102;
        for _ in 0..2_000 {
            now += MS * 5;
            law.on_ack(now, 5_000, &rtt);
            assert!(law.pacing_rate().unwrap() <= rate + 1.0);
        }
        assert!((law.pacing_rate().unwrap() / rate - 1.0).abs() < 0.01);
    }

    /// A new index while a loss holds the sender under the advertised rate
    /// moves the advertised part only: the window stays where the loss put
    /// it. Ramping from the Cubic rate released the hold at every new
    /// index, so behind an erc router whose share wobbled between two
    /// levels, a flow at a DualPI2 bottleneck downstream took most of the
    /// link from Cubic (`l4s-erc-then-dualpi2`).
    #[test]
    fn a_new_index_keeps_a_loss_reduction() {
        let (_, rtt, mut law, _) = told_1_mbyte_per_s();
        law.on_ack(MS * 100, 1_000, &rtt);
        law.on_congestion(MS * 101, MS * 100, Congestion::Loss, &rtt);
        let held = law.pacing_rate().unwrap();
        for (k, rate) in [1.1e6, 1.2e6, 1.1e6, 0.9e6].into_iter().enumerate() {
            let now = MS * (110 + 50 * k as u32);
            law.on_feedback(now, feedback(index_of(rate)), &rtt);
            law.on_ack(now + MS * 40, 1_000, &rtt);
            let sending = law.pacing_rate().unwrap();
            assert!(sending < held * 1.05, "{sending} after {held}, told {rate}");
        }
    }

    /// A sender on a 40 ms path told 1 MB/s at 1 ms: its config, RTT, law
    /// and the rate it was told.
    fn told_1_mbyte_per_s() -> (LawConfig, RttSample, ErcLaw, f64) {
        let config = LawConfig::with_mss(1_000);
        let rtt = RttSample::uniform(MS * 40);
        let mut law = ErcLaw::new(config);
        law.on_feedback(MS, feedback(index_of(1e6)), &rtt);
        (config, rtt, law, rate_of(index_of(1e6)).unwrap())
    }

    /// A flow that paused (nothing in flight for two seconds) sends its
    /// initial window's rate for a round trip, then ramps back up over the
    /// next, never above the rate it was told.
    #[test]
    fn after_a_pause_the_rate_ramps_back_up_over_the_second_round_trip() {
        let (config, rtt, mut law, told) = told_1_mbyte_per_s();
        law.on_ack(MS * 100, 1_000, &rtt);
        assert!((law.pacing_rate().unwrap() / told - 1.0).abs() < 1e-9);
        // Silent until 2.1 s.
        let resume = MS * 2_100;
        law.on_idle_restart(resume, MS * 2_000);
        let restart = config.initial_window as f64 / 0.040;
        assert!((law.pacing_rate().unwrap() / restart - 1.0).abs() < 1e-9);
        // The first ACKs come a round trip later: the ramp starts there.
        law.on_ack(resume + MS * 40, 1_000, &rtt);
        assert!((law.pacing_rate().unwrap() / restart - 1.0).abs() < 1e-9);
        law.on_ack(resume + MS * 60, 1_000, &rtt);
        let half = law.pacing_rate().unwrap();
        assert!(half > restart && half < told, "{half}");
        law.on_ack(resume + MS * 80, 1_000, &rtt);
        assert!((law.pacing_rate().unwrap() / told - 1.0).abs() < 1e-9);
        // With no router on the path there is no rate to ramp to.
        let mut cubic = ErcLaw::new(config);
        cubic.on_idle_restart(resume, MS * 2_000);
        assert_eq!(cubic.pacing_rate(), None);
    }

    /// Feedback that stops (lost reports, a silent receiver) never lets the
    /// sender above the last rate it was told.
    #[test]
    fn silent_feedback_never_lifts_the_rate() {
        let (_, rtt, mut law, told) = told_1_mbyte_per_s();
        for ms in 2..10_000u32 {
            law.on_ack(MS * ms, 1_000, &rtt);
            let rate = law.pacing_rate().unwrap();
            assert!(rate <= told * (1.0 + 1e-9), "{rate} over {told} at {ms} ms");
        }
        assert!(
            (law.pacing_rate().unwrap() / told - 1.0).abs() < 1e-6,
            "holds"
        );
    }

    #[test]
    fn a_router_that_leaves_hands_the_flow_to_cubic_at_its_rate() {
        let config = LawConfig::with_mss(1_000);
        let rtt = RttSample::uniform(MS * 40);
        let mut law = ErcLaw::new(config);
        law.on_feedback(MS, feedback(index_of(1e6)), &rtt);
        law.on_ack(MS * 100, 1_000, &rtt);
        let rate = law.pacing_rate().unwrap();
        law.on_feedback(MS * 200, feedback(0), &rtt);
        assert_eq!(law.pacing_rate(), None);
        let window = law.window() as f64;
        assert!((window / (rate * 0.04) - 1.0).abs() < 0.02, "{window}");
    }
}
