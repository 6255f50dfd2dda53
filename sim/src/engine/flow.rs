//! A flow as the engine runs it: its law and decoder (or, with session
//! feedback, its two sessions), the sender's and the receiver's
//! bookkeeping, its life stage and counters, and its time-series row.
//! `sender` and `receiver` drive it.

use std::collections::VecDeque;
use std::iter;

use ecnq::session::idle_gap;
use ecnq::signal::{Congestion, CountReader, Decoder, LawConfig, PacketMarks, RttSample};
use ecnq::wire::ack::EcnCounts;
use ecnq::{Ecn, SchemeTag};

use super::clock::{dur, Nanos};
use super::config::{FeedbackPath, FlowSpec};
use super::handshake::Handshake;
use super::packet::{EcnTally, Packet};
use super::probes::Probes;
use super::rtt::RttEstimator;
use super::session::{FeedbackRecord, FlowSession};
use super::state::FlowState;
use crate::explicit::SenderLaw;
use crate::protocol::Protocol;

/// What became of a sent data packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum SentState {
    InFlight,
    Acked,
    Lost,
}

/// A sent data packet the sender still tracks.
#[derive(Clone, Copy, Debug)]
pub(super) struct SentPacket {
    pub(super) len: u32,
    pub(super) sent: Nanos,
    pub(super) state: SentState,
    /// The packet hash, for reading ACK-ECN counts.
    pub(super) hash: u32,
}

/// A data packet the receiver got, as the sender learns of it from the
/// first ACK that covers it.
#[derive(Clone, Copy, Debug)]
pub(super) struct Arrival {
    pub(super) pn: u64,
    /// It arrived with CE.
    pub(super) ce: bool,
    /// It was a presence probe no ecnq router raised.
    pub(super) unraised: bool,
}

/// A flow as the engine runs it.
#[derive(Debug)]
pub struct Flow {
    /// The configuration.
    pub spec: FlowSpec,
    pub(super) law: SenderLaw,
    pub(super) decoder: Option<Box<dyn Decoder>>,
    /// With ACK-count feedback, the sender's reader of the receiver's
    /// counts, which stands in for `decoder`.
    pub(super) count_reader: Option<Box<dyn CountReader>>,
    /// The receiver's cumulative ECN counts.
    pub(super) tally: EcnTally,
    /// The data packets the receiver got that no ACK read by the sender
    /// has covered yet, in arrival order: every ACK covers all arrivals
    /// before it, as QUIC's ACK ranges do, so a lost ACK costs nothing
    /// once a later one arrives.
    pub(super) arrivals: VecDeque<Arrival>,
    /// Arrivals before the front of `arrivals`.
    pub(super) arrivals_covered: u64,
    /// The receiver's counts as the last ACK the sender read carried them.
    pub(super) tally_read: EcnTally,
    /// The hashes of the packets acknowledged since the counts were last
    /// read: the ACK frame being gathered.
    pub(super) frame: Vec<u32>,
    /// When the first ACK of the frame being gathered arrived.
    pub(super) frame_since: Option<Nanos>,
    pub(super) data_ecn: Ecn,
    pub(super) router_assisted: bool,
    /// Presence probes, for the schemes that send them.
    pub(super) probes: Option<Probes>,
    /// With session feedback, the sender's and the receiver's sessions,
    /// which stand in for `law`, `decoder` and `probes`.
    pub(super) session: Option<Box<FlowSession>>,
    /// Life stage.
    pub state: FlowState,
    pub(super) handshake: Handshake,
    pub(super) next_pn: u64,
    pub(super) base_pn: u64,
    pub(super) sent: VecDeque<SentPacket>,
    pub(super) bytes_in_flight: u64,
    pub(super) largest_acked: Option<u64>,
    pub(super) rtt: RttEstimator,
    pub(super) new_bytes_left: u64,
    pub(super) retransmit_bytes: u64,
    /// Unique data bytes acknowledged.
    pub acked_bytes: u64,
    pub(super) rto_at: Nanos,
    pub(super) rto_pending: bool,
    pub(super) rto_backoff: u32,
    pub(super) pace_next: Nanos,
    pub(super) pace_pending: bool,
    /// When the last data packet was sent.
    pub(super) last_sent: Option<Nanos>,
    /// Data bytes the receiver got.
    pub received_bytes: u64,
    pub(super) sample_received: u64,
    /// Delayed ACKs: a received packet not yet acknowledged, and its timer.
    pub(super) held: Option<Packet>,
    pub(super) delack_at: Nanos,
    pub(super) delack_pending: bool,
    /// `received_bytes` when statistics started.
    pub received_at_measure: u64,
    /// `packets_lost` when statistics started.
    pub lost_at_measure: u64,
    /// Data packets sent (retransmissions included).
    pub packets_sent: u64,
    /// Data packets declared lost.
    pub packets_lost: u64,
}

