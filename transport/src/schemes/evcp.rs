//! EVCP — Extended VCP (Lu, Wang, Zhu, "EVCP: a convergence time improved
//! high-speed transport congestion control protocol", JZUS 2007).
//!
//! Routers and receivers are VCP's; only the sender changes. On every MD the
//! convergence controller (paper §"Convergence controller" and Fig. 3) decides
//! whether the flow is a large flow in a downward trend (set D); such a flow
//! decreases by β = 0.7 instead of 0.875 and may not multiplicatively increase
//! until its next MD, leaving room for newer, smaller flows.

use std::time::Duration;

use crate::schemes::vcp::{Decrease, VcpLaw, BETA};
use crate::signal::{Congestion, Feedback, Law, LawConfig, Mode, RttSample};
use crate::wire::ecn::SchemeTag;

/// N1: MD count before a flow can be judged in a downward trend (paper §"Simulation environment").
pub const N1: u32 = 2;
/// N2: MD count after which W_max is refreshed (same place).
pub const N2: u32 = 10;
/// S = W_max / 32: the drop below W_max that counts as a downward trend.
pub const S_DIVISOR: f64 = 32.0;
/// β for flows in D (paper eq. 10: β − β_c = 0.175 with β = 0.875).
pub const BETA_DOWNWARD: f64 = 0.7;
/// W_low, the window (packets) below which a flow is "low speed" (set L). The
/// paper leaves its value open; ecnq uses HighSpeed TCP's Low_Window of 38
/// packets (RFC 3649 §5), the threshold of the Nabeshima–Yata scheme EVCP
/// builds on.
pub const W_LOW: f64 = 38.0;

/// The set a flow was placed in at its latest MD.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowClass {
    /// L: window below W_low; plain VCP decrease.
    Low,
    /// H \ D: high-speed flow, not in a downward trend; plain VCP decrease.
    NotDownward,
    /// D: high-speed flow in a downward trend; decrease by 0.7, no MI until the next MD.
    Downward,
}

/// The convergence controller of EVCP's Fig. 3.
#[derive(Clone, Debug, PartialEq)]
pub struct ConvergenceController {
    /// W_prev: the window before the last MD (packets).
    pub w_prev: f64,
    /// W_max: the largest pre-MD window during the downward trend (packets).
    pub w_max: f64,
    /// NumDec: MDs counted while the flow is suspected to be in a downward trend.
    pub num_dec: u32,
    mi_blocked: bool,
    last_class: Option<FlowClass>,
}

impl Default for ConvergenceController {
    fn default() -> Self {
        ConvergenceController {
            w_prev: 0.0,
            w_max: 0.0,
            num_dec: 0,
            mi_blocked: false,
            last_class: None,
        }
    }
}

impl ConvergenceController {
    /// Runs the flowchart for an MD at window `w1` (packets, before the
    /// decrease) and returns the MD factor β.
    pub fn on_decrease(&mut self, w1: f64) -> f64 {
        // "not allowed to enter into MI phase until next MD phase": any MD lifts the block.
        self.mi_blocked = false;
        let class = if w1 < W_LOW {
            // Step (1): f ∈ L.
            FlowClass::Low
        } else if self.w_prev <= w1 {
            // Step (2) I: not decreasing; restart the trend from here.
            self.w_max = w1;
            self.w_prev = w1;
            self.num_dec = 0;
            FlowClass::NotDownward
        } else {
            // Step (2) II.
            self.num_dec += 1;
            if self.num_dec >= N1 && self.w_max - w1 >= self.w_max / S_DIVISOR {
                // (i): f ∈ D.
                self.w_max = 0.0;
                self.w_prev = 0.0;
                self.num_dec = 0;
                self.mi_blocked = true;
                FlowClass::Downward
            } else {
                // (ii): f ∉ D.
                self.w_prev = w1;
                if self.num_dec == N2 {
                    self.w_max = w1;
                    self.num_dec = 0;
                }
                FlowClass::NotDownward
            }
        };
        self.last_class = Some(class);
        match class {
            FlowClass::Downward => BETA_DOWNWARD,
            FlowClass::Low | FlowClass::NotDownward => BETA,
        }
    }

    /// Whether MI is forbidden (the flow was put in D at its last MD).
    pub fn mi_blocked(&self) -> bool {
        self.mi_blocked
    }

    /// The class decided at the latest MD.
    pub fn last_class(&self) -> Option<FlowClass> {
        self.last_class
    }
}

/// EVCP decides each MD's factor itself (the level's β is VCP's).
impl Decrease for ConvergenceController {
    fn on_decrease(&mut self, window: f64, _beta: f64) -> f64 {
        ConvergenceController::on_decrease(self, window)
    }
    fn mi_blocked(&self) -> bool {
        ConvergenceController::mi_blocked(self)
    }
}

/// The EVCP sender: VCP's law with the convergence controller on its MD.
#[derive(Clone, Debug)]
pub struct EvcpLaw(VcpLaw<ConvergenceController>);

impl EvcpLaw {
    /// An EVCP sender.
    pub fn new(config: LawConfig) -> EvcpLaw {
        EvcpLaw(VcpLaw::with_decrease(
            config,
            ConvergenceController::default(),
        ))
    }

