//! One ecnq connection's state beyond what its transport (quinn) keeps,
//! sans-IO: the decoder of the peer's marks and the reports it sends
//! ([`report`]), the active law with its fallback and recovery
//! ([`PeerMode`]), router presence, the rate gate, and stats
//! (docs/design.md §3).
//!
//! A [`Session`] is fed with time (a [`Duration`] since an origin the caller
//! chooses), the TOS byte and packet hash of every received datagram, what
//! the transport's congestion controller sees (packets sent, acknowledged,
//! lost, RTT samples) and the reports the peer sends. It returns the reports
//! to send, the window, and the TOS byte of every datagram. The QUIC glue
//! (`quic/peer.rs`) holds one behind a lock; the tests drive two of them as a
//! simulated pair (no sockets, virtual time).
//!
//! The socket picks a TOS byte per datagram without taking that lock: the
//! session keeps a [`Published`] view, updated after every change, that it
//! shares with whoever sends.
//!
//! quinn's own controllers (NewReno, Cubic) take quinn's `Instant`s and RTT
//! estimator, so they stay with quinn: a session built without a scheme
//! only decodes and reports, and its sender is [`PeerMode::Unassisted`]. A
//! baseline law of the core (BBR) runs in a session of its own
//! ([`Session::with_baseline`]), unassisted too.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

mod ack_counts;
mod ack_gap;
mod mode;
pub mod presence;
mod rate_gate;
mod receiving;
pub mod report;
mod sending;
mod start_code;

#[cfg(test)]
mod ack_patterns;
#[cfg(test)]
mod pair;
#[cfg(test)]
mod tests;

pub use ack_counts::NO_COUNTS_AFTER;
pub use mode::{Marking, PeerMode};
pub use report::{Next, ReportError, Repr};
pub use sending::{idle_gap, GATED_WINDOW_CAP};
pub use start_code::HandshakeSpace;

use crate::schemes::registry::Scheme;
use crate::session::presence::is_probe;
use crate::signal::{Feedback, Law, LawConfig, Mode, RttSample};
use crate::wire::ack::AckFrame;
use crate::wire::ecn::{Ecn, SchemeTag};
use receiving::Receiving;
use sending::Sending;

/// What happened inside a session, for logs: drain with [`Session::poll_event`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Event {
    /// The sender's mode changed.
    ModeChanged {
        /// The mode before.
        from: PeerMode,
        /// The mode now.
        to: PeerMode,
    },
    /// A fallback replaced the scheme's law by Cubic at `window` bytes.
    LawReplaced {
        /// The window handed over.
        window: u64,
        /// The fallback mode.
        mode: PeerMode,
    },
    /// Router feedback is back: the scheme's law took over at `window` bytes.
    SchemeResumed {
        /// The scheme.
        scheme: Scheme,
        /// The window handed over.
        window: u64,
    },
    /// The law's own mode changed.
    LawModeChanged {
        /// The law's mode before.
        from: Mode,
        /// The law's mode now.
        to: Mode,
        /// The window now.
        window: u64,
        /// What the law was told.
        cause: Cause,
    },
    /// The law decreased its window (or its rate, for rate laws).
    Decrease {
        /// The law's mode now.
        mode: Mode,
        /// The window or rate before.
        from: f64,
        /// The window or rate now.
        to: f64,
        /// What the law was told.
        cause: Cause,
    },
    /// A report was refused.
    ReportRejected(ReportError),
    /// A report arrived, but this sender runs no ecnq scheme.
    ReportIgnored,
}

/// What a law was told when it changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// An acknowledgement.
    Ack,
    /// A feedback report.
    Feedback,
    /// A loss or a CE mark.
    Congestion,
}

impl Cause {
    /// A short name for logs.
    pub const fn name(self) -> &'static str {
        match self {
            Cause::Ack => "ack",
            Cause::Feedback => "feedback",
            Cause::Congestion => "congestion",
        }
    }
}