impl Flow {
    /// A flow that has not started yet.
    pub(super) fn new(spec: FlowSpec) -> Flow {
        let mut config = LawConfig::with_mss(u64::from(spec.mss));
        if let Some(cap) = spec.max_window {
            config.max_window = cap.max(config.min_window);
            config.initial_window = config.initial_window.min(config.max_window);
        }
        let session = match (spec.feedback, spec.protocol) {
            (FeedbackPath::Session, Protocol::Ecnq(scheme)) => {
                Some(Box::new(FlowSession::new(scheme, config)))
            }
            _ => None,
        };
        let piggyback = session.is_none();
        let count_reader = (spec.feedback == FeedbackPath::AckCounts)
            .then(|| spec.protocol.count_reader())
            .flatten();
        let mut law = spec.protocol.sender_law(config);
        law.reads_ack_counts(count_reader.is_some());
        Flow {
            law,
            decoder: spec
                .protocol
                .decoder()
                .filter(|_| piggyback && count_reader.is_none()),
            count_reader,
            tally: EcnTally::default(),
            arrivals: VecDeque::new(),
            arrivals_covered: 0,
            tally_read: EcnTally::default(),
            frame: Vec::new(),
            frame_since: None,
            data_ecn: spec.protocol.data_ecn(),
            router_assisted: spec.protocol.router_assisted() && piggyback,
            probes: (spec.protocol.sends_probes() && piggyback)
                .then(|| Probes::new(spec.protocol, config)),
            session,
            new_bytes_left: spec.size.unwrap_or(u64::MAX),
            spec,
            state: FlowState::Pending,
            handshake: Handshake::default(),
            next_pn: 0,
            base_pn: 0,
            sent: VecDeque::new(),
            bytes_in_flight: 0,
            largest_acked: None,
            rtt: RttEstimator::default(),
            retransmit_bytes: 0,
            acked_bytes: 0,
            rto_at: Nanos::MAX,
            rto_pending: false,
            rto_backoff: 0,
            pace_next: 0,
            pace_pending: false,
            last_sent: None,
            received_bytes: 0,
            sample_received: 0,
            held: None,
            delack_at: Nanos::MAX,
            delack_pending: false,
            received_at_measure: 0,
            lost_at_measure: 0,
            packets_sent: 0,
            packets_lost: 0,
        }
    }

    /// Whether Cubic stands in for the scheme's law (no ecnq router).
    pub(super) fn fallen_back(&self) -> bool {
        self.probes.as_ref().is_some_and(Probes::fallen_back)
    }

    /// An ACK of `acked` packets echoed `unraised` probes that arrived
    /// unraised: on a change of verdict, Cubic takes over from the scheme's
    /// law at its window, or hands back to it.
    pub(super) fn on_probe_echo(&mut self, acked: u64, unraised: u64) {
        let Some(probes) = self.probes.as_mut() else {
            return;
        };
        let protocol = self.spec.protocol;
        if let Some((law, ecn)) = probes.on_echo(acked, unraised, &*self.law, protocol) {
            self.law = SenderLaw::Plain(law);
            self.data_ecn = ecn;
        }
    }

    /// The congestion window in bytes (with session feedback, the
    /// session's: rate × srtt for a rate law).
    pub fn window(&self) -> u64 {
        self.session
            .as_ref()
            .map_or_else(|| self.law.window(), |s| s.window())
    }

    /// Tells the law that the sender sends again after an idle
    /// ([`idle_gap`]'s rule, the QUIC stack's); a session tells its own.
    pub(super) fn restart_if_idle(&mut self, now: Nanos) {
        if self.session.is_some() {
            return;
        }
        let last = self.last_sent.map(dur);
        let srtt = dur(self.rtt.srtt);
        if let Some(idle) = idle_gap(
            self.bytes_in_flight,
            u64::from(self.spec.mss),
            last,
            dur(now),
            srtt,
        ) {
            self.law.on_idle_restart(dur(now), idle);
        }
    }

    /// Whether the application gives the sender nothing to send at `now`.
    pub(super) fn paused(&self, now: Nanos) -> bool {
        self.spec
            .pause
            .is_some_and(|(from, until)| (from..until).contains(&now))
    }

