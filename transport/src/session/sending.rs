//! The sending half of a session: the active law, the fallback decision,
//! router presence, the report timeout and the rate gate.

use std::collections::VecDeque;
use std::time::Duration;

use super::ack_counts::{AckCounts, Reading};
use super::ack_gap::AckGap;
use super::mode::{PeerMode, Signal};
use super::rate_gate::{Pace, RateGate};
use super::report::{ReportFilter, Repr};
use super::start_code::StartCode;
use super::{Cause, Event, PeerEvent, SessionStats};
use crate::schemes::cubic::CubicLaw;
use crate::schemes::erc::start_with_code;
use crate::schemes::registry::Scheme;
use crate::session::presence::RouterPresence;
use crate::signal::{Congestion, Feedback, Law, LawConfig, Mode, RttSample};
use crate::wire::ack::AckFrame;
use crate::wire::ecn::{Ecn, SchemeTag};

/// No report for this long while acks arrive ⇒ fall back to classic:
/// max(`REPORT_TIMEOUT_RTTS` · srtt, `REPORT_TIMEOUT_MIN`) (docs/design.md §3:
/// "when no report arrives for a few RTTs").
const REPORT_TIMEOUT_RTTS: u32 = 4;
/// The floor of the report timeout; reports are sent at least every 10 ms
/// ([`super::report::SendPolicy::default`]), so this leaves room for
/// scheduling delays.
const REPORT_TIMEOUT_MIN: Duration = Duration::from_millis(500);

/// A rate law's gated window reaches at most this many times rate × srtt:
/// room for the ACK delay and a queue, while the gate spaces the sending.
/// It is also what a rate law has in flight at most: when no ACK comes
/// back (a link in an outage) the flow stops after it.
pub const GATED_WINDOW_CAP: u64 = 2;

/// quinn's pacer sends at this times its congestion window per smoothed
/// RTT (quinn-proto's `pacing` module).
pub(crate) const QUINN_PACING_GAIN: f64 = 1.25;

/// What the law may be told, from whichever feedback carried it;
/// [`Sending::hears`] decides whether it does.
#[derive(Clone, Copy, Debug)]
enum Told {
    /// The transport acknowledged `bytes`.
    Ack { bytes: u64, app_limited: bool },
    /// An accepted report; `arrived`: packets it counts beyond those sent
    /// before the peer was known to run ecnq.
    Report { feedback: Feedback, arrived: u64 },
    /// A reading of the peer's ACK-ECN counts; `ce_sent`: when the newest
    /// packet of a frame whose CE count rose was sent.
    Counts {
        feedback: Feedback,
        ce_sent: Option<Duration>,
    },
    /// The transport saw a loss or a CE mark of a packet sent at `sent`.
    Congestion { sent: Duration, kind: Congestion },
}

/// When reports are overdue. Reports are due only while data flows: while
/// this end sends no data (perhaps only its own reports), or after a pause,
/// the peer has nothing it must report, so the timeout restarts.
#[derive(Clone, Debug, Default)]
struct ReportTimeout {
    /// When the last report was accepted, or acks resumed after a pause.
    due_from: Duration,
    /// When the last ack arrived.
    last_ack: Duration,
    /// The data-sent progress counter and when it last moved.
    data_sent: (u64, Duration),
    /// The data-sent progress counter as last told.
    progress: u64,
}

impl ReportTimeout {
    /// At an ack: whether reports are overdue.
    fn on_ack(&mut self, now: Duration, srtt: Duration) -> bool {
        let timeout = (srtt * REPORT_TIMEOUT_RTTS).max(REPORT_TIMEOUT_MIN);
        if self.progress != self.data_sent.0 {
            self.data_sent = (self.progress, now);
        }
        let paused = now.saturating_sub(self.data_sent.1) > timeout
            || now.saturating_sub(self.last_ack) > timeout;
        if paused {
            self.due_from = self.due_from.max(now);
        }
        self.last_ack = now;
        now.saturating_sub(self.due_from) > timeout
    }
}

/// The window a law gives the transport: its own, or a rate law's gate
/// with its pace, its cap and the floor below which it does not go.
enum Gating {
    Law(u64),
    Gate { pace: Pace, cap: u64, floor: u64 },
}

/// The sending direction: what the congestion controller owns.
#[derive(Debug)]
pub(super) struct Sending {
    /// The scheme whose law this is; `None` for a baseline's law, or when
    /// the sender runs a controller outside the session (one of quinn's).
    scheme: Option<Scheme>,
    /// The active law: the scheme's, or the classic law after a fallback.
    law: Option<Box<dyn Law>>,
    mode: PeerMode,
    /// The scheme's own tag, kept while fallen back.
    scheme_tag: SchemeTag,
    config: LawConfig,
    rtt: RttSample,
    filter: Option<ReportFilter>,
    /// Whether an ecnq router is on the path, for schemes that probe.
    presence: Option<RouterPresence>,
    /// The peer's ACK-ECN counts, read for a scheme whose marks they carry.
    counts: Option<AckCounts>,
    timeout: ReportTimeout,
    decreases: u64,
    /// Holds a rate law to its rate (none of the other laws use it).
    gate: RateGate,
    /// The time between the peer's ACKs.
    ack_gap: AckGap,
    /// IP and UDP header bytes of every packet: routers meter whole packets
    /// and advertise rates in those bytes, while quinn counts UDP payload,
    /// so the gate debits both.
    header_bytes: u64,
    /// Bytes in flight as the transport counts them, for the gate: its own
    /// figure at the end of each ACK, plus what was sent and less what was
    /// declared lost since.
    in_flight: u64,
    /// Packets sent before the peer was known to run ecnq, with quinn's
    /// ECT(0) (see [`Sending::on_report`]).
    probing_packets: u64,
    /// When the last data packet (see [`CONTROL_PACKET`]) was sent, to
    /// tell an idle restart.
    last_sent: Option<Duration>,
    /// The handshake's ACK-ECN counts, until the handshake is done.
    handshake_counts: Option<StartCode>,
    /// The start code they told (see [`SessionStats::start_code`]).
    start_code: Option<u8>,
}

