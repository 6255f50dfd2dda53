//! BMCC — Binary Marking Congestion Control with ADPM (Qazi, Andrew & Znati,
//! "Two bits are enough"; Sorathiya & Zambare, "Performance Analysis of Binary
//! Marking Congestion Control Protocol"; docs/design.md §2 "Scheme notes").

use crate::signal::load::{Formula, IntervalStats, LoadFactor};

/// BMCC's DSCP pool tag (docs/design.md §2, tag table).
pub const WIRE: WireScheme = WireScheme::new(4);
/// Where a link's load holds f ([`Formula`]).
pub const FORMULA: Formula = Formula::new(1);
/// k_1 = 0.5, how fast the queue drains (BMCC paper Table 1).
pub const K1: f64 = 0.5;

/// The router's load-factor parameters (BMCC paper eq. 1.1).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LoadParams {
    /// γ_l ≤ 1, target utilization. The BMCC paper gives no value; ecnq uses
    /// VCP's capacity-dependent γ ([`crate::schemes::vcp::gamma_for_capacity`]).
    pub gamma: f64,
    /// k_1, weight of the average queue.
    pub k1: f64,
}

impl LoadParams {
    /// γ as for VCP, k_1 = 0.5.
    pub fn for_capacity(capacity: f64) -> LoadParams {
        LoadParams {
            gamma: crate::schemes::vcp::gamma_for_capacity(capacity),
            k1: K1,
        }
    }

    /// f = (λ + k_1·q_av) / (γ·C·t_p) (BMCC paper eq. 1.1).
    pub fn load_factor(&self, stats: &IntervalStats, capacity: f64) -> LoadFactor {
        let demand = stats.arrived_bytes as f64 + self.k1 * stats.queue_avg;
        LoadFactor::new(demand / (self.gamma * capacity * stats.length.as_secs_f64()))
    }
}

use std::time::Duration;

use crate::schemes::vcp::MI_SCALE_CAP;
use crate::signal::{
    Congestion, Decoder, Feedback, Law, LawConfig, LinkState, Marker, Mode, PacketMarks, RttSample,
    Window,
};
use crate::wire::ecn::{Ecn, SchemeTag, WireScheme};

/// k_2 = 0.35, the MI step size (BMCC paper Table 1 and eq. 1.2).
pub const K2: f64 = 0.35;
/// β_max = 0.875, the mildest back-off (BMCC paper Table 1).
pub const BETA_MAX: f64 = 0.875;
/// β_min = 0.65, the strongest back-off (BMCC paper Table 1).
pub const BETA_MIN: f64 = 0.65;
/// η_0 = 0.15: lower loads are rounded up to it; the initial estimate
/// (BMCC paper Table 1; ADPM paper's (0.15, 0) map point).
pub const ETA0: f64 = 0.15;
/// η = 0.75, the low / medium load threshold (BMCC paper Table 1).
pub const ETA: f64 = 0.75;
/// How many router periods t_p a reading under η must hold before a flow
/// past its start switches to MI; until then it holds its window. A stray
/// reading lasts one period at the router and reaches the sender spread
/// over about one more; two outlast it. ecnq's own rule (see [`BmccLaw`]);
/// the BMCC paper has none.
pub const LOW_LOAD_HOLD: u32 = 2;
/// u = 1.2, the "severely congested" load ADPM signals with `11` (ADPM
/// paper's (1.2, 1) map point; docs/design.md §2).
pub const U: f64 = 1.2;

/// The ADPM threshold θ of a packet hash: x = (h >> 16)/65 536 maps so that
/// 1/4 of packets fall in (η_0, η), 1/4 in (η, 1) and 1/2 in (1, u) (BMCC paper
/// §II-B; docs/design.md §2 "Scheme notes").
pub fn threshold(hash: u32) -> f64 {
    let x = f64::from(hash >> 16) / 65_536.0;
    if x < 0.25 {
        ETA0 + (ETA - ETA0) * 4.0 * x
    } else if x < 0.5 {
        ETA + (1.0 - ETA) * 4.0 * (x - 0.25)
    } else {
        1.0 + (U - 1.0) * 2.0 * (x - 0.5)
    }
}