    /// The rate a rate law sends at, bytes per second.
    pub(super) fn pacing_rate(&self) -> Option<f64> {
        match &self.session {
            Some(s) => s.pacing_rate(),
            None => self.law.pacing_rate(),
        }
    }

    /// What the session feedback path went through; `None` with ACK feedback.
    pub fn feedback_record(&self) -> Option<&FeedbackRecord> {
        self.session.as_ref().map(|s| &s.record)
    }

    /// The marks of the `len`-byte data packet that flow `id` sends at `now`
    /// (its `packets_sent`-th) with packet hash `hash`; a session also
    /// counts it as sent.
    pub(super) fn data_marks(&mut self, now: Nanos, len: u32, hash: u32, id: u64) -> PacketMarks {
        if let Some(s) = self.session.as_deref_mut() {
            return s.send(now, len, hash, id);
        }
        let mut marks = self.unprobed_marks(hash, id);
        if let Some(probes) = self.probes.as_mut() {
            probes.mark(self.packets_sent, &mut marks);
        }
        marks
    }

    /// A sender's packet's marks before its presence probes touch them:
    /// its data codepoint and its law's tag.
    fn unprobed_marks(&self, hash: u32, id: u64) -> PacketMarks {
        PacketMarks {
            ecn: self.data_ecn,
            tag: self.law.tag(),
            hash,
            flow: id,
        }
    }

    /// The marks of a handshake datagram the sender sends: a data packet's,
    /// as before any presence verdict, and counted nowhere.
    pub(super) fn handshake_marks(&self, hash: u32, id: u64) -> PacketMarks {
        if let Some(s) = self.session.as_deref() {
            return s.handshake_marks(hash, id);
        }
        let mut marks = self.unprobed_marks(hash, id);
        if let Some(probes) = self.probes.as_ref() {
            probes.probe_marks(&mut marks);
        }
        marks
    }

    /// The marks of a packet the receiver of flow `id` sends (an ACK, its
    /// handshake) for data tagged `tag`.
    pub(super) fn reply_marks(&self, tag: SchemeTag, id: u64) -> PacketMarks {
        match self.session.as_deref() {
            Some(session) => session.reply_marks(id),
            // An ecnq receiver tags its packets too (QUIC tags every
            // packet), so ACKs queue with their connection's class.
            None => PacketMarks {
                ecn: Ecn::NotEct,
                tag: SchemeTag::new(tag.wire_id),
                hash: 0,
                flow: id,
            },
        }
    }

    /// A packet of the sender's reached the receiver with `marks`: its
    /// decoder, or its session, reads them. Returns whether to poll for a
    /// report.
    pub(super) fn on_arrival(&mut self, now: Nanos, marks: &PacketMarks) -> bool {
        if let Some(d) = self.decoder.as_mut() {
            d.on_packet(dur(now), marks.ecn, marks.tag, marks.hash);
        }
        (self.session.as_deref_mut()).is_some_and(|s| s.on_data(now, marks))
    }

    /// A packet of the receiver's reached the sender with `marks`: its
    /// session sees them.
    pub(super) fn on_reply(&mut self, now: Nanos, marks: &PacketMarks) {
        if let Some(session) = self.session.as_deref_mut() {
            session.on_reply(now, marks);
        }
    }

    /// Packet `ack` acknowledged `len` bytes sent at `sent`: feedback, a CE
    /// mark and the ACK go to the law, or to the session.
    pub(super) fn on_acked(&mut self, now: Nanos, len: u32, sent: Nanos, ack: &Packet) {
        let (t, rtt) = (dur(now), self.rtt.sample());
        if let Some(s) = self.session.as_deref_mut() {
            s.on_acked(now, u64::from(len), sent, ack.ce, rtt);
            return;
        }
        if self.router_assisted {
            self.law.on_feedback(t, ack.feedback, &rtt);
        }
        self.law.on_echo(t, ack.explicit, &rtt);
        if ack.ce && (self.spec.protocol.ce_is_congestion() || self.fallen_back()) {
            self.law.on_congestion(t, dur(sent), Congestion::Ce, &rtt);
        }
        self.law.on_ack(t, u64::from(len), &rtt);
    }