/// What the peer said about this end's packets, in whichever form it
/// reached the transport: the one way feedback enters a session
/// ([`Session::on_peer`]). Whether the law hears it is decided in one
/// place, whatever the form, and no form's handling waits on another's:
/// an ACK frame is judged on its own, before or after the transport
/// acknowledges its packets.
#[derive(Clone, Copy, Debug)]
pub enum PeerEvent<'a> {
    /// An ecnq report datagram from the peer.
    Report(&'a [u8]),
    /// An ACK frame the peer sent in a 1-RTT packet, with ECN counts or
    /// without, read where the sender reads counts
    /// ([`Published::reads_counts`]).
    AckFrame(AckFrame<'a>),
    /// An ACK frame the peer sent in an Initial or Handshake packet: its
    /// ECN counts carry erc's start code until the handshake is done.
    HandshakeAck {
        /// The packet's space.
        space: HandshakeSpace,
        /// The frame.
        frame: AckFrame<'a>,
    },
    /// The handshake is done: the peer's first 1-RTT packet came, after
    /// its acknowledgements of this end's whole flight. A law that reads
    /// erc's start code paces its first window at it.
    HandshakeDone,
    /// The transport acknowledged one packet of `bytes`; `rtt` is its
    /// estimate.
    Acked {
        /// The packet's bytes.
        bytes: u64,
        /// Whether the sender was limited by its application when it
        /// sent the packet.
        app_limited: bool,
        /// The transport's RTT estimate.
        rtt: RttSample,
    },
    /// The end of an ACK's processing: the transport's bytes in flight.
    AcksDone {
        /// Bytes in flight.
        in_flight: u64,
    },
    /// A loss (`lost_bytes` > 0) or a CE mark (`lost_bytes` == 0) the
    /// transport saw, of a packet sent at `sent`.
    Congestion {
        /// When the packet was sent.
        sent: Duration,
        /// Bytes lost; 0 for a CE mark.
        lost_bytes: u64,
    },
}

/// What [`Session::on_receive`] tells the transport.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Arrival {
    /// The codepoint to hand quinn ([`quinn_view`]).
    pub quinn_ecn: Ecn,
    /// The estimate changed, or packets arrived after an idle poll: poll
    /// for a report again.
    pub wake_reporter: bool,
}

/// Data progress both ways: stream frames and application datagrams sent
/// and received so far (ACKs and reports are not data).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Progress {
    /// Pieces of data this end sent.
    pub sent: u64,
    /// Pieces of data this end received.
    pub received: u64,
}

/// A snapshot of a session ([`Session::stats`]).
#[derive(Clone, Debug, PartialEq)]
pub struct SessionStats {
    /// Whether router feedback is in use, and if not why.
    pub mode: PeerMode,
    /// The law's own mode; `None` without a law.
    pub law_mode: Option<Mode>,
    /// The law's window in bytes (rate × srtt for a rate law); `None`
    /// without a law.
    pub window: Option<u64>,
    /// A rate law's rate in bytes per second.
    pub pacing_rate: Option<f64>,
    /// The peer's last accepted report.
    pub last_report: Option<Repr>,
    /// Reports from the peer accepted.
    pub reports_accepted: u64,
    /// Reports from the peer refused.
    pub reports_rejected: u64,
    /// Multiplicative decreases (and hold / recovery entries) of the law.
    pub decreases: u64,
    /// The decoder's estimate of the peer's path (what this end reports).
    pub local_estimate: Option<Feedback>,
    /// Packets received per codepoint, indexed by [`Ecn::bits`].
    pub ecn_received: [u64; 4],
    /// Reports sent to the peer.
    pub reports_sent: u64,
    /// The estimate read from the peer's ACK-ECN counts, while the law
    /// runs on them ([`PeerMode::EcnqAckCounts`]).
    pub counts_estimate: Option<Feedback>,
    /// ACK frames whose ECN counts the law read, and frames with counts
    /// that could not be read (their marks fell on packets the sender did
    /// not keep, or the counts fell).
    pub ack_frames_read: u64,
    /// See [`SessionStats::ack_frames_read`].
    pub ack_frames_unread: u64,
    /// erc's start code as the handshake's ACK-ECN counts told it: the
    /// flight's datagrams a router cleared; `None` before the handshake's
    /// end or where no counts came.
    pub start_code: Option<u8>,
}

