//! VCP — Variable-structure congestion Control Protocol (Xia, Subramanian,
//! Stoica, Kalyanaraman, "One More Bit Is Enough", SIGCOMM 2005), as restated
//! in the EVCP paper (Lu, Wang, Zhu, JZUS 2007, eqs. 1–7) and with the facts
//! from the authors' ns-2 release recorded in docs/design.md §2.
//!
//! * Router: ρ = (λ + κ_q·q̃) / (γ·C·t_p) (EVCP eq. 1); code `01` if ρ < 80 %,
//!   `10` if ρ < 100 %, else `11`; a router only raises the code.
//! * Receiver: the latest code, where a CE counts only once a second comes
//!   right after it ([`VcpDecoder`]).
//! * Sender: MI (1+ξ) per RTT in low load, AI α per RTT in high load, MD β
//!   once on overload, then the window is frozen for one t_p and the next RTT
//!   is additive-increase only. No slow start: new flows start in MI. Loss
//!   falls back to Reno halving.

use std::fmt;
use std::time::Duration;

use crate::signal::load::{Formula, IntervalStats, LoadFactor};
use crate::signal::{
    Congestion, Decoder, Feedback, LawConfig, LinkState, Marker, Mode, PacketMarks, RttSample,
    Window,
};
use crate::wire::ecn::{Ecn, SchemeTag, WireScheme};

/// VCP's DSCP pool tag, which EVCP shares: EVCP changes only the sender
/// (docs/design.md §2, tag table).
pub const WIRE: WireScheme = WireScheme::new(1);
/// Where a link's load holds ρ ([`Formula`]).
pub const FORMULA: Formula = Formula::new(0);
/// Low-load / high-load boundary: ρ < 80 % is low load (EVCP paper §"Overview
/// of VCP"; `ρ < 80 % → 01` in the ns-2 release, docs/design.md §2).
pub const LOW_LOAD_BOUND: f64 = 0.8;
/// High-load / overload boundary: ρ < 100 % is high load (same sources).
pub const OVERLOAD_BOUND: f64 = 1.0;
/// κ_q, how fast the persistent queue drains (ns-2 release, docs/design.md §2).
pub const KAPPA_Q: f64 = 0.5;
/// MI step ξ = k(1−ρ̂)/ρ̂ with k = 0.25, ρ̂ = 80 % (EVCP paper eq. 3).
pub const XI: f64 = 0.0625;
/// The k of EVCP paper eq. 3, used by MPCP for its finer levels.
pub const XI_K: f64 = 0.25;
/// AI step α = 1 packet per RTT (EVCP paper eq. 4; ns-2 release).
pub const ALPHA: f64 = 1.0;
/// MD factor β = 0.875 (EVCP paper eq. 5 and convergence controller step 1).
pub const BETA: f64 = 0.875;
/// The RTT scaling exponent T/t_ρ of the MI step is capped at 2.5 (ns-2 release).
pub const MI_SCALE_CAP: f64 = 2.5;

/// The MI step ξ(ρ̂) = k(1 − ρ̂)/ρ̂ for an encoded load ρ̂ (EVCP paper eq. 3).
pub fn xi(encoded_load: f64) -> f64 {
    if encoded_load <= 0.0 {
        return 0.0;
    }
    (XI_K * (1.0 - encoded_load) / encoded_load).max(0.0)
}

/// Target utilization γ for a link of `capacity` bytes per second: the
/// values of the VCP ns-2 release (≈0.94 at 1 Mbit/s, 0.96 at 10, 0.975 at
/// 100, 0.985 at 1 Gbit/s; docs/design.md §2), interpolated in log10(capacity)
/// and held flat outside that range.
pub fn gamma_for_capacity(capacity: f64) -> f64 {
    const POINTS: [(f64, f64); 4] = [(6.0, 0.94), (7.0, 0.96), (8.0, 0.975), (9.0, 0.985)];
    let bits = (capacity * 8.0).max(1.0).log10();
    if bits <= POINTS[0].0 {
        return POINTS[0].1;
    }
    for w in POINTS.windows(2) {
        let ((x0, y0), (x1, y1)) = (w[0], w[1]);
        if bits <= x1 {
            return y0 + (y1 - y0) * (bits - x0) / (x1 - x0);
        }
    }
    POINTS[3].1
}

