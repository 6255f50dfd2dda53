//! Floods of fake newcomers: a stream of short flows that each send a few
//! packets from a new flow id, as a fresh sender of their scheme would mark
//! them, ignore every ACK, loss and mark, and stop. Fake flow `k` of a
//! flood starts at `start + k × period`, where the period is one fake
//! flow's bits over the stream's rate, so the stream offers its rate
//! whatever the network does; its packets go out back to back or spread
//! evenly over `spread`. Their delivered bytes count to the flood's own
//! flow, so reports show the attack's throughput beside the flows it hits.

use std::collections::VecDeque;

use super::clock::{Event, Nanos};
use super::config::NewcomerFloodSpec;
use super::packet::{Packet, PacketKind};
use super::state::FlowState;
use super::Sim;

/// Fake flow ids start here, above every engine flow's index (a `u32`), so
/// no fake flow shares an id with a real one.
const FAKE_IDS: u64 = 1 << 32;
/// Each flood's fake flow ids are a block this large (fake flow `k` of
/// flood `s` is `FAKE_IDS + s × FAKE_BLOCK + k`).
const FAKE_BLOCK: u64 = 1 << 40;

/// A fake flow that has started: its number and the packets it sent.
#[derive(Clone, Copy, Debug)]
struct Fake {
    number: u64,
    sent: u32,
}

/// A flood as the engine runs it.
#[derive(Debug)]
pub(super) struct Flood {
    spec: NewcomerFloodSpec,
    /// The flow its delivered bytes count to.
    pub(super) flow: usize,
    /// Nanoseconds between fake flows' starts.
    period: f64,
    /// Nanoseconds between a fake flow's packets.
    gap: f64,
    /// The number of the next fake flow to start.
    next: u64,
    /// Fake flows with packets left to send, oldest first.
    active: VecDeque<Fake>,
}

impl Flood {
    /// Flood `spec`, its bytes counted to flow `flow`.
    pub(super) fn new(spec: NewcomerFloodSpec, flow: usize) -> Flood {
        let bits = f64::from(spec.packets) * f64::from(spec.size) * 8.0;
        Flood {
            period: bits / spec.rate * 1e9,
            gap: spec.spread as f64 / f64::from(spec.packets),
            spec,
            flow,
            next: 0,
            active: VecDeque::new(),
        }
    }

    /// When fake flow `number` starts or would start.
    fn begins(&self, number: u64) -> Nanos {
        self.spec.flow.start + (number as f64 * self.period).round() as Nanos
    }

    /// When fake flow `number` starts, if it starts at all.
    fn start_of(&self, number: u64) -> Option<Nanos> {
        Some(self.begins(number)).filter(|&t| t < self.spec.until)
    }

    /// When `fake` sends its next packet.
    fn next_packet(&self, fake: &Fake) -> Nanos {
        self.begins(fake.number) + (f64::from(fake.sent) * self.gap).round() as Nanos
    }

    /// Starts the fake flows due by `now`; then takes the next packet due
    /// by `now`, if any: its fake flow's number and the packet's index.
    fn take_due(&mut self, now: Nanos) -> Option<(u64, u32)> {
        while self.start_of(self.next).is_some_and(|t| t <= now) {
            self.active.push_back(Fake {
                number: self.next,
                sent: 0,
            });
            self.next += 1;
        }
        let i = self
            .active
            .iter()
            .position(|f| self.next_packet(f) <= now)?;
        let fake = &mut self.active[i];
        let due = (fake.number, fake.sent);
        fake.sent += 1;
        if fake.sent == self.spec.packets {
            self.active.remove(i);
        }
        Some(due)
    }

    /// When the flood next has something to do, if ever.
    fn next_event(&self) -> Option<Nanos> {
        let packets = self.active.iter().map(|f| self.next_packet(f));
        packets.chain(self.start_of(self.next)).min()
    }
}

impl Sim {
    /// Flood `s` sends every packet due now, and waits for its next.
    pub(super) fn flood(&mut self, s: usize) {
        let now = self.clock.now();
        while let Some((number, index)) = self.floods[s].take_due(now) {
            let id = FAKE_IDS + s as u64 * FAKE_BLOCK + number;
            self.send_fake(s, id, index);
        }
        let flood = &self.floods[s];
        let flow = &mut self.flows[flood.flow];
        match flood.next_event() {
            Some(at) => {
                flow.state = FlowState::Active;
                self.clock.schedule_at(at, Event::Flood(s as u32));
            }
            None => flow.state = FlowState::Stopped,
        }
    }

    /// Flood `s` sends packet `index` of fake flow `id`, marked as a fresh
    /// sender of its scheme marks its packets.
    fn send_fake(&mut self, s: usize, id: u64, index: u32) {
        let now = self.clock.now();
        let hash = self.rng.next_u32();
        let (f, len) = (self.floods[s].flow, self.floods[s].spec.size);
        let flow = &mut self.flows[f];
        let marks = flow.data_marks(now, len, hash, id);
        flow.packets_sent += 1;
        let pn = u64::from(index);
        self.inject(Packet::bare(f, PacketKind::Fake, len, marks, pn, now));
    }

    /// A fake newcomer's packet reached the far end: its bytes count to its
    /// flood, and nothing answers it.
    pub(super) fn on_fake(&mut self, pkt: Packet) {
        let flow = &mut self.flows[pkt.flow as usize];
        flow.received_bytes += u64::from(pkt.len);
        flow.sample_received += u64::from(pkt.len);
    }
}