    /// The convergence controller's state.
    pub fn controller(&self) -> &ConvergenceController {
        self.0.decrease_policy()
    }
}

impl Law for EvcpLaw {
    fn on_ack(&mut self, now: Duration, acked_bytes: u64, rtt: &RttSample) {
        self.0.on_ack(now, acked_bytes, rtt)
    }
    fn on_feedback(&mut self, now: Duration, feedback: Feedback, rtt: &RttSample) {
        self.0.on_feedback(now, feedback, rtt)
    }
    fn on_congestion(&mut self, now: Duration, sent: Duration, kind: Congestion, rtt: &RttSample) {
        self.0.on_congestion(now, sent, kind, rtt)
    }
    fn window(&self) -> u64 {
        self.0.window()
    }
    fn mode(&self) -> Mode {
        self.0.mode()
    }
    fn tag(&self) -> SchemeTag {
        self.0.tag()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn low_speed_flows_use_vcp_beta() {
        let mut c = ConvergenceController::default();
        assert_eq!(c.on_decrease(10.0), BETA);
        assert_eq!(c.last_class(), Some(FlowClass::Low));
        assert!(!c.mi_blocked());
    }

    #[test]
    fn growing_flow_resets_the_trend() {
        let mut c = ConvergenceController::default();
        assert_eq!(c.on_decrease(100.0), BETA);
        assert_eq!((c.w_prev, c.w_max, c.num_dec), (100.0, 100.0, 0));
        // Bigger than before: still not downward, trend restarts at 120.
        assert_eq!(c.on_decrease(120.0), BETA);
        assert_eq!((c.w_prev, c.w_max, c.num_dec), (120.0, 120.0, 0));
    }

    #[test]
    fn second_decreasing_md_puts_the_flow_in_d() {
        let mut c = ConvergenceController::default();
        c.on_decrease(1000.0);
        // First decrease below W_prev: NumDec = 1 < N1, not in D.
        assert_eq!(c.on_decrease(950.0), BETA);
        assert_eq!(c.last_class(), Some(FlowClass::NotDownward));
        assert_eq!((c.w_prev, c.num_dec), (950.0, 1));
        // Second: NumDec = 2 ≥ N1 and W_max − W = 100 ≥ 1000/32 → D.
        assert_eq!(c.on_decrease(900.0), BETA_DOWNWARD);
        assert_eq!(c.last_class(), Some(FlowClass::Downward));
        assert!(c.mi_blocked());
        assert_eq!((c.w_prev, c.w_max, c.num_dec), (0.0, 0.0, 0));
        // The next MD lifts the MI block and, W_prev being 0, restarts the trend.
        assert_eq!(c.on_decrease(800.0), BETA);
        assert!(!c.mi_blocked());
        assert_eq!((c.w_prev, c.w_max), (800.0, 800.0));
    }

    #[test]
    fn small_drops_below_s_are_not_a_trend() {
        let mut c = ConvergenceController::default();
        c.on_decrease(3200.0);
        // S = 3200/32 = 100: drops of less than 100 packets never qualify.
        for w in [3199.0, 3150.0, 3120.0] {
            assert_eq!(c.on_decrease(w), BETA);
        }
        assert_eq!(c.num_dec, 3);
        assert_eq!(c.on_decrease(3100.0), BETA_DOWNWARD);
    }

    #[test]
    fn w_max_refreshes_after_n2_decreases() {
        let mut c = ConvergenceController::default();
        c.on_decrease(3200.0);
        // Ten tiny decreases (each below S from W_max) reach N2 and refresh W_max.
        let mut w = 3200.0;
        for i in 1..=N2 {
            w -= 1.0;
            assert_eq!(c.on_decrease(w), BETA, "decrease {i}");
        }
        assert_eq!((c.w_max, c.num_dec), (w, 0));
    }

    #[test]
    fn evcp_flow_in_d_does_not_mi() {
        use crate::signal::RttSample;
        let cfg = LawConfig::with_mss(1000);
        let mut law = EvcpLaw::new(cfg);
        let rtt = RttSample::uniform(Duration::from_millis(100));
        let over = Feedback {
            level: 2,
            ..Feedback::default()
        };
        let low = Feedback::default();
        // Grow to a large window under low load.
        let mut now = Duration::ZERO;
        let ms = Duration::from_millis(1);
        while law.window() < 2_000_000 {
            now += ms;
            law.on_ack(now, 10_000, &rtt);
        }
        // Three MDs each below the previous: the third lands in D.
        for _ in 0..3 {
            now += Duration::from_secs(1);
            law.on_feedback(now, over, &rtt);
        }
        assert_eq!(law.controller().last_class(), Some(FlowClass::Downward));
        now += Duration::from_secs(1);
        law.on_feedback(now, low, &rtt);
        let before = law.window();
        law.on_ack(now, 100_000, &rtt);
        // AI only: α_s·mss·acked/cwnd = 0.25·1000·100 000/cwnd bytes, far below MI's ξ_s·acked.
        assert_eq!(law.mode(), Mode::AdditiveIncrease);
        assert!(law.window() - before < 100);
    }
}
