//! MCP — Multimodal Control Protocol (Podlesny & Gorinsky, "Multimodal
//! Congestion Control for Low Stable-State Queuing", WUCSE-2006-41).
//!
//! * Router: U = (N + Q) / (C·T) (eq. 1) in two bits: `00` below 48 %, `01`
//!   below 88 %, `10` below 98 %, else `11` (§IV-E, Fig. 2); a router only
//!   raises the code (§IV-A.3). A packet with both the fairing and the
//!   this-path bit set makes the router set the fairing bit of every MCP
//!   packet with code `01` or `10` it forwards until the end of the next
//!   measurement period (§IV-D.2).
//! * Receiver: echoes the latest code and the latest packet's fairing bit (§IV-I.4).
//! * Sender: a rate, adjusted once per 2T by the mode of Fig. 2 — MI(2),
//!   AI(80 kbit/s), MI(1.1), AI then one AD, constant, MD(0.5); nascent
//!   overload decreases at once and restarts the adjustment timer (§IV-H). A
//!   new flow sets fairing + this-path until it has seen seven
//!   increase-decrease cycles (§IV-D.1).
//!
//! Where no ecnq router is on the path, every packet arrives with code `00`,
//! the same as a lightly used ecnq link, and the paper's sender would double
//! its rate into a queue it cannot see. The session's presence probes tell
//! the two apart: an MCP probe sets the probe bit of its tag (`00` leaves
//! no codepoint below it), every ecnq router that meters MCP clears it, and
//! a sender whose probes keep arriving with the bit runs Cubic
//! (`session::presence`). Where an ecnq router raises the probes but is not
//! the bottleneck, the law tells the two apart by loss: a loss while no
//! code above `00` has come for [`ROUTER_SPAN_PERIODS`] adjustment periods
//! happened at a link no ecnq router meters, and the flow runs Cubic from
//! its current rate until a code above `00` arrives again (docs/design.md
//! §2, router presence).
//!
//! Rates are in bytes per second, like every other ecnq figure; the paper
//! counts bits per second, and each constant gives both. In QUIC the rate
//! becomes a window = rate × srtt and the pacer spreads it (docs/design.md §2).

use std::time::Duration;

use crate::schemes::cubic::CubicLaw;
use crate::signal::load::{Formula, IntervalStats, LoadFactor};
use crate::signal::{
    Congestion, Decoder, Feedback, Law, LawConfig, LinkState, Marker, Mode, PacketMarks, RttSample,
};
use crate::wire::ecn::{Ecn, SchemeTag, WireScheme};

/// Where a link's load holds U ([`Formula`]).
pub const FORMULA: Formula = Formula::new(2);

/// U = (N + Q) / (C·T), Q the minimum queue of the period (MCP paper eq. 1).
pub fn utilization(stats: &IntervalStats, capacity: f64) -> LoadFactor {
    let demand = stats.arrived_bytes as f64 + stats.queue_min as f64;
    LoadFactor::new(demand / (capacity * stats.length.as_secs_f64()))
}

/// MCP's DSCP pool tags start here: tags 8..=15 carry the fairing bit in
/// bit 0, the this-path bit in bit 1 and ecnq's presence-probe bit in bit 2
/// (docs/design.md §2, tag table).
pub const WIRE: WireScheme = WireScheme::new(8);
/// U < 48 % is code `00`, scaling mode (MCP paper §IV-B, §IV-E, Fig. 2).
pub const SCALING_BOUND: f64 = 0.48;
/// U < 88 % is code `01`, enhancing mode (MCP paper §IV-E, Fig. 2).
pub const ENHANCING_BOUND: f64 = 0.88;
/// U ≥ 98 % is code `11`, overloaded mode (MCP paper §IV-C, Fig. 2).
pub const OVERLOAD_BOUND: f64 = 0.98;
/// Code `11` has no upper bound (MCP paper Fig. 2: [0.98; ∞)); feedback
/// reports 120 % as a representative, as VCP does for its overload.
pub const OVERLOAD_REPRESENTATIVE: f64 = 1.2;

/// Scaling mode: MI(2) (MCP paper §IV-B).
pub const SCALING_FACTOR: f64 = 2.0;
/// Enhancing mode: MI(1.1) (MCP paper §IV-E).
pub const ENHANCING_FACTOR: f64 = 1.1;
/// Overloaded mode: MD(0.5) (MCP paper §IV-C).
pub const DECREASE_FACTOR: f64 = 0.5;
/// The AI step of the fairing and smoothing modes and the smoothing mode's
/// one AD: 80 kbit/s = 10 000 bytes/s (MCP paper §IV-D, §IV-F).
pub const RATE_STEP: f64 = 10_000.0;
/// Every flow starts at 80 kbit/s = 10 000 bytes/s (MCP paper §IV-H).
pub const INITIAL_RATE: f64 = 10_000.0;
/// No law rate exceeds 100 Gbit/s = 12.5 Gbyte/s: ecnq's bound (the paper
/// has none), so that MI(2) can never make the rate infinite.
pub const MAX_RATE: f64 = 12.5e9;
/// A fairing request lasts seven increase-decrease cycles, which lift the
/// fairness index to at least 0.98 (MCP paper §IV-D.1).
pub const FAIRING_CYCLES: u32 = 7;
/// Senders adjust the rate once per 2T, T the measurement period (MCP paper §IV-H).
pub const ADJUSTMENT_PERIODS: u32 = 2;
/// A loss counts as one at a link without an ecnq router when no code above
/// `00` arrived for this many adjustment periods (2T each; 3.2 s at the
/// default T = 200 ms). ecnq's, not the paper's: a loaded ecnq router writes
/// at least `01` from 48 % utilization on, long before its queue overflows,
/// so a flow whose bottleneck it is has seen such a code within a few
/// periods of any loss there, even right after a halving.
pub const ROUTER_SPAN_PERIODS: u32 = 8;

/// A fairing request at a router lasts while the link's last completed
/// period is below e + 2, e the last completed period when the request
/// arrived: the rest of period e + 1 in progress, and all of the next
/// period e + 2 (MCP paper §IV-D.2, "before the end of the next period").
pub const FAIRING_PERIODS: u64 = 2;
/// The longest burst the sender's pacing lets out at once. The paper's
/// sender spaces every packet at 8S/R (MCP §IV-H); ecnq's transport lets
/// 1 ms of the rate through at once and catches up on what quinn did not
/// ask for in time, as erc does, so that the ecnq queue stays short beside
/// Cubic (issue 20: under 2 ms at p99).
const BURST: Duration = Duration::from_millis(1);

/// MCP's four utilization codes (MCP paper §IV-E, Fig. 2). Their order is
/// the order of utilization, and of the ECN bits that carry them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum McpCode {
    /// U < 48 %: code `00`, scaling mode. What senders send (§IV-A.3).
    #[default]
    Light = 0,
    /// 48 % ≤ U < 88 %: code `01`, enhancing (or fairing) mode.
    Moderate = 1,
    /// 88 % ≤ U < 98 %: code `10`, smoothing or stable (or fairing) mode.
    High = 2,
    /// U ≥ 98 %: code `11`, overloaded mode.
    Overload = 3,
}

impl McpCode {
    /// The code of a measured utilization.
    pub fn of(utilization: LoadFactor) -> McpCode {
        match utilization.get() {
            u if u < SCALING_BOUND => McpCode::Light,
            u if u < ENHANCING_BOUND => McpCode::Moderate,
            u if u < OVERLOAD_BOUND => McpCode::High,
            _ => McpCode::Overload,
        }
    }

    /// The code a codepoint carries: all four are codes, `00` the lowest.
    pub fn from_ecn(ecn: Ecn) -> McpCode {
        match ecn {
            Ecn::NotEct => McpCode::Light,
            Ecn::Ect1 => McpCode::Moderate,
            Ecn::Ect0 => McpCode::High,
            Ecn::Ce => McpCode::Overload,
        }
    }

    /// The codepoint for this code.
    pub fn ecn(self) -> Ecn {
        Ecn::from_bits(self as u8)
    }