/// The router's load-factor parameters (EVCP paper eq. 1).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LoadParams {
    /// γ_l, target utilization.
    pub gamma: f64,
    /// κ_q, persistent-queue weight.
    pub k_q: f64,
}

impl LoadParams {
    /// γ from [`gamma_for_capacity`], κ_q = 0.5.
    pub fn for_capacity(capacity: f64) -> LoadParams {
        LoadParams {
            gamma: gamma_for_capacity(capacity),
            k_q: KAPPA_Q,
        }
    }

    /// ρ = (λ + κ_q·q̃) / (γ·C·t_p) (EVCP paper eq. 1).
    pub fn load_factor(&self, stats: &IntervalStats, capacity: f64) -> LoadFactor {
        let demand = stats.arrived_bytes as f64 + self.k_q * stats.queue_persistent as f64;
        LoadFactor::new(demand / (self.gamma * capacity * stats.length.as_secs_f64()))
    }
}

/// VCP's three load levels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum VcpLevel {
    /// ρ < 80 %: code `01`, MI.
    Low = 0,
    /// 80 % ≤ ρ < 100 %: code `10`, AI.
    High = 1,
    /// ρ ≥ 100 %: code `11`, MD.
    Overload = 2,
}

impl VcpLevel {
    /// The level of a measured load factor.
    pub fn of(load: LoadFactor) -> VcpLevel {
        match load.get() {
            r if r < LOW_LOAD_BOUND => VcpLevel::Low,
            r if r < OVERLOAD_BOUND => VcpLevel::High,
            _ => VcpLevel::Overload,
        }
    }

    /// The level a codepoint carries; `00` carries none.
    pub fn from_ecn(ecn: Ecn) -> Option<VcpLevel> {
        match ecn {
            Ecn::NotEct => None,
            Ecn::Ect1 => Some(VcpLevel::Low),
            Ecn::Ect0 => Some(VcpLevel::High),
            Ecn::Ce => Some(VcpLevel::Overload),
        }
    }

    /// The codepoint for this level.
    pub fn ecn(self) -> Ecn {
        match self {
            VcpLevel::Low => Ecn::Ect1,
            VcpLevel::High => Ecn::Ect0,
            VcpLevel::Overload => Ecn::Ce,
        }
    }

    /// The level from a feedback report's level number (out of range → overload).
    pub fn from_feedback(level: u16) -> VcpLevel {
        match level {
            0 => VcpLevel::Low,
            1 => VcpLevel::High,
            _ => VcpLevel::Overload,
        }
    }

    /// The encoded load ρ̂ the level stands for: 80 %, 100 %, and — overload
    /// having no upper bound in VCP — 120 % as a representative.
    pub fn encoded_load(self) -> f64 {
        match self {
            VcpLevel::Low => LOW_LOAD_BOUND,
            VcpLevel::High => OVERLOAD_BOUND,
            VcpLevel::Overload => 1.2,
        }
    }
}

/// VCP router marking: raise the packet's code to this link's code.
#[derive(Clone, Copy, Debug, Default)]
pub struct VcpMarker;

impl Marker for VcpMarker {
    #[inline]
    fn mark(&mut self, _now: Duration, link: &LinkState, pkt: &mut PacketMarks) {
        // A Not-ECT packet cannot carry a code; ECN marks are only raised.
        if pkt.ecn.is_ect() {
            pkt.ecn = pkt.ecn.max(VcpLevel::of(link.load[FORMULA]).ecn());
        }
    }
}

