//! Per-connection state shared by the socket,
//! the congestion controller inside quinn, and the feedback tasks.
//!
//! The socket finds it by connection ID (`demux.rs`); [`PeerTable`] is the
//! by-address fallback.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use quinn_proto::congestion::{Controller, NewRenoConfig};
use tokio::sync::Notify;

use super::congestion::CongestionControl;
use super::rate_gate::RateGate;
use super::report::{FeedbackSender, Next, ReportFilter, Repr, SendPolicy};
use crate::ecn::WireScheme;
use crate::ecn::{Ecn, SchemeTag};
use crate::hash::packet_hash;
use crate::presence::{RouterPresence, PROBE_EVERY};
use crate::signal::{Decoder, Feedback, Law, LawConfig, Mode, RttSample};

/// Whether a connection's sender uses router feedback, and if not, why.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PeerMode {
    /// Nothing received from the peer yet: packets are tagged, ECN is quinn's ECT(0).
    Probing,
    /// The peer tags its packets: it runs ecnq, the scheme's law is in control.
    Ecnq,
    /// Classic congestion control: the peer's packets are untagged.
    ClassicPeerNotEcnq,
    /// Classic congestion control: the peer's reports stopped.
    ClassicReportsStopped,
    /// This connection's controller uses no router feedback (the classic
    /// law, or one of quinn's controllers).
    Unassisted,
    /// Classic congestion control: the scheme's presence probes arrive
    /// unraised, so no ecnq router is on the path.
    ClassicNoRouter,
}

impl PeerMode {
    const ALL: [PeerMode; 6] = [
        PeerMode::Probing,
        PeerMode::Ecnq,
        PeerMode::ClassicPeerNotEcnq,
        PeerMode::ClassicReportsStopped,
        PeerMode::Unassisted,
        PeerMode::ClassicNoRouter,
    ];

    /// A short name for logs and stats.
    pub const fn name(self) -> &'static str {
        match self {
            PeerMode::Probing => "probing",
            PeerMode::Ecnq => "ecnq",
            PeerMode::ClassicPeerNotEcnq => "classic (peer not ecnq)",
            PeerMode::ClassicReportsStopped => "classic (reports stopped)",
            PeerMode::Unassisted => "no router feedback",
            PeerMode::ClassicNoRouter => "classic (no ecnq router)",
        }
    }

    /// Whether the scheme's law has been replaced by the classic law.
    pub const fn is_fallback(self) -> bool {
        matches!(
            self,
            PeerMode::ClassicPeerNotEcnq
                | PeerMode::ClassicReportsStopped
                | PeerMode::ClassicNoRouter
        )
    }
}

/// No report for this long while acks arrive ⇒ fall back to classic:
/// max(`REPORT_TIMEOUT_RTTS` · srtt, `REPORT_TIMEOUT_MIN`) (docs/design.md §3:
/// "when no report arrives for a few RTTs").
const REPORT_TIMEOUT_RTTS: u32 = 4;
/// The floor of the report timeout; reports are sent at least every 10 ms
/// ([`SendPolicy::default`]), so this leaves room for scheduling delays.
const REPORT_TIMEOUT_MIN: Duration = Duration::from_millis(500);

/// The controller quinn drives: a core law (the scheme's, or the classic law
/// after a fallback), or one of quinn's controllers.
pub(crate) enum Active {
    Law(Box<dyn Law>),
    Quinn(Box<dyn Controller>),
}

/// The sending direction: what the congestion controller owns.
pub(crate) struct Sending {
    pub active: Active,
    pub config: LawConfig,
    pub rtt: RttSample,
    pub filter: Option<ReportFilter>,
    /// Whether an ecnq router is on the path, for schemes that probe.
    pub presence: Option<RouterPresence>,
    /// When the last report was accepted, or acks resumed after a pause
    /// (reports are due only while data flows).
    pub reports_due_from: Duration,
    /// When the last ack arrived.
    pub last_ack: Duration,
    /// The data-sent progress counter and when it last moved.
    pub data_sent: (u64, Duration),
    pub md_events: u64,
    /// Holds a rate law to its rate (none of the other controllers use it).
    pub gate: RateGate,
    /// IP and UDP header bytes of every packet: routers meter whole packets
    /// and advertise rates in those bytes, while quinn counts UDP payload,
    /// so the gate debits both.
    pub header_bytes: u64,
    /// Bytes in flight as quinn counts them, for the gate: quinn's own
    /// figure at the end of each ACK, plus what was sent and less what was
    /// declared lost since.
    pub in_flight: u64,
}