    /// The level number `0..=3` reported in [`Feedback::level`].
    pub fn level(self) -> u16 {
        self as u16
    }

    /// The code of a feedback level number (out of range → overload).
    pub fn from_level(level: u16) -> McpCode {
        match level {
            0 => McpCode::Light,
            1 => McpCode::Moderate,
            2 => McpCode::High,
            _ => McpCode::Overload,
        }
    }

    /// The upper bound of the code's range: 48 %, 88 %, 98 %, and for `11`
    /// the representative [`OVERLOAD_REPRESENTATIVE`].
    pub fn encoded_load(self) -> f64 {
        match self {
            McpCode::Light => SCALING_BOUND,
            McpCode::Moderate => ENHANCING_BOUND,
            McpCode::High => OVERLOAD_BOUND,
            McpCode::Overload => OVERLOAD_REPRESENTATIVE,
        }
    }

    /// Whether the code is in [0.48; 0.98), the range where fairing applies
    /// (MCP paper §IV-D, Fig. 2).
    pub fn admits_fairing(self) -> bool {
        matches!(self, McpCode::Moderate | McpCode::High)
    }
}

/// The two-bit code of a utilization as a codepoint: `00` [0, 0.48), `01`
/// [0.48, 0.88), `10` [0.88, 0.98), `11` [0.98, ∞) (MCP paper §IV-E, Fig. 2).
pub fn code_of(utilization: LoadFactor) -> Ecn {
    McpCode::of(utilization).ecn()
}

/// MCP router marking for one link: raises codes and propagates fairing
/// requests. The caller hands it MCP packets only (by DSCP tag, or all
/// packets when the router is forced to MCP).
#[derive(Clone, Copy, Debug, Default)]
pub struct McpMarker {
    /// Fairing bits are set while the link's last completed period is below
    /// this; 0 (the default) never holds, so no request is active.
    fairing_until: u64,
}

impl McpMarker {
    /// A marker with no fairing request active.
    pub fn new() -> McpMarker {
        McpMarker::default()
    }

    /// Whether a fairing request is being propagated on a link whose last
    /// completed measurement period is `epoch`.
    ///
    /// Before the meter's first period closes, its epoch reads 0 as it does
    /// after the first closes, so a request that early lasts one period more.
    pub fn propagating(&self, epoch: u64) -> bool {
        epoch < self.fairing_until
    }
}

impl Marker for McpMarker {
    #[inline]
    fn mark(&mut self, _now: Duration, link: &LinkState, pkt: &mut PacketMarks) {
        // Every MCP packet carries a code, `00` included: raise it, never lower it.
        let code = McpCode::from_ecn(pkt.ecn).max(McpCode::of(link.load[FORMULA]));
        pkt.ecn = code.ecn();
        // Only a sender sets this-path, so only a sender's own request
        // propagates; fairing bits set by routers do not chain (§IV-D.2).
        if pkt.tag.fairing && pkt.tag.this_path {
            let until = link.load.epoch.saturating_add(FAIRING_PERIODS);
            self.fairing_until = self.fairing_until.max(until);
        }
        if self.propagating(link.load.epoch) && code.admits_fairing() {
            pkt.tag.fairing = true;
        }
    }
}

/// MCP receiver: the latest code and the latest packet's fairing bit
/// (MCP paper §IV-I.4). Starts at `00`, the code senders send.
#[derive(Clone, Copy, Debug, Default)]
pub struct McpDecoder {
    code: McpCode,
    fairing: bool,
}

impl Decoder for McpDecoder {
    fn on_packet(&mut self, _now: Duration, ecn: Ecn, tag: SchemeTag, _hash: u32) -> bool {
        let code = McpCode::from_ecn(ecn);
        let changed = code != self.code || tag.fairing != self.fairing;
        self.code = code;
        self.fairing = tag.fairing;
        changed
    }

    fn estimate(&self, _now: Duration) -> Feedback {
        Feedback {
            level: self.code.level(),
            load: LoadFactor::new(self.code.encoded_load()),
            fairing: self.fairing,
        }
    }
}

/// The MCP sender: a rate in bytes per second and the mode of Fig. 2.
///
/// Adjustments fall due once per 2T (T = [`LawConfig::interval`]) from the
/// first event the law sees; every `on_ack` / `on_feedback` /
/// `on_congestion` applies the one that is due, so no timer is needed.
/// Readings of the paper where it is silent:
///
/// * The smoothing mode's one AD is its reaction to the first overload; the
///   flow is then stable. Stable lasts while the code stays `10` without
///   fairing (an overload code that persists to the next adjustment instant
///   is sustained overload, MD(0.5)); any other code ends it, and a later
///   return to `10` smooths again.
/// * An increase-decrease cycle ends with a decrease (MD or AD) that follows
///   at least one increase; a run of decreases counts once.
/// * Loss and unexplained CE act as overload: MD(0.5) at once, timer
///   restarted, at most once per round trip — a packet sent before the last
///   decrease of any cause is part of the event that decrease answered.
/// * The rate stays within one MSS per 2T (so that feedback keeps coming) and
///   [`MAX_RATE`].
///
/// Three departures from the paper (measurements: sim/REPRODUCTION.md,
/// "Deviations and tuning"):
///
/// * A stable flow without a fairing request halves only for an overload
///   code that holds for 2T (three measurements in a row), because the
///   utilization a router measures wanders by a point or two at constant
///   rates; lower codes end the stable state at once, as in the paper.
/// * After MD(0.5), code `00` means the halving overshot the 49 % it aims at
///   (§IV-C), not a lightly used link: the flow enhances, MI(1.1), instead of
///   doubling, until a higher code arrives.
/// * With round trips as long as T, a code that cannot yet reflect the last
///   halving (it arrived sooner than T and a round trip after it) neither
///   halves again nor ends the enhancing that follows a halving.
/// * MI(2) goes no higher than the rate the last overload came at: the
///   doubling from under 48 % is to land under 96 % (§IV-B), and that rate
///   was read as 98 % or more. A flow sending under its rate (the transport
///   asks late) reads `00` a few points above 48 % of the link, and
///   doubling stood a queue: MCP beside BBR on the real stack, at 13.3
///   Mbit/s of a 25 Mbit/s share, doubled to 26.6 after halving from
///   24.2. A `00` at or above that rate means capacity was freed: the flow
///   doubles and forgets it.
#[derive(Clone, Debug)]
pub struct McpLaw {
    config: LawConfig,
    /// Bytes per second.
    rate: f64,
    min_rate: f64,
    /// 2T.
    period: Duration,
    code: McpCode,
    fairing_echo: bool,
    mode: Mode,
    next_adjustment: Option<Duration>,
    last_decrease: Option<Duration>,
    /// When the rate was last halved.
    halved_at: Option<Duration>,
    /// When the latest report arrived.
    reported_at: Option<Duration>,
    /// The latest non-zero smoothed RTT.
    srtt: Option<Duration>,
    /// An increase happened since the last decrease.
    increased: bool,
    /// MD(0.5) happened and no code above `00` has arrived since.
    halved: bool,
    /// The rate the last overload halved: what MI(2) stops at.
    overload_rate: Option<f64>,
    /// A stable flow's pending overload: when it counts as confirmed.
    overload_confirmed_at: Option<Duration>,
    cycles: u32,
    /// When the latest code above `00` arrived.
    router_spoke_at: Option<Duration>,
    /// While no ecnq router is at the bottleneck: the Cubic law in control.
    unassisted: Option<CubicLaw>,
}

impl McpLaw {
    /// An MCP sender at the initial 80 kbit/s, in scaling mode, requesting fairing.
    pub fn new(config: LawConfig) -> McpLaw {
        // A zero t_p would make every call an adjustment instant: floor 2T
        // at a microsecond, as the meter floors t_p.
        let period = config
            .interval
            .saturating_mul(ADJUSTMENT_PERIODS)
            .max(Duration::from_micros(1));
        let min_rate = (config.mss as f64 / period.as_secs_f64()).min(MAX_RATE);
        let mut law = McpLaw {
            config,
            rate: INITIAL_RATE,
            min_rate,
            period,
            code: McpCode::Light,
            fairing_echo: false,
            mode: Mode::Scaling,
            next_adjustment: None,
            last_decrease: None,
            halved_at: None,
            reported_at: None,
            srtt: None,
            increased: false,
            halved: false,
            overload_rate: None,
            overload_confirmed_at: None,
            cycles: 0,
            router_spoke_at: None,
            unassisted: None,
        };
        law.set_rate(INITIAL_RATE);
        law
    }

