//! The three sans-IO roles of every scheme (docs/design.md §1) and the values
//! that pass between them: a router's [`Marker`] rewrites packet marks, a
//! receiver's [`Decoder`] turns the marks it sees into [`Feedback`], and a
//! sender's [`Law`] turns feedback, acks and losses into a window or a rate.
//!
//! None of them owns a clock: every call takes `now`, a [`Duration`] since an
//! origin the caller chooses (virtual time in the simulator, an `Instant`
//! epoch in the QUIC stack and the shim).

pub mod fairness;
pub mod flow_table;
pub mod load;

use std::fmt;
use std::time::Duration;

use crate::signal::flow_table::FlowTableConfig;
use crate::signal::load::LinkLoad;
use crate::signal::load::LoadFactor;
use crate::wire::ack::EcnCounts;
use crate::wire::ecn::{Ecn, SchemeTag};

/// The marks of one packet as a router sees and rewrites them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketMarks {
    /// The ECN codepoint.
    pub ecn: Ecn,
    /// The DSCP scheme tag.
    pub tag: SchemeTag,
    /// The packet hash of [`crate::wire::hash::packet_hash`].
    pub hash: u32,
    /// A key for the packet's flow (a hash of its addresses and ports); MPCP
    /// keeps per-flow state under it.
    pub flow: u64,
}

/// What a marker knows about its link when a packet is forwarded into it.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct LinkState {
    /// The load figures of the last completed measurement interval.
    pub load: LinkLoad,
    /// The queue in bytes when the packet arrives.
    pub queue_bytes: u64,
    /// The length of the packet being marked, in bytes.
    pub packet_len: u32,
    /// The link's capacity, in bytes per second.
    pub capacity: f64,
}

/// What a router gives every marker it builds for a link.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MarkerConfig {
    /// Per-flow state of the markers that keep it (MPCP, erc).
    pub flows: FlowTableConfig,
    /// Queue (bytes) at which classic ECT traffic is CE-marked.
    pub classic_threshold: u64,
}

/// The router half of a scheme: rewrites a packet's marks as it enters a link.
pub trait Marker: Send + fmt::Debug {
    /// Rewrites `pkt` in place.
    fn mark(&mut self, now: Duration, link: &LinkState, pkt: &mut PacketMarks);

    /// Whether it wants [`Marker::observe`] calls: a marker that shares the
    /// queue among its flows (erc) counts other schemes' flows too.
    fn observes_others(&self) -> bool {
        false
    }

    /// A packet of another scheme enters the same queue; it is not this
    /// marker's to rewrite. Called only if [`Marker::observes_others`].
    fn observe(&mut self, _now: Duration, _link: &LinkState, _pkt: &PacketMarks) {}
}

/// What a receiver learned about its path, as it reports it to the sender.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Feedback {
    /// The scheme's quantized level: VCP 0..=2 (low, high, overload), DPCP
    /// 0..=8 and TPCP 0..=26 (table index), MCP 0..=3 (utilization code),
    /// BMCC the estimate in units of 1/10 000 (saturating).
    pub level: u16,
    /// The load factor the level stands for (for quantized schemes, the upper
    /// bound of the level's range — what the laws increase from).
    pub load: LoadFactor,
    /// MCP: the fairing bit echoed by the receiver.
    pub fairing: bool,
}

/// The receiver half of a scheme: reads the marks of arriving packets.
pub trait Decoder: Send + fmt::Debug {
    /// Takes one received packet; returns whether the estimate changed.
    fn on_packet(&mut self, now: Duration, ecn: Ecn, tag: SchemeTag, hash: u32) -> bool;

    /// The current estimate (it may depend on `now`: MPCP ages its digits).
    fn estimate(&self, now: Duration) -> Feedback;
}

/// A sender-side decoder for a peer that runs none: it reads the routers'
/// marks from the peer's ACK-ECN counts, which any QUIC receiver that
/// supports ECN sends (docs/design.md §3, "Feedback from ACK-ECN counts").
pub trait CountReader: Send + fmt::Debug {
    /// One ACK frame: the hashes of the packets it newly acknowledges, and
    /// how much the peer's cumulative counts rose since the last frame
    /// read. Returns whether the estimate changed.
    fn on_ack(&mut self, acked: &[u32], rises: EcnCounts) -> bool;

