//! Driving packets through the links: a packet enters a link's
//! bottleneck (or, on a pure delay, its pipe), departs at the link rate,
//! may be lost on the wire, propagates, and moves on to the next link of
//! its path or to its endpoint. Because every link serves in FIFO order and
//! its delay is constant, each link needs at most two pending events (the
//! end of the current transmission and the head of its pipe), which keeps
//! the event heap small however many packets are in flight.

use ecnq::router::bottleneck::Dropped;

use super::clock::{dur, Event, Nanos};
use super::packet::{Packet, PacketKind};
use super::trace::{TraceKind, TraceRecord};
use super::Sim;

impl Sim {
    /// Records a queue event when tracing.
    fn trace(&mut self, link: usize, kind: TraceKind, pkt: &Packet) {
        if let Some(trace) = self.trace.as_mut() {
            trace.push(TraceRecord {
                time: self.clock.now(),
                link,
                kind,
                id: pkt.id,
                flow: pkt.flow,
                marks: pkt.marks,
                len: pkt.len,
            });
        }
    }

    /// A packet arrives at link `l`: it queues (or is dropped), or enters
    /// the pipe of a pure delay.
    fn link_arrive(&mut self, l: usize, mut pkt: Packet) {
        let now = self.clock.now();
        let link = &mut self.links[l];
        let Some(bottleneck) = link.bottleneck.as_mut() else {
            let was_empty = link.pipe.is_empty();
            let at = now + link.spec.delay;
            link.pipe.push_back((at, pkt));
            if was_empty {
                self.clock.schedule_at(at, Event::PipeHead(l as u32));
            }
            return;
        };
        let class = bottleneck.class_of(Some(&pkt.marks));
        let seen = bottleneck.class_packets(class);
        let idle = bottleneck.next_departure().is_none();
        let stats = &mut link.stats;
        stats.arrived_packets += 1;
        stats.arrived_bytes += u64::from(pkt.len);
        let histogram = &mut stats.queue_seen[class as usize];
        if histogram.len() <= seen {
            histogram.resize(seen + 1, 0);
        }
        histogram[seen] += 1;
        link.account_queue(now);
        link.explicit(now, &mut pkt, false);
        let Some(bottleneck) = link.bottleneck.as_mut() else {
            return;
        };
        match bottleneck.offer(dur(now), pkt) {
            Ok(()) => {
                let queue = (link.queue_packets() as u64, link.queue_bytes());
                link.stats.peak_queue_packets = link.stats.peak_queue_packets.max(queue.0);
                link.stats.peak_queue_bytes = link.stats.peak_queue_bytes.max(queue.1);
                self.trace(l, TraceKind::Enqueue, &pkt);
            }
            Err((_, pkt)) => {
                link.stats.dropped_packets += 1;
                self.counters.dropped += 1;
                self.trace(l, TraceKind::Drop, &pkt);
            }
        }
        self.after_service_change(l, idle);
    }

    /// Counts CoDel's drops and schedules the next departure when the link
    /// went from idle to busy (`was_idle`) or a departure just happened.
    fn after_service_change(&mut self, l: usize, was_idle: bool) {
        let link = &mut self.links[l];
        let Some(bottleneck) = link.bottleneck.as_mut() else {
            return;
        };
        let dropped: Vec<(Dropped, Packet)> = bottleneck.take_drops().collect();
        let next = bottleneck.next_departure();
        link.stats.aqm_drops += dropped.iter().filter(|d| d.0 == Dropped::Aqm).count() as u64;
        link.stats.dropped_packets += dropped.len() as u64;
        self.counters.dropped += dropped.len() as u64;
        for (_, pkt) in &dropped {
            self.trace(l, TraceKind::Drop, pkt);
        }
        if was_idle {
            if let Some(t) = next {
                self.clock
                    .schedule_at(t.as_nanos() as Nanos, Event::TxDone(l as u32));
            }
        }
    }

    /// Link `l` finished transmitting its head packet: it is lost on the
    /// wire or enters the pipe.
    pub(super) fn tx_done(&mut self, l: usize) {
        let now = self.clock.now();
        let link = &mut self.links[l];
        link.account_queue(now);
        let Some(bottleneck) = link.bottleneck.as_mut() else {
            return;
        };
        let Some((_, mut pkt)) = bottleneck.depart(dur(now)) else {
            return;
        };
        link.explicit(now, &mut pkt, true);
        link.stats.departed_packets += 1;
        link.stats.departed_bytes += u64::from(pkt.len);
        link.sample_departed += u64::from(pkt.len);
        self.after_service_change(l, true);
        self.trace(l, TraceKind::Depart, &pkt);
        let link = &mut self.links[l];
        if link.spec.loses(now, pkt.kind, |p| self.rng.chance(p)) {
            link.stats.lost_packets += 1;
            self.counters.dropped += 1;
            self.trace(l, TraceKind::Lost, &pkt);
            return;
        }
        let was_empty = link.pipe.is_empty();
        let at = now + link.spec.delay;
        link.pipe.push_back((at, pkt));
        if was_empty {
            self.clock.schedule_at(at, Event::PipeHead(l as u32));
        }
    }

    /// The packet at the head of link `l`'s pipe arrived at the far end:
    /// on to the next link of its path, or to its endpoint.
    pub(super) fn pipe_head(&mut self, l: usize) {
        let link = &mut self.links[l];
        let Some((_, mut pkt)) = link.pipe.pop_front() else {
            return;
        };
        if let Some(&(next, _)) = link.pipe.front() {
            self.clock.schedule_at(next, Event::PipeHead(l as u32));
        }
        pkt.hop += 1;
        let flow = &self.flows[pkt.flow as usize];
        match flow.spec.path_of(pkt.kind).get(usize::from(pkt.hop)) {
            Some(&next) => self.link_arrive(next, pkt),
            None => {
                self.counters.delivered += 1;
                match pkt.kind {
                    PacketKind::Data => self.on_data(pkt),
                    PacketKind::Ack => self.on_ack(pkt),
                    PacketKind::Report => self.on_report(pkt),
                    PacketKind::Fake => self.on_fake(pkt),
                    PacketKind::ClientHandshake | PacketKind::ServerHandshake => {
                        self.on_handshake(pkt)
                    }
                }
            }
        }
    }

    /// Hands a new packet to the first link of its path.
    pub(super) fn inject(&mut self, mut pkt: Packet) {
        pkt.id = self.counters.injected;
        self.counters.injected += 1;
        let first = self.flows[pkt.flow as usize].spec.path_of(pkt.kind)[0];
        self.link_arrive(first, pkt);
    }
}
