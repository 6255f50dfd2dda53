//! Receivers: every data packet goes through the flow's decoder, and each
//! ACK carries the receiver's current estimate (the papers' ACK piggyback),
//! whether the acknowledged packets arrived CE, and how many were presence
//! probes no ecnq router raised; it also covers every packet received before
//! it, as QUIC's ACK ranges do, so a lost ACK is made good by the next
//! (`Flow::late_arrivals`). With session feedback
//! the receiver's session decodes instead, and reports on its own
//! (`session`). A delayed-ACK receiver acknowledges every second packet, or
//! after 40 ms.

use ecnq::signal::Feedback;
use ecnq::Ecn;

use super::clock::{dur, Event, Nanos};
use super::flow::Arrival;
use super::packet::{Packet, PacketKind, ACK_LEN};
use super::Sim;

/// A delayed ACK waits at most this long for a second packet (Linux's 40 ms
/// minimum; RFC 1122 §4.2.3.2 allows up to 500 ms).
const DELAYED_ACK_TIMEOUT: Nanos = 40_000_000;

impl Sim {
    /// A data packet reached its receiver.
    pub(super) fn on_data(&mut self, pkt: Packet) {
        let now = self.clock.now();
        let f = pkt.flow as usize;
        let flow = &mut self.flows[f];
        flow.received_bytes += u64::from(pkt.len);
        flow.sample_received += u64::from(pkt.len);
        flow.tally.count(pkt.marks.ecn);
        flow.arrivals.push_back(Arrival {
            pn: pkt.pn,
            ce: ce(&pkt),
            unraised: unraised(&pkt),
        });
        let report = flow.on_arrival(now, &pkt.marks);
        self.acknowledge(pkt);
        if report {
            self.poll_report(f);
        }
    }

    /// Acknowledges a data packet now, or holds it for a delayed ACK.
    fn acknowledge(&mut self, pkt: Packet) {
        let now = self.clock.now();
        let f = pkt.flow as usize;
        let flow = &mut self.flows[f];
        if !flow.spec.delayed_ack {
            self.send_ack(&pkt, None);
            return;
        }
        match flow.held.take() {
            Some(earlier) => self.send_ack(&pkt, Some(&earlier)),
            None => {
                flow.held = Some(pkt);
                flow.delack_at = now + DELAYED_ACK_TIMEOUT;
                if !flow.delack_pending {
                    flow.delack_pending = true;
                    self.clock
                        .schedule_at(now + DELAYED_ACK_TIMEOUT, Event::DelayedAck(f as u32));
                }
            }
        }
    }

    /// Flow `f`'s delayed-ACK timer fired.
    pub(super) fn delayed_ack(&mut self, f: usize) {
        let now = self.clock.now();
        let flow = &mut self.flows[f];
        flow.delack_pending = false;
        let Some(held) = flow.held else {
            return;
        };
        if now < flow.delack_at {
            flow.delack_pending = true;
            let at = flow.delack_at;
            self.clock.schedule_at(at, Event::DelayedAck(f as u32));
            return;
        }
        flow.held = None;
        self.send_ack(&held, None);
    }

    /// Acknowledges `data` (and `earlier`, for a delayed ACK) with the
    /// receiver's current estimate (none with session feedback).
    fn send_ack(&mut self, data: &Packet, earlier: Option<&Packet>) {
        let t = dur(self.clock.now());
        let flow = &self.flows[data.flow as usize];
        let feedback = flow
            .decoder
            .as_ref()
            .map_or(Feedback::default(), |d| d.estimate(t));
        let marks = flow.reply_marks(data.marks.tag, u64::from(data.flow));
        self.inject(Packet {
            id: 0,
            flow: data.flow,
            hop: 0,
            kind: PacketKind::Ack,
            len: ACK_LEN,
            marks,
            pn: data.pn,
            sent: data.sent,
            feedback,
            ce: ce(data) || earlier.is_some_and(ce),
            unraised: u8::from(unraised(data)) + earlier.map_or(0, |p| u8::from(unraised(p))),
            also: earlier.map(|p| p.pn),
            counts: flow.tally,
            explicit: data.explicit,
        });
    }
}

/// Whether `p` arrived with CE.
fn ce(p: &Packet) -> bool {
    p.marks.ecn == Ecn::Ce
}

/// Whether `p` is a presence probe that arrived unraised by any ecnq router.
fn unraised(p: &Packet) -> bool {
    let (tag, ecn) = (p.marks.tag, p.marks.ecn);
    tag.wire().is_unraised_probe(tag, ecn)
}
