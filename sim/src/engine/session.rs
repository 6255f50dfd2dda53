//! Session feedback (`feedback = "session"`): an ecnq flow's sender and
//! receiver each hold the core's connection [`Session`], as the QUIC stack
//! does. The receiver's session decodes every data packet and decides when
//! to report; its reports travel as packets of their own on the ACK path,
//! so loss, delay and queueing there apply to them. The sender's session
//! turns ACKs, losses, CE marks and reports into its window or rate, marks
//! every data packet, and decides fallback, recovery and router presence.
//! ACKs carry no feedback then.

use std::collections::VecDeque;
use std::iter;

use ecnq::session::report;
use ecnq::session::{Event, HandshakeSpace, Next, PeerEvent, PeerMode, Progress, Session};
use ecnq::signal::{LawConfig, PacketMarks, RttSample};
use ecnq::wire::ack::{ack_frames, AckRepr};
use ecnq::{Ecn, Scheme, SchemeTag};

use super::clock::{dur, Event as Timer, Nanos};
use super::packet::{EcnTally, Packet, PacketKind};
use super::Sim;
use crate::explicit::Header;

/// A report packet's bytes beyond the report: IPv4 and UDP headers (28), a
/// QUIC short header (flags, an 8-byte connection ID, a 2-byte packet
/// number), the DATAGRAM frame's type byte and the AEAD tag (16).
const REPORT_OVERHEAD: u32 = 28 + 11 + 1 + 16;

/// What a flow's sender session went through, for reports and tests.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FeedbackRecord {
    /// The sender's mode changes: when, and to what.
    pub mode_changes: Vec<(Nanos, PeerMode)>,
    /// Reports the receiver sent.
    pub reports_sent: u64,
    /// Reports that reached the sender.
    pub reports_arrived: u64,
}

impl FeedbackRecord {
    /// The sender's mode now.
    pub fn mode(&self) -> PeerMode {
        self.mode_changes
            .last()
            .map_or(PeerMode::Probing, |&(_, mode)| mode)
    }

    /// How many times the sender fell back to classic congestion control.
    pub fn fallbacks(&self) -> usize {
        self.mode_changes
            .iter()
            .filter(|(_, mode)| mode.is_fallback())
            .count()
    }

    /// How many times the scheme's law took over again after a fallback.
    pub fn recoveries(&self) -> usize {
        self.mode_changes
            .windows(2)
            .filter(|pair| pair[0].1.is_fallback() && pair[1].1 == PeerMode::Ecnq)
            .count()
    }
}

/// The two sessions of one flow and the reports between them.
#[derive(Debug)]
pub(super) struct FlowSession {
    sender: Session,
    receiver: Session,
    /// Reports on their way to the sender, by number. Links keep a flow's
    /// packets in order, so reports older than one that arrives were lost.
    in_transit: VecDeque<(u64, Vec<u8>)>,
    /// Reports sent so far: the next one's number.
    sent: u64,
    /// When the report timer is set for.
    timer: Option<Nanos>,
    pub(super) record: FeedbackRecord,
}

/// The marks of a packet sent with TOS byte `tos`.
fn marks(tos: u8, hash: u32, flow: u64) -> PacketMarks {
    PacketMarks {
        ecn: Ecn::from_tos(tos),
        tag: SchemeTag::from_tos(tos),
        hash,
        flow,
    }
}

impl FlowSession {
    /// Sessions for a flow running `scheme` with law `config`. The packet
    /// lengths the simulator gives are whole packets, so the sessions add
    /// no header bytes.
    pub(super) fn new(scheme: Scheme, config: LawConfig) -> FlowSession {
        let session = || Session::new(Some(scheme), config, 0);
        FlowSession {
            sender: session(),
            receiver: session(),
            in_transit: VecDeque::new(),
            sent: 0,
            timer: None,
            record: FeedbackRecord::default(),
        }
    }

    /// The law's window (rate × srtt for a rate law).
    pub(super) fn window(&self) -> u64 {
        self.sender.published().window()
    }

    /// A rate law's rate, bytes per second.
    pub(super) fn pacing_rate(&self) -> Option<f64> {
        self.sender.pacing_rate()
    }

