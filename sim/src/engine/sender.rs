//! QUIC-like senders: packet numbers are never reused, a packet is lost
//! when three later ones are acknowledged or 9/8 RTT passed (RFC 9002
//! §6.1), a retransmission timeout catches tail losses (RFC 6298), and the
//! flow's law (or its session) turns ACKs, feedback, CE marks and losses
//! into its window or rate. Window senders may pace, as quinn does.

use ecnq::session::GATED_WINDOW_CAP;
use ecnq::signal::{Feedback, Law};

use super::clock::{Event, Nanos};
use super::flow::{SentPacket, SentState};
use super::packet::{EcnTally, Packet, PacketKind};
use super::state::FlowState;
use super::Sim;

/// Packet reordering threshold (RFC 9002 §6.1.1).
const PACKET_THRESHOLD: u64 = 3;
/// Paced window senders send at this multiple of window / srtt, as quinn's
/// pacer does (docs/design.md §3).
const PACING_GAIN: f64 = 1.25;

/// What a sender with `window` may have in flight: the window, for a
/// window law and for a law whose window caps its paced flight (BBR,
/// [`Law::window_caps_flight`]); for an ecnq rate law, what the QUIC
/// stack's gated window reaches ([`GATED_WINDOW_CAP`] × the law's window,
/// which is at most rate × srtt). Without that cap a rate law kept filling
/// the queue of a link in an outage, while no ACK came back (test
/// `erc_rides_out_an_outage_without_loss_and_is_back_within_a_second`).
fn flight_cap(law: &dyn Law, window: u64, paced: bool) -> u64 {
    if paced && !law.window_caps_flight() {
        window.saturating_mul(GATED_WINDOW_CAP)
    } else {
        window
    }
}

impl Sim {
    /// Sends what flow `f`'s law, pacing and data allow now; schedules the
    /// next paced send if pacing holds it back.
    pub(super) fn try_send(&mut self, f: usize) {
        loop {
            let now = self.clock.now();
            let flow = &mut self.flows[f];
            if flow.state != FlowState::Active || flow.paused(now) {
                return;
            }
            let available = flow.retransmit_bytes.saturating_add(flow.new_bytes_left);
            if available == 0 {
                return;
            }
            let len = available.min(u64::from(flow.spec.mss));
            flow.restart_if_idle(now);
            let paced = flow.pacing_rate();
            let window = flow.window();
            let cap = flight_cap(&*flow.law, window, paced.is_some());
            if flow.bytes_in_flight > 0 && flow.bytes_in_flight + len > cap.max(len) {
                return;
            }
            let rate = paced.or_else(|| {
                (flow.spec.pace && flow.rtt.has_sample)
                    .then(|| PACING_GAIN * window as f64 * 1e9 / flow.rtt.srtt.max(1) as f64)
            });
            if let Some(rate) = rate {
                if now < flow.pace_next {
                    if !flow.pace_pending {
                        flow.pace_pending = true;
                        let at = flow.pace_next;
                        self.clock.schedule_at(at, Event::Pace(f as u32));
                    }
                    return;
                }
                let gap = (len as f64 * 1e9 / rate.max(1.0)).ceil() as Nanos;
                flow.pace_next = now.max(flow.pace_next) + gap;
            }
            self.send_one(f, len as u32);
        }
    }

    /// Sends one data packet of `len` bytes, retransmitted bytes first.
    fn send_one(&mut self, f: usize, len: u32) {
        let now = self.clock.now();
        let hash = self.rng.next_u32();
        let flow = &mut self.flows[f];
        let from_retransmit = u64::from(len).min(flow.retransmit_bytes);
        flow.retransmit_bytes -= from_retransmit;
        flow.new_bytes_left = flow
            .new_bytes_left
            .saturating_sub(u64::from(len) - from_retransmit);
        let pn = flow.next_pn;
        flow.next_pn += 1;
        flow.sent.push_back(SentPacket {
            len,
            sent: now,
            state: SentState::InFlight,
            hash,
        });
        flow.bytes_in_flight += u64::from(len);
        flow.last_sent = Some(now);
        flow.packets_sent += 1;
        let marks = flow.data_marks(now, len, hash, f as u64);
        let explicit = flow.law.header();
        self.arm_rto(f);
        self.inject(Packet {
            id: 0,
            flow: f as u32,
            hop: 0,
            kind: PacketKind::Data,
            len,
            marks,
            pn,
            sent: now,
            feedback: Feedback::default(),
            ce: false,
            unraised: 0,
            also: None,
            counts: EcnTally::default(),
            explicit,
        });
    }

    /// Restarts flow `f`'s retransmission timer (off with nothing in flight).
    fn arm_rto(&mut self, f: usize) {
        let now = self.clock.now();
        let flow = &mut self.flows[f];
        if flow.bytes_in_flight == 0 {
            flow.rto_at = Nanos::MAX;
            return;
        }
        flow.rto_at = now + (flow.rtt.rto() << flow.rto_backoff.min(6));
        if !flow.rto_pending {
            flow.rto_pending = true;
            let at = flow.rto_at;
            self.clock.schedule_at(at, Event::Rto(f as u32));
        }
    }