    /// The current estimate, as the scheme's receiver decoder reports it.
    fn estimate(&self) -> Feedback;
}

/// The sender's view of the round-trip time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RttSample {
    /// Smoothed RTT (RFC 9002).
    pub smoothed: Duration,
    /// Minimum RTT seen.
    pub min: Duration,
    /// The latest sample.
    pub latest: Duration,
}

impl RttSample {
    /// The same value for all three fields.
    pub const fn uniform(rtt: Duration) -> RttSample {
        RttSample {
            smoothed: rtt,
            min: rtt,
            latest: rtt,
        }
    }
}

/// A congestion signal other than router feedback.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Congestion {
    /// A packet was declared lost.
    Loss,
    /// A packet arrived with CE while no scheme feedback explains it.
    Ce,
}

/// What a law is doing, for stats and tracing.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// Classic slow start.
    SlowStart,
    /// Classic congestion avoidance.
    CongestionAvoidance,
    /// After a loss: recovery (Reno halving) until the lost data's epoch ends.
    Recovery,
    /// Multiplicative increase (VCP family low load, BMCC low load).
    MultiplicativeIncrease,
    /// Additive increase (VCP family high load, BMCC medium load).
    AdditiveIncrease,
    /// Window frozen: after a multiplicative decrease (VCP family), or while
    /// BMCC waits to see whether a low reading holds.
    Hold,
    /// MCP scaling mode: MI(2).
    Scaling,
    /// MCP fairing mode: AI(80 kbit/s).
    Fairing,
    /// MCP enhancing mode: MI(1.1).
    Enhancing,
    /// MCP smoothing mode: AI then one AD.
    Smoothing,
    /// MCP stable mode: constant rate.
    Stable,
    /// Overload: multiplicative decrease (MCP MD(0.5), VCP family MD).
    Overloaded,
    /// erc: sending at the rate the routers advertise.
    ExplicitRate,
}