/// The MD factor β(f̂) = β_max − Δβ·(f̂ − 1)/(u − 1), held within
/// [β_min, β_max] (BMCC paper §II-C (3)).
pub fn md_factor(estimate: f64) -> f64 {
    (BETA_MAX - (BETA_MAX - BETA_MIN) * (estimate - 1.0) / (U - 1.0)).clamp(BETA_MIN, BETA_MAX)
}

/// The load a BMCC feedback report carries, from its level (units of 1/10 000).
pub fn level_of(estimate: f64) -> u16 {
    (estimate * 10_000.0)
        .round()
        .clamp(0.0, f64::from(u16::MAX)) as u16
}

/// ADPM router marking (BMCC paper §II-A): `11` when f ≥ u (or already `11`);
/// else `01` when f > θ(h); else unchanged. Unmarked BMCC packets carry `10`.
#[derive(Clone, Copy, Debug, Default)]
pub struct BmccMarker;

impl Marker for BmccMarker {
    #[inline]
    fn mark(&mut self, _now: Duration, link: &LinkState, pkt: &mut PacketMarks) {
        if !pkt.ecn.is_ect() || pkt.ecn == Ecn::Ce {
            return;
        }
        let f = link.load[FORMULA].get();
        if f >= U {
            pkt.ecn = Ecn::Ce;
        } else if f > threshold(pkt.hash) {
            pkt.ecn = Ecn::Ect1;
        }
    }
}

/// ADPM receiver estimate (BMCC paper §II-B): `11` ⇒ u; an unmarked packet
/// whose threshold is below the estimate, or a marked one whose threshold is
/// above it, moves the estimate to that threshold. Every packet bounds the
/// bottleneck's load from one side; the estimate follows the tightest bound.
#[derive(Clone, Copy, Debug)]
pub struct BmccDecoder {
    estimate: f64,
}

impl Default for BmccDecoder {
    fn default() -> Self {
        BmccDecoder { estimate: ETA0 }
    }
}

impl Decoder for BmccDecoder {
    fn on_packet(&mut self, _now: Duration, ecn: Ecn, _tag: SchemeTag, hash: u32) -> bool {
        let before = self.estimate;
        match ecn {
            Ecn::Ce => self.estimate = U,
            Ecn::Ect0 | Ecn::Ect1 => {
                let theta = threshold(hash);
                let unmarked_below = ecn == Ecn::Ect0 && theta < self.estimate;
                let marked_above = ecn == Ecn::Ect1 && theta > self.estimate;
                if unmarked_below || marked_above {
                    self.estimate = theta;
                }
            }
            Ecn::NotEct => {}
        }
        self.estimate != before
    }

    fn estimate(&self, _now: Duration) -> Feedback {
        Feedback {
            level: level_of(self.estimate),
            load: crate::signal::load::LoadFactor::new(self.estimate),
            fairing: false,
        }
    }
}

/// The BMCC sender (BMCC paper §II-C): MI in low load (and for new flows until
/// the estimate first reaches 1), AI in medium load, MD by β(f̂) in overload;
/// Reno halving on loss.
///
/// Two departures from the paper (measurements: sim/REPRODUCTION.md,
/// "Deviations and tuning"):
///
/// * Decreases are 2 t_p + RTT apart, not one RTT, as VCP's episode
///   ([`crate::schemes::vcp::VcpLaw::decrease_if_due`]): the router's estimate
///   changes only every t_p, and the period in which the decreased traffic
///   arrives still reads overload.
/// * Once past its start, a flow takes a reading under η to mean spare
///   capacity only after it has held for [`LOW_LOAD_HOLD`] periods, and
///   holds its window until then: a decrease never takes the load under η,
///   so a low reading in steady state comes from senders that paused.
#[derive(Clone, Debug)]
pub struct BmccLaw {
    config: LawConfig,
    cwnd: Window,
    estimate: f64,
    /// New flows stay in MI until the estimate first reaches 1.
    starting: bool,
    /// Since when the estimate has been under η (after the start).
    low_since: Option<Duration>,
    last_decrease: Option<Duration>,
}

impl BmccLaw {
    /// A BMCC sender.
    pub fn new(config: LawConfig) -> BmccLaw {
        BmccLaw {
            cwnd: Window::new(config, Mode::MultiplicativeIncrease),
            config,
            estimate: ETA0,
            starting: true,
            low_since: None,
            last_decrease: None,
        }
    }

