//! Cubic (RFC 8312): the loss-based law ecnq senders use where no router
//! gives them feedback, the law erc keeps beside its advertised rate so that
//! a drop-tail or classic-ECN bottleneck elsewhere on the path is respected,
//! and the simulator's Cubic baseline.
//!
//! It reacts to a loss or a CE mark at most once per round trip
//! ([`Window`]) and starts in slow start.

use std::time::Duration;

use crate::signal::{Congestion, Feedback, Law, LawConfig, Mode, RttSample, Window};
use crate::wire::ecn::SchemeTag;

/// Cubic's C = 0.4 (RFC 8312 §5).
pub const CUBIC_C: f64 = 0.4;
/// Cubic's multiplicative decrease β = 0.7 (RFC 8312 §4.5).
pub const CUBIC_BETA: f64 = 0.7;

/// Cubic: window W(t) = C·(t − K)³ + W_max after a decrease by β, never
/// below the Reno-friendly estimate, with fast convergence.
#[derive(Clone, Debug)]
pub struct CubicLaw {
    config: LawConfig,
    cwnd: Window,
    ssthresh: f64,
    /// W_max in packets.
    w_max: f64,
    /// The previous W_max, for fast convergence (RFC 8312 §4.6).
    w_last_max: f64,
    /// Start of the current congestion-avoidance epoch.
    epoch_start: Option<Duration>,
    /// K in seconds.
    k: f64,
    /// The Reno-friendly window estimate in packets (RFC 8312 §4.2).
    w_est: f64,
}

impl CubicLaw {
    /// A Cubic sender.
    pub fn new(config: LawConfig) -> CubicLaw {
        CubicLaw {
            cwnd: Window::new(config, Mode::SlowStart),
            ssthresh: f64::INFINITY,
            w_max: 0.0,
            w_last_max: 0.0,
            epoch_start: None,
            k: 0.0,
            w_est: 0.0,
            config,
        }
    }

    /// Cubic taking over from `law` (a scheme's law, when no ecnq router
    /// is on the path) at its window. A law that was growing its window
    /// exponentially (slow start, the papers' multiplicative increase at low
    /// load, which is how they start, or MCP's scaling and enhancing modes)
    /// hands over a window that goes on growing in slow start until the
    /// first loss or CE: a new flow whose verdict came a round trip in must
    /// not be held at its first window while a Cubic neighbour takes the
    /// link, nor start below the initial window a new Cubic flow would
    /// start with (MCP starts at 80 kbit/s, a window of under two packets
    /// on a 40 ms path). Any other law hands over a window that Cubic's
    /// next epoch starts from.
    pub fn in_place_of(law: &dyn Law, config: LawConfig) -> CubicLaw {
        let window = law.window();
        let exponential = matches!(
            law.mode(),
            Mode::SlowStart | Mode::MultiplicativeIncrease | Mode::Scaling | Mode::Enhancing
        );
        let mut cubic = CubicLaw::new(LawConfig {
            initial_window: if exponential {
                window.max(config.initial_window)
            } else {
                window
            },
            ..config
        });
        if !exponential {
            cubic.set_window(window as f64);
        }
        cubic
    }

    fn mss(&self) -> f64 {
        self.config.mss as f64
    }

    /// Whether the window is still in slow start.
    pub fn in_slow_start(&self) -> bool {
        self.cwnd.bytes() < self.ssthresh
    }

    /// Holds the window at or under `max` bytes without ending slow start:
    /// growth goes on under a cap set by someone who knows better.
    pub fn limit(&mut self, max: f64) {
        if self.cwnd.bytes() > max {
            self.cwnd.set(max);
        }
    }

    /// Sets the window to `window` bytes, for a caller whose sending is
    /// limited by something else (erc's advertised rate): a window that
    /// does not limit the flow must neither grow while unused nor lag when
    /// that limit rises. The window leaves slow start, so its next growth
    /// is Cubic's from there.
    pub fn set_window(&mut self, window: f64) {
        self.cwnd.set(window);
        self.ssthresh = self.ssthresh.min(self.cwnd.bytes());
        self.w_max = self.cwnd.bytes() / self.mss();
        self.k = 0.0;
        self.epoch_start = None;
    }
}