impl Sending {
    pub fn new(scheme: Option<Scheme>, config: LawConfig, header_bytes: u64) -> Sending {
        Sending::running(scheme, scheme.map(|s| s.law(config)), config, header_bytes)
    }

    /// A sender whose law is a baseline that no router feeds (BBR): no
    /// scheme, untagged, its law told of ACKs and losses as a scheme's is.
    pub fn baseline(law: Box<dyn Law>, config: LawConfig, header_bytes: u64) -> Sending {
        Sending::running(None, Some(law), config, header_bytes)
    }

    fn running(
        scheme: Option<Scheme>,
        law: Option<Box<dyn Law>>,
        config: LawConfig,
        header_bytes: u64,
    ) -> Sending {
        let assisted = scheme.filter(|s| s.is_router_assisted());
        Sending {
            scheme,
            mode: match assisted {
                Some(_) => PeerMode::Probing,
                None => PeerMode::Unassisted,
            },
            // The plain tag: an MCP law's first tag also requests fairing,
            // which a fallen-back flow must not.
            scheme_tag: law
                .as_ref()
                .map_or(SchemeTag::UNTAGGED, |l| SchemeTag::new(l.tag().wire_id)),
            law,
            config,
            rtt: RttSample::uniform(Duration::from_millis(333)),
            filter: assisted.map(|s| ReportFilter::new(s.wire())),
            presence: assisted
                .filter(|s| s.wire().sends_probes())
                .map(|_| RouterPresence::default()),
            counts: assisted
                .and_then(|s| s.wire().count_reader())
                .map(AckCounts::new),
            timeout: ReportTimeout::default(),
            decreases: 0,
            gate: RateGate::default(),
            ack_gap: AckGap::default(),
            header_bytes,
            in_flight: 0,
            probing_packets: 0,
            last_sent: None,
            handshake_counts: Some(StartCode::default()),
            start_code: None,
        }
    }

    /// Whether router feedback is in use, and if not why.
    pub fn mode(&self) -> PeerMode {
        self.mode
    }

    /// The scheme's own tag, kept while fallen back.
    pub fn scheme_tag(&self) -> SchemeTag {
        self.scheme_tag
    }

    pub fn config(&self) -> &LawConfig {
        &self.config
    }

    /// The sender's part of a session's stats; the receiver's fields are
    /// left empty for the session to fill.
    pub fn stats(&self) -> SessionStats {
        let law = self.law();
        let filter = self.filter.as_ref();
        let counts = self.counts.as_ref();
        SessionStats {
            mode: self.mode,
            law_mode: law.map(|l| l.mode()),
            window: self.law_window(),
            pacing_rate: law.and_then(|l| l.pacing_rate()),
            last_report: filter.and_then(|f| f.last()).copied(),
            reports_accepted: filter.map_or(0, |f| f.accepted()),
            reports_rejected: filter.map_or(0, |f| f.rejected()),
            decreases: self.decreases,
            local_estimate: None,
            ecn_received: [0; 4],
            reports_sent: 0,
            counts_estimate: counts
                .filter(|_| self.mode == PeerMode::EcnqAckCounts)
                .map(|c| c.estimate()),
            ack_frames_read: counts.map_or(0, |c| c.frames_read),
            ack_frames_unread: counts.map_or(0, |c| c.frames_skipped),
            start_code: self.start_code,
        }
    }

    /// Whether the presence probes gave a first verdict (true for a scheme
    /// that does not probe).
    pub fn presence_decided(&self) -> bool {
        self.presence.as_ref().is_none_or(RouterPresence::decided)
    }

    pub fn law(&self) -> Option<&dyn Law> {
        self.law.as_deref()
    }

    /// The rate the active law sends at, if it is a rate law (its gate's fill rate).
    pub fn law_rate(&self) -> Option<f64> {
        self.law.as_ref().and_then(|law| law.pacing_rate())
    }

    /// The active law's pacing, if it paces: what its gate fills at.
    fn law_pace(&self) -> Option<Pace> {
        let law = self.law.as_ref()?;
        Some(Pace::of(law.as_ref(), law.pacing_rate()?))
    }

    /// The law's current tag.
    pub fn tag(&self) -> SchemeTag {
        self.law.as_ref().map_or(SchemeTag::UNTAGGED, |l| l.tag())
    }

    /// rate × srtt, bytes: what a flow at `rate` has in flight.
    fn rate_window(&self, rate: f64) -> u64 {
        self.config.clamp(rate * self.rtt.smoothed.as_secs_f64()) as u64
    }

    /// What a flow sends between two of the peer's ACKs, bytes: its bytes
    /// per ACK, beyond its window's round trip (docs/design.md §3, "The
    /// ACK pattern").
    fn ack_room(&self) -> u64 {
        self.ack_gap.bytes()
    }

    /// The window published for the law. For a rate law it is rate × srtt,
    /// what stats show; the transport gets the gate's window
    /// ([`Sending::gated_window`]), which this caps.
    pub fn law_window(&self) -> Option<u64> {
        let law = self.law.as_ref()?;
        Some(match law.pacing_rate() {
            Some(rate) => self.rate_window(rate),
            None => law.window(),
        })
    }