/// What the sending path reads without the session's lock: the marking of
/// the next datagrams, the window, and the presence probe counters.
#[derive(Debug, Default)]
pub struct Published {
    marking: AtomicU32,
    window: AtomicU64,
    rate_gated: AtomicBool,
    reads_counts: AtomicBool,
    /// Datagrams sent while probing, for picking presence probes, whether
    /// the sender has its first presence verdict, and the packets sent as
    /// probes.
    datagrams: AtomicU64,
    presence_decided: AtomicBool,
    probe_packets: AtomicU64,
}

impl Published {
    /// The marking of the next datagrams.
    pub fn marking(&self) -> Marking {
        Marking::from_bits(self.marking.load(Ordering::Relaxed))
    }

    /// The sender's mode.
    pub fn mode(&self) -> PeerMode {
        self.marking().mode
    }

    /// The law's window (rate × srtt for a rate law); 0 without a law.
    pub fn window(&self) -> u64 {
        self.window.load(Ordering::Relaxed)
    }

    /// Whether the sender keeps its packets for reading the peer's ACK-ECN
    /// counts ([`Session::on_packet_sent`], [`PeerEvent::AckFrame`]).
    pub fn reads_counts(&self) -> bool {
        self.reads_counts.load(Ordering::Relaxed)
    }

    /// Whether the law is a rate law, whose window the session's gate sets
    /// ([`Session::window`]).
    pub fn rate_gated(&self) -> bool {
        self.rate_gated.load(Ordering::Relaxed)
    }

    /// The whole TOS byte for a datagram of `packets` packets (a GSO batch)
    /// the transport wants sent with `quinn_ecn`. A probing sender's
    /// datagrams that [`is_probe`] picks are presence probes.
    pub fn send_tos(&self, quinn_ecn: Ecn, packets: u64) -> u8 {
        let marking = self.marking();
        let probe = marking.takes_probes()
            && is_probe(
                self.datagrams.fetch_add(1, Ordering::Relaxed) + 1,
                self.presence_decided.load(Ordering::Relaxed),
            );
        if probe {
            self.probe_packets.fetch_add(packets, Ordering::Relaxed);
        }
        marking.tos(quinn_ecn, probe)
    }

    fn probe_packets(&self) -> u64 {
        self.probe_packets.load(Ordering::Relaxed)
    }

    /// Stores only what changed: rewriting an unchanged value would still
    /// pull the cache line away from the core that sends.
    fn store(&self, marking: Marking, window: u64, flags: Flags) {
        let Flags {
            rate_gated,
            presence_decided,
            reads_counts,
        } = flags;
        let bits = marking.to_bits();
        if self.marking.load(Ordering::Relaxed) != bits {
            self.marking.store(bits, Ordering::Relaxed);
        }
        if self.window.load(Ordering::Relaxed) != window {
            self.window.store(window, Ordering::Relaxed);
        }
        for (flag, value) in [
            (&self.rate_gated, rate_gated),
            (&self.presence_decided, presence_decided),
            (&self.reads_counts, reads_counts),
        ] {
            if flag.load(Ordering::Relaxed) != value {
                flag.store(value, Ordering::Relaxed);
            }
        }
    }
}

/// The yes-or-no facts [`Published`] holds.
struct Flags {
    rate_gated: bool,
    presence_decided: bool,
    reads_counts: bool,
}

/// One connection's ecnq state (see the module docs).
#[derive(Debug)]
pub struct Session {
    sending: Sending,
    receiving: Receiving,
    published: Arc<Published>,
    events: VecDeque<Event>,
}

