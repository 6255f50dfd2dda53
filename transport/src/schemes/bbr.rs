//! BBR v1 as draft-cardwell-iccrg-bbr-congestion-control-00 ("the draft")
//! specifies it: the BBR baseline of both the simulator and the real stack,
//! which runs it through the connection's session as it runs erc's law
//! (`CongestionControl::Bbr`). It is a baseline, not a scheme: its packets
//! are untagged Not-ECT and the registry does not list it.
//!
//! It paces at a gain times its bottleneck-bandwidth estimate (the largest
//! delivery rate of the last ten round trips) and caps what it has in flight
//! at a gain times that estimate times the smallest RTT of the last 10 s.
//! Where the draft reads per-packet delivery state and the bytes in flight,
//! which a [`Law`] does not see, the law measures delivery per round trip
//! on the ACK clock (the bytes acknowledged over one smoothed RTT), takes
//! what it acknowledged over the last round trip as what it has in flight
//! (Little's law), and moves through ProbeBW's gain cycle on time alone.
//! A delivery rate taken over a whole round trip is not raised by ACKs
//! that come in bunches (a cellular link's, or a receiver's ACK delay);
//! one taken between two ACKs, as quinn's BBR does, is, and its window
//! grows with it (docs/design.md §2, "BBR").
//! Like BBR v1 it slows down for neither loss nor CE; the draft's packet
//! conservation in recovery, one round trip long, is left out.

use std::collections::VecDeque;
use std::time::Duration;

use crate::signal::{Congestion, Feedback, Law, LawConfig, Mode, RttSample};
use crate::wire::ecn::SchemeTag;

/// Startup's pacing and window gain, 2/ln 2: the smallest that doubles the
/// delivery rate every round trip (the draft's BBRHighGain).
const HIGH_GAIN: f64 = 2.885;
/// The window gain in ProbeBW (the draft's cwnd_gain outside Startup and Drain).
const CWND_GAIN: f64 = 2.0;
/// ProbeBW's pacing gains, one round trip each (the draft's BBRGainCycleLen = 8).
const GAIN_CYCLE: [f64; 8] = [1.25, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];
/// The bandwidth estimate is the largest delivery rate of this many round
/// trips (the draft's BtlBwFilterLen).
const BW_FILTER_ROUNDS: u64 = 10;
/// The RTT estimate is the smallest of this long (the draft's RTpropFilterLen).
const RTT_FILTER: Duration = Duration::from_secs(10);
/// ProbeRTT holds the window at [`MIN_PIPE_PACKETS`] this long (the draft's
/// ProbeRTTDuration).
const PROBE_RTT_TIME: Duration = Duration::from_millis(200);
/// The smallest window, packets (the draft's BBRMinPipeCwnd).
const MIN_PIPE_PACKETS: f64 = 4.0;
/// Startup ends after this many round trips in which the bandwidth estimate
/// grew by less than [`FULL_BW_GROWTH`] (the draft's full-pipe check).
const FULL_BW_ROUNDS: u32 = 3;
/// See [`FULL_BW_ROUNDS`].
const FULL_BW_GROWTH: f64 = 1.25;
/// Packets added to the window target for the sender's and receiver's
/// batching (the draft's quantization budget, 3 × SMSS).
const QUANTIZATION_PACKETS: f64 = 3.0;

/// Where the law is in the draft's state machine.
#[derive(Clone, Copy, Debug, PartialEq)]
enum State {
    /// Doubling the rate every round trip until the bandwidth stops growing.
    Startup,
    /// Pacing under the bandwidth until Startup's queue is gone.
    Drain,
    /// Cycling through [`GAIN_CYCLE`]; `phase` began at `since`.
    ProbeBw { phase: usize, since: Duration },
    /// The window at [`MIN_PIPE_PACKETS`] until `until`, to measure the RTT
    /// without its own queue: one smoothed RTT for the flight to fall to
    /// that (the draft watches the bytes in flight) and [`PROBE_RTT_TIME`];
    /// then the window it had before again.
    ProbeRtt { until: Duration },
}

/// One delivery-rate sample per round trip, on the ACK clock.
#[derive(Clone, Debug, Default)]
struct DeliveryRate {
    /// Bytes acknowledged since the round trip began.
    delivered: u64,
    /// When the current round trip began.
    since: Option<Duration>,
    /// Round trips ended so far.
    rounds: u64,
    /// The bytes acknowledged over the last whole round trip.
    last_round: u64,
    /// The last [`BW_FILTER_ROUNDS`] samples (round, bytes per second).
    samples: VecDeque<(u64, f64)>,
}