    /// The MI growth per RTT for an estimate: (1 + k_2(1−f̂)/f̂)^(T/t_p) − 1
    /// (BMCC paper eq. 1.2 with its RTT scaling). ecnq caps T/t_p at 2.5 as VCP
    /// does, so long-RTT flows do not burst.
    pub fn mi_growth(estimate: f64, rtt: Duration, interval: Duration) -> f64 {
        let f = estimate.max(ETA0);
        let ratio = (rtt.as_secs_f64() / interval.as_secs_f64()).min(MI_SCALE_CAP);
        (1.0 + K2 * (1.0 - f).max(0.0) / f).powf(ratio) - 1.0
    }

    fn decrease_due(&self, now: Duration, rtt: &RttSample) -> bool {
        let gap = self.config.interval * 2 + rtt.smoothed;
        self.estimate >= 1.0 && self.last_decrease.is_none_or(|t| now >= t + gap)
    }

    fn decrease(&mut self, now: Duration) {
        self.cwnd.set(self.cwnd.bytes() * md_factor(self.estimate));
        self.last_decrease = Some(now);
        self.cwnd.set_mode(Mode::Overloaded);
    }
}

impl Law for BmccLaw {
    fn on_ack(&mut self, now: Duration, acked_bytes: u64, rtt: &RttSample) {
        if self.estimate >= 1.0 {
            if self.decrease_due(now, rtt) {
                self.decrease(now);
            }
            return;
        }
        // Set only while the estimate is under η.
        let low_held = self
            .low_since
            .is_some_and(|t| now >= t + self.config.interval * LOW_LOAD_HOLD);
        if !self.starting && self.estimate < ETA && !low_held {
            self.cwnd.set_mode(Mode::Hold);
            return;
        }
        let acked = acked_bytes as f64;
        let grown = if self.starting || low_held {
            self.cwnd.set_mode(Mode::MultiplicativeIncrease);
            self.cwnd.bytes()
                + Self::mi_growth(self.estimate, rtt.smoothed, self.config.interval) * acked
        } else {
            // α = (T/t_p)² packets per RTT (BMCC paper eq. 1.3).
            let ratio = rtt.smoothed.as_secs_f64() / self.config.interval.as_secs_f64();
            self.cwnd.set_mode(Mode::AdditiveIncrease);
            self.cwnd.bytes() + ratio * ratio * self.config.mss as f64 * acked / self.cwnd.bytes()
        };
        self.cwnd.set(grown);
    }

    fn on_feedback(&mut self, now: Duration, feedback: Feedback, rtt: &RttSample) {
        self.estimate = feedback.load.get();
        if self.estimate >= ETA {
            self.low_since = None;
        } else if self.low_since.is_none() {
            self.low_since = Some(now);
        }
        if self.estimate >= 1.0 {
            self.starting = false;
            if self.decrease_due(now, rtt) {
                self.decrease(now);
            }
        }
    }