/// VCP receiver: the latest code seen. Starts at low load, as senders do.
///
/// A CE right after a code below overload waits for the next packet: it
/// reads as overload only if that one carries CE too. A VCP router writes
/// overload into every packet of a measurement interval, so its CE comes
/// in runs; a lone CE is another AQM's mark. Behind an ecnq router that is
/// not the bottleneck, at an L4S DualPI2 one downstream (VCP's low-load
/// code is ECT(1), the L4S identifier), the coupled marks fall on single
/// packets: read as overload, each would cut the window by β and leave VCP
/// a small share beside Cubic (scenario `l4s-erc-then-dualpi2`, guarded by
/// sim/tests/l4s_goals.rs
/// `vcp_behind_an_ecnq_router_shares_a_dualpi2_bottleneck_with_cubic`).
/// The L4S queue's step still marks runs, which read as overload; losses
/// count as always (`a_lone_ce_is_no_overload_and_a_run_of_two_is`).
/// ecnq's own rule: the papers know no other AQM on the path and read
/// every CE as overload.
#[derive(Clone, Copy, Debug)]
pub struct VcpDecoder {
    level: VcpLevel,
    /// Whether the last ECN-capable packet was a CE not read yet.
    lone_ce: bool,
}

impl Default for VcpDecoder {
    fn default() -> Self {
        VcpDecoder {
            level: VcpLevel::Low,
            lone_ce: false,
        }
    }
}

impl Decoder for VcpDecoder {
    fn on_packet(&mut self, _now: Duration, ecn: Ecn, _tag: SchemeTag, _hash: u32) -> bool {
        if !ecn.is_ect() {
            return false;
        }
        let first_ce = ecn == Ecn::Ce && self.level != VcpLevel::Overload && !self.lone_ce;
        self.lone_ce = first_ce;
        if first_ce {
            return false;
        }
        match VcpLevel::from_ecn(ecn) {
            Some(level) if level != self.level => {
                self.level = level;
                true
            }
            _ => false,
        }
    }

    fn estimate(&self, _now: Duration) -> Feedback {
        Feedback {
            level: self.level as u16,
            load: LoadFactor::new(self.level.encoded_load()),
            fairing: false,
        }
    }
}

/// How a VCP-family sender decreases: the factor of each MD, and whether MI
/// is allowed meanwhile. VCP's own is [`PlainDecrease`]; EVCP's convergence
/// controller is another.
pub trait Decrease: Clone + fmt::Debug + Send {
    /// An MD at a window of `window` packets that the load level asks to
    /// be by `beta`: its factor.
    fn on_decrease(&mut self, window: f64, beta: f64) -> f64;
    /// Whether MI is forbidden now.
    fn mi_blocked(&self) -> bool;
}

/// VCP's (and MPCP's) decrease: the level's factor, MI never blocked.
#[derive(Clone, Copy, Debug, Default)]
pub struct PlainDecrease;

impl Decrease for PlainDecrease {
    fn on_decrease(&mut self, _window: f64, beta: f64) -> f64 {
        beta
    }
    fn mi_blocked(&self) -> bool {
        false
    }
}

/// The VCP window law; EVCP's is the same with its own [`Decrease`].
#[derive(Clone, Debug)]
pub struct VcpLaw<D = PlainDecrease> {
    config: LawConfig,
    cwnd: Window,
    level: VcpLevel,
    /// No change at all before this time (one t_p after an MD).
    hold_until: Duration,
    /// Additive increase only before this time (one RTT after the hold).
    ai_only_until: Duration,
    /// No second MD before this time: one RTT and one t_p after the hold.
    episode_until: Duration,
    decrease: D,
}

impl VcpLaw {
    /// A VCP sender.
    pub fn new(config: LawConfig) -> VcpLaw {
        VcpLaw::with_decrease(config, PlainDecrease)
    }

    /// The scaled MI step ξ_s = (1+ξ)^(T/t_p) − 1, T/t_p capped at 2.5
    /// (EVCP paper eq. 6; cap from the ns-2 release).
    pub fn scaled_xi(xi: f64, rtt: Duration, interval: Duration) -> f64 {
        let ratio = (rtt.as_secs_f64() / interval.as_secs_f64()).min(MI_SCALE_CAP);
        (1.0 + xi).powf(ratio) - 1.0
    }