    /// Flow `f`'s retransmission timer fired: everything in flight is lost.
    pub(super) fn rto(&mut self, f: usize) {
        let now = self.clock.now();
        let flow = &mut self.flows[f];
        flow.rto_pending = false;
        if flow.rto_at == Nanos::MAX {
            return;
        }
        if flow.rto_at > now {
            flow.rto_pending = true;
            let at = flow.rto_at;
            self.clock.schedule_at(at, Event::Rto(f as u32));
            return;
        }
        let (mut last_sent, mut lost_bytes) = (None, 0);
        for i in 0..flow.sent.len() {
            if flow.sent[i].state == SentState::InFlight {
                last_sent = Some(flow.sent[i].sent);
                lost_bytes += u64::from(flow.sent[i].len);
                flow.declare_lost(i);
            }
        }
        flow.pop_settled();
        flow.rto_backoff += 1;
        flow.rto_at = Nanos::MAX;
        if let Some(sent) = last_sent {
            let rtt = flow.rtt.sample();
            flow.on_lost(now, sent, lost_bytes, &rtt);
        }
        self.try_send(f);
    }

    /// An ACK reached its sender. It acknowledges every packet the
    /// receiver got before it, as QUIC's ranges do: first those whose own
    /// ACKs were lost (no RTT sample: they waited for this ACK), then the
    /// one or two it names.
    pub(super) fn on_ack(&mut self, mut ack: Packet) {
        let f = ack.flow as usize;
        let now = self.clock.now();
        let late = self.flows[f].late_arrivals(&ack);
        self.flows[f].read_counts(now, &mut ack, &late);
        let acked = (late.len() + 1 + usize::from(ack.also.is_some())) as u64;
        let unraised = late.iter().filter(|a| a.unraised).count() as u64;
        let unraised = unraised + u64::from(ack.unraised);
        self.flows[f].on_probe_echo(acked, unraised);
        if let Some(session) = self.flows[f].session.as_deref_mut() {
            session.on_reply(now, &ack.marks);
        }
        let mut newly = false;
        for a in &late {
            let cover = Packet { ce: a.ce, ..ack };
            newly |= self.ack_packet(f, a.pn, &cover, false);
        }
        let earlier = ack
            .also
            .is_some_and(|pn| self.ack_packet(f, pn, &ack, true));
        if !(self.ack_packet(f, ack.pn, &ack, true) || earlier || newly) {
            return;
        }
        self.detect_losses(f);
        let flow = &mut self.flows[f];
        flow.on_end_acks(now);
        if flow.spec.size.is_some_and(|size| flow.acked_bytes >= size) {
            flow.state = FlowState::Done(now);
            flow.rto_at = Nanos::MAX;
            return;
        }
        self.arm_rto(f);
        self.try_send(f);
    }

    /// Packet `pn` of flow `f` was acknowledged by `ack` (an RTT sample if
    /// `sample`); returns whether it was still in flight (a late ACK for a
    /// packet declared lost is ignored: its data is already queued again).
    fn ack_packet(&mut self, f: usize, pn: u64, ack: &Packet, sample: bool) -> bool {
        let now = self.clock.now();
        let flow = &mut self.flows[f];
        let Some(i) = pn.checked_sub(flow.base_pn).map(|i| i as usize) else {
            return false;
        };
        let Some(entry) = flow.sent.get_mut(i) else {
            return false;
        };
        if entry.state != SentState::InFlight {
            return false;
        }
        entry.state = SentState::Acked;
        let (len, sent) = (entry.len, entry.sent);
        flow.bytes_in_flight -= u64::from(len);
        flow.acked_bytes += u64::from(len);
        flow.rto_backoff = 0;
        if sample {
            flow.rtt.update(now - sent);
        }
        flow.largest_acked = Some(flow.largest_acked.map_or(pn, |l| l.max(pn)));
        flow.on_acked(now, len, sent, ack);
        true
    }

    /// Declares lost what the packet and time thresholds say is lost.
    fn detect_losses(&mut self, f: usize) {
        let now = self.clock.now();
        let flow = &mut self.flows[f];
        let Some(largest) = flow.largest_acked else {
            return;
        };
        let window = flow.rtt.srtt.max(flow.rtt.latest) * 9 / 8;
        let rtt = flow.rtt.sample();
        for i in 0..flow.sent.len() {
            let pn = flow.base_pn + i as u64;
            if pn >= largest {
                break;
            }
            let e = flow.sent[i];
            if e.state != SentState::InFlight {
                continue;
            }
            if pn + PACKET_THRESHOLD <= largest || e.sent + window <= now {
                flow.declare_lost(i);
                flow.on_lost(now, e.sent, u64::from(e.len), &rtt);
            } else {
                break;
            }
        }
        flow.pop_settled();
    }
}