    /// A data packet of `len` bytes leaves at `now`: its marks, as the
    /// session picks its TOS byte (quinn's codepoint is ECT(0)).
    pub(super) fn send(&mut self, now: Nanos, len: u32, hash: u32, flow: u64) -> PacketMarks {
        self.sender.on_sent(dur(now), u64::from(len));
        marks(self.sender.send_tos(Ecn::Ect0, 1), hash, flow)
    }

    /// The marks of a handshake datagram the sender sends, as the session
    /// picks its TOS byte, counted as no data packet.
    pub(super) fn handshake_marks(&self, hash: u32, flow: u64) -> PacketMarks {
        marks(self.sender.send_tos(Ecn::Ect0, 1), hash, flow)
    }

    /// The marks of an ACK or report the receiver sends.
    pub(super) fn reply_marks(&self, flow: u64) -> PacketMarks {
        marks(self.receiver.send_tos(Ecn::Ect0, 1), 0, flow)
    }

    /// A data packet reached the receiver; returns whether to poll for a report.
    pub(super) fn on_data(&mut self, now: Nanos, m: &PacketMarks) -> bool {
        let tos = m.tag.tos(m.ecn);
        let arrival = self
            .receiver
            .on_receive(dur(now), tos, iter::once(Some(m.hash)));
        while self.receiver.poll_event().is_some() {}
        arrival.wake_reporter
    }

    /// An ACK or a report reached the sender: its session sees its marks.
    pub(super) fn on_reply(&mut self, now: Nanos, m: &PacketMarks) {
        let tos = m.tag.tos(m.ecn);
        self.sender
            .on_receive(dur(now), tos, iter::once(Some(m.hash)));
        self.note_events(now);
    }

    /// A packet sent at `sent` was acknowledged with or without CE.
    pub(super) fn on_acked(&mut self, now: Nanos, len: u64, sent: Nanos, ce: bool, rtt: RttSample) {
        let acked = PeerEvent::Acked {
            bytes: len,
            app_limited: false,
            rtt,
        };
        self.sender.on_peer(dur(now), acked);
        if ce {
            self.on_lost(now, sent, 0);
        }
    }

    /// `bytes` sent at `sent` were declared lost; 0 bytes: a CE mark.
    pub(super) fn on_lost(&mut self, now: Nanos, sent: Nanos, bytes: u64) {
        let (sent, lost_bytes) = (dur(sent), bytes);
        self.sender
            .on_peer(dur(now), PeerEvent::Congestion { sent, lost_bytes });
    }

    /// The end of an ACK's processing, with `in_flight` bytes left in
    /// flight after `packets_sent` data packets.
    pub(super) fn on_end_acks(
        &mut self,
        now: Nanos,
        in_flight: u64,
        packets_sent: u64,
        srtt: Nanos,
    ) {
        self.sender
            .on_peer(dur(now), PeerEvent::AcksDone { in_flight });
        // Polling tells the session how much data it sent: reports are due
        // only while data flows. Its own reports, on the ACKs it receives,
        // are not simulated.
        let progress = Progress {
            sent: packets_sent,
            received: 0,
        };
        let _ = self.sender.poll_report(dur(now), dur(srtt), progress);
        self.note_events(now);
    }

    /// The client's Finished reached the server: its session hears the
    /// handshake as the QUIC stack's tap and quinn tell it. The client's
    /// ACK frames of the flight, per space (`acks`), with their ECN counts
    /// (erc's start code); quinn's acknowledgement of the `flight`
    /// datagrams of `len` bytes each, with the handshake's round trip
    /// `rtt`; then the handshake's end, at the request's 1-RTT packet, where
    /// the law takes the code (`session_mode_hears_the_start_code`).
    pub(super) fn on_handshake(
        &mut self,
        now: Nanos,
        acks: &[(HandshakeSpace, AckRepr)],
        flight: u8,
        len: u32,
        rtt: RttSample,
    ) {
        let t = dur(now);
        for (space, repr) in acks {
            let mut bytes = Vec::new();
            repr.emit(&mut bytes);
            for frame in ack_frames(&bytes).map_while(Result::ok) {
                let space = *space;
                self.sender
                    .on_peer(t, PeerEvent::HandshakeAck { space, frame });
            }
        }
        for _ in 0..flight {
            let bytes = u64::from(len);
            let acked = PeerEvent::Acked {
                bytes,
                app_limited: false,
                rtt,
            };
            self.sender.on_peer(t, acked);
        }
        self.sender.on_peer(t, PeerEvent::AcksDone { in_flight: 0 });
        self.sender.on_peer(t, PeerEvent::HandshakeDone);
        self.note_events(now);
    }