impl Session {
    /// A session whose sender runs `scheme`'s law, or, with `None`, a
    /// controller outside the session. `header_bytes` are the IP and UDP
    /// header bytes of every packet (28 for IPv4, 48 for IPv6).
    pub fn new(scheme: Option<Scheme>, config: LawConfig, header_bytes: u64) -> Session {
        Session::sending(Sending::new(scheme, config, header_bytes))
    }

    /// A session whose sender runs `law`, a baseline that no router feeds
    /// (BBR, [`crate::schemes::bbr`]): its packets untagged, the law paced
    /// through the rate gate as a scheme's is.
    pub fn with_baseline(law: Box<dyn Law>, config: LawConfig, header_bytes: u64) -> Session {
        Session::sending(Sending::baseline(law, config, header_bytes))
    }

    fn sending(sending: Sending) -> Session {
        let session = Session {
            sending,
            receiving: Receiving::new(),
            published: Arc::default(),
            events: VecDeque::new(),
        };
        session.publish();
        session
    }

    /// The view the sending path reads without locking; it follows the session.
    pub fn published(&self) -> &Arc<Published> {
        &self.published
    }

    /// The sender's mode.
    pub fn mode(&self) -> PeerMode {
        self.sending.mode()
    }

    /// The law's configuration (its packet unit and initial window).
    pub fn config(&self) -> &LawConfig {
        self.sending.config()
    }

    /// The next event, if any. Events accumulate until drained.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }

    /// The TOS byte of the next datagram ([`Published::send_tos`]).
    pub fn send_tos(&self, quinn_ecn: Ecn, packets: u64) -> u8 {
        self.published.send_tos(quinn_ecn, packets)
    }

    /// The window the transport may use at `now`: the law's, through the
    /// rate gate for a rate law; `None` without a law.
    pub fn window(&self, now: Duration) -> Option<u64> {
        self.sending.gated_window(now)
    }

    /// When [`Session::window`] first reaches `window` bytes if nothing but
    /// time passes (nothing sent, acknowledged or lost): `now` if it
    /// already does; `None` if time alone never opens it (a window law's
    /// window, which only acknowledgements move, or beyond a rate law's
    /// cap). A sender held by a rate law's gate can sleep until then
    /// rather than ask again and again; the session tests' pair does.
    pub fn window_reaches_at(&self, now: Duration, window: u64) -> Option<Duration> {
        self.sending.gated_window_reaches(now, window)
    }

    /// Whether a rate law has room under its flight cap for another
    /// packet: the transport should ask for its window between ACKs rather
    /// than wait for them ([`Session::next_packet_at`] says when).
    pub fn under_rate(&self) -> bool {
        self.sending.under_rate()
    }

    /// When a rate law under its rate ([`Session::under_rate`]) has one
    /// more packet through its gate if nothing but time passes: `now` if
    /// it already has; `None` when it is not under its rate. The transport
    /// asks for its window then, so a flow paces at its rate however its
    /// ACKs come, at no more asks than it has packets.
    pub fn next_packet_at(&self, now: Duration) -> Option<Duration> {
        self.sending.next_packet_at(now)
    }

    /// The rate a rate law sends at, in bytes per second; `None` for a
    /// window law or without a law. A sender that paces by rate (the
    /// simulator's) reads it; quinn gets the gated [`Session::window`].
    pub fn pacing_rate(&self) -> Option<f64> {
        self.sending.law_rate()
    }

    /// A received datagram of `hashes.len()` packets (a GRO batch), all with
    /// TOS byte `tos`; `hashes` are their packet hashes
    /// ([`crate::packet_hash`]), read only if the datagram is tagged, or
    /// `None` for a packet the decoder is not to read (the handshake's).
    pub fn on_receive(
        &mut self,
        now: Duration,
        tos: u8,
        hashes: impl ExactSizeIterator<Item = Option<u32>>,
    ) -> Arrival {
        let (ecn, tag) = (Ecn::from_tos(tos), SchemeTag::from_tos(tos));
        if self.sending.mode() == PeerMode::Probing {
            self.sending
                .on_peer_packet(!tag.is_untagged(), &mut self.events);
            self.publish();
        }
        let mut handshake = false;
        let hashes = hashes.inspect(|hash| handshake |= hash.is_none());
        let wake_reporter = self.receiving.on_datagram(now, ecn, tag, hashes);
        let quinn_ecn = if ecn == Ecn::NotEct && !handshake && self.sending.mode().peer_probes() {
            // A presence probe from an ecnq peer, whose tag a path may have
            // bleached: its quinn counted it as ECT(0).
            Ecn::Ect0
        } else {
            quinn_view(ecn, tag, handshake)
        };
        Arrival {
            quinn_ecn,
            wake_reporter,
        }
    }