    /// The window the transport may use at `now`: a rate law's goes through
    /// its gate, up to [`GATED_WINDOW_CAP`] times rate × srtt. For a law
    /// that catches up it is at least rate × srtt / [`QUINN_PACING_GAIN`]:
    /// quinn paces at that gain times its window per srtt, so while less
    /// than that is in flight (a start, a return from idle) its own pacer
    /// sends at the law's rate, woken by its own timer, where the gate's
    /// window alone holds its pacer to 1.25 × what is in flight per round
    /// trip, and a late flow on a long path takes longer to reach its share
    /// (`once_a_start_knows_its_rate_the_pacer_sends_it`). quinn's pacer
    /// lets out at least ten packets at once, so a law that bounds its
    /// bursts closer and does not catch up (Prague, under the L4S queue's
    /// 1 ms step) gets no floor: with one, Prague got much less of the
    /// link in the demo (`ecnq-perf demo`).
    pub fn gated_window(&self, now: Duration) -> Option<u64> {
        Some(match self.gating()? {
            Gating::Law(window) => window,
            Gating::Gate { pace, cap, floor } => {
                let (mss, in_flight) = (self.config.mss, self.in_flight);
                self.gate.window(now, pace, mss, in_flight, cap).max(floor)
            }
        })
    }

    /// When [`Sending::gated_window`] first reaches `target` if time alone
    /// passes: `now` if it already does; `None` if time alone never gets it
    /// there (a window law's, which only acknowledgements move).
    pub fn gated_window_reaches(&self, now: Duration, target: u64) -> Option<Duration> {
        match self.gating()? {
            Gating::Law(window) => (window >= target).then_some(now),
            Gating::Gate { floor, .. } if floor >= target => Some(now),
            Gating::Gate { pace, cap, .. } => {
                let (mss, in_flight) = (self.config.mss, self.in_flight);
                self.gate.reaches(now, pace, mss, in_flight, cap, target)
            }
        }
    }

    /// What the transport's window is made of ([`Sending::gated_window`]).
    /// The law's rate is computed once here: quinn reads its window for
    /// every packet, and the lock's release asks [`Sending::under_rate`].
    fn gating(&self) -> Option<Gating> {
        let law = self.law.as_ref()?;
        let Some(rate) = law.pacing_rate() else {
            return Some(Gating::Law(law.window()));
        };
        let pace = Pace::of(law.as_ref(), rate);
        // A law whose own window is tighter than rate × srtt (erc's, whose
        // round trip is bounded by the path's least) caps the flight by it:
        // a queue the flow meets then holds it back, as in the simulator
        // (`flight_cap` in the simulator's sender).
        let window = law.window().min(self.rate_window(rate));
        let floor = if pace.catch_up {
            (window as f64 / QUINN_PACING_GAIN) as u64
        } else {
            0
        };
        // What the rate sends between two ACKs comes on top: the law's
        // window rule bounds the flight's round trip, the peer's pattern
        // adds its gap to it. A law whose window is its flight cap (BBR's)
        // gets that alone: twice it let BBR queue three of its
        // bandwidth-delay products where the simulator's queued one
        // (`a_bbr_flight_is_capped_by_its_window`).
        let cap = if law.window_caps_flight() {
            law.window()
        } else {
            window.saturating_mul(GATED_WINDOW_CAP) + self.ack_room()
        };
        Some(Gating::Gate { pace, cap, floor })
    }

    /// Whether a pacing law's flow is short of its rate, so that the
    /// transport should ask for its window again soon: quinn asks only as
    /// ACKs come, and at each ask the gate lets one burst out. So while
    /// room for a packet under its cap the flow is asked between ACKs, and
    /// paces at its rate whenever the ACKs come, as the simulator's sender
    /// does. Asked only while it had less than half its rate × srtt out,
    /// an erc flow on a link that delivers in bursts (a cellular one, whose
    /// ACKs pause with it) sent one burst per ACK and about 0.8 of its
    /// rate; a Prague flow on a long fat path, whose gate holds one burst,
    /// fell further short (`a_rate_law_is_asked_between_acks_until_its_cap`).
    pub fn under_rate(&self) -> bool {
        matches!(self.gating(), Some(Gating::Gate { cap, .. })
            if self.in_flight + self.config.mss <= cap)
    }

    /// When the gate of a flow under its rate ([`Sending::under_rate`])
    /// lets one more packet out if time alone passes: `now` if it already
    /// does; `None` when the flow is not under its rate.
    pub fn next_packet_at(&self, now: Duration) -> Option<Duration> {
        if !self.under_rate() {
            return None;
        }
        self.gated_window_reaches(now, self.in_flight + self.config.mss)
    }

    pub fn on_data_progress(&mut self, sent: u64) {
        self.timeout.progress = sent;
    }

    pub fn on_sent(&mut self, now: Duration, bytes: u64) {
        if bytes >= CONTROL_PACKET {
            let (mss, srtt) = (self.config.mss, self.rtt.smoothed);
            if let Some(idle) = idle_gap(self.in_flight, mss, self.last_sent, now, srtt) {
                if let Some(law) = self.law.as_mut() {
                    law.on_idle_restart(now, idle);
                }
            }
            self.last_sent = Some(now);
        }
        self.in_flight = self.in_flight.saturating_add(bytes);
        if self.mode == PeerMode::Probing {
            self.probing_packets += 1;
        }
        if let Some(pace) = self.law_pace() {
            self.gate
                .on_sent(now, bytes + self.header_bytes, pace, self.config.mss);
        }
    }