impl Sending {
    /// The rate the active law sends at, if it is a rate law (its gate's fill rate).
    pub fn law_rate(&self) -> Option<f64> {
        match &self.active {
            Active::Law(law) => law.pacing_rate(),
            Active::Quinn(_) => None,
        }
    }
}

/// The receiving direction: what the socket feeds.
struct Receiving {
    decoder: Option<(WireScheme, Box<dyn Decoder>)>,
    counts: [u64; 4],
    sender: FeedbackSender,
    reports_sent: u64,
}

/// One connection's shared state.
pub(crate) struct Peer {
    epoch: Instant,
    pub cc: CongestionControl,
    mode: AtomicU8,
    /// The DSCP of the law's current tag (MCP changes its fairing bits).
    dscp: AtomicU8,
    /// The scheme's own tag, kept while fallen back because reports stopped.
    scheme_tag: SchemeTag,
    send_ecn: Ecn,
    sending: Mutex<Sending>,
    receiving: Mutex<Receiving>,
    window: AtomicU64,
    /// The sender runs a rate law: quinn's window comes from its gate.
    rate_gated: AtomicBool,
    pub notify: Notify,
    wake_on_packet: AtomicBool,
    attached: AtomicBool,
    data_sent: AtomicU64,
    /// Datagrams sent, for picking presence probes, and the packets sent
    /// as probes.
    sent_datagrams: AtomicU64,
    probe_packets: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere must not take the connection down with a poisoned lock.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Peer {
    /// The state of the connection with `remote`.
    pub fn new(cc: CongestionControl, mss: u64, remote: SocketAddr) -> Peer {
        let config = LawConfig::with_mss(mss);
        let (active, mode) = match cc {
            CongestionControl::Ecnq(scheme) => (
                Active::Law(scheme.law(config)),
                match cc.router_assisted() {
                    Some(_) => PeerMode::Probing,
                    None => PeerMode::Unassisted,
                },
            ),
            quinn => (
                Active::Quinn(quinn_controller(quinn, mss)),
                PeerMode::Unassisted,
            ),
        };
        let (window, tag) = match &active {
            Active::Law(law) => (law.window(), law.tag()),
            Active::Quinn(c) => (c.window(), SchemeTag::UNTAGGED),
        };
        Peer {
            epoch: Instant::now(),
            cc,
            mode: AtomicU8::new(mode as u8),
            dscp: AtomicU8::new(tag.dscp()),
            scheme_tag: tag,
            send_ecn: tag.wire().base_ecn(),
            sending: Mutex::new(Sending {
                active,
                config,
                rtt: RttSample::uniform(Duration::from_millis(333)),
                filter: cc.router_assisted().map(|s| ReportFilter::new(s.wire())),
                presence: cc
                    .router_assisted()
                    .filter(|s| s.wire().sends_probes())
                    .map(|_| RouterPresence::default()),
                reports_due_from: Duration::ZERO,
                last_ack: Duration::ZERO,
                data_sent: (0, Duration::ZERO),
                md_events: 0,
                gate: RateGate::default(),
                header_bytes: header_bytes(remote),
                in_flight: 0,
            }),
            receiving: Mutex::new(Receiving {
                decoder: None,
                counts: [0; 4],
                sender: FeedbackSender::new(SendPolicy::default()),
                reports_sent: 0,
            }),
            window: AtomicU64::new(window),
            rate_gated: AtomicBool::new(false),
            notify: Notify::new(),
            wake_on_packet: AtomicBool::new(false),
            attached: AtomicBool::new(false),
            data_sent: AtomicU64::new(0),
            sent_datagrams: AtomicU64::new(0),
            probe_packets: AtomicU64::new(0),
        }
    }

    /// Whether CE marks are congestion for this connection's law even on an
    /// ecnq path (schemes that never use CE as a code).
    pub fn ce_is_congestion(&self) -> bool {
        match self.cc {
            CongestionControl::Ecnq(scheme) => scheme.ce_is_congestion(),
            _ => true,
        }
    }

    /// Time since this connection's epoch: the `now` of the sans-IO core.
    pub fn since_epoch(&self, at: Instant) -> Duration {
        at.saturating_duration_since(self.epoch)
    }

    pub fn epoch(&self) -> Instant {
        self.epoch
    }

    pub fn mode(&self) -> PeerMode {
        PeerMode::ALL[usize::from(self.mode.load(Ordering::Relaxed))]
    }

    /// Moves from `from` to `to`; false if the mode was not `from`.
    pub fn transition(&self, from: PeerMode, to: PeerMode) -> bool {
        let moved = self
            .mode
            .compare_exchange(from as u8, to as u8, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok();
        if moved {
            if to.is_fallback() {
                tracing::info!(cc = %self.cc, from = from.name(), to = to.name(), "ecnq fallback to classic congestion control");
            } else {
                tracing::info!(cc = %self.cc, from = from.name(), to = to.name(), "ecnq mode change");
            }
        }
        moved
    }

    /// Claims the state for one connection; false if one already has it.
    pub fn attach(&self) -> bool {
        !self.attached.swap(true, Ordering::AcqRel)
    }

    pub fn is_attached(&self) -> bool {
        self.attached.load(Ordering::Acquire)
    }

    pub fn sending(&self) -> MutexGuard<'_, Sending> {
        lock(&self.sending)
    }

    pub fn window(&self) -> u64 {
        self.window.load(Ordering::Relaxed)
    }

    /// Publishes what the socket and quinn read without locking: the window
    /// quinn may use (for a rate law, rate × srtt, the base of its gate's
    /// cap) and the tag the next packets carry.
    pub fn publish(&self, tx: &Sending) {
        let (window, tag) = match &tx.active {
            Active::Law(law) => (law_window(law.as_ref(), &tx.rtt, &tx.config), law.tag()),
            Active::Quinn(c) => (c.window(), SchemeTag::UNTAGGED),
        };
        self.window.store(window, Ordering::Relaxed);
        self.rate_gated
            .store(tx.law_rate().is_some(), Ordering::Relaxed);
        self.dscp.store(tag.dscp(), Ordering::Relaxed);
    }

    /// The window quinn may use at `at`. A rate law's goes through its
    /// gate, up to [`GATED_WINDOW_CAP`] times the published rate × srtt.
    pub fn quinn_window(&self, at: Instant) -> u64 {
        if !self.rate_gated.load(Ordering::Relaxed) {
            return self.window();
        }
        let tx = self.sending();
        let published = self.window();
        // The law may have changed since the flag was read.
        tx.law_rate().map_or(published, |rate| {
            tx.gate.window(
                self.since_epoch(at),
                rate,
                tx.config.mss,
                tx.in_flight,
                published.saturating_mul(GATED_WINDOW_CAP),
            )
        })
    }

    /// The whole TOS byte for a datagram of `packets` packets (a GSO batch)
    /// quinn wants sent with `quinn_ecn`.
    pub fn send_tos(&self, quinn_ecn: Option<quinn::udp::EcnCodepoint>, packets: u64) -> u8 {
        let quinn_ecn = Ecn::from_bits(quinn_ecn.map_or(0, |e| e as u8));
        let tag = SchemeTag::from_dscp(self.dscp.load(Ordering::Relaxed));
        let mode = self.mode();
        // A presence probe now and then, once the peer runs ecnq (its
        // receiver hands quinn tagged Not-ECT as ECT(0), so quinn's ECN
        // validation holds).
        if matches!(mode, PeerMode::Ecnq | PeerMode::ClassicNoRouter)
            && self.scheme_tag.wire().sends_probes()
            && self.sent_datagrams.fetch_add(1, Ordering::Relaxed) % PROBE_EVERY == PROBE_EVERY - 1
        {
            self.probe_packets.fetch_add(packets, Ordering::Relaxed);
            return self.scheme_tag.tos(Ecn::NotEct);
        }
        match mode {
            // Until the peer is known to run ecnq, use quinn's codepoint so that a
            // vanilla peer's ECN counts pass quinn's validation (ECT(1) would fail it).
            PeerMode::Probing => tag.tos(quinn_ecn),
            PeerMode::Ecnq => tag.tos(self.send_ecn),
            // Still tagged, so routers keep marking and the peer keeps
            // decoding: when its reports get through again, or its probes
            // come back raised, feedback resumes.
            PeerMode::ClassicReportsStopped | PeerMode::ClassicNoRouter => {
                self.scheme_tag.tos(quinn_ecn)
            }
            PeerMode::ClassicPeerNotEcnq | PeerMode::Unassisted => {
                SchemeTag::UNTAGGED.tos(quinn_ecn)
            }
        }
    }

    /// One received datagram, or a GRO batch of `stride`-sized segments, all
    /// with TOS byte `tos`. Returns the codepoint to hand quinn.
    pub fn on_receive(&self, at: Instant, tos: u8, payload: &[u8], stride: usize) -> Ecn {
        let ecn = Ecn::from_tos(tos);
        let tag = SchemeTag::from_tos(tos);
        let segments = payload.chunks(stride.max(1));
        let packets = segments.len() as u64;
        if tag.is_untagged() {
            self.transition(PeerMode::Probing, PeerMode::ClassicPeerNotEcnq);
        } else {
            self.transition(PeerMode::Probing, PeerMode::Ecnq);
        }
        let now = self.since_epoch(at);
        let mut changed = false;
        {
            let mut rx = lock(&self.receiving);
            rx.counts[usize::from(ecn.bits())] += packets;
            if !tag.is_untagged() {
                let wire = tag.wire();
                if rx.decoder.as_ref().map(|(w, _)| *w) != Some(wire) {
                    rx.decoder = wire.decoder().map(|d| (wire, d));
                    changed = rx.decoder.is_some();
                }
                if let Some((_, decoder)) = rx.decoder.as_mut() {
                    for segment in segments {
                        changed |= decoder.on_packet(now, ecn, tag, packet_hash(segment));
                    }
                    rx.sender.on_packets(packets);
                }
            }
        }
        if changed || (!tag.is_untagged() && self.wake_on_packet.swap(false, Ordering::AcqRel)) {
            self.notify.notify_one();
        }
        let peer_probes = matches!(
            self.mode(),
            PeerMode::Ecnq | PeerMode::ClassicReportsStopped | PeerMode::ClassicNoRouter
        );
        if ecn == Ecn::NotEct && peer_probes {
            // A presence probe from an ecnq peer, whose tag a path may have
            // bleached: its quinn counted it as ECT(0).
            return Ecn::Ect0;
        }
        quinn_view(ecn, tag)
    }

    /// Asks the report policy; with [`Next::Send`], also builds the report.
    /// `progress` counts the stream frames and application datagrams
    /// received so far.
    pub fn poll_report(
        &self,
        at: Instant,
        srtt: Duration,
        progress: u64,
    ) -> (Next, Option<Vec<u8>>) {
        let now = self.since_epoch(at);
        let mut rx = lock(&self.receiving);
        let next = match rx.decoder.as_ref() {
            Some((wire, decoder)) => {
                let feedback = decoder.estimate(now);
                (
                    rx.sender.poll(now, feedback, srtt, progress),
                    *wire,
                    feedback,
                )
            }
            None => (Next::Idle, WireScheme::CLASSIC, Feedback::default()),
        };
        let (next, wire, feedback) = next;
        if next == Next::Idle {
            // Set under the lock that on_receive counts packets under: a
            // packet counted after this poll will wake the reporter.
            self.wake_on_packet.store(true, Ordering::Release);
        }
        if next != Next::Send {
            return (next, None);
        }
        let sequence = rx.sender.on_sent(now, feedback, progress);
        rx.reports_sent += 1;
        let repr = Repr {
            scheme: wire,
            sequence,
            feedback,
            counts: rx.counts,
        };
        (Next::Send, Some(repr.to_bytes()))
    }

    /// A report datagram from the peer: checked, then handed to the law.
    pub fn on_report(&self, at: Instant, datagram: &[u8]) {
        let now = self.since_epoch(at);
        let mut tx = self.sending();
        let tx = &mut *tx;
        let Some(filter) = tx.filter.as_mut() else {
            tracing::debug!("report ignored: this connection runs no ecnq scheme");
            return;
        };
        let repr = match filter.accept(datagram) {
            Ok(repr) => repr,
            Err(error) => {
                tracing::debug!(%error, "bad feedback report ignored");
                return;
            }
        };
        tx.reports_due_from = now;
        if self.transition(PeerMode::ClassicReportsStopped, PeerMode::Ecnq) {
            self.resume_scheme(tx);
        }
        if let Some(presence) = tx.presence.as_mut() {
            let unraised = repr.counts[usize::from(Ecn::NotEct.bits())];
            let probes = self.probe_packets.load(Ordering::Relaxed);
            if presence.on_report(unraised, probes) {
                if self.transition(PeerMode::ClassicNoRouter, PeerMode::Ecnq) {
                    self.resume_scheme(tx);
                }
            } else {
                let _ = self.transition(PeerMode::Ecnq, PeerMode::ClassicNoRouter);
            }
        }
        if let Active::Law(law) = &mut tx.active {
            let before = law_level(law.as_ref());
            law.on_feedback(now, repr.feedback, &tx.rtt);
            note_law_change(law.as_ref(), before, &mut tx.md_events, "feedback");
        }
        self.publish(tx);
    }

    /// Reports came back, or probes came back raised, after a fallback: the
    /// scheme's law takes over again from the classic law's window.
    fn resume_scheme(&self, tx: &mut Sending) {
        let (CongestionControl::Ecnq(scheme), Active::Law(law)) = (self.cc, &tx.active) else {
            return;
        };
        let config = LawConfig {
            initial_window: law.window(),
            ..tx.config
        };
        tracing::info!(window = config.initial_window, scheme = %scheme, "router feedback resumed: the scheme's law is back");
        tx.active = Active::Law(scheme.law(config));
    }

    /// What this end has sent besides ACKs and reports so far (stream frames
    /// and application datagrams); the reporter task keeps it current.
    pub fn note_data_sent(&self, progress: u64) {
        self.data_sent.store(progress, Ordering::Relaxed);
    }

    /// Called on acks: falls back to classic when reports stopped while
    /// data flowed. While this end sends no data (perhaps only its own
    /// reports), or after a pause, the peer has nothing it must report, so
    /// the timeout restarts.
    pub fn check_report_timeout(&self, tx: &mut Sending, now: Duration) {
        let timeout = (tx.rtt.smoothed * REPORT_TIMEOUT_RTTS).max(REPORT_TIMEOUT_MIN);
        let data_sent = self.data_sent.load(Ordering::Relaxed);
        if data_sent != tx.data_sent.0 {
            tx.data_sent = (data_sent, now);
        }
        if now.saturating_sub(tx.data_sent.1) > timeout || now.saturating_sub(tx.last_ack) > timeout
        {
            tx.reports_due_from = tx.reports_due_from.max(now);
        }
        tx.last_ack = now;
        if now.saturating_sub(tx.reports_due_from) > timeout {
            let _ = self.transition(PeerMode::Ecnq, PeerMode::ClassicReportsStopped)
                || self.transition(PeerMode::Probing, PeerMode::ClassicReportsStopped);
        }
    }

    pub fn receive_stats(&self, at: Instant) -> (Option<Feedback>, [u64; 4], u64) {
        let rx = lock(&self.receiving);
        let estimate = rx
            .decoder
            .as_ref()
            .map(|(_, d)| d.estimate(self.since_epoch(at)));
        (estimate, rx.counts, rx.reports_sent)
    }
}

/// What quinn is told about a received codepoint. quinn sends ECT(0) only
/// and disables ECN when the peer's ACKs report ECT(1) or fewer ECN-marked
/// packets than it acked (`detect_ecn` in quinn-proto). ecnq senders put
/// scheme codes on their packets, so every tagged non-CE packet is reported
/// as ECT(0); CE stays CE (quinn's controller hook sees it, and the adapter
/// decides what it means). Untagged Not-ECT stays Not-ECT.
pub(crate) fn quinn_view(ecn: Ecn, tag: SchemeTag) -> Ecn {
    match ecn {
        Ecn::Ce => Ecn::Ce,
        Ecn::NotEct if tag.is_untagged() => Ecn::NotEct,
        _ => Ecn::Ect0,
    }
}

/// A rate law's gated window reaches at most this many times rate × srtt:
/// room for the ACK delay and a queue, while the gate spaces the sending.
const GATED_WINDOW_CAP: u64 = 2;

/// The window published for a law. For a rate law it is rate × srtt, what
/// stats show; quinn gets the gate's window ([`Peer::quinn_window`]), which
/// this caps. docs/design.md's rate × srtt / 1.25 (for quinn's pacer to run at
/// the rate) would cap a rate law at 80 % of its own rate.
fn law_window(law: &dyn Law, rtt: &RttSample, config: &LawConfig) -> u64 {
    match law.pacing_rate() {
        Some(rate) => config.clamp(rate * rtt.smoothed.as_secs_f64()) as u64,
        None => law.window(),
    }
}

/// What a law's decreases are measured on: its rate for rate laws (their
/// window follows the RTT), else its window.
pub(crate) fn law_level(law: &dyn Law) -> (Mode, f64) {
    (law.mode(), law.pacing_rate().unwrap_or(law.window() as f64))
}

/// Emits tracing events for a law's mode change and counts decreases.
pub(crate) fn note_law_change(law: &dyn Law, before: (Mode, f64), md: &mut u64, cause: &str) {
    let (mode, size) = law_level(law);
    if mode != before.0 {
        tracing::debug!(from = %before.0, to = %mode, window = law.window(), cause, "law mode change");
    }
    if size < before.1 {
        *md += 1;
        tracing::info!(mode = %mode, from = before.1, to = size, cause, "multiplicative decrease");
    }
}

/// One of quinn's controllers (NewReno for anything but Cubic and BBR), with
/// quinn's default configuration, as a vanilla quinn connection runs it.
fn quinn_controller(cc: CongestionControl, mss: u64) -> Box<dyn Controller> {
    use quinn_proto::congestion::{BbrConfig, ControllerFactory, CubicConfig};
    let now = Instant::now();
    let mtu = u16::try_from(mss).unwrap_or(u16::MAX);
    match cc {
        CongestionControl::Cubic => Arc::new(CubicConfig::default()).build(now, mtu),
        CongestionControl::Bbr => Arc::new(BbrConfig::default()).build(now, mtu),
        _ => Arc::new(NewRenoConfig::default()).build(now, mtu),
    }
}

/// Per-connection state by remote address, bounded.
#[derive(Default)]
pub(crate) struct PeerTable {
    map: Mutex<HashMap<SocketAddr, Arc<Peer>>>,
}

/// The table never holds more peers than this; states that no connection
/// claimed are dropped first when it is full (a flood of spoofed Initials
/// must not grow memory without bound).
const MAX_PEERS: usize = 16_384;

/// The IP and UDP header bytes of a packet to `remote`: 20 + 8 for IPv4
/// (also when a dual-stack socket names it IPv4-mapped), 40 + 8 for IPv6.
pub(crate) fn header_bytes(remote: SocketAddr) -> u64 {
    match canonical(remote) {
        SocketAddr::V4(_) => 28,
        SocketAddr::V6(_) => 48,
    }
}

/// Addresses are keyed in canonical form: a dual-stack socket sees IPv4
/// peers as IPv4-mapped IPv6 addresses.
pub(crate) fn canonical(addr: SocketAddr) -> SocketAddr {
    SocketAddr::new(addr.ip().to_canonical(), addr.port())
}

impl PeerTable {
    pub fn get(&self, addr: SocketAddr) -> Option<Arc<Peer>> {
        lock(&self.map).get(&canonical(addr)).cloned()
    }