    /// The sending rate in bytes per second.
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// The smallest rate the law goes down to: one MSS per 2T, in bytes per second.
    pub fn min_rate(&self) -> f64 {
        self.min_rate
    }

    /// When the next scheduled adjustment falls due (None before the first event).
    pub fn next_adjustment(&self) -> Option<Duration> {
        self.next_adjustment
    }

    /// Increase-decrease cycles seen since the flow started or last requested fairing.
    pub fn cycles(&self) -> u32 {
        self.cycles
    }

    /// Whether the sender's packets request fairing (fairing + this-path bits).
    pub fn requests_fairing(&self) -> bool {
        self.cycles < FAIRING_CYCLES
    }

    /// Requests fairing for the next seven cycles again, e.g. when an
    /// application that sent below its fair share wants it back (§IV-D.2).
    pub fn request_fairing(&mut self) {
        self.cycles = 0;
        self.increased = false;
    }

    /// Whether the flow runs Cubic because its bottleneck has no ecnq router.
    pub fn is_unassisted(&self) -> bool {
        self.unassisted.is_some()
    }

    /// Whether a loss at `now` happened at a link without an ecnq router:
    /// no code above `00` for [`ROUTER_SPAN_PERIODS`] adjustment periods.
    fn router_silent(&self, now: Duration) -> bool {
        let span = self.period.saturating_mul(ROUTER_SPAN_PERIODS);
        self.code == McpCode::Light
            && self
                .router_spoke_at
                .is_none_or(|at| now >= at.saturating_add(span))
    }

    /// A router speaks again: MCP from the rate Cubic reached, in the mode
    /// the code selects, adjusting 2T from now.
    fn leave_cubic(&mut self, now: Duration) {
        if let Some(cubic) = self.unassisted.take() {
            let srtt = self.srtt.unwrap_or(self.period).as_secs_f64();
            self.set_rate(cubic.window() as f64 / srtt);
            self.halved = false;
            self.restart_timer(now);
        }
    }

    fn set_rate(&mut self, rate: f64) {
        self.rate = if rate.is_nan() {
            self.min_rate
        } else {
            rate.clamp(self.min_rate, MAX_RATE)
        };
    }

    fn observe_rtt(&mut self, rtt: &RttSample) {
        if !rtt.smoothed.is_zero() {
            self.srtt = Some(rtt.smoothed);
        }
    }

    fn restart_timer(&mut self, now: Duration) {
        self.next_adjustment = Some(now.checked_add(self.period).unwrap_or(Duration::MAX));
    }

    /// Applies the adjustment due at `now`, if one is. When several instants
    /// passed since the last call (an idle sender, no acks) it applies one,
    /// not one per instant: the feedback it holds is stale, and MI(2)
    /// compounded over an idle spell would flood the path. The schedule keeps
    /// its phase.
    fn advance(&mut self, now: Duration) {
        self.confirm_overload(now);
        let Some(due) = self.next_adjustment else {
            self.restart_timer(now);
            return;
        };
        if now < due {
            return;
        }
        self.adjust(now);
        let late = (now - due).as_nanos() % self.period.as_nanos();
        let late = u64::try_from(late).map_or(Duration::ZERO, Duration::from_nanos);
        self.restart_timer(now - late);
    }

    /// Whether the flow is stable and no fairing request is in: it keeps its
    /// rate under an overload code until the overload is confirmed.
    fn holds_stable(&self) -> bool {
        self.mode == Mode::Stable && !self.fairing_echo
    }

    /// Whether the latest report can describe traffic sent after the last
    /// halving: it arrived T and a smoothed round trip after it, or later
    /// (see the type's doc).
    fn reports_since_halving(&self) -> bool {
        let Some(halved_at) = self.halved_at else {
            return true;
        };
        let settled = halved_at
            .saturating_add(self.config.interval)
            .saturating_add(self.srtt.unwrap_or_default());
        self.reported_at.is_some_and(|at| at >= settled)
    }

    /// Halves a stable flow whose overload code held until it counted as
    /// confirmed, and restarts the timer, as a nascent overload does in the
    /// other modes (see the type's doc).
    fn confirm_overload(&mut self, now: Duration) {
        if self.holds_stable()
            && self.overload_confirmed_at.is_some_and(|at| now >= at)
            && self.reports_since_halving()
        {
            self.overload_confirmed_at = None;
            self.halve(now);
            self.restart_timer(now);
        }
    }

    /// One scheduled adjustment by the mode of Fig. 2.
    fn adjust(&mut self, now: Duration) {
        if self.holds_stable() {
            return;
        }
        if self.code == McpCode::Overload {
            // Sustained overload: one decrease per 2T (§IV-H).
            self.on_overload(now);
            return;
        }
        self.mode = self.mode_for_feedback();
        match self.mode {
            Mode::Scaling => {
                let doubled = self.rate * SCALING_FACTOR;
                let rate = match self.overload_rate {
                    Some(ceiling) if ceiling > self.rate => doubled.min(ceiling),
                    _ => {
                        self.overload_rate = None;
                        doubled
                    }
                };
                self.increase(rate);
            }
            Mode::Enhancing => self.increase(self.rate * ENHANCING_FACTOR),
            Mode::Fairing | Mode::Smoothing => self.increase(self.rate + RATE_STEP),
            _ => {}
        }
    }

    /// The mode the latest feedback selects (Fig. 2). Under overload the mode
    /// stays what the decrease made it (overloaded, or stable after the AD).
    fn mode_for_feedback(&self) -> Mode {
        match self.code {
            McpCode::Light if self.halved => Mode::Enhancing,
            McpCode::Light => Mode::Scaling,
            McpCode::Overload => self.mode,
            McpCode::Moderate | McpCode::High if self.fairing_echo => Mode::Fairing,
            McpCode::Moderate => Mode::Enhancing,
            McpCode::High if self.mode == Mode::Stable => Mode::Stable,
            McpCode::High => Mode::Smoothing,
        }
    }

    fn increase(&mut self, rate: f64) {
        self.set_rate(rate);
        self.increased = true;
    }

    /// Overload feedback: a smoothing flow backtracks by AD(80 kbit/s) once
    /// and becomes stable (§IV-F); any other flow halves (§IV-C), unless the
    /// code may still describe the traffic before its last halving. Returns
    /// whether the rate went down.
    fn on_overload(&mut self, now: Duration) -> bool {
        if self.mode == Mode::Smoothing {
            self.decrease(now, self.rate - RATE_STEP);
            self.mode = Mode::Stable;
            // An overload that outlasts the backtrack until the next
            // adjustment instant is sustained (§IV-H).
            self.overload_confirmed_at = now.checked_add(self.period);
        } else if self.reports_since_halving() {
            self.halve(now);
        } else {
            return false;
        }
        true
    }

    fn halve(&mut self, now: Duration) {
        self.overload_rate = Some(self.rate);
        self.decrease(now, self.rate * DECREASE_FACTOR);
        self.mode = Mode::Overloaded;
        self.halved = true;
        self.halved_at = Some(now);
    }

    fn decrease(&mut self, now: Duration, rate: f64) {
        self.set_rate(rate);
        if std::mem::take(&mut self.increased) {
            self.cycles = self.cycles.saturating_add(1);
        }
        self.last_decrease = Some(now);
    }
}

impl Law for McpLaw {
    fn on_ack(&mut self, now: Duration, acked_bytes: u64, rtt: &RttSample) {
        self.observe_rtt(rtt);
        match &mut self.unassisted {
            Some(cubic) => cubic.on_ack(now, acked_bytes, rtt),
            None => self.advance(now),
        }
    }