impl DeliveryRate {
    /// `acked` bytes acknowledged at `now`; returns whether a round trip of
    /// `round` ended.
    fn on_ack(&mut self, now: Duration, acked: u64, round: Duration) -> bool {
        let since = *self.since.get_or_insert(now);
        self.delivered += acked;
        let elapsed = now.saturating_sub(since);
        if elapsed < round || elapsed.is_zero() {
            return false;
        }
        let rate = self.delivered as f64 / elapsed.as_secs_f64();
        self.rounds += 1;
        self.samples.push_back((self.rounds, rate));
        while self
            .samples
            .front()
            .is_some_and(|&(r, _)| r + BW_FILTER_ROUNDS <= self.rounds)
        {
            self.samples.pop_front();
        }
        self.last_round = self.delivered;
        self.delivered = 0;
        self.since = Some(now);
        true
    }

    /// The bottleneck-bandwidth estimate, bytes per second.
    fn max(&self) -> Option<f64> {
        self.samples.iter().map(|&(_, r)| r).reduce(f64::max)
    }
}

/// BBR v1 (see the module doc).
#[derive(Clone, Debug)]
pub struct Bbr {
    config: LawConfig,
    state: State,
    rate: DeliveryRate,
    /// The smallest RTT of the last [`RTT_FILTER`], and when it was seen.
    min_rtt: Option<(Duration, Duration)>,
    /// The latest smoothed RTT, for the first flight's pacing.
    srtt: Option<Duration>,
    /// Startup's full-pipe check: the estimate it last grew to, and the
    /// round trips since.
    full_bw: f64,
    full_bw_rounds: u32,
    /// Whether Startup has found the pipe full (the draft's filled_pipe).
    filled: bool,
    cwnd: f64,
    pacing: f64,
}

impl Bbr {
    /// A BBR sender at the start of a connection.
    pub fn new(config: LawConfig) -> Bbr {
        Bbr {
            state: State::Startup,
            rate: DeliveryRate::default(),
            min_rtt: None,
            srtt: None,
            full_bw: 0.0,
            full_bw_rounds: 0,
            filled: false,
            cwnd: config.initial_window as f64,
            pacing: 0.0,
            config,
        }
    }

    fn mss(&self) -> f64 {
        self.config.mss as f64
    }

    /// The bandwidth-delay product of the estimates, bytes.
    fn bdp(&self) -> Option<f64> {
        Some(self.rate.max()? * self.min_rtt?.0.as_secs_f64())
    }

    fn pacing_gain(&self) -> f64 {
        match self.state {
            State::Startup => HIGH_GAIN,
            State::Drain => 1.0 / HIGH_GAIN,
            State::ProbeBw { phase, .. } => GAIN_CYCLE[phase],
            State::ProbeRtt { .. } => 1.0,
        }
    }

    fn cwnd_gain(&self) -> f64 {
        match self.state {
            State::Startup | State::Drain => HIGH_GAIN,
            _ => CWND_GAIN,
        }
    }

    /// Startup's end: three round trips without 25 % more bandwidth.
    fn check_full_pipe(&mut self) {
        let Some(bw) = self.rate.max() else {
            return;
        };
        if bw >= self.full_bw * FULL_BW_GROWTH {
            self.full_bw = bw;
            self.full_bw_rounds = 0;
            return;
        }
        self.full_bw_rounds += 1;
        if self.full_bw_rounds >= FULL_BW_ROUNDS {
            self.filled = true;
        }
    }

    /// The draft's state transitions after an ACK at `now` (`round_ended`
    /// when it closed a round trip, `rtt_expired` when the RTT estimate had
    /// not been confirmed for [`RTT_FILTER`]).
    fn advance(&mut self, now: Duration, round_ended: bool, rtt_expired: bool) {
        let bdp = self.bdp().unwrap_or(f64::INFINITY);
        match self.state {
            State::Startup if round_ended => {
                self.check_full_pipe();
                if self.filled {
                    self.state = State::Drain;
                }
            }
            State::Drain if round_ended && (self.rate.last_round as f64) <= bdp => {
                self.enter_probe_bw(now);
            }
            State::ProbeBw { phase, since } => {
                let min_rtt = self.min_rtt.map_or(Duration::ZERO, |(rtt, _)| rtt);
                if now.saturating_sub(since) >= min_rtt {
                    self.state = State::ProbeBw {
                        phase: (phase + 1) % GAIN_CYCLE.len(),
                        since: now,
                    };
                }
            }
            State::ProbeRtt { until } if now >= until => {
                if let Some((rtt, _)) = self.min_rtt {
                    self.min_rtt = Some((rtt, now));
                }
                if self.filled {
                    self.enter_probe_bw(now);
                } else {
                    self.state = State::Startup;
                }
            }
            _ => {}
        }
        if rtt_expired && !matches!(self.state, State::ProbeRtt { .. }) {
            let srtt = self.srtt.unwrap_or_default();
            self.state = State::ProbeRtt {
                until: now + srtt + PROBE_RTT_TIME,
            };
        }
    }