    /// What the peer said about this end's packets, in whichever form it
    /// came: the one way feedback enters the sender. `probes_sent` counts
    /// the presence probe packets sent so far.
    pub fn on_peer(
        &mut self,
        now: Duration,
        event: PeerEvent<'_>,
        probes_sent: u64,
        events: &mut VecDeque<Event>,
    ) {
        match event {
            PeerEvent::Report(datagram) => self.on_report(now, datagram, probes_sent, events),
            PeerEvent::AckFrame(frame) => self.on_ack_frame(now, &frame, events),
            PeerEvent::HandshakeAck { space, frame } => {
                if let Some(counts) = self.handshake_counts.as_mut() {
                    counts.on_ack(space, &frame);
                }
            }
            PeerEvent::HandshakeDone => self.on_handshake_done(now),
            PeerEvent::Acked {
                bytes,
                app_limited,
                rtt,
            } => self.on_ack(now, bytes, app_limited, rtt, events),
            PeerEvent::AcksDone { in_flight } => {
                self.in_flight = in_flight;
                self.ack_gap.on_ack_end();
            }
            PeerEvent::Congestion { sent, lost_bytes } => {
                self.in_flight = self.in_flight.saturating_sub(lost_bytes);
                let kind = match lost_bytes {
                    0 => Congestion::Ce,
                    _ => Congestion::Loss,
                };
                self.tell(now, Told::Congestion { sent, kind }, events);
            }
        }
    }

    /// The handshake is done: erc's start code, where the counts told one,
    /// paces the law's first window (the window over the handshake's round
    /// trip, halved per cleared datagram; `a_start_code_paces_the_first_window`).
    /// Laws that do not read the code ignore it.
    fn on_handshake_done(&mut self, now: Duration) {
        let Some((cleared, flight)) = self.handshake_counts.take().and_then(|c| c.read()) else {
            return;
        };
        self.start_code = Some(cleared);
        if let Some(law) = self.law.as_mut() {
            start_with_code(law.as_mut(), now, (cleared, flight), &self.rtt);
        }
    }

    fn on_ack(
        &mut self,
        now: Duration,
        bytes: u64,
        app_limited: bool,
        rtt: RttSample,
        events: &mut VecDeque<Event>,
    ) {
        self.rtt = rtt;
        self.ack_gap.on_acked(bytes, app_limited);
        if let Some(law) = self.law.as_mut() {
            law.on_rtt(&rtt);
        }
        if self.timeout.on_ack(now, rtt.smoothed) {
            self.signal(Signal::ReportsStopped, events);
        }
        self.tell(now, Told::Ack { bytes, app_limited }, events);
    }

    /// A packet from the peer arrived, tagged or not.
    pub fn on_peer_packet(&mut self, tagged: bool, events: &mut VecDeque<Event>) {
        let reads_counts = self.counts.is_some();
        self.signal(
            Signal::PeerPacket {
                tagged,
                reads_counts,
            },
            events,
        );
    }

    /// Whether the sender keeps its packets' numbers and hashes for
    /// reading the peer's ACK-ECN counts: its scheme's marks are in them,
    /// and the peer may not, or does not, run ecnq.
    pub fn reads_counts(&self) -> bool {
        self.counts.is_some()
            && matches!(
                self.mode,
                PeerMode::Probing | PeerMode::EcnqAckCounts | PeerMode::ClassicNoEcnCounts
            )
    }

    /// A 1-RTT packet sent at `now`: its number and packet hash.
    pub fn on_packet_sent(&mut self, now: Duration, number: u64, hash: u32) {
        if self.reads_counts() {
            if let Some(counts) = self.counts.as_mut() {
                counts.on_sent(number, hash, now);
            }
        }
    }

    /// An ACK frame from the peer: read for the routers' marks while the
    /// law runs on the peer's counts, and a CE mark among them is
    /// congestion. Whether the peer sends counts at all is judged here,
    /// frame by frame ([`super::NO_COUNTS_AFTER`]), never per packet
    /// acknowledged: the transport acknowledges a frame's packets after
    /// the frame is read.
    fn on_ack_frame(&mut self, now: Duration, frame: &AckFrame<'_>, events: &mut VecDeque<Event>) {
        if !matches!(
            self.mode,
            PeerMode::EcnqAckCounts | PeerMode::ClassicNoEcnCounts
        ) {
            return;
        }
        let Some(counts) = self.counts.as_mut() else {
            return;
        };
        let reading = counts.on_frame(frame);
        let signal = match reading {
            Reading::Nothing | Reading::NoCounts { stopped: false } => return,
            Reading::NoCounts { stopped: true } => Signal::EcnCountsStopped,
            Reading::Invalid => Signal::EcnCountsInvalid,
            Reading::Unplaced | Reading::Read { .. } => Signal::EcnCountsSeen,
        };
        self.signal(signal, events);
        if let Reading::Read { feedback, ce_sent } = reading {
            self.tell(now, Told::Counts { feedback, ce_sent }, events);
        }
    }

    /// A report datagram from the peer: checked, then handed to the law.
    fn on_report(
        &mut self,
        now: Duration,
        datagram: &[u8],
        probes_sent: u64,
        events: &mut VecDeque<Event>,
    ) {
        let Some(filter) = self.filter.as_mut() else {
            events.push_back(Event::ReportIgnored);
            return;
        };
        let repr: Repr = match filter.accept(datagram) {
            Ok(repr) => repr,
            Err(error) => {
                events.push_back(Event::ReportRejected(error));
                return;
            }
        };
        self.timeout.due_from = now;
        self.signal(Signal::ReportAccepted, events);
        // Packets the report counts beyond those sent before the peer was
        // known to run ecnq, which carried quinn's ECT(0).
        let arrived = repr
            .counts
            .iter()
            .sum::<u64>()
            .saturating_sub(self.probing_packets);
        if let Some(presence) = self.presence.as_mut() {
            let present = presence.on_report(repr.unraised_probes, probes_sent, arrived);
            self.signal(Signal::RouterPresent(present), events);
        }
        let feedback = repr.feedback;
        self.tell(now, Told::Report { feedback, arrived }, events);
    }