    fn on_feedback(&mut self, now: Duration, feedback: Feedback, rtt: &RttSample) {
        self.observe_rtt(rtt);
        // An adjustment that fell due before this report uses the feedback
        // that was current then.
        self.advance(now);
        let code = McpCode::from_level(feedback.level);
        if code > McpCode::Light {
            self.router_spoke_at = Some(now);
            self.leave_cubic(now);
        }
        if self.unassisted.is_some() {
            self.code = code;
            self.fairing_echo = feedback.fairing;
            return;
        }
        let nascent = code == McpCode::Overload && self.code != McpCode::Overload;
        self.code = code;
        self.fairing_echo = feedback.fairing;
        self.reported_at = Some(now);
        if code > McpCode::Light && self.reports_since_halving() {
            self.halved = false;
        }
        if self.holds_stable() && code == McpCode::Overload {
            // Confirmed if it still holds 2T from now.
            if self.overload_confirmed_at.is_none() {
                self.overload_confirmed_at = now.checked_add(self.period);
            }
            return;
        }
        self.overload_confirmed_at = None;
        if nascent {
            // Curb at once and restart the adjustment timer (§IV-H); an
            // overload that is not news waits for the next adjustment.
            if self.on_overload(now) {
                self.restart_timer(now);
            }
        } else {
            self.mode = self.mode_for_feedback();
        }
    }

    fn on_congestion(&mut self, now: Duration, sent: Duration, kind: Congestion, rtt: &RttSample) {
        self.observe_rtt(rtt);
        if self.unassisted.is_none() && self.router_silent(now) {
            // Cubic from the rate the flow sent, however small (no initial
            // window floor at a loss); its decrease answers this loss.
            let config = LawConfig {
                initial_window: 0,
                ..self.config
            };
            self.unassisted = Some(CubicLaw::in_place_of(self, config));
        }
        if let Some(cubic) = &mut self.unassisted {
            cubic.on_congestion(now, sent, kind, rtt);
            return;
        }
        self.advance(now);
        if self.last_decrease.is_some_and(|last| sent <= last) {
            return;
        }
        self.halve(now);
        self.restart_timer(now);
    }

    /// rate × srtt, or the initial window before any RTT sample, clamped by
    /// the [`LawConfig`]. The QUIC adapter derives its own window from
    /// [`pacing_rate`](crate::signal::Law::pacing_rate); this one is for
    /// window-driven callers.
    fn window(&self) -> u64 {
        if let Some(cubic) = &self.unassisted {
            return cubic.window();
        }
        let bytes = match self.srtt {
            Some(srtt) => self.rate * srtt.as_secs_f64(),
            None => self.config.initial_window as f64,
        };
        self.config.clamp(bytes) as u64
    }

    fn pacing_rate(&self) -> Option<f64> {
        self.unassisted.is_none().then_some(self.rate)
    }

    fn pacing_burst(&self) -> Option<Duration> {
        Some(BURST)
    }

    fn pacing_catches_up(&self) -> bool {
        // The rate is what the routers' codes led to; falling short of it
        // reads as spare capacity at the next period.
        true
    }

    fn mode(&self) -> Mode {
        match &self.unassisted {
            Some(cubic) => cubic.mode(),
            None => self.mode,
        }
    }