    /// ProbeBW begins in the cruising part of its cycle (the draft picks a
    /// random phase other than the draining one; runs stay
    /// reproducible).
    fn enter_probe_bw(&mut self, now: Duration) {
        self.state = State::ProbeBw {
            phase: 2,
            since: now,
        };
    }

    /// The bandwidth before the first delivery-rate sample: the initial
    /// window per smoothed RTT (1 ms without one; the draft's nominal
    /// bandwidth).
    fn nominal_bandwidth(&self) -> f64 {
        let srtt = self.srtt.map_or(0.001, |s| s.as_secs_f64().max(0.001));
        self.config.initial_window as f64 / srtt
    }

    /// The pacing rate and window for the current state and estimates.
    fn set_rate_and_window(&mut self, acked: u64) {
        let bw = self.rate.max().unwrap_or_else(|| self.nominal_bandwidth());
        let rate = self.pacing_gain() * bw;
        if self.filled || rate > self.pacing {
            self.pacing = rate;
        }
        // ProbeRTT's small window is [`Law::window`]'s; the one kept here
        // is what the window is again after it.
        if let State::ProbeRtt { .. } = self.state {
            return;
        }
        let Some(bdp) = self.bdp() else {
            self.cwnd += acked as f64;
            return;
        };
        let target = self.cwnd_gain() * bdp + QUANTIZATION_PACKETS * self.mss();
        self.cwnd = if self.filled {
            (self.cwnd + acked as f64).min(target)
        } else if self.cwnd < target {
            self.cwnd + acked as f64
        } else {
            self.cwnd
        };
        self.cwnd = self.cwnd.max(MIN_PIPE_PACKETS * self.mss());
    }
}

impl Law for Bbr {
    fn on_ack(&mut self, now: Duration, acked_bytes: u64, rtt: &RttSample) {
        self.srtt = Some(rtt.smoothed);
        let expired = self
            .min_rtt
            .is_some_and(|(_, at)| now.saturating_sub(at) > RTT_FILTER);
        let smaller = self.min_rtt.is_none_or(|(min, _)| rtt.latest <= min);
        if (expired || smaller) && !rtt.latest.is_zero() {
            self.min_rtt = Some((rtt.latest, now));
        }
        let round_ended = self.rate.on_ack(now, acked_bytes, rtt.smoothed);
        self.advance(now, round_ended, expired);
        self.set_rate_and_window(acked_bytes);
    }

    fn on_rtt(&mut self, rtt: &RttSample) {
        self.srtt = Some(rtt.smoothed);
    }

    fn on_feedback(&mut self, _now: Duration, _feedback: Feedback, _rtt: &RttSample) {}

    fn on_congestion(&mut self, _: Duration, _: Duration, _: Congestion, _: &RttSample) {}

    fn window(&self) -> u64 {
        let cwnd = match self.state {
            State::ProbeRtt { .. } => MIN_PIPE_PACKETS * self.mss(),
            _ => self.cwnd,
        };
        self.config.clamp(cwnd) as u64
    }

    fn pacing_rate(&self) -> Option<f64> {
        self.srtt?;
        let start = HIGH_GAIN * self.nominal_bandwidth();
        Some(if self.pacing > 0.0 {
            self.pacing
        } else {
            start
        })
    }

    /// The draft's cwnd: a gain times the bandwidth-delay product, the
    /// flight's cap beside the pacing.
    fn window_caps_flight(&self) -> bool {
        true
    }

    fn mode(&self) -> Mode {
        match self.state {
            State::Startup => Mode::SlowStart,
            State::ProbeBw { .. } => Mode::CongestionAvoidance,
            State::Drain | State::ProbeRtt { .. } => Mode::Hold,
        }
    }

    fn tag(&self) -> SchemeTag {
        SchemeTag::UNTAGGED
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);
    const MSS: u64 = 1000;

    /// A bottleneck of `rate` bytes/s and a base RTT of `base`: feeds the
    /// law the ACKs of what it sends, one packet per ACK, with the queue
    /// its excess over the bottleneck builds.
    struct Path {
        rate: f64,
        base: Duration,
        queue: f64,
        /// Bytes served but not yet acknowledged as a whole packet.
        credit: f64,
        now: Duration,
    }