    /// The state for `addr`, created with `cc` if there is none.
    pub fn get_or_insert(&self, addr: SocketAddr, cc: CongestionControl) -> Arc<Peer> {
        let mut map = lock(&self.map);
        if map.len() >= MAX_PEERS {
            map.retain(|_, peer| peer.is_attached());
        }
        map.entry(canonical(addr))
            .or_insert_with(|| Arc::new(Peer::new(cc, MSS, addr)))
            .clone()
    }

    /// A fresh state for `addr`, replacing any unattached one.
    pub fn insert(&self, addr: SocketAddr, peer: Arc<Peer>) {
        lock(&self.map).insert(canonical(addr), peer);
    }

    /// Removes `peer` if it is still the state for `addr`.
    pub fn remove(&self, addr: SocketAddr, peer: &Arc<Peer>) {
        let mut map = lock(&self.map);
        if map
            .get(&canonical(addr))
            .is_some_and(|p| Arc::ptr_eq(p, peer))
        {
            map.remove(&canonical(addr));
        }
    }
}

/// quinn's initial MTU (1200 bytes, RFC 9000 §14) is the laws' packet unit.
pub(crate) const MSS: u64 = 1200;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::McpLaw;

    #[test]
    fn a_rate_law_gets_a_window_of_one_rate_times_rtt() {
        let config = LawConfig::with_mss(1200);
        let law = McpLaw::new(config);
        let rate = law.pacing_rate().expect("MCP is rate-based");
        let rtt = RttSample::uniform(Duration::from_millis(100));
        let window = law_window(
            &law,
            &rtt,
            &LawConfig {
                min_window: 1,
                ..config
            },
        );
        // Throughput is at most window / RTT: the window must carry a whole RTT of the rate.
        assert_eq!(window, (rate * 0.1) as u64);
    }
}