    fn on_congestion(
        &mut self,
        now: Duration,
        sent: Duration,
        _kind: Congestion,
        _rtt: &RttSample,
    ) {
        if self.cwnd.halve_on_congestion(now, sent) {
            self.starting = false;
        }
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
mod tests {
    use super::*;
    use crate::signal::load::LinkLoad;
    use crate::signal::load::LoadFactor;

    const MS: Duration = Duration::from_millis(1);

    fn hash_for(x: f64) -> u32 {
        ((x * 65_536.0) as u32) << 16
    }

    #[test]
    fn table1_parameters() {
        assert_eq!(
            (K1, K2, BETA_MAX, BETA_MIN, ETA0, ETA, U),
            (0.5, 0.35, 0.875, 0.65, 0.15, 0.75, 1.2)
        );
    }

    #[test]
    fn threshold_map_is_the_inverse_of_the_adpm_congestion_map() {
        // Breakpoints: x = 0 → η0, ¼ → η, ½ → 1, 1 → u.
        assert!((threshold(0) - ETA0).abs() < 1e-12);
        assert!((threshold(hash_for(0.25)) - ETA).abs() < 1e-12);
        assert!((threshold(hash_for(0.5)) - 1.0).abs() < 1e-12);
        assert!((threshold(u32::MAX) - U).abs() < 1e-4);
        // A quarter of hashes in (η0, η), a quarter in (η, 1), half in (1, u).
        let mut bins = [0u32; 3];
        for i in 0u32..40_000 {
            let t = threshold(crate::wire::hash::fmix32(i));
            bins[usize::from(t >= ETA) + usize::from(t >= 1.0)] += 1;
        }
        assert!((9_500..10_500).contains(&bins[0]), "{bins:?}");
        assert!((9_500..10_500).contains(&bins[1]), "{bins:?}");
        assert!((19_500..20_500).contains(&bins[2]), "{bins:?}");
        // Monotone.
        let mut last = 0.0;
        for x in 0..=65_535u32 {
            let t = threshold(x << 16);
            assert!(t >= last);
            last = t;
        }
    }

    #[test]
    fn beta_endpoints_and_linearity() {
        assert_eq!(md_factor(1.0), BETA_MAX);
        assert!((md_factor(U) - BETA_MIN).abs() < 1e-12);
        assert!((md_factor(1.1) - (BETA_MAX + BETA_MIN) / 2.0).abs() < 1e-12);
        assert_eq!(md_factor(5.0), BETA_MIN);
    }

    fn link(f: f64) -> LinkState {
        let mut load = LinkLoad::default();
        load[FORMULA] = LoadFactor::new(f);
        LinkState {
            load,
            queue_bytes: 0,
            ..LinkState::default()
        }
    }

    fn marks(ecn: Ecn, hash: u32) -> PacketMarks {
        PacketMarks {
            ecn,
            tag: SchemeTag::new(4),
            hash,
            flow: 1,
        }
    }

    #[test]
    fn marking_rules() {
        let mut m = BmccMarker;
        let mut p = marks(Ecn::Ect0, hash_for(0.5)); // θ = 1.0
        m.mark(MS, &link(0.9), &mut p);
        assert_eq!(p.ecn, Ecn::Ect0, "f ≤ θ leaves the packet unchanged");
        m.mark(MS, &link(1.05), &mut p);
        assert_eq!(p.ecn, Ecn::Ect1, "f > θ marks 01");
        m.mark(MS, &link(0.2), &mut p);
        assert_eq!(p.ecn, Ecn::Ect1, "a mark is never removed");
        m.mark(MS, &link(1.2), &mut p);
        assert_eq!(p.ecn, Ecn::Ce, "f ≥ u marks 11");
        m.mark(MS, &link(0.0), &mut p);
        assert_eq!(p.ecn, Ecn::Ce, "11 stays");
    }

    #[test]
    fn decoder_follows_the_tightest_bound() {
        let mut d = BmccDecoder::default();
        assert_eq!(d.estimate(MS).load.get(), ETA0);
        // Marked with θ = 0.9 > f̂: the load is above 0.9.
        assert!(d.on_packet(MS, Ecn::Ect1, SchemeTag::new(4), hash_for(0.4)));
        let t = threshold(hash_for(0.4));
        assert_eq!(d.estimate(MS).load.get(), t);
        // A marked packet with a lower threshold tells nothing new.
        assert!(!d.on_packet(MS, Ecn::Ect1, SchemeTag::new(4), hash_for(0.1)));
        // Unmarked with θ below the estimate: the load is at most θ.
        assert!(d.on_packet(MS, Ecn::Ect0, SchemeTag::new(4), hash_for(0.3)));
        assert_eq!(d.estimate(MS).load.get(), threshold(hash_for(0.3)));
        assert!(d.on_packet(MS, Ecn::Ce, SchemeTag::new(4), 0));
        assert_eq!(d.estimate(MS).load.get(), U);
        assert!(!d.on_packet(MS, Ecn::NotEct, SchemeTag::new(4), 0));
    }

    #[test]
    fn decoder_converges_to_the_load_of_the_worst_router_in_series() {
        for (f1, f2) in [(0.3, 0.95), (1.1, 0.5), (0.8, 0.81)] {
            let mut routers = [BmccMarker, BmccMarker];
            let mut d = BmccDecoder::default();
            for i in 0..4_000u32 {
                let mut p = marks(Ecn::Ect0, crate::wire::hash::fmix32(i));
                routers[0].mark(MS, &link(f1), &mut p);
                routers[1].mark(MS, &link(f2), &mut p);
                d.on_packet(MS, p.ecn, p.tag, p.hash);
            }
            let want = f64::max(f1, f2);
            let got = d.estimate(MS).load.get();
            assert!((got - want).abs() < 0.01, "max({f1}, {f2}): estimate {got}");
        }
    }

    #[test]
    fn law_modes() {
        let cfg = LawConfig::with_mss(1000);
        let rtt = RttSample::uniform(MS * 200); // T = t_p: no scaling
        let fb = |f: f64| Feedback {
            load: LoadFactor::new(f),
            ..Feedback::default()
        };
        let mut law = BmccLaw::new(cfg);
        // Low load: MI by k2(1-f)/f per RTT: at f = 0.5, ×1.35.
        law.on_feedback(MS, fb(0.5), &rtt);
        law.on_ack(MS, 10_000, &rtt);
        assert_eq!(law.window(), 13_500);
        // A new flow stays in MI in medium load until f̂ first reaches 1.
        law.on_feedback(MS, fb(0.9), &rtt);
        law.on_ack(MS, 13_500, &rtt);
        assert_eq!(law.mode(), Mode::MultiplicativeIncrease);
        let w = law.window() as f64;
        // Overload: MD by β(1.1) = 0.7625.
        law.on_feedback(MS * 2, fb(1.1), &rtt);
        assert_eq!(law.window(), (w * 0.7625) as u64);
        // Not again for 2 t_p + RTT, even after an RTT, or after t_p + RTT
        // (the verdict on the period the decreased traffic arrived in).
        law.on_feedback(MS * 250, fb(1.1), &rtt);
        assert_eq!(law.window(), (w * 0.7625) as u64);
        law.on_feedback(MS * 550, fb(1.1), &rtt);
        assert_eq!(law.window(), (w * 0.7625) as u64);
        law.on_feedback(MS * 602, fb(1.1), &rtt);
        assert_eq!(law.window(), (w * 0.7625 * 0.7625) as u64);
        // Medium load after the first overload: AI of one packet per RTT.
        law.on_feedback(MS * 700, fb(0.9), &rtt);
        let w = law.window();
        law.on_ack(MS * 700, w, &rtt);
        assert_eq!(law.mode(), Mode::AdditiveIncrease);
        assert!((law.window() as i64 - (w + 1000) as i64).abs() <= 1);
    }

    #[test]
    fn past_its_start_a_flow_takes_a_low_reading_to_mi_only_once_it_holds() {
        let cfg = LawConfig::with_mss(1000);
        let rtt = RttSample::uniform(MS * 200);
        let fb = |f: f64| Feedback {
            load: LoadFactor::new(f),
            ..Feedback::default()
        };
        let grows_by = |law: &mut BmccLaw, now: Duration| {
            let w = law.window();
            law.on_ack(now, w, &rtt);
            (law.mode(), law.window() - w)
        };
        let mut law = BmccLaw::new(cfg);
        law.on_feedback(MS, fb(1.0), &rtt);
        // A stray reading of 0.68 for one period: the window holds.
        law.on_feedback(MS * 1_000, fb(0.68), &rtt);
        assert_eq!(grows_by(&mut law, MS * 1_150), (Mode::Hold, 0));
        // Back at η, AI; and the hold starts over: 0.68 again is new.
        law.on_feedback(MS * 1_250, fb(0.8), &rtt);
        let (mode, step) = grows_by(&mut law, MS * 1_250);
        assert_eq!(mode, Mode::AdditiveIncrease);
        assert!((999..=1_001).contains(&step), "{step}");
        law.on_feedback(MS * 1_300, fb(0.68), &rtt);
        assert_eq!(grows_by(&mut law, MS * 1_650), (Mode::Hold, 0));
        // Two periods under η: spare capacity, MI by k2(1-f)/f per RTT.
        let w = law.window() as f64;
        let (mode, step) = grows_by(&mut law, MS * 1_700);
        assert_eq!(mode, Mode::MultiplicativeIncrease);
        assert!((step as f64 - w * K2 * 0.32 / 0.68).abs() <= 1.0, "{step}");
    }
}