    /// A report packet reached the sender.
    fn on_report(&mut self, now: Nanos, pkt: &Packet) {
        self.on_reply(now, &pkt.marks);
        self.record.reports_arrived += 1;
        while self.in_transit.front().is_some_and(|(n, _)| *n < pkt.pn) {
            self.in_transit.pop_front();
        }
        if let Some((_, report)) = self.in_transit.pop_front() {
            self.sender.on_peer(dur(now), PeerEvent::Report(&report));
        }
        self.note_events(now);
    }

    /// Asks the receiver's report policy at `now`: the report packet to
    /// send, if any, and when to ask again, if a new timer is needed.
    fn poll_report(
        &mut self,
        now: Nanos,
        srtt: Nanos,
        received: u64,
        flow: u32,
    ) -> (Option<Packet>, Option<Nanos>) {
        let progress = Progress { sent: 0, received };
        let mut report = None;
        let mut next = self.receiver.poll_report(dur(now), dur(srtt), progress);
        if let (Next::Send, Some(bytes)) = next {
            report = Some(self.report_packet(now, bytes, flow));
            next = self.receiver.poll_report(dur(now), dur(srtt), progress);
        }
        let Next::At(at) = next.0 else {
            return (report, None);
        };
        let at = (at.as_nanos() as Nanos).max(now + 1);
        if self.timer.is_some_and(|t| t > now && t <= at) {
            return (report, None);
        }
        self.timer = Some(at);
        (report, Some(at))
    }

    /// The packet that carries report `bytes`, remembered until it arrives.
    fn report_packet(&mut self, now: Nanos, bytes: Vec<u8>, flow: u32) -> Packet {
        let number = self.sent;
        self.sent += 1;
        self.record.reports_sent += 1;
        self.in_transit.push_back((number, bytes));
        Packet {
            id: 0,
            flow,
            hop: 0,
            kind: PacketKind::Report,
            len: report::LEN as u32 + REPORT_OVERHEAD,
            marks: self.reply_marks(u64::from(flow)),
            pn: number,
            sent: now,
            feedback: Default::default(),
            ce: false,
            unraised: 0,
            also: None,
            counts: EcnTally::default(),
            explicit: Header::None,
        }
    }

    /// Records the sender's mode changes; drops its other events.
    fn note_events(&mut self, now: Nanos) {
        while let Some(event) = self.sender.poll_event() {
            if let Event::ModeChanged { to, .. } = event {
                self.record.mode_changes.push((now, to));
            }
        }
    }
}

impl Sim {
    /// Flow `f`'s receiver asks its session whether to report, sends the
    /// report, and sets the timer for the next time to ask.
    pub(super) fn poll_report(&mut self, f: usize) {
        let now = self.clock.now();
        let flow = &mut self.flows[f];
        let (srtt, received) = (flow.rtt.srtt, flow.received_bytes);
        let Some(session) = flow.session.as_deref_mut() else {
            return;
        };
        let (report, timer) = session.poll_report(now, srtt, received, f as u32);
        if let Some(at) = timer {
            self.clock.schedule_at(at, Timer::Report(f as u32));
        }
        if let Some(report) = report {
            self.inject(report);
        }
    }

    /// Flow `f`'s report timer fired.
    pub(super) fn report_timer(&mut self, f: usize) {
        let now = self.clock.now();
        if let Some(session) = self.flows[f].session.as_deref_mut() {
            session.timer = session.timer.filter(|&t| t > now);
        }
        self.poll_report(f);
    }

    /// A report reached its sender.
    pub(super) fn on_report(&mut self, pkt: Packet) {
        let now = self.clock.now();
        let f = pkt.flow as usize;
        if let Some(session) = self.flows[f].session.as_deref_mut() {
            session.on_report(now, &pkt);
        }
        self.try_send(f);
    }
}