    /// The scaled AI step α_s = α·(T/t_p)² packets (EVCP paper eq. 7).
    pub fn scaled_alpha(alpha: f64, rtt: Duration, interval: Duration) -> f64 {
        let ratio = rtt.as_secs_f64() / interval.as_secs_f64();
        alpha * ratio * ratio
    }
}

impl<D: Decrease> VcpLaw<D> {
    /// A VCP-family sender whose MDs go through `decrease`.
    pub fn with_decrease(config: LawConfig, decrease: D) -> VcpLaw<D> {
        VcpLaw {
            cwnd: Window::new(config, Mode::MultiplicativeIncrease),
            config,
            level: VcpLevel::Low,
            hold_until: Duration::ZERO,
            ai_only_until: Duration::ZERO,
            episode_until: Duration::ZERO,
            decrease,
        }
    }

    /// The decrease policy's state.
    pub fn decrease_policy(&self) -> &D {
        &self.decrease
    }

    /// MD by `beta` (for VCP itself; the decrease policy chooses) unless the
    /// previous MD is still being answered; then hold for one t_p and allow
    /// only AI for the following RTT (the VCP ns-2 release, docs/design.md §2).
    ///
    /// Overload reported until one RTT and one t_p after the hold still
    /// describes the episode this MD answered, so it does not decrease the
    /// window again: the ns-2 release guards only the hold and the RTT, but
    /// the interval in which the decreased traffic arrives reads overload
    /// too (measurements: sim/REPRODUCTION.md, "Deviations and tuning").
    pub fn decrease_if_due(&mut self, now: Duration, rtt: &RttSample, beta: f64) {
        if now < self.episode_until {
            return;
        }
        let packets = self.cwnd.bytes() / self.config.mss as f64;
        let beta = self.decrease.on_decrease(packets, beta);
        self.cwnd.set(self.cwnd.bytes() * beta);
        self.hold_until = now + self.config.interval;
        self.ai_only_until = self.hold_until + rtt.smoothed;
        self.episode_until = self.ai_only_until + self.config.interval;
        self.cwnd.set_mode(Mode::Hold);
    }

    /// One ack's worth of MIAIMD: `step` says what the current level asks for.
    /// During the RTT after a hold only AI (α = 1) applies (docs/design.md §2, from
    /// the VCP ns-2 release); overload goes to [`VcpLaw::decrease_if_due`],
    /// which ignores it while it still belongs to the last MD's episode. MI
    /// also becomes AI while EVCP's controller forbids it.
    pub fn apply(&mut self, now: Duration, acked_bytes: u64, rtt: &RttSample, step: Step) {
        if now < self.hold_until {
            self.cwnd.set_mode(Mode::Hold);
            return;
        }
        let ai_only = now < self.ai_only_until;
        let (xi, alpha) = match step {
            Step::Decrease { beta } => return self.decrease_if_due(now, rtt, beta),
            Step::Increase { .. } if ai_only => (0.0, ALPHA),
            Step::Increase { xi, alpha } if xi > 0.0 && !self.mi_allowed() => {
                (0.0, alpha.max(ALPHA))
            }
            Step::Increase { xi, alpha } => (xi, alpha),
        };
        let acked = acked_bytes as f64;
        let xi_s = VcpLaw::scaled_xi(xi, rtt.smoothed, self.config.interval);
        let alpha_s = VcpLaw::scaled_alpha(alpha, rtt.smoothed, self.config.interval);
        let mss = self.config.mss as f64;
        self.cwnd
            .set(self.cwnd.bytes() + xi_s * acked + alpha_s * mss * acked / self.cwnd.bytes());
        self.cwnd.set_mode(if xi > 0.0 {
            Mode::MultiplicativeIncrease
        } else {
            Mode::AdditiveIncrease
        });
    }