impl Mode {
    /// A short lowercase name.
    pub const fn name(self) -> &'static str {
        match self {
            Mode::SlowStart => "slow-start",
            Mode::CongestionAvoidance => "congestion-avoidance",
            Mode::Recovery => "recovery",
            Mode::MultiplicativeIncrease => "mi",
            Mode::AdditiveIncrease => "ai",
            Mode::Hold => "hold",
            Mode::Scaling => "scaling",
            Mode::Fairing => "fairing",
            Mode::Enhancing => "enhancing",
            Mode::Smoothing => "smoothing",
            Mode::Stable => "stable",
            Mode::Overloaded => "overloaded",
            Mode::ExplicitRate => "explicit-rate",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Limits and units every law shares.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LawConfig {
    /// Maximum segment size in bytes: the unit of "one packet".
    pub mss: u64,
    /// Initial window in bytes (window laws).
    pub initial_window: u64,
    /// The window never goes below this (bytes).
    pub min_window: u64,
    /// The window never goes above this (bytes).
    pub max_window: u64,
    /// The routers' measurement interval t_p that RTT scaling refers to.
    pub interval: Duration,
}

impl LawConfig {
    /// Defaults for a given MSS: initial window 10 packets (RFC 9002 uses
    /// about that), minimum 2 packets (RFC 9002 §7.2), maximum 1 GiB, t_p 200 ms.
    pub fn with_mss(mss: u64) -> LawConfig {
        let mss = mss.max(1);
        LawConfig {
            mss,
            initial_window: 10 * mss,
            min_window: 2 * mss,
            max_window: 1 << 30,
            interval: crate::signal::load::DEFAULT_INTERVAL,
        }
    }

    /// `window` clamped into `[min_window, max_window]`, NaN to the minimum.
    /// A configuration whose minimum exceeds its maximum yields the minimum,
    /// never a panic.
    pub fn clamp(&self, window: f64) -> f64 {
        let (min, max) = (self.min_window as f64, self.max_window as f64);
        if window.is_nan() {
            return min;
        }
        window.min(max).max(min)
    }
}

impl Default for LawConfig {
    fn default() -> LawConfig {
        LawConfig::with_mss(1200)
    }
}

/// Reno's rule for loss and unexplained CE (RFC 6582; RFC 9002 §7.3.2): one
/// reaction per round trip. A signal for a packet sent before the last
/// reaction belongs to the congestion event already answered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LossEpoch(Option<Duration>);

impl LossEpoch {
    /// Whether a signal for a packet sent at `sent` starts a new congestion
    /// event; if it does, the event starts at `now`.
    pub fn begins(&mut self, now: Duration, sent: Duration) -> bool {
        let new = self.is_new(sent);
        if new {
            self.start(now);
        }
        new
    }

    /// Whether a signal for a packet sent at `sent` comes after the event
    /// last answered.
    pub fn is_new(&self, sent: Duration) -> bool {
        self.0.is_none_or(|start| sent > start)
    }

    /// A reaction at `now` answers the congestion event.
    pub fn start(&mut self, now: Duration) {
        self.0 = Some(now);
    }

    /// Whether the last reaction is less than a round trip old: acks now are
    /// for packets sent before it, which must not grow the window back
    /// (NewReno's recovery, RFC 6582).
    pub fn in_recovery(&self, now: Duration, rtt: &RttSample) -> bool {
        self.0.is_some_and(|start| now < start + rtt.smoothed)
    }
}

/// The congestion window every window law keeps: bytes within the law's
/// bounds, the law's mode, and Reno's reaction to loss and unexplained CE
/// (RFC 9002 §7.3.2: kLossReductionFactor = 0.5, once per congestion
/// event).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Window {
    bytes: f64,
    bounds: LawConfig,
    loss: LossEpoch,
    mode: Mode,
}

impl Window {
    /// NewReno's loss reduction factor (RFC 9002 §7.3.2).
    pub const LOSS_REDUCTION: f64 = 0.5;

    /// The configured initial window, in `mode`.
    pub fn new(config: LawConfig, mode: Mode) -> Window {
        Window {
            bytes: config.clamp(config.initial_window as f64),
            bounds: config,
            loss: LossEpoch::default(),
            mode,
        }
    }

    /// The window in bytes.
    pub fn bytes(&self) -> f64 {
        self.bytes
    }

    /// The window in whole bytes, as [`Law::window`] reports it.
    pub fn whole_bytes(&self) -> u64 {
        self.bytes as u64
    }

    /// Sets the window, clamped into the configured bounds.
    pub fn set(&mut self, bytes: f64) {
        self.bytes = self.bounds.clamp(bytes);
    }

    /// The law's mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// Sets the law's mode.
    pub fn set_mode(&mut self, mode: Mode) {
        self.mode = mode;
    }

    /// The reaction to a loss or CE for a packet sent at `sent`: the first
    /// signal of a congestion event multiplies the window by `factor`;
    /// returns the window before, if it did.
    pub fn reduce_on_congestion(
        &mut self,
        now: Duration,
        sent: Duration,
        factor: f64,
    ) -> Option<f64> {
        let before = self.bytes;
        self.loss.begins(now, sent).then(|| {
            self.set(before * factor);
            before
        })
    }

    /// Reno's reaction: the first signal of a congestion event halves the
    /// window and enters recovery; true if it did.
    pub fn halve_on_congestion(&mut self, now: Duration, sent: Duration) -> bool {
        let halved = self
            .reduce_on_congestion(now, sent, Self::LOSS_REDUCTION)
            .is_some();
        if halved {
            self.mode = Mode::Recovery;
        }
        halved
    }