impl Law for CubicLaw {
    fn on_ack(&mut self, now: Duration, acked_bytes: u64, rtt: &RttSample) {
        if self.cwnd.in_recovery(now, rtt) {
            return;
        }
        let acked = acked_bytes as f64;
        if self.in_slow_start() {
            self.cwnd.set(self.cwnd.bytes() + acked);
            return;
        }
        let mss = self.mss();
        let cwnd_pkts = self.cwnd.bytes() / mss;
        let start = *self.epoch_start.get_or_insert_with(|| {
            // An epoch that starts without a loss (after slow start) grows from here.
            if self.w_max < cwnd_pkts {
                self.w_max = cwnd_pkts;
                self.k = 0.0;
            }
            self.w_est = cwnd_pkts;
            now
        });
        let t = now.saturating_sub(start).as_secs_f64();
        let rtt_s = rtt.smoothed.as_secs_f64().max(1e-6);
        // RFC 8312 eq. 1, evaluated one RTT ahead (§4.1).
        let target = CUBIC_C * (t + rtt_s - self.k).powi(3) + self.w_max;
        // RFC 8312 eq. 4: the Reno-friendly estimate grows by
        // 3(1−β)/(1+β) packets per RTT.
        let alpha = 3.0 * (1.0 - CUBIC_BETA) / (1.0 + CUBIC_BETA);
        self.w_est += alpha * (acked / mss) / cwnd_pkts;
        let next = if self.w_est > target {
            self.w_est
        } else if target > cwnd_pkts {
            cwnd_pkts + (target - cwnd_pkts) / cwnd_pkts * (acked / mss)
        } else {
            // Below the plateau: grow very slowly (RFC 8312 §4.1: 1/(100·cwnd)).
            cwnd_pkts + 0.01 * (acked / mss) / cwnd_pkts
        };
        self.cwnd.set(next.max(cwnd_pkts) * mss);
    }

    fn on_feedback(&mut self, _now: Duration, _feedback: Feedback, _rtt: &RttSample) {}

    fn on_congestion(
        &mut self,
        now: Duration,
        sent: Duration,
        _kind: Congestion,
        _rtt: &RttSample,
    ) {
        let Some(before) = self.cwnd.reduce_on_congestion(now, sent, CUBIC_BETA) else {
            return;
        };
        let cwnd_pkts = before / self.mss();
        // Fast convergence (RFC 8312 §4.6).
        self.w_max = if cwnd_pkts < self.w_last_max {
            cwnd_pkts * (1.0 + CUBIC_BETA) / 2.0
        } else {
            cwnd_pkts
        };
        self.w_last_max = cwnd_pkts;
        self.ssthresh = self.cwnd.bytes();
        // RFC 8312 eq. 2.
        self.k = (self.w_max * (1.0 - CUBIC_BETA) / CUBIC_C).cbrt();
        self.w_est = self.cwnd.bytes() / self.mss();
        // The epoch starts at the first ACK after recovery; keep K relative to it.
        self.epoch_start = Some(now);
    }

    fn window(&self) -> u64 {
        self.cwnd.whole_bytes()
    }

    fn mode(&self) -> Mode {
        if self.in_slow_start() {
            Mode::SlowStart
        } else {
            Mode::CongestionAvoidance
        }
    }

    fn tag(&self) -> SchemeTag {
        SchemeTag::UNTAGGED
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u64 = 1000;

    fn rtt() -> RttSample {
        RttSample::uniform(Duration::from_millis(100))
    }

    #[test]
    fn cubic_decreases_by_beta_and_regrows_to_w_max() {
        let mut law = CubicLaw::new(LawConfig::with_mss(MSS));
        let mut now = Duration::from_secs(1);
        law.on_ack(now, 90 * MSS, &rtt());
        assert_eq!(law.window(), 100 * MSS);
        law.on_congestion(now, now, Congestion::Loss, &rtt());
        assert_eq!(law.window(), 70 * MSS);
        // K = cbrt(100·0.3/0.4) ≈ 4.2 s: after K the window is back near W_max.
        let step = Duration::from_millis(10);
        while now < Duration::from_millis(5_300) {
            now += step;
            law.on_ack(now, law.window() / 10, &rtt());
        }
        let w = law.window() / MSS;
        assert!((95..=110).contains(&w), "window {w} packets");
    }

    #[test]
    fn a_set_window_leaves_slow_start() {
        let mut law = CubicLaw::new(LawConfig::with_mss(MSS));
        let now = Duration::from_secs(1);
        law.on_ack(now, 90 * MSS, &rtt());
        law.set_window(50.0 * MSS as f64);
        assert_eq!(law.window(), 50 * MSS);
        assert!(!law.in_slow_start());
        // Growth is now Cubic's (about W_max at the plateau), not slow start's.
        law.on_ack(now + Duration::from_millis(10), 50 * MSS, &rtt());
        assert!(law.window() < 52 * MSS, "{}", law.window());
    }

    /// Taking over from a law that is still starting keeps slow start;
    /// from one that is not, Cubic's next epoch starts at its window.
    #[test]
    fn cubic_in_place_of_a_starting_law_stays_in_slow_start() {
        let config = LawConfig::with_mss(MSS);
        let starting = crate::schemes::vcp::VcpLaw::new(config);
        assert_eq!(starting.mode(), Mode::MultiplicativeIncrease);
        let cubic = CubicLaw::in_place_of(&starting, config);
        assert!(cubic.in_slow_start());
        assert_eq!(cubic.window(), starting.window());

        let mut settled = CubicLaw::new(config);
        settled.set_window(40.0 * MSS as f64);
        assert_eq!(settled.mode(), Mode::CongestionAvoidance);
        let cubic = CubicLaw::in_place_of(&settled, config);
        assert!(!cubic.in_slow_start());
        assert_eq!(cubic.window(), 40 * MSS);
    }
}