    fn mi_allowed(&self) -> bool {
        !self.decrease.mi_blocked()
    }
}

/// What the current load level asks of the window.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Step {
    /// Per RTT: window × (1 + ξ) + α packets (each scaled by RTT / t_p).
    Increase {
        /// MI step ξ.
        xi: f64,
        /// AI step α, in packets.
        alpha: f64,
    },
    /// Window × β, once, then hold.
    Decrease {
        /// MD factor β.
        beta: f64,
    },
}

impl VcpLevel {
    /// VCP's step for this level: MI(ξ = 0.0625), AI(α = 1), MD(β = 0.875).
    pub fn step(self) -> Step {
        match self {
            VcpLevel::Low => Step::Increase { xi: XI, alpha: 0.0 },
            VcpLevel::High => Step::Increase {
                xi: 0.0,
                alpha: ALPHA,
            },
            VcpLevel::Overload => Step::Decrease { beta: BETA },
        }
    }
}

impl<D: Decrease> crate::signal::Law for VcpLaw<D> {
    fn on_ack(&mut self, now: Duration, acked_bytes: u64, rtt: &RttSample) {
        self.apply(now, acked_bytes, rtt, self.level.step());
    }

    fn on_feedback(&mut self, now: Duration, feedback: Feedback, rtt: &RttSample) {
        self.level = VcpLevel::from_feedback(feedback.level);
        if self.level == VcpLevel::Overload {
            self.decrease_if_due(now, rtt, BETA);
        }
    }

    fn on_congestion(
        &mut self,
        now: Duration,
        sent: Duration,
        _kind: Congestion,
        _rtt: &RttSample,
    ) {
        self.cwnd.halve_on_congestion(now, sent);
    }

    fn window(&self) -> u64 {
        self.cwnd.whole_bytes()
    }

    fn mode(&self) -> Mode {
        self.cwnd.mode()
    }