    /// Asks the report policy at `now`; with [`Next::Send`], also returns
    /// the report to send. `srtt` is the connection's smoothed RTT.
    pub fn poll_report(
        &mut self,
        now: Duration,
        srtt: Duration,
        progress: Progress,
    ) -> (Next, Option<Vec<u8>>) {
        self.sending.on_data_progress(progress.sent);
        self.receiving.poll_report(now, srtt, progress.received)
    }

    /// What the peer said at `now` ([`PeerEvent`]): the one way feedback
    /// enters the session. A report is checked, then handed to the law,
    /// the presence verdict and the fallback decision; an ACK frame is
    /// read for the peer's ECN counts while the law runs on them
    /// ([`PeerMode::EcnqAckCounts`]).
    pub fn on_peer(&mut self, now: Duration, event: PeerEvent<'_>) {
        let probes = self.published.probe_packets();
        self.sending.on_peer(now, event, probes, &mut self.events);
        self.publish();
    }

    /// `bytes` of a packet were sent at `now`.
    pub fn on_sent(&mut self, now: Duration, bytes: u64) {
        self.sending.on_sent(now, bytes);
    }

    /// A 1-RTT packet was sent at `now`: its packet number and packet hash
    /// ([`crate::packet_hash`] of its datagram), kept while the sender may
    /// read its peer's ACK-ECN counts ([`Published::reads_counts`]).
    pub fn on_packet_sent(&mut self, now: Duration, number: u64, hash: u32) {
        self.sending.on_packet_sent(now, number, hash);
    }

    /// A snapshot of the session at `now`.
    pub fn stats(&self, now: Duration) -> SessionStats {
        let rx = &self.receiving;
        SessionStats {
            local_estimate: rx.estimate(now),
            ecn_received: rx.counts,
            reports_sent: rx.reports_sent,
            ..self.sending.stats()
        }
    }

    fn publish(&self) {
        let marking = Marking {
            mode: self.sending.mode(),
            tag: self.sending.tag(),
            scheme_tag: self.sending.scheme_tag(),
        };
        let window = self.sending.law_window().unwrap_or(0);
        let flags = Flags {
            rate_gated: self.sending.law_rate().is_some(),
            presence_decided: self.sending.presence_decided(),
            reads_counts: self.sending.reads_counts(),
        };
        self.published.store(marking, window, flags);
    }
}

/// What quinn is told about a received codepoint. quinn sends ECT(0) only
/// and disables ECN when the peer's ACKs report ECT(1) or fewer ECN-marked
/// packets than it acked (`detect_ecn` in quinn-proto). ecnq senders put
/// scheme codes on their packets, so every tagged non-CE packet is reported
/// as ECT(0); CE stays CE (quinn's controller hook sees it, and the session
/// decides what it means). Untagged Not-ECT stays Not-ECT, and so does
/// a `handshake` datagram's (one that starts with a long header): there
/// Not-ECT is erc's start code, which this end's counts of the handshake
/// tell the peer (`a_handshake_datagram_keeps_its_not_ect_for_quinn`).
pub fn quinn_view(ecn: Ecn, tag: SchemeTag, handshake: bool) -> Ecn {
    match ecn {
        Ecn::Ce => Ecn::Ce,
        Ecn::NotEct if tag.is_untagged() || handshake => Ecn::NotEct,
        _ => Ecn::Ect0,
    }
}