    /// Whether the law hears `told`: the one place that decides, whatever
    /// the feedback came in.
    fn hears(&self, told: &Told) -> bool {
        match *told {
            Told::Ack { app_limited, .. } => !app_limited,
            // VCP, MPCP and MCP read ECT(0) as a load code ("high load"),
            // so a report of only those packets would hand the law a load
            // no router measured, and a starting VCP sender would leave
            // multiplicative increase for additive increase.
            //
            // A probing law (those same schemes) hears no report at all
            // before its first presence verdict: the receiver's decoder
            // may still hold the level of those ECT(0) packets when its
            // report first counts a probe, and with no ecnq router, Cubic
            // must take over from a law still starting. Once it has a
            // verdict, probes have arrived, so the first rule is left for
            // the schemes that do not probe
            // (`before_its_first_verdict_a_law_hears_no_report`).
            Told::Report { arrived, .. } => {
                self.presence_decided()
                    && (arrived > 0 || self.scheme_tag.wire().base_ecn() == Ecn::Ect0)
            }
            // Counts are read only for the scheme's own law.
            Told::Counts { .. } => self.mode == PeerMode::EcnqAckCounts,
            Told::Congestion {
                kind: Congestion::Loss,
                ..
            } => true,
            Told::Congestion {
                kind: Congestion::Ce,
                ..
            } => match self.mode {
                // CE on an ecnq path is the scheme's own overload code (the
                // receiver's report carries it to the law), unless the
                // scheme never uses CE as a code.
                PeerMode::Ecnq => self.scheme.is_none_or(|s| s.ce_is_congestion()),
                // Read from the peer's counts, CE reaches the law from
                // there ([`Told::Counts`]): quinn's ECN validation fails on
                // the routers' Not-ECT digits, and then tells of no CE.
                PeerMode::EcnqAckCounts => false,
                _ => true,
            },
        }
    }

    /// Tells the law `told`, if it [hears](Sending::hears) it.
    fn tell(&mut self, now: Duration, told: Told, events: &mut VecDeque<Event>) {
        if !self.hears(&told) {
            return;
        }
        let congestion = |sent, kind| {
            move |law: &mut dyn Law, rtt: &RttSample| law.on_congestion(now, sent, kind, rtt)
        };
        match told {
            Told::Ack { bytes, .. } => {
                self.update_law(Cause::Ack, events, |law, rtt| law.on_ack(now, bytes, rtt))
            }
            Told::Report { feedback, .. } | Told::Counts { feedback, .. } => {
                self.update_law(Cause::Feedback, events, |law, rtt| {
                    law.on_feedback(now, feedback, rtt)
                });
                if let Told::Counts {
                    ce_sent: Some(sent),
                    ..
                } = told
                {
                    let update = congestion(sent, Congestion::Ce);
                    self.update_law(Cause::Congestion, events, update);
                }
            }
            Told::Congestion { sent, kind } => {
                self.update_law(Cause::Congestion, events, congestion(sent, kind))
            }
        }
    }

    /// Moves the mode on `signal`; entering a fallback hands the window to
    /// the classic law, leaving one hands it back to the scheme's.
    fn signal(&mut self, signal: Signal, events: &mut VecDeque<Event>) {
        let (from, to) = (self.mode, self.mode.after(signal));
        if from == to {
            return;
        }
        self.mode = to;
        events.push_back(Event::ModeChanged { from, to });
        if to.is_fallback() {
            self.fall_back(to, events);
        } else if from.is_fallback() {
            self.resume_scheme(events);
        }
        if let Some(law) = self.law.as_mut() {
            law.reads_ack_counts(to == PeerMode::EcnqAckCounts);
        }
    }

    /// Replaces the scheme's law by Cubic at the law's window: without router
    /// feedback, a loss-based law that holds its own next to today's traffic
    /// (a law still in slow start stays in it).
    fn fall_back(&mut self, mode: PeerMode, events: &mut VecDeque<Event>) {
        let Some(law) = self.law.as_ref().filter(|l| l.tag() != SchemeTag::UNTAGGED) else {
            return;
        };
        let window = law.window();
        let cubic = CubicLaw::in_place_of(law.as_ref(), self.config);
        self.law = Some(Box::new(cubic));
        events.push_back(Event::LawReplaced { window, mode });
    }

    /// Reports came back, or probes came back raised, after a fallback: the
    /// scheme's law takes over again from the classic law's window.
    fn resume_scheme(&mut self, events: &mut VecDeque<Event>) {
        let (Some(scheme), Some(law)) = (self.scheme, self.law.as_ref()) else {
            return;
        };
        let config = LawConfig {
            initial_window: law.window(),
            ..self.config
        };
        events.push_back(Event::SchemeResumed {
            scheme,
            window: config.initial_window,
        });
        let mut law = scheme.law(config);
        law.on_rtt(&self.rtt);
        self.law = Some(law);
    }

    /// Runs `update` on the law and notes its mode changes and decreases.
    fn update_law(
        &mut self,
        cause: Cause,
        events: &mut VecDeque<Event>,
        update: impl FnOnce(&mut dyn Law, &RttSample),
    ) {
        let Some(law) = self.law.as_deref_mut() else {
            return;
        };
        let before = law_level(law);
        update(law, &self.rtt);
        let (mode, level) = law_level(law);
        if mode != before.0 {
            events.push_back(Event::LawModeChanged {
                from: before.0,
                to: mode,
                window: law.window(),
                cause,
            });
        }
        if level < before.1 {
            self.decreases += 1;
            events.push_back(Event::Decrease {
                mode,
                from: before.1,
                to: level,
                cause,
            });
        }
    }
}

