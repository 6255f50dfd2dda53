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
/// Four departures from the paper (measurements: sim/REPRODUCTION.md,
/// "Deviations and tuning"):
///
/// * A stable flow without a fairing request halves only for an overload
///   code that holds for 2T (three measurements in a row), because the
///   utilization a router measures wanders by a point or two at constant
///   rates; lower codes end the stable state at once, as in the paper
///   (`a_stable_flow_rides_out_a_one_period_overload`).
/// * After MD(0.5), code `00` means the halving overshot the 49 % it aims at
///   (§IV-C), not a lightly used link: the flow enhances, MI(1.1), instead of
///   doubling, until a higher code arrives
///   (`a_halving_that_lands_under_48_percent_enhances_instead_of_doubling`).
/// * With round trips as long as T, a code that cannot yet reflect the last
///   halving (it arrived sooner than T and a round trip after it) neither
///   halves again nor ends the enhancing that follows a halving
///   (`codes_from_before_a_halving_do_not_halve_again`).
/// * MI(2) goes no higher than the rate the last overload came at: the
///   doubling from under 48 % is to land under 96 % (§IV-B), and that rate
///   was read as 98 % or more. A flow sending under its rate (the transport
///   asks late) reads `00` a few points above 48 % of the link, and
///   doubling from there stands a queue. A `00` at or above that rate
///   means capacity was freed: the flow doubles and forgets it
///   (`a_halving_that_lands_under_48_percent_enhances_instead_of_doubling`).
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
    /// The window is rate × srtt: it follows every RTT the transport
    /// learns, as the transport's gate does.
    fn on_rtt(&mut self, rtt: &RttSample) {
        self.observe_rtt(rtt);
    }

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
mod tests;