    fn tag(&self) -> SchemeTag {
        SchemeTag::new(WIRE.id())
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::signal::load::LinkLoad;
    use crate::signal::Law;

    const MS: Duration = Duration::from_millis(1);

    /// A link whose VCP load factor is `rho`, empty queue (MPCP's tests too).
    pub(crate) fn link(rho: f64) -> LinkState {
        let mut load = LinkLoad::default();
        load[FORMULA] = LoadFactor::new(rho);
        LinkState {
            load,
            queue_bytes: 0,
            ..LinkState::default()
        }
    }

    fn fb(level: VcpLevel) -> Feedback {
        Feedback {
            level: level as u16,
            ..Feedback::default()
        }
    }

    #[test]
    fn thresholds_and_codes() {
        assert_eq!(VcpLevel::of(LoadFactor::new(0.7999)), VcpLevel::Low);
        assert_eq!(VcpLevel::of(LoadFactor::new(0.8)), VcpLevel::High);
        assert_eq!(VcpLevel::of(LoadFactor::new(0.9999)), VcpLevel::High);
        assert_eq!(VcpLevel::of(LoadFactor::new(1.0)), VcpLevel::Overload);
        assert_eq!(VcpLevel::Low.ecn(), Ecn::Ect1);
        assert_eq!(VcpLevel::High.ecn(), Ecn::Ect0);
        assert_eq!(VcpLevel::Overload.ecn(), Ecn::Ce);
        assert_eq!(VcpLevel::from_ecn(Ecn::NotEct), None);
    }

    #[test]
    fn xi_is_0_0625_at_80_percent() {
        // EVCP paper eq. 3: ξ(0.8) = 0.25 · 0.2 / 0.8.
        assert!((xi(LOW_LOAD_BOUND) - XI).abs() < 1e-15);
        assert_eq!(XI, 0.0625);
        assert_eq!(xi(1.0), 0.0);
        assert_eq!(xi(0.0), 0.0);
    }

    #[test]
    fn rtt_scaling() {
        let tp = MS * 200;
        // T = t_p: no scaling.
        assert!((VcpLaw::scaled_xi(XI, tp, tp) - XI).abs() < 1e-12);
        assert!((VcpLaw::scaled_alpha(1.0, tp, tp) - 1.0).abs() < 1e-12);
        // T = t_p/2: ξ_s = 1.0625^0.5 − 1, α_s = 0.25.
        assert!((VcpLaw::scaled_xi(XI, MS * 100, tp) - (1.0625f64.sqrt() - 1.0)).abs() < 1e-12);
        assert!((VcpLaw::scaled_alpha(1.0, MS * 100, tp) - 0.25).abs() < 1e-12);
        // T/t_p is capped at 2.5 for MI, not for AI.
        let capped = 1.0625f64.powf(2.5) - 1.0;
        assert!((VcpLaw::scaled_xi(XI, MS * 2000, tp) - capped).abs() < 1e-12);
        assert!((VcpLaw::scaled_alpha(1.0, MS * 2000, tp) - 100.0).abs() < 1e-9);
    }

    #[test]
    fn gamma_follows_capacity() {
        let at = |mbit: f64| gamma_for_capacity(mbit * 1e6 / 8.0);
        assert!((at(1.0) - 0.94).abs() < 1e-9);
        assert!((at(10.0) - 0.96).abs() < 1e-9);
        assert!((at(100.0) - 0.975).abs() < 1e-9);
        assert!((at(1000.0) - 0.985).abs() < 1e-9);
        assert_eq!(at(0.1), 0.94);
        assert_eq!(at(10_000.0), 0.985);
        assert!(at(30.0) > 0.96 && at(30.0) < 0.975);
    }

    #[test]
    fn marker_only_raises() {
        let mut m = VcpMarker;
        let mut p = PacketMarks {
            ecn: Ecn::Ect1,
            tag: SchemeTag::new(1),
            hash: 0,
            flow: 0,
        };
        m.mark(MS, &link(0.9), &mut p);
        assert_eq!(p.ecn, Ecn::Ect0);
        m.mark(MS, &link(0.1), &mut p);
        assert_eq!(p.ecn, Ecn::Ect0, "never lowered");
        m.mark(MS, &link(1.3), &mut p);
        assert_eq!(p.ecn, Ecn::Ce);
        p.ecn = Ecn::NotEct;
        m.mark(MS, &link(1.3), &mut p);
        assert_eq!(p.ecn, Ecn::NotEct);
    }

    #[test]
    fn receiver_learns_the_most_congested_router() {
        for rhos in [[0.5, 0.9, 0.2], [1.2, 0.1, 0.85], [0.3, 0.4, 0.79]] {
            let mut routers = [VcpMarker; 3];
            let mut p = PacketMarks {
                ecn: Ecn::Ect1,
                tag: SchemeTag::new(1),
                hash: 0,
                flow: 0,
            };
            for (r, rho) in routers.iter_mut().zip(rhos) {
                r.mark(MS, &link(rho), &mut p);
            }
            let mut d = VcpDecoder::default();
            // Routers write a level into every packet of an interval.
            for _ in 0..2 {
                d.on_packet(MS, p.ecn, p.tag, p.hash);
            }
            let worst = rhos.iter().cloned().fold(0.0, f64::max);
            assert_eq!(
                d.estimate(MS).level,
                VcpLevel::of(LoadFactor::new(worst)) as u16
            );
        }
    }

    #[test]
    fn a_lone_ce_is_no_overload_and_a_run_of_two_is() {
        let mut d = VcpDecoder::default();
        let mut read = |codes: &[Ecn]| {
            for &ecn in codes {
                d.on_packet(MS, ecn, SchemeTag::new(1), 0);
            }
            VcpLevel::from_feedback(d.estimate(MS).level)
        };
        use Ecn::*;
        assert_eq!(read(&[Ect1, Ce]), VcpLevel::Low);
        assert_eq!(read(&[Ect1, Ce, Ect0]), VcpLevel::High);
        // Not-ECT packets (a presence probe no router raised) leave a run alone.
        assert_eq!(read(&[Ce, NotEct, Ce]), VcpLevel::Overload);
        assert_eq!(read(&[Ce]), VcpLevel::Overload, "a run goes on");
        assert_eq!(read(&[Ect1, Ce]), VcpLevel::Low);
        assert_eq!(read(&[Ce, Ce, Ce]), VcpLevel::Overload);
    }

    #[test]
    fn mi_ai_md_hold_then_ai_only() {
        let tp = MS * 200;
        let rtt = RttSample::uniform(tp);
        let mut law = VcpLaw::new(LawConfig::with_mss(1000));
        // New flows start in MI: a window's worth of acks grows it by ξ.
        law.on_ack(MS, 10_000, &rtt);
        assert_eq!(law.window(), 10_625);
        assert_eq!(law.mode(), Mode::MultiplicativeIncrease);
        // High load: one packet per window.
        law.on_feedback(MS, fb(VcpLevel::High), &rtt);
        law.on_ack(MS, 10_625, &rtt);
        assert_eq!(law.window(), 11_625);
        // Overload: × 0.875 at once, then frozen for t_p.
        law.on_feedback(MS * 10, fb(VcpLevel::Overload), &rtt);
        assert_eq!(law.window(), (11_625.0 * 0.875) as u64);
        let held = law.window();
        law.on_feedback(MS * 100, fb(VcpLevel::Overload), &rtt);
        law.on_feedback(MS * 100, fb(VcpLevel::Low), &rtt);
        law.on_ack(MS * 100, 50_000, &rtt);
        assert_eq!(law.window(), held, "frozen for one t_p");
        assert_eq!(law.mode(), Mode::Hold);
        // Overload reported during the hold and the RTT after it describes
        // traffic from before the decrease: no second MD.
        law.on_feedback(MS * 250, fb(VcpLevel::Overload), &rtt);
        law.on_ack(MS * 250, 1, &rtt);
        assert_eq!(law.window(), held);
        law.on_feedback(MS * 250, fb(VcpLevel::Low), &rtt);
        // After the hold, one RTT of AI only even in low load.
        law.on_ack(MS * 300, held, &rtt);
        assert_eq!(law.mode(), Mode::AdditiveIncrease);
        assert!((law.window() as i64 - (held + 1000) as i64).abs() <= 1);
        // Then MI again.
        law.on_ack(MS * 411, 1000, &rtt);
        assert_eq!(law.mode(), Mode::MultiplicativeIncrease);
        // Overload from the interval during which the decreased traffic
        // reached the router comes up to a t_p later: still no second MD
        // (the MD was at 10 ms: hold to 210, RTT to 410, t_p to 610)...
        let grown = law.window();
        law.on_feedback(MS * 605, fb(VcpLevel::Overload), &rtt);
        law.on_ack(MS * 606, 1000, &rtt);
        assert_eq!(law.window(), grown);
        // ...but overload after that is a new episode.
        law.on_feedback(MS * 611, fb(VcpLevel::Overload), &rtt);
        assert!((law.window() as f64 - grown as f64 * 0.875).abs() <= 1.0);
    }

    #[test]
    fn loss_halves_once_per_round() {
        let rtt = RttSample::uniform(MS * 50);
        let mut law = VcpLaw::new(LawConfig::with_mss(1000));
        law.on_congestion(MS * 10, MS * 5, Congestion::Loss, &rtt);
        assert_eq!(law.window(), 5_000);
        law.on_congestion(MS * 11, MS * 6, Congestion::Loss, &rtt);
        assert_eq!(law.window(), 5_000);
        law.on_congestion(MS * 80, MS * 20, Congestion::Loss, &rtt);
        assert_eq!(law.window(), 2_500);
        // Never below the minimum window.
        law.on_congestion(MS * 200, MS * 150, Congestion::Loss, &rtt);
        assert_eq!(law.window(), 2_000);
    }
}