    /// With ACK-count feedback, reads the receiver's counts on `ack` and
    /// puts the reader's estimate in its place of the receiver's. ACKs
    /// gather into frames of `ack_frame` packets, and the counts are read
    /// once per frame, as from a receiver that acknowledges every
    /// `ack_frame` packets, or at the first ACK `ack_delay` after the
    /// frame's first (a receiver that acknowledges by time). `late` are the
    /// packets `ack` covers whose own ACKs were lost: the frame names them
    /// too, as QUIC's ranges do.
    pub(super) fn read_counts(&mut self, now: Nanos, ack: &mut Packet, late: &[Arrival]) {
        let Some(reader) = self.count_reader.as_mut() else {
            return;
        };
        let (tally, read) = (ack.counts, self.tally_read);
        let base = self.base_pn;
        let late = late.iter().map(|a| a.pn);
        for pn in late.chain(iter::once(ack.pn)).chain(ack.also) {
            let entry = pn
                .checked_sub(base)
                .and_then(|i| self.sent.get(usize::try_from(i).ok()?));
            if let Some(entry) = entry.filter(|e| e.state != SentState::Acked) {
                self.frame.push(entry.hash);
            }
        }
        let named = self.frame.len() as u64;
        let since = match named {
            0 => now,
            _ => *self.frame_since.get_or_insert(now),
        };
        let waited = (self.spec.ack_delay).is_some_and(|delay| now >= since + delay);
        // A rise over none of the named packets, or over packets the sender
        // no longer tracks, says nothing: the frame starts again.
        if tally.received.checked_sub(read.received) != Some(named) {
            if tally.received > read.received {
                self.tally_read = tally;
            }
            self.frame.clear();
            self.frame_since = None;
        } else if named >= u64::from(self.spec.ack_frame) || (waited && named > 0) {
            let rises = EcnCounts {
                ect0: tally.ect0 - read.ect0,
                ect1: 0,
                ce: tally.ce - read.ce,
            };
            reader.on_ack(&self.frame, rises);
            self.tally_read = tally;
            self.frame.clear();
            self.frame_since = None;
        }
        ack.feedback = reader.estimate();
    }

    /// Takes the arrivals that `ack` covers beyond the one or two packets
    /// it names (the last arrivals it covers): those whose own ACKs were
    /// lost, in arrival order.
    pub(super) fn late_arrivals(&mut self, ack: &Packet) -> Vec<Arrival> {
        let named = 1 + usize::from(ack.also.is_some());
        let through = ack.counts.received;
        let covered = usize::try_from(through.saturating_sub(self.arrivals_covered))
            .map_or(self.arrivals.len(), |n| n.min(self.arrivals.len()));
        self.arrivals_covered += covered as u64;
        let late: Vec<Arrival> = self
            .arrivals
            .drain(..covered.saturating_sub(named))
            .collect();
        self.arrivals.drain(..covered - late.len());
        late
    }

    /// `bytes` sent at `sent` were declared lost at `now`.
    pub(super) fn on_lost(&mut self, now: Nanos, sent: Nanos, bytes: u64, rtt: &RttSample) {
        match self.session.as_deref_mut() {
            Some(s) => s.on_lost(now, sent, bytes),
            None => self
                .law
                .on_congestion(dur(now), dur(sent), Congestion::Loss, rtt),
        }
    }

    /// The end of an ACK's processing (the session's bookkeeping).
    pub(super) fn on_end_acks(&mut self, now: Nanos) {
        let (in_flight, sent, srtt) = (self.bytes_in_flight, self.packets_sent, self.rtt.srtt);
        if let Some(s) = self.session.as_deref_mut() {
            s.on_end_acks(now, in_flight, sent, srtt);
        }
    }

    /// The smoothed RTT.
    pub fn srtt(&self) -> Nanos {
        self.rtt.srtt
    }

    /// Completion time of a finite flow that finished.
    pub fn completion(&self) -> Option<Nanos> {
        match self.state {
            FlowState::Done(t) => Some(t - self.spec.start),
            _ => None,
        }
    }

    /// The `i`-th tracked packet is lost: its bytes go out again.
    pub(super) fn declare_lost(&mut self, i: usize) {
        let e = &mut self.sent[i];
        e.state = SentState::Lost;
        self.bytes_in_flight -= u64::from(e.len);
        self.retransmit_bytes += u64::from(e.len);
        self.packets_lost += 1;
    }

    /// Stops tracking the acknowledged or lost packets at the front.
    pub(super) fn pop_settled(&mut self) {
        while self
            .sent
            .front()
            .is_some_and(|e| e.state != SentState::InFlight)
        {
            self.sent.pop_front();
            self.base_pn += 1;
        }
    }
}

/// One time-series row for a flow.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlowSample {
    /// End of the sampling period.
    pub time: Nanos,
    /// Flow index.
    pub flow: u32,
    /// Receive rate over the period, bits per second.
    pub rate: f64,
    /// Congestion window, bytes.
    pub window: u64,
}