    fn tag(&self) -> SchemeTag {
        let request = self.requests_fairing();
        SchemeTag {
            this_path: request,
            fairing: request,
            ..SchemeTag::new(WIRE.id())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::signal::load::LinkLoad;
    use crate::signal::Law;
    use proptest::prelude::*;

    const MS: Duration = Duration::from_millis(1);

    fn feedback(code: McpCode, fairing: bool) -> Feedback {
        Feedback {
            level: code.level(),
            load: LoadFactor::new(code.encoded_load()),
            fairing,
        }
    }

    fn rtt() -> RttSample {
        RttSample::uniform(MS * 50)
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() <= 1e-9 * b.abs().max(1.0)
    }

    /// A law at the default T = 200 ms that saw `code` at time 0, so its
    /// adjustments fall due at 400 ms, 800 ms, ...
    fn law_seeing(code: McpCode, fairing: bool) -> McpLaw {
        let mut law = McpLaw::new(LawConfig::default());
        law.on_feedback(Duration::ZERO, feedback(code, fairing), &rtt());
        law
    }

    fn link(utilization: f64, epoch: u64) -> LinkState {
        let mut load = LinkLoad {
            epoch,
            ..LinkLoad::default()
        };
        load[FORMULA] = LoadFactor::new(utilization);
        LinkState {
            load,
            queue_bytes: 0,
            ..LinkState::default()
        }
    }

    fn packet(ecn: Ecn, fairing: bool, this_path: bool, flow: u64) -> PacketMarks {
        PacketMarks {
            ecn,
            tag: SchemeTag {
                this_path,
                fairing,
                ..SchemeTag::new(WIRE.id())
            },
            hash: 0,
            flow,
        }
    }

    fn requester() -> PacketMarks {
        packet(Ecn::NotEct, true, true, 1)
    }

    fn marked(marker: &mut McpMarker, link: &LinkState, mut pkt: PacketMarks) -> PacketMarks {
        marker.mark(Duration::ZERO, link, &mut pkt);
        pkt
    }

    #[test]
    fn codes_follow_fig_2_boundaries() {
        let cases = [
            (0.0, McpCode::Light),
            (0.479_999, McpCode::Light),
            (0.48, McpCode::Moderate),
            (0.879_999, McpCode::Moderate),
            (0.88, McpCode::High),
            (0.979_999, McpCode::High),
            (0.98, McpCode::Overload),
            (7.0, McpCode::Overload),
        ];
        for (u, code) in cases {
            assert_eq!(McpCode::of(LoadFactor::new(u)), code, "U = {u}");
            assert_eq!(code_of(LoadFactor::new(u)), code.ecn(), "U = {u}");
        }
        let bits: Vec<u8> = [
            McpCode::Light,
            McpCode::Moderate,
            McpCode::High,
            McpCode::Overload,
        ]
        .iter()
        .map(|c| c.ecn().bits())
        .collect();
        assert_eq!(bits, [0b00, 0b01, 0b10, 0b11]);
        for ecn in Ecn::ALL {
            let code = McpCode::from_ecn(ecn);
            assert_eq!(code.ecn(), ecn);
            assert_eq!(code.level(), u16::from(ecn.bits()));
            assert_eq!(McpCode::from_level(code.level()), code);
        }
        assert_eq!(McpCode::from_level(9), McpCode::Overload);
        assert!(McpCode::Moderate.admits_fairing() && McpCode::High.admits_fairing());
        assert!(!McpCode::Light.admits_fairing() && !McpCode::Overload.admits_fairing());
    }

    #[test]
    fn marker_raises_from_00_and_never_lowers() {
        let mut m = McpMarker::new();
        let plain = |ecn| packet(ecn, false, false, 2);
        assert_eq!(
            marked(&mut m, &link(0.5, 3), plain(Ecn::NotEct)).ecn,
            Ecn::Ect1
        );
        assert_eq!(
            marked(&mut m, &link(0.9, 3), plain(Ecn::Ect1)).ecn,
            Ecn::Ect0
        );
        assert_eq!(
            marked(&mut m, &link(1.5, 3), plain(Ecn::NotEct)).ecn,
            Ecn::Ce
        );
        assert_eq!(
            marked(&mut m, &link(0.1, 3), plain(Ecn::Ect0)).ecn,
            Ecn::Ect0
        );
        assert_eq!(
            marked(&mut m, &link(0.1, 3), plain(Ecn::NotEct)).ecn,
            Ecn::NotEct
        );
    }

    #[test]
    fn fairing_request_reaches_other_flows_with_codes_01_and_10_only() {
        let mut m = McpMarker::new();
        let other = |ecn| packet(ecn, false, false, 2);
        // No request yet: nobody's fairing bit is set.
        assert!(
            !marked(&mut m, &link(0.5, 3), other(Ecn::NotEct))
                .tag
                .fairing
        );
        let req = marked(&mut m, &link(0.5, 3), requester());
        assert!(req.tag.fairing && req.tag.this_path);
        assert!(m.propagating(3));
        // Code raised to 01 here, or 10 from upstream: fairing, never this-path.
        for (u, ecn, want) in [
            (0.5, Ecn::NotEct, true),
            (0.9, Ecn::NotEct, true),
            (0.3, Ecn::Ect0, true),
            (0.3, Ecn::NotEct, false),
            (0.99, Ecn::NotEct, false),
            (0.3, Ecn::Ce, false),
        ] {
            let p = marked(&mut m, &link(u, 3), other(ecn));
            assert_eq!(p.tag.fairing, want, "U = {u}, arriving {ecn:?}");
            assert!(!p.tag.this_path);
        }
    }

    #[test]
    fn fairing_propagation_expires_after_the_next_period() {
        let mut m = McpMarker::new();
        marked(&mut m, &link(0.5, 10), requester());
        let other = packet(Ecn::NotEct, false, false, 2);
        // Period 11 is in progress (last completed 10), then period 12 (last 11).
        assert!(marked(&mut m, &link(0.5, 10), other).tag.fairing);
        assert!(marked(&mut m, &link(0.5, 11), other).tag.fairing);
        // Period 12 has ended.
        assert!(!marked(&mut m, &link(0.5, 12), other).tag.fairing);
        // A new request extends it; an old one never shortens it.
        marked(&mut m, &link(0.5, 12), requester());
        marked(&mut m, &link(0.5, 5), requester());
        assert!(m.propagating(13) && !m.propagating(14));
    }

    #[test]
    fn router_set_fairing_bits_do_not_trigger_propagation() {
        let mut m = McpMarker::new();
        let relayed = packet(Ecn::Ect1, true, false, 2);
        assert!(marked(&mut m, &link(0.5, 3), relayed).tag.fairing);
        assert!(!m.propagating(3));
        // this-path alone is no request either.
        marked(&mut m, &link(0.5, 3), packet(Ecn::Ect1, false, true, 2));
        assert!(!m.propagating(3));
        assert!(
            !marked(&mut m, &link(0.5, 3), packet(Ecn::NotEct, false, false, 3))
                .tag
                .fairing
        );
    }

    #[test]
    fn two_markers_in_series() {
        // The Fig. 1 example: the requester crosses A only, flow X crosses A
        // then C, flow Y crosses C only.
        let (mut a, mut c) = (McpMarker::new(), McpMarker::new());
        let (link_a, link_c) = (link(0.5, 7), link(0.9, 7));
        let req = marked(&mut a, &link_a, requester());
        let x = marked(&mut a, &link_a, packet(Ecn::NotEct, false, false, 2));
        let x = marked(&mut c, &link_c, x);
        let y = marked(&mut c, &link_c, packet(Ecn::NotEct, false, false, 3));
        assert!(req.tag.this_path && req.tag.fairing);
        assert!(x.tag.fairing && !x.tag.this_path);
        assert!(!c.propagating(7), "no chain reaction at C");
        assert!(!y.tag.fairing && !y.tag.this_path);
        // X's receiver learns the larger code of the two links.
        let mut rx = McpDecoder::default();
        rx.on_packet(Duration::ZERO, x.ecn, x.tag, x.hash);
        let est = rx.estimate(Duration::ZERO);
        assert_eq!((est.level, est.fairing), (McpCode::High.level(), true));
        // Series the other way round: the max still wins.
        let back = marked(&mut a, &link_a, marked(&mut c, &link_c, y));
        assert_eq!(back.ecn, McpCode::High.ecn());
    }

    #[test]
    fn decoder_echoes_latest_code_and_fairing_bit() {
        let mut rx = McpDecoder::default();
        let t = Duration::ZERO;
        let plain = SchemeTag::new(WIRE.id());
        let fairing = SchemeTag {
            fairing: true,
            ..plain
        };
        assert_eq!(rx.estimate(t), feedback(McpCode::Light, false));
        assert!(!rx.on_packet(t, Ecn::NotEct, plain, 0));
        assert!(rx.on_packet(t, Ecn::Ce, plain, 0));
        assert_eq!(rx.estimate(t), feedback(McpCode::Overload, false));
        assert_eq!(rx.estimate(t).load.get(), OVERLOAD_REPRESENTATIVE);
        assert!(rx.on_packet(t, Ecn::Ect1, fairing, 0));
        assert_eq!(rx.estimate(t), feedback(McpCode::Moderate, true));
        assert_eq!(rx.estimate(t).load.get(), ENHANCING_BOUND);
        // The latest packet decides, down as well as up.
        assert!(rx.on_packet(t, Ecn::Ect1, plain, 0));
        assert!(!rx.estimate(t).fairing);
        assert!(rx.on_packet(t, Ecn::Ect0, plain, 0));
        assert_eq!(rx.estimate(t).load.get(), OVERLOAD_BOUND);
    }

    #[test]
    fn starts_at_80_kbit_and_requests_fairing() {
        let law = McpLaw::new(LawConfig::default());
        assert_eq!(law.pacing_rate(), Some(INITIAL_RATE));
        assert_eq!(law.mode(), Mode::Scaling);
        assert_eq!(
            law.tag(),
            SchemeTag {
                this_path: true,
                fairing: true,
                ..SchemeTag::new(WIRE.id())
            }
        );
        // Before any RTT sample: the initial window.
        assert_eq!(law.window(), LawConfig::default().initial_window);
    }

    #[test]
    fn scaling_doubles_once_per_2t() {
        let mut law = law_seeing(McpCode::Light, true);
        law.on_ack(MS * 399, 1000, &rtt());
        assert_eq!(law.rate(), INITIAL_RATE);
        law.on_ack(MS * 400, 1000, &rtt());
        assert_eq!(law.rate(), 2.0 * INITIAL_RATE);
        law.on_ack(MS * 799, 1000, &rtt());
        assert_eq!(law.rate(), 2.0 * INITIAL_RATE);
        law.on_ack(MS * 800, 1000, &rtt());
        assert_eq!(law.rate(), 4.0 * INITIAL_RATE);
        assert_eq!(law.mode(), Mode::Scaling);
    }

    #[test]
    fn adjustment_period_is_twice_the_interval() {
        let cfg = LawConfig {
            interval: MS * 100,
            ..LawConfig::default()
        };
        let mut law = McpLaw::new(cfg);
        law.on_ack(Duration::ZERO, 0, &rtt());
        law.on_ack(MS * 199, 0, &rtt());
        assert_eq!(law.rate(), INITIAL_RATE);
        law.on_ack(MS * 200, 0, &rtt());
        assert_eq!(law.rate(), 2.0 * INITIAL_RATE);
        assert_eq!(law.next_adjustment(), Some(MS * 400));
    }

    #[test]
    fn enhancing_multiplies_by_1_1() {
        let mut law = law_seeing(McpCode::Moderate, false);
        assert_eq!(law.mode(), Mode::Enhancing);
        law.on_ack(MS * 400, 0, &rtt());
        assert!(close(law.rate(), INITIAL_RATE * ENHANCING_FACTOR));
    }

    #[test]
    fn fairing_adds_80_kbit_in_01_and_10() {
        for code in [McpCode::Moderate, McpCode::High] {
            let mut law = law_seeing(code, true);
            assert_eq!(law.mode(), Mode::Fairing);
            law.on_ack(MS * 400, 0, &rtt());
            law.on_ack(MS * 800, 0, &rtt());
            assert!(
                close(law.rate(), INITIAL_RATE + 2.0 * RATE_STEP),
                "{code:?}"
            );
        }
        // Fairing bit with code 00 or 11 does not make it fairing (Fig. 2).
        assert_eq!(law_seeing(McpCode::Light, true).mode(), Mode::Scaling);
    }

    #[test]
    fn smoothing_adds_until_overload_then_backs_off_once_and_holds() {
        let mut law = law_seeing(McpCode::High, false);
        assert_eq!(law.mode(), Mode::Smoothing);
        law.on_ack(MS * 400, 0, &rtt());
        law.on_ack(MS * 800, 0, &rtt());
        let peak = INITIAL_RATE + 2.0 * RATE_STEP;
        assert!(close(law.rate(), peak));
        // First overload: AD(80 kbit/s), not MD, then stable.
        law.on_feedback(MS * 900, feedback(McpCode::Overload, false), &rtt());
        assert!(close(law.rate(), peak - RATE_STEP));
        assert_eq!(law.mode(), Mode::Stable);
        law.on_feedback(MS * 1000, feedback(McpCode::High, false), &rtt());
        for t in [1300, 1700, 2100, 5000] {
            law.on_ack(MS * t, 0, &rtt());
            assert!(close(law.rate(), peak - RATE_STEP), "constant at {t} ms");
            assert_eq!(law.mode(), Mode::Stable);
        }
        // Leaving 10 ends stable; coming back smooths again.
        law.on_feedback(MS * 5100, feedback(McpCode::Moderate, false), &rtt());
        assert_eq!(law.mode(), Mode::Enhancing);
        law.on_feedback(MS * 5150, feedback(McpCode::High, false), &rtt());
        assert_eq!(law.mode(), Mode::Smoothing);
    }

    /// A law that smoothed to two steps above 10 000 B/s and backed off
    /// once at 900 ms: stable at `INITIAL_RATE + RATE_STEP`, code `10` again.
    fn stable_law() -> McpLaw {
        let mut law = law_seeing(McpCode::High, false);
        law.on_ack(MS * 400, 0, &rtt());
        law.on_ack(MS * 800, 0, &rtt());
        law.on_feedback(MS * 900, feedback(McpCode::Overload, false), &rtt());
        law.on_feedback(MS * 1000, feedback(McpCode::High, false), &rtt());
        assert_eq!(law.mode(), Mode::Stable);
        law
    }

    /// [`stable_law`] that saw code `11` at 2000 ms, and its stable rate.
    fn stable_law_overloaded() -> (McpLaw, f64) {
        let mut law = stable_law();
        let rate = law.rate();
        law.on_feedback(MS * 2000, feedback(McpCode::Overload, false), &rtt());
        (law, rate)
    }

    #[test]
    fn a_stable_flow_rides_out_a_one_period_overload() {
        // Two overload readings in a row (2000 ms and 2200 ms), then 10.
        let (mut law, rate) = stable_law_overloaded();
        law.on_ack(MS * 2150, 0, &rtt());
        law.on_feedback(MS * 2200, feedback(McpCode::Overload, false), &rtt());
        law.on_ack(MS * 2350, 0, &rtt());
        law.on_feedback(MS * 2390, feedback(McpCode::High, false), &rtt());
        for t in [2400, 2500, 3000, 4000] {
            law.on_ack(MS * t, 0, &rtt());
            assert_eq!(law.rate(), rate, "{t} ms");
            assert_eq!(law.mode(), Mode::Stable);
        }
    }

    #[test]
    fn a_stable_flow_halves_an_overload_that_holds_2t() {
        let (mut law, rate) = stable_law_overloaded();
        law.on_ack(MS * 2399, 0, &rtt());
        assert_eq!(law.rate(), rate);
        law.on_ack(MS * 2400, 0, &rtt());
        assert!(close(law.rate(), rate * DECREASE_FACTOR));
        assert_eq!(law.mode(), Mode::Overloaded);
        assert_eq!(law.next_adjustment(), Some(MS * 2800));
    }

    #[test]
    fn lower_codes_end_a_stable_state_at_once() {
        let mut law = stable_law();
        law.on_feedback(MS * 2000, feedback(McpCode::Moderate, false), &rtt());
        assert_eq!(law.mode(), Mode::Enhancing);
        let mut law = stable_law();
        law.on_feedback(MS * 2000, feedback(McpCode::High, true), &rtt());
        assert_eq!(law.mode(), Mode::Fairing);
    }

    #[test]
    fn a_halving_that_lands_under_48_percent_enhances_instead_of_doubling() {
        let mut law = scaled_up(4);
        let peak = law.rate();
        // Nascent overload at 1700 ms halves and restarts the timer.
        law.on_feedback(MS * 1700, feedback(McpCode::Overload, false), &rtt());
        law.on_feedback(MS * 1800, feedback(McpCode::Light, false), &rtt());
        assert_eq!(law.mode(), Mode::Enhancing);
        law.on_ack(MS * 2100, 0, &rtt());
        assert!(close(law.rate(), peak / 2.0 * ENHANCING_FACTOR));
        // Still 00 at the next instant: still no doubling.
        law.on_ack(MS * 2500, 0, &rtt());
        assert!(close(
            law.rate(),
            peak / 2.0 * ENHANCING_FACTOR * ENHANCING_FACTOR
        ));
        // Once a higher code came, 00 means a light load again: MI(2), but
        // no higher than the rate the overload came at.
        law.on_feedback(MS * 2600, feedback(McpCode::Moderate, false), &rtt());
        law.on_feedback(MS * 2700, feedback(McpCode::Light, false), &rtt());
        let before = law.rate();
        assert!(before * SCALING_FACTOR > peak);
        law.on_ack(MS * 2900, 0, &rtt());
        assert!(close(law.rate(), peak));
        // Still 00 at that rate: capacity was freed, and it doubles.
        law.on_ack(MS * 3300, 0, &rtt());
        assert!(close(law.rate(), peak * SCALING_FACTOR));
    }

    /// A flow scaled up to its peak rate (returned) and halved by an
    /// overload at 3300 ms, on a round trip as long as T (also returned):
    /// reports reach the sender 200 ms after the router wrote them, and
    /// describe the period before.
    fn halved_on_a_long_rtt() -> (McpLaw, f64, RttSample) {
        let mut law = scaled_up(8);
        let peak = law.rate();
        let rtt = RttSample::uniform(MS * 200);
        law.on_feedback(MS * 3300, feedback(McpCode::Overload, false), &rtt);
        (law, peak, rtt)
    }

    #[test]
    fn codes_from_before_a_halving_do_not_halve_again() {
        let (mut law, peak, rtt) = halved_on_a_long_rtt();
        assert_eq!(law.rate(), peak / 2.0);
        // Until 3300 + T + srtt = 3700 ms no code can describe traffic sent
        // after the halving: a new 11, and the instant at 3700, keep the rate.
        law.on_feedback(MS * 3400, feedback(McpCode::Moderate, false), &rtt);
        law.on_feedback(MS * 3500, feedback(McpCode::Overload, false), &rtt);
        law.on_ack(MS * 3700, 0, &rtt);
        assert_eq!(law.rate(), peak / 2.0);
        // An overload reported after that halves at the next instant.
        law.on_feedback(MS * 3750, feedback(McpCode::Overload, false), &rtt);
        assert_eq!(law.rate(), peak / 2.0);
        law.on_ack(MS * 4100, 0, &rtt);
        assert_eq!(law.rate(), peak / 4.0);
    }

    #[test]
    fn a_code_from_before_a_halving_does_not_end_its_enhancing() {
        let (mut law, peak, rtt) = halved_on_a_long_rtt();
        law.on_feedback(MS * 3400, feedback(McpCode::High, false), &rtt);
        law.on_feedback(MS * 3500, feedback(McpCode::Light, false), &rtt);
        law.on_ack(MS * 3700, 0, &rtt);
        let enhanced = peak / 2.0 * ENHANCING_FACTOR;
        assert!(close(law.rate(), enhanced));
        // A 10 reported from 3700 ms on is news: 00 then means light load,
        // MI(2) up to the rate the overload came at.
        law.on_feedback(MS * 3750, feedback(McpCode::High, false), &rtt);
        law.on_feedback(MS * 3800, feedback(McpCode::Light, false), &rtt);
        law.on_ack(MS * 4100, 0, &rtt);
        assert!(enhanced * SCALING_FACTOR > peak);
        assert!(close(law.rate(), peak));
    }

    #[test]
    fn overload_that_outlasts_the_backtrack_halves() {
        let mut law = law_seeing(McpCode::High, false);
        law.on_ack(MS * 400, 0, &rtt());
        law.on_feedback(MS * 500, feedback(McpCode::Overload, false), &rtt());
        let after_ad = law.rate();
        assert_eq!(law.mode(), Mode::Stable);
        // Still 11 at the next instant (timer restarted at 500 ms).
        law.on_feedback(MS * 899, feedback(McpCode::Overload, false), &rtt());
        assert_eq!(law.rate(), after_ad);
        law.on_ack(MS * 900, 0, &rtt());
        assert!(close(law.rate(), after_ad * DECREASE_FACTOR));
        assert_eq!(law.mode(), Mode::Overloaded);
    }

    /// A law at the default T that doubled `n` times from 0, last at n·400 ms.
    fn scaled_up(n: u32) -> McpLaw {
        let mut law = law_seeing(McpCode::Light, false);
        for k in 1..=n {
            law.on_ack(MS * (400 * k), 0, &rtt());
        }
        law
    }

    #[test]
    fn nascent_overload_halves_at_once_and_restarts_the_timer() {
        let mut law = scaled_up(4);
        let peak = INITIAL_RATE * 16.0;
        assert_eq!(law.rate(), peak);
        // 1600 ms: last adjustment. 1700 ms: code turns 11.
        law.on_feedback(MS * 1700, feedback(McpCode::Overload, false), &rtt());
        assert_eq!(law.rate(), peak / 2.0);
        assert_eq!(law.mode(), Mode::Overloaded);
        assert_eq!(law.next_adjustment(), Some(MS * 2100));
        // The old schedule's 2000 ms instant is gone.
        law.on_ack(MS * 2000, 0, &rtt());
        assert_eq!(law.rate(), peak / 2.0);
        // Back to 10 before the instant: no further decrease, smoothing AI.
        law.on_feedback(MS * 2050, feedback(McpCode::High, false), &rtt());
        law.on_ack(MS * 2100, 0, &rtt());
        assert!(close(law.rate(), peak / 2.0 + RATE_STEP));
        assert_eq!(law.mode(), Mode::Smoothing);
    }

    #[test]
    fn sustained_overload_halves_once_per_2t() {
        let mut law = scaled_up(8);
        let peak = law.rate();
        let start = MS * 3300;
        let mut decreases = Vec::new();
        let mut last = peak;
        for step in 0..=200u32 {
            let now = start + MS * (10 * step);
            law.on_feedback(now, feedback(McpCode::Overload, true), &rtt());
            if law.rate() < last {
                decreases.push((now - start).as_millis());
                assert!(close(law.rate(), last * DECREASE_FACTOR));
                last = law.rate();
            }
        }
        assert_eq!(decreases, [0, 400, 800, 1200, 1600, 2000]);
    }

    #[test]
    fn an_idle_spell_gets_one_adjustment_and_keeps_the_phase() {
        let mut law = law_seeing(McpCode::Light, false);
        law.on_ack(MS * 10_100, 0, &rtt());
        assert_eq!(law.rate(), 2.0 * INITIAL_RATE);
        assert_eq!(law.next_adjustment(), Some(MS * 10_400));
    }

    #[test]
    fn fairing_request_lasts_seven_cycles() {
        let mut law = law_seeing(McpCode::Light, false);
        // A decrease before any increase ends no cycle.
        law.on_feedback(MS * 10, feedback(McpCode::Overload, false), &rtt());
        law.on_feedback(MS * 20, feedback(McpCode::Light, false), &rtt());
        assert_eq!(law.cycles(), 0);
        let mut now = MS * 20;
        for cycle in 1..=FAIRING_CYCLES {
            assert!(law.tag().fairing && law.tag().this_path, "cycle {cycle}");
            now += MS * 400;
            law.on_ack(now, 0, &rtt());
            // Two decreases in a row: one cycle.
            now += MS * 10;
            law.on_feedback(now, feedback(McpCode::Overload, false), &rtt());
            now += MS * 400;
            law.on_ack(now, 0, &rtt());
            now += MS * 10;
            law.on_feedback(now, feedback(McpCode::Light, false), &rtt());
            assert_eq!(law.cycles(), cycle);
        }
        assert!(!law.requests_fairing());
        let tag = law.tag();
        assert!(!tag.fairing && !tag.this_path);
        assert_eq!(tag.wire_id, WIRE.id());
        law.request_fairing();
        assert!(law.tag().fairing && law.tag().this_path);
    }

    #[test]
    fn loss_halves_at_most_once_per_round_trip() {
        let mut law = scaled_up(4);
        // An ecnq router spoke lately: the loss is MCP's to answer.
        law.router_spoke_at = Some(MS * 1600);
        let peak = law.rate();
        let rtt = rtt();
        law.on_congestion(MS * 1700, MS * 1650, Congestion::Loss, &rtt);
        assert_eq!(law.rate(), peak / 2.0);
        assert_eq!(law.next_adjustment(), Some(MS * 2100));
        // Sent before that reaction: the same event.
        law.on_congestion(MS * 1720, MS * 1690, Congestion::Ce, &rtt);
        assert_eq!(law.rate(), peak / 2.0);
        law.on_congestion(MS * 1800, MS * 1750, Congestion::Loss, &rtt);
        assert_eq!(law.rate(), peak / 4.0);
        // Feedback-driven decreases count as reactions too.
        law.on_feedback(MS * 1900, feedback(McpCode::Overload, false), &rtt);
        law.on_congestion(MS * 1950, MS * 1890, Congestion::Loss, &rtt);
        assert_eq!(law.rate(), peak / 8.0);
    }

    #[test]
    fn window_is_rate_times_srtt_within_config_bounds() {
        let mut law = scaled_up(7);
        let srtt = RttSample::uniform(MS * 100);
        law.on_ack(MS * 2900, 0, &srtt);
        let want = law.rate() * 0.1;
        assert!((law.window() as f64 - want).abs() <= 1.0);
        assert_eq!(law.pacing_rate(), Some(INITIAL_RATE * 128.0));
        // A tiny rate is clamped up to the minimum window.
        let mut slow = McpLaw::new(LawConfig::default());
        slow.on_ack(Duration::ZERO, 0, &RttSample::uniform(MS));
        assert_eq!(slow.window(), LawConfig::default().min_window);
        // A zero RTT sample is no sample.
        let mut fresh = McpLaw::new(LawConfig::default());
        fresh.on_ack(Duration::ZERO, 0, &RttSample::uniform(Duration::ZERO));
        assert_eq!(fresh.window(), LawConfig::default().initial_window);
    }

    #[test]
    fn rate_stays_between_one_mss_per_2t_and_the_maximum() {
        let mut law = law_seeing(McpCode::Overload, false);
        for k in 1..40 {
            let overload = feedback(McpCode::Overload, false);
            law.on_feedback(MS * (400 * k), overload, &rtt());
        }
        // 1200 bytes per 400 ms.
        assert_eq!(law.rate(), 3000.0);
        assert_eq!(law.min_rate(), 3000.0);
        let mut law = law_seeing(McpCode::Light, false);
        for k in 1..100 {
            law.on_ack(MS * (400 * k), 0, &rtt());
        }
        assert_eq!(law.rate(), MAX_RATE);
    }

    /// One 20 Mbit/s link (the paper's §V default) in 10 ms fluid steps,
    /// with flows joining 10 s apart; feedback reaches senders at once.
    /// Returns (utilization, peak queue in bytes, min/max rate ratio) over
    /// the last 20 s of `secs`.
    fn closed_loop(flows: usize, secs: u32) -> (f64, u64, f64) {
        use crate::{LoadFactorMeter, MeterConfig};
        let capacity = 2.5e6;
        let step = MS * 10;
        let mut meter = LoadFactorMeter::new(MeterConfig::new(capacity), Duration::ZERO);
        let mut marker = McpMarker::new();
        let mut senders: Vec<(McpLaw, McpDecoder, f64)> = Vec::new();
        let (mut queue, mut departed, mut peak) = (0u64, 0.0, 0u64);
        let steps = secs * 100;
        for i in 0..steps {
            let now = step * i;
            if senders.len() < flows && i % 1000 == 0 {
                senders.push((
                    McpLaw::new(LawConfig::default()),
                    McpDecoder::default(),
                    0.0,
                ));
            }
            for (flow, (law, rx, credit)) in senders.iter_mut().enumerate() {
                *credit += law.rate() * step.as_secs_f64();
                while *credit >= 1200.0 {
                    *credit -= 1200.0;
                    meter.on_arrival(now, 1200);
                    queue += 1200;
                    meter.on_queue(now, queue);
                    let state = LinkState {
                        load: *meter.load(),
                        queue_bytes: queue,
                        ..LinkState::default()
                    };
                    let mut pkt = packet(Ecn::NotEct, false, false, flow as u64);
                    pkt.tag = law.tag();
                    marker.mark(now, &state, &mut pkt);
                    rx.on_packet(now, pkt.ecn, pkt.tag, pkt.hash);
                }
                law.on_feedback(now, rx.estimate(now), &rtt());
            }
            let out = queue.min((capacity * step.as_secs_f64()) as u64);
            queue -= out;
            meter.on_departure(now, out as u32);
            meter.on_queue(now, queue);
            if i >= steps - 2000 {
                departed += out as f64;
                peak = peak.max(queue);
            }
        }
        let rates: Vec<f64> = senders.iter().map(|s| s.0.rate()).collect();
        let min = rates.iter().copied().fold(f64::INFINITY, f64::min);
        let max = rates.iter().copied().fold(0.0, f64::max);
        (departed / (capacity * 20.0), peak, min / max)
    }

    #[test]
    fn closed_loop_converges_to_high_fair_utilization_with_a_short_queue() {
        // Three flows on 20 Mbit/s, as in the paper's §V-A (Fig. 3: stable
        // utilization 0.97, fairness index 0.91, queue under 7 packets).
        // Fairing lasts until about 140 s here; the last 20 s of 400 are stable.
        let (utilization, peak_queue, fairness) = closed_loop(3, 400);
        assert!(utilization > 0.9, "utilization {utilization}");
        assert!(peak_queue <= 7 * 1200, "peak queue {peak_queue} B");
        assert!(fairness > 0.85, "min/max rate {fairness}");
    }

    #[derive(Clone, Debug)]
    enum Event {
        Ack { rtt_ms: u32 },
        Feedback { level: u16, fairing: bool },
        Congestion { sent_ago_ms: u32 },
    }

    fn event() -> impl Strategy<Value = Event> {
        prop_oneof![
            (0u32..2000).prop_map(|rtt_ms| Event::Ack { rtt_ms }),
            (0u16..6, any::<bool>())
                .prop_map(|(level, fairing)| Event::Feedback { level, fairing }),
            (0u32..3000).prop_map(|sent_ago_ms| Event::Congestion { sent_ago_ms }),
        ]
    }

    fn apply(law: &mut McpLaw, now: Duration, ev: &Event) {
        match *ev {
            Event::Ack { rtt_ms } => law.on_ack(now, 1200, &RttSample::uniform(MS * rtt_ms)),
            Event::Feedback { level, fairing } => law.on_feedback(
                now,
                Feedback {
                    level,
                    load: LoadFactor::new(f64::from(level)),
                    fairing,
                },
                &rtt(),
            ),
            Event::Congestion { sent_ago_ms } => {
                let sent = now.saturating_sub(MS * sent_ago_ms);
                law.on_congestion(now, sent, Congestion::Loss, &rtt());
            }
        }
    }

    #[test]
    fn a_loss_no_router_saw_turns_the_flow_to_cubic_until_a_router_speaks() {
        let mut law = law_seeing(McpCode::Light, false);
        let second = Duration::from_secs(1);
        // Scaling on code 00 for a few seconds, then a loss: no ecnq router
        // wrote anything above 00, so the loss happened at a link none meters.
        for t in 1..=4 {
            law.on_ack(second * t, 1200, &rtt());
        }
        let rate = law.rate();
        law.on_congestion(second * 4, second * 4 - MS, Congestion::Loss, &rtt());
        assert!(law.is_unassisted());
        assert_eq!(law.pacing_rate(), None, "Cubic's window rules");
        // Cubic's decrease (β = 0.7) of the window the flow sent at.
        let window = law.window() as f64;
        let sent = rate * rtt().smoothed.as_secs_f64();
        assert!(
            (window - 0.7 * sent).abs() <= 0.01 * sent + 1200.0,
            "{window} vs {sent}"
        );
        // Acks grow Cubic's window, not MCP's rate.
        for ms in 1..200 {
            law.on_ack(second * 4 + MS * ms, 1200, &rtt());
        }
        assert!(law.window() as f64 > window);
        assert_eq!(law.rate(), rate, "MCP's rate waits");
        // A router at a loaded link speaks: MCP again, from Cubic's rate.
        let cubic_rate = law.window() as f64 / rtt().smoothed.as_secs_f64();
        law.on_feedback(second * 5, feedback(McpCode::Moderate, false), &rtt());
        assert!(!law.is_unassisted());
        assert!((law.rate() - cubic_rate).abs() < 1e-6 * cubic_rate);
        assert_eq!(law.pacing_rate(), Some(law.rate()));
    }

    #[test]
    fn a_loss_soon_after_a_router_spoke_is_answered_by_mcp() {
        let mut law = law_seeing(McpCode::High, false);
        let at = ROUTER_SPAN_PERIODS * law.period / 2;
        law.on_feedback(at, feedback(McpCode::Light, false), &rtt());
        let rate = law.rate();
        law.on_congestion(at + MS, at, Congestion::Loss, &rtt());
        assert!(!law.is_unassisted());
        assert_eq!(law.mode(), Mode::Overloaded);
        assert!(law.rate() <= rate * DECREASE_FACTOR + 1e-9);
    }

    proptest! {
        #[test]
        fn decoder_never_panics(packets in proptest::collection::vec((any::<u8>(), any::<u8>(), any::<u32>()), 0..200)) {
            let mut rx = McpDecoder::default();
            for (i, (tos, dscp, hash)) in packets.into_iter().enumerate() {
                let now = MS * i as u32;
                rx.on_packet(now, Ecn::from_tos(tos), SchemeTag::from_dscp(dscp), hash);
                let est = rx.estimate(now);
                prop_assert!(est.level <= 3);
                prop_assert!(est.load.get().is_finite());
                prop_assert_eq!(est.level, u16::from(tos & 0b11));
            }
        }

        #[test]
        fn rate_and_window_stay_finite_and_bounded(
            mss in 1u64..9000,
            interval_ms in 0u64..1000,
            events in proptest::collection::vec((0u64..2000, event()), 0..300),
        ) {
            let cfg = LawConfig { interval: MS * interval_ms as u32, ..LawConfig::with_mss(mss) };
            let mut law = McpLaw::new(cfg);
            let mut now = Duration::ZERO;
            for (dt, ev) in &events {
                now += MS * *dt as u32;
                apply(&mut law, now, ev);
                let rate = law.rate();
                prop_assert!(rate.is_finite());
                prop_assert!(rate >= law.min_rate() && rate <= MAX_RATE, "rate {}", rate);
                let paced = (!law.is_unassisted()).then_some(rate);
                prop_assert_eq!(law.pacing_rate(), paced);
                prop_assert!(law.window() >= cfg.min_window && law.window() <= cfg.max_window);
            }
        }

        #[test]
        fn overload_forever_never_grows(
            events in proptest::collection::vec((0u64..2000, event()), 0..300),
        ) {
            let mut law = McpLaw::new(LawConfig::default());
            let mut now = Duration::ZERO;
            law.on_feedback(now, feedback(McpCode::Overload, false), &rtt());
            let mut last = law.rate();
            for (dt, ev) in &events {
                now += MS * *dt as u32;
                // Every report says overload; acks and losses come as they may.
                let ev = match ev {
                    Event::Feedback { level, fairing } => {
                        Event::Feedback { level: (*level).max(3), fairing: *fairing }
                    }
                    other => other.clone(),
                };
                apply(&mut law, now, &ev);
                prop_assert!(law.rate() <= last);
                last = law.rate();
            }
        }
    }
}