/// The idle time before a packet sent at `now`, if the sender was idle:
/// less than one full packet (`mss`) in flight, and at least one smoothed
/// RTT since its last data packet. A writer's pause leaves a few control
/// packets in flight (PINGs, ACKs of the receiver's reports, tens of bytes
/// each, some never acknowledged): with "nothing in flight" as the rule, a
/// flow back from a pause often finds a few of them in flight, takes no
/// restart, resumes at its old rate at once and builds a queue
/// (`an_idle_gap_needs_no_data_in_flight_and_a_round_trip_of_silence`).
pub fn idle_gap(
    in_flight: u64,
    mss: u64,
    last_sent: Option<Duration>,
    now: Duration,
    srtt: Duration,
) -> Option<Duration> {
    let idle = now.saturating_sub(last_sent?);
    (in_flight < mss && !idle.is_zero() && idle >= srtt).then_some(idle)
}

/// Packets smaller than this carry control frames, not data (ACKs, PINGs,
/// ecnq's reports: tens of bytes): they do not end an idle period.
const CONTROL_PACKET: u64 = 256;

/// What a law's decreases are measured on: its rate for rate laws (their
/// window follows the RTT), else its window.
fn law_level(law: &dyn Law) -> (Mode, f64) {
    (law.mode(), law.pacing_rate().unwrap_or(law.window() as f64))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schemes::mcp::McpLaw;
    use crate::session::ack_counts::frame_bytes;
    use crate::session::rate_gate::IDLE_WINDOW;
    use crate::signal::load::LoadFactor;
    use crate::signal::{Feedback, Law};
    use crate::wire::ack::{ack_frames, EcnCounts};

    #[test]
    fn a_rate_law_gets_a_window_of_one_rate_times_rtt() {
        let mut sending = Sending::new(
            Some(Scheme::Mcp),
            LawConfig {
                min_window: 1,
                ..LawConfig::with_mss(1200)
            },
            28,
        );
        sending.rtt = RttSample::uniform(Duration::from_millis(100));
        let rate = McpLaw::new(LawConfig::with_mss(1200))
            .pacing_rate()
            .expect("MCP is rate-based");
        // Throughput is at most window / RTT: the window must carry a whole RTT of the rate.
        assert_eq!(sending.law_window(), Some((rate * 0.1) as u64));
    }

    /// A law that catches up (MCP) gets a window of at least rate × srtt
    /// / 1.25, so that quinn's pacer runs at its rate; one that bounds its
    /// bursts closer (Prague) keeps the gate's, one datagram with nothing in
    /// flight and the gate in debt.
    #[test]
    fn only_a_law_that_catches_up_gets_a_window_the_pacer_runs_at_its_rate_with() {
        let now = Duration::from_secs(1);
        for (scheme, floored) in [(Scheme::Mcp, true), (Scheme::Prague, false)] {
            let mut sending = Sending::new(Some(scheme), LawConfig::with_mss(1200), 28);
            let rtt = RttSample::uniform(Duration::from_secs(4));
            sending.rtt = rtt;
            sending.law.as_mut().expect("a law").on_rtt(&rtt);
            let rate = sending.law_rate().expect("a rate law");
            let floor = (sending.rate_window(rate) as f64 / QUINN_PACING_GAIN) as u64;
            assert!(floor > 3 * IDLE_WINDOW, "{scheme}: floor {floor}");
            // A burst far over the balance, then all of it acknowledged.
            sending.on_sent(now, 1_000_000);
            sending.in_flight = 0;
            let window = sending.gated_window(now).expect("a law");
            if floored {
                assert!(window >= floor, "{scheme}: {window} < {floor}");
            } else {
                assert!(window <= IDLE_WINDOW, "{scheme}: {window}");
            }
        }
    }

    /// An erc flow in a queue of its own making (its link's capacity fell):
    /// the gate caps its flight by the law's window, whose round trip is
    /// bounded by the path's least, not by rate × srtt, as the simulator
    /// caps it (`flight_cap` in the simulator's sender).
    #[test]
    fn a_rate_laws_flight_is_capped_by_its_own_window() {
        use crate::schemes::erc::index_of;
        let ms = Duration::from_millis;
        let mut sending = Sending::new(Some(Scheme::Erc), LawConfig::with_mss(1200), 28);
        let queued = RttSample {
            smoothed: ms(150),
            min: ms(50),
            latest: ms(150),
        };
        sending.rtt = queued;
        let law = sending.law.as_mut().expect("a law");
        law.on_rtt(&queued);
        let told = Feedback {
            level: index_of(2.5e6),
            ..Feedback::default()
        };
        law.on_feedback(ms(1_000), told, &queued);
        law.on_ack(ms(1_001), 1_200, &queued);
        let rate = sending.law_rate().expect("erc paces once told a rate");
        let own = sending.law().expect("a law").window();
        assert!(own < sending.rate_window(rate) / 2, "{own}");
        // With two of the law's windows out, the gate opens no further,
        // however long it saved up.
        sending.in_flight = own * GATED_WINDOW_CAP;
        let window = sending.gated_window(ms(60_000)).expect("a law");
        assert_eq!(window, sending.in_flight, "the law's window {own}");
    }

    /// BBR's window is its flight cap, as in the simulator: the gate opens
    /// no further than it, where a rate law's flight may reach twice its
    /// window.
    #[test]
    fn a_bbr_flight_is_capped_by_its_window() {
        use crate::schemes::bbr::Bbr;
        let ms = Duration::from_millis;
        let config = LawConfig::with_mss(1200);
        let mut sending = Sending::baseline(Box::new(Bbr::new(config)), config, 28);
        let rtt = RttSample::uniform(ms(50));
        for i in 0..200 {
            sending.on_ack(ms(100 + i), 1_200, false, rtt, &mut VecDeque::new());
        }
        assert!(sending.law_rate().is_some(), "BBR paces");
        let own = sending.law().expect("a law").window();
        sending.in_flight = own;
        let window = sending.gated_window(ms(60_000)).expect("a law");
        assert_eq!(window, own, "the law's window {own}");
    }

    /// The real stack's start: a few datagrams carry quinn's ECT(0) before
    /// the peer is known to run ecnq, then every datagram is a probe. The
    /// receiver's decoder still holds the ECT(0)s' level (VCP's high load)
    /// when its first report counts a probe, so the law must not hear
    /// reports before the verdict: with no ecnq router, Cubic then takes
    /// over in slow start, as a new Cubic flow beside it runs, not in
    /// congestion avoidance from about the initial window.
    #[test]
    fn before_its_first_verdict_a_law_hears_no_report() {
        let ms = Duration::from_millis;
        let mut sending = Sending::new(Some(Scheme::Vcp), LawConfig::with_mss(1200), 28);
        let mut events = VecDeque::new();
        let rtt = RttSample::uniform(ms(40));
        let report = |sequence, probes, unraised| {
            Repr {
                scheme: Scheme::Vcp.wire(),
                sequence,
                feedback: Feedback {
                    level: 1,
                    load: LoadFactor::new(1.0),
                    fairing: false,
                },
                counts: [probes, 0, 3, 0],
                unraised_probes: unraised,
            }
            .to_bytes()
        };
        (0..3).for_each(|_| sending.on_sent(ms(0), 1200));
        sending.on_peer_packet(true, &mut events);
        (0..10).for_each(|_| sending.on_sent(ms(40), 1200));
        // One probe arrived unraised: too few for a verdict.
        sending.on_report(ms(60), &report(1, 1, 1), 10, &mut events);
        (1..=40).for_each(|t| sending.on_ack(ms(60 + t), 1200, false, rtt, &mut events));
        let law = sending.law().expect("a law");
        assert_eq!(law.mode(), Mode::MultiplicativeIncrease);
        // Ten of ten: no router, and Cubic starts in slow start.
        sending.on_report(ms(100), &report(2, 10, 10), 10, &mut events);
        assert_eq!(sending.mode, PeerMode::ClassicNoRouter);
        assert_eq!(sending.law().expect("a law").mode(), Mode::SlowStart);
    }

    /// An erc sender in [`PeerMode::EcnqAckCounts`] with packets
    /// `0..packets` sent, 1 ms apart.
    fn reading_counts(packets: u64) -> (Sending, VecDeque<Event>) {
        use crate::wire::hash::fmix32;
        let mut sending = Sending::new(Some(Scheme::Erc), LawConfig::with_mss(1200), 28);
        let mut events = VecDeque::new();
        sending.on_peer_packet(false, &mut events);
        assert_eq!(sending.mode, PeerMode::EcnqAckCounts);
        for n in 0..packets {
            let at = Duration::from_millis(n);
            sending.on_sent(at, 1200);
            sending.on_packet_sent(at, n, fmix32(n as u32));
        }
        (sending, events)
    }

    /// The ACK frame of `ranges` (highest first) with counts `ecn`, read,
    /// then each packet it acknowledges, as quinn acknowledges them after
    /// the packet keys have read the frame.
    fn ack_frame(
        sending: &mut Sending,
        ranges: &[std::ops::RangeInclusive<u64>],
        ecn: Option<EcnCounts>,
        events: &mut VecDeque<Event>,
    ) {
        let now = Duration::from_secs(1);
        let bytes = frame_bytes(ranges, ecn);
        let frame = ack_frames(&bytes).next().expect("a frame").expect("valid");
        sending.on_ack_frame(now, &frame, events);
        let rtt = RttSample::uniform(Duration::from_millis(40));
        for _ in ranges.iter().flat_map(|r| r.clone()) {
            sending.on_ack(now, 1200, false, rtt, events);
        }
    }

    /// A loaded client once acknowledged 144 packets in one frame with its
    /// counts: the counts mode must hold, whatever the frame's size, since
    /// a frame with counts never counts towards the verdict.
    #[test]
    fn one_large_frame_with_counts_keeps_the_counts_mode() {
        for packets in [144, 1000] {
            let (mut sending, mut events) = reading_counts(packets);
            let counts = EcnCounts {
                ect0: packets / 2,
                ect1: 0,
                ce: 0,
            };
            ack_frame(&mut sending, &[0..=packets - 1], Some(counts), &mut events);
            assert_eq!(
                sending.mode,
                PeerMode::EcnqAckCounts,
                "{packets}: {events:?}"
            );
        }
    }

    /// A peer that stops sending counts loses the counts mode, and gets
    /// it back when they return; counts that fall end it for good.
    #[test]
    fn counts_that_stop_return_and_fall_move_the_mode() {
        let (mut sending, mut events) = reading_counts(1000);
        let counts = |ect0| {
            Some(EcnCounts {
                ect0,
                ect1: 0,
                ce: 0,
            })
        };
        ack_frame(&mut sending, &[0..=99], counts(50), &mut events);
        ack_frame(&mut sending, &[0..=199], None, &mut events);
        assert_eq!(sending.mode, PeerMode::EcnqAckCounts);
        ack_frame(&mut sending, &[0..=299], None, &mut events);
        assert_eq!(sending.mode, PeerMode::ClassicNoEcnCounts);
        assert!(sending.reads_counts());
        ack_frame(&mut sending, &[0..=399], counts(200), &mut events);
        assert_eq!(sending.mode, PeerMode::EcnqAckCounts);
        assert_eq!(sending.law().map(|l| l.tag()), Some(sending.scheme_tag));
        ack_frame(&mut sending, &[0..=499], counts(100), &mut events);
        assert_eq!(sending.mode, PeerMode::ClassicEcnInvalid);
        assert!(!sending.reads_counts());
        ack_frame(&mut sending, &[0..=599], counts(300), &mut events);
        assert_eq!(sending.mode, PeerMode::ClassicEcnInvalid);
    }

    /// An erc sender on a path of `rtt`, told `rate` by its router.
    fn erc_told(rate: f64, rtt: RttSample) -> Sending {
        let mut sending = Sending::new(Some(Scheme::Erc), LawConfig::with_mss(1200), 28);
        sending.rtt = rtt;
        let told = Feedback {
            level: crate::schemes::erc::index_of(rate),
            ..Feedback::default()
        };
        let law = sending.law.as_mut().expect("a law");
        law.on_feedback(Duration::ZERO, told, &rtt);
        sending
    }

    /// Behind a peer that acknowledges every tenth packet (12 ms apart at
    /// 10 Mbit/s) or every second one, the flow is asked between ACKs
    /// while less than its cap is in flight, and not once the cap is out;
    /// the cap leaves room for what its rate sends up to the next ACK.
    #[test]
    fn a_rate_law_is_asked_between_acks_until_its_cap() {
        let ms = Duration::from_millis;
        let rate = 1.25e6;
        let rtt = RttSample::uniform(ms(40));
        for every in [10, 2] {
            let mut sending = erc_told(rate, rtt);
            let mut events = VecDeque::new();
            // A second of ACKs, one per `every` packets of 1200 bytes.
            let gap = Duration::from_secs_f64(every as f64 * 1200.0 / rate);
            let mut now = ms(1);
            while now < ms(1_000) {
                for _ in 0..every {
                    sending.on_ack(now, 1200, false, rtt, &mut events);
                }
                // Nothing new: a repeated ACK frame.
                let done = PeerEvent::AcksDone { in_flight: 60_000 };
                sending.on_peer(now, done, 0, &mut events);
                let in_flight = 60_000;
                let done = PeerEvent::AcksDone { in_flight };
                sending.on_peer(now, done, 0, &mut events);
                now += gap;
            }
            let paced = sending.law_rate().expect("erc paces");
            let through_gap = paced * (0.040 + gap.as_secs_f64());
            assert!(sending.under_rate(), "every {every}");
            let window = sending.law().expect("a law").window();
            let cap = window * GATED_WINDOW_CAP + sending.ack_room();
            assert!(cap as f64 > through_gap, "every {every}: {cap}");
            sending.in_flight = cap - 1200;
            assert!(sending.under_rate(), "every {every}");
            assert!(sending.next_packet_at(now).is_some(), "every {every}");
            sending.in_flight = cap - 1199;
            assert!(!sending.under_rate(), "every {every}");
            assert_eq!(sending.next_packet_at(now), None, "every {every}");
        }
    }

    #[test]
    fn an_idle_gap_needs_no_data_in_flight_and_a_round_trip_of_silence() {
        let ms = Duration::from_millis;
        let srtt = ms(40);
        let gap = |in_flight, last: Option<u64>, now| {
            idle_gap(in_flight, 1_200, last.map(ms), ms(now), srtt)
        };
        assert_eq!(gap(0, Some(100), 2_100), Some(ms(2_000)));
        assert_eq!(gap(0, Some(100), 140), Some(ms(40)));
        // Control packets in flight do not keep the sender busy.
        assert_eq!(gap(74, Some(100), 2_100), Some(ms(2_000)));
        // Shorter than a round trip, a data packet in flight, or a first packet.
        assert_eq!(gap(0, Some(100), 139), None);
        assert_eq!(gap(1_200, Some(100), 2_100), None);
        assert_eq!(gap(0, None, 2_100), None);
    }

    /// A writer's pause leaves control packets in flight and sends more
    /// during it (ACKs of the receiver's reports, PINGs): the law still
    /// hears the restart when data comes again.
    #[test]
    fn control_packets_do_not_hide_a_pause_from_the_law() {
        let ms = Duration::from_millis;
        let rtt = RttSample::uniform(ms(40));
        let advertised = 3e6;
        let mut sending = erc_told(advertised, rtt);
        let law = sending.law.as_mut().expect("a law");
        law.on_ack(ms(1_000), 1_200, &rtt);
        let before = sending.law_rate().expect("erc paces");
        assert!(before > 0.9 * advertised, "{before}");
        // The writer pauses after a packet; a PING goes out once it is
        // acknowledged, and the last ACKs come.
        sending.on_sent(ms(1_000), 1_200);
        let done = PeerEvent::AcksDone { in_flight: 0 };
        sending.on_peer(ms(1_000), done, 0, &mut VecDeque::new());
        sending.on_sent(ms(1_100), 37);
        sending.on_ack(ms(1_200), 1_200, false, rtt, &mut VecDeque::new());
        assert!(
            sending.law_rate() >= Some(before),
            "the pause has not begun"
        );
        // Two more PINGs, never acknowledged, one just before data comes back.
        sending.on_sent(ms(1_500), 37);
        sending.on_sent(ms(2_990), 37);
        sending.on_sent(ms(3_000), 1_200);
        let after = sending.law_rate().expect("erc paces");
        assert!(after < 0.5 * before, "{after} after {before}");
    }

    #[test]
    fn reports_are_overdue_only_while_data_flows() {
        let ms = Duration::from_millis;
        let srtt = ms(20);
        let mut timeout = ReportTimeout::default();
        // Data flows, acks every 10 ms, no report: overdue after 500 ms.
        let mut overdue_at = None;
        for t in (10..1000).step_by(10) {
            timeout.progress = t;
            if timeout.on_ack(ms(t), srtt) && overdue_at.is_none() {
                overdue_at = Some(t);
            }
        }
        assert_eq!(overdue_at, Some(510));
        // The same acks with no data moving: never overdue.
        let mut idle = ReportTimeout::default();
        assert!((10..3000).step_by(10).all(|t| !idle.on_ack(ms(t), srtt)));
    }
}