    impl Path {
        fn run(&mut self, law: &mut Bbr, for_: Duration) {
            let step = MS;
            let end = self.now + for_;
            while self.now < end {
                let rtt = self.base + Duration::from_secs_f64(self.queue / self.rate);
                let sample = RttSample {
                    smoothed: rtt,
                    min: self.base,
                    latest: rtt,
                };
                // What the law sends this step: its pacing rate, capped by
                // its window over the RTT.
                let send = law
                    .pacing_rate()
                    .unwrap_or(0.0)
                    .min(law.window() as f64 / rtt.as_secs_f64())
                    * step.as_secs_f64();
                let served = (self.queue + send).min(self.rate * step.as_secs_f64());
                self.queue = (self.queue + send - served).max(0.0);
                self.credit += served;
                while self.credit >= MSS as f64 {
                    self.credit -= MSS as f64;
                    law.on_ack(self.now, MSS, &sample);
                }
                self.now += step;
            }
        }
    }

    fn path(rate: f64) -> (Bbr, Path) {
        let mut law = Bbr::new(LawConfig::with_mss(MSS));
        law.on_rtt(&RttSample::uniform(MS * 40));
        let p = Path {
            rate,
            base: MS * 40,
            queue: 0.0,
            credit: 0.0,
            now: Duration::ZERO,
        };
        (law, p)
    }

    #[test]
    fn startup_finds_the_bottleneck_and_drain_empties_its_queue() {
        // 1.25 Mbyte/s (10 Mbit/s), 40 ms: a BDP of 50 packets.
        let (mut law, mut p) = path(1.25e6);
        p.run(&mut law, MS * 2000);
        assert!(
            matches!(law.state, State::ProbeBw { .. }),
            "{:?}",
            law.state
        );
        let bw = law.rate.max().unwrap();
        assert!((bw / 1.25e6 - 1.0).abs() < 0.1, "bandwidth estimate {bw}");
        // The window is twice the BDP plus the quantization budget.
        let want = CWND_GAIN * 50_000.0 + QUANTIZATION_PACKETS * MSS as f64;
        assert!(
            (law.window() as f64 / want - 1.0).abs() < 0.15,
            "{}",
            law.window()
        );
        // What Startup queued is gone but for ProbeBW's own probe.
        assert!(p.queue < 0.5 * 50_000.0, "queue {} bytes", p.queue);
    }

    #[test]
    fn probe_bw_cycles_its_gains_one_min_rtt_each() {
        let (mut law, mut p) = path(1.25e6);
        p.run(&mut law, MS * 2000);
        let mut gains = Vec::new();
        for _ in 0..16 {
            gains.push(law.pacing_gain());
            p.run(&mut law, MS * 40);
        }
        assert!(gains.contains(&1.25) && gains.contains(&0.75), "{gains:?}");
        let probes = gains.iter().filter(|&&g| g == 1.25).count();
        assert!((2..=3).contains(&probes), "{gains:?}");
    }

    #[test]
    fn probe_rtt_comes_after_ten_seconds_without_a_smaller_rtt() {
        let (mut law, mut p) = path(1.25e6);
        p.run(&mut law, MS * 2000);
        // The path grows 10 ms longer: every later sample is larger than
        // the estimate, which ages until ProbeRTT replaces it.
        p.base += MS * 10;
        let (mut probing, mut probes) = (false, 0);
        let mut before = law.window();
        for _ in 0..1200 {
            p.run(&mut law, MS * 10);
            match law.state {
                State::ProbeRtt { .. } => {
                    assert_eq!(law.window(), 4 * MSS);
                    probes += u32::from(!probing);
                    probing = true;
                }
                _ if probing => {
                    // Back at once to the window it had before.
                    assert!(
                        law.window() >= before,
                        "{} after, {before} before",
                        law.window()
                    );
                    probing = false;
                }
                _ => before = law.window(),
            }
        }
        assert_eq!(probes, 1, "ProbeRTTs in 12 s");
        assert!(
            matches!(law.state, State::ProbeBw { .. }),
            "{:?}",
            law.state
        );
        let (min_rtt, _) = law.min_rtt.unwrap();
        assert!(
            min_rtt >= MS * 50,
            "RTT estimate {min_rtt:?} after the path grew to 50 ms"
        );
    }

    #[test]
    fn loss_does_not_slow_it_down() {
        let (mut law, mut p) = path(1.25e6);
        p.run(&mut law, MS * 2000);
        let (window, rate) = (law.window(), law.pacing_rate());
        let rtt = RttSample::uniform(MS * 40);
        law.on_congestion(p.now, p.now - MS * 40, Congestion::Loss, &rtt);
        law.on_congestion(p.now, p.now - MS * 40, Congestion::Ce, &rtt);
        assert_eq!((law.window(), law.pacing_rate()), (window, rate));
    }
}