    /// Whether the last reduction is less than a round trip old
    /// ([`LossEpoch::in_recovery`]).
    pub fn in_recovery(&self, now: Duration, rtt: &RttSample) -> bool {
        self.loss.in_recovery(now, rtt)
    }
}

/// What the path's routers asked of a server's initial window in the
/// handshake (erc's start code, [`crate::schemes::erc::first_window_pace`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FirstPace {
    /// The window's pace, bytes per second.
    pub rate: f64,
    /// Whether the code is the most a flight carries: a router that asks
    /// the most may have wanted the window slower still (a crowd larger
    /// than the code can say), which the law answers at its first loss
    /// ([`Law::pace_first_window`]).
    pub most: bool,
}

/// The sender half of a scheme: a window (or rate) state machine.
pub trait Law: Send + fmt::Debug {
    /// `acked_bytes` were newly acknowledged.
    fn on_ack(&mut self, now: Duration, acked_bytes: u64, rtt: &RttSample);

    /// The path's RTT estimate after any ACK, also one that [`Law::on_ack`]
    /// does not see because the sender was application-limited (the
    /// handshake's): a pacing law paces its first flight from it.
    fn on_rtt(&mut self, _rtt: &RttSample) {}

    /// The sender sends again at `now` with nothing in flight, `idle` (at
    /// least a smoothed RTT) after its last packet: an application that
    /// paused. A law whose rate may have gone stale meanwhile restarts
    /// gently.
    fn on_idle_restart(&mut self, _now: Duration, _idle: Duration) {}

    /// The path's routers asked, in the handshake (whose round trip is
    /// `rtt`), that the initial window go out no faster than `pace` (erc's
    /// start code, [`crate::schemes::erc::first_window_pace`]). Laws that
    /// do not read it ignore it.
    fn pace_first_window(&mut self, _now: Duration, _pace: FirstPace, _rtt: &RttSample) {}

    /// Whether the routers' marks reach the law through the peer's ACK-ECN
    /// counts (`true`) or through its ecnq receiver's reports: a count
    /// reader reads only the packets its peer's ACK frames acknowledge, so
    /// a law that would pace a few packets per round trip or fewer may keep
    /// more to read by. Laws that do not care ignore it.
    fn reads_ack_counts(&mut self, _counts: bool) {}

    /// A feedback report arrived from the receiver.
    fn on_feedback(&mut self, now: Duration, feedback: Feedback, rtt: &RttSample);

    /// A loss or unexplained CE for a packet sent at `sent`. Laws react at
    /// most once per round trip: a packet sent before the last reaction is
    /// part of the same congestion event.
    fn on_congestion(&mut self, now: Duration, sent: Duration, kind: Congestion, rtt: &RttSample);

    /// The congestion window in bytes.
    fn window(&self) -> u64;

    /// The sending rate in bytes per second, for rate-based laws (MCP).
    fn pacing_rate(&self) -> Option<f64> {
        None
    }

    /// The longest burst the law's pacing may send at once, if the law
    /// bounds it; `None` leaves it to the transport, whose scheduling on a
    /// busy host needs a few milliseconds.
    fn pacing_burst(&self) -> Option<Duration> {
        None
    }

    /// Whether what the law's pacing could not send while the transport did
    /// not ask for its window (quinn asks when ACKs come, which a busy host
    /// spaces unevenly) may go out later, a burst at a time, at up to a few
    /// times the rate ([`crate::session`]'s rate gate). A law that must
    /// deliver the rate a router gave it wants that; one that reads its own
    /// queue (Prague, at the L4S step) does not: the faster stretches are
    /// marked.
    fn pacing_catches_up(&self) -> bool {
        false
    }

    /// Whether a pacing law's [`Law::window`] is what it may have in flight
    /// (BBR's, a gain times its bandwidth-delay product), rather than a
    /// rate × RTT that the transport lets the flight reach a few times over
    /// ([`crate::session::GATED_WINDOW_CAP`]). The session's gate and the
    /// simulator's sender both cap the flight by it.
    fn window_caps_flight(&self) -> bool {
        false
    }

    /// What the law is doing.
    fn mode(&self) -> Mode;

    /// The DSCP tag for the next packet (MCP sets fairing bits).
    fn tag(&self) -> SchemeTag;
}
