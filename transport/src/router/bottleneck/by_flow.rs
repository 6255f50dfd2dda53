//! Each waiting flow's bytes in the dual queue's classic and L4S queues:
//! an overflow is taken from the flow with the most bytes waiting, and a
//! light classic flow's packets go into the sparse section at the head of
//! the classic queue, as in FQ-CoDel (RFC 8290 §4.1, §4.2).

use std::collections::HashMap;
use std::time::Duration;

use super::scheduler::SPARSE_BURST;
use super::{Bottleneck, Class, Discipline, Dropped, QueueLimit, Queued, Waiting, CLASSES};

/// Each class's waiting packets by flow.
pub(super) type Waits = [HashMap<u64, FlowWaiting>; CLASSES];

/// A flow's packets waiting in one class's queue.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct FlowWaiting {
    pub(super) bytes: u64,
    /// Of those, in the sparse section.
    pub(super) sparse: u64,
    /// CoDel signals that other flows' packets passed to it
    /// ([`Bottleneck::classic_signal`]).
    pub(super) owed: u32,
}

impl<P: Queued> Bottleneck<P> {
    /// What `flow` has waiting in `class`'s queue, when the queue keeps
    /// its bytes by flow ([`Bottleneck::queues_by_flow`]).
    pub(super) fn waits_of(&self, class: Class, flow: u64) -> FlowWaiting {
        if self.queues_by_flow(class) {
            let waiting = self.flow_bytes[class as usize].get(&flow);
            waiting.copied().unwrap_or_default()
        } else {
            FlowWaiting::default()
        }
    }

    /// Whether `class` keeps its bytes waiting by flow: the dual queue's
    /// classic and L4S queues, for [`Bottleneck::make_room`] and
    /// [`Bottleneck::sparse_place`].
    pub(super) fn queues_by_flow(&self, class: Class) -> bool {
        self.discipline == Discipline::Dual && class != Class::Ecnq
    }

    /// Counts a packet of `flow` and `len` bytes into queue `c`'s bytes
    /// by flow, and its fattest flow.
    pub(super) fn count_waiting(&mut self, c: usize, flow: u64, len: u32, sparse: bool) {
        let waits = self.flow_bytes[c].entry(flow).or_default();
        waits.bytes += u64::from(len);
        if sparse {
            waits.sparse += u64::from(len);
        }
        let bytes = waits.bytes;
        let (fat, fat_bytes) = self.fattest[c];
        if fat == flow || bytes > fat_bytes {
            self.fattest[c] = (flow, bytes);
        }
    }

    /// Whether a packet of `flow` and `len` bytes fits in `class`'s queue,
    /// where the flow has `own` bytes waiting. When it does not, in the
    /// classic and L4S queues of [`Discipline::Dual`], the flow with the
    /// most bytes waiting (as arrivals left it: no search per packet,
    /// which costs too much with thousands of flows waiting) loses its
    /// oldest packets to make room, as FQ-CoDel drops from its fattest
    /// queue (RFC 8290 §4.1), unless it is the packet's own flow or holds
    /// no more than `own`. A flow that fills the queue (BBR ignores
    /// CE and overflows it) pays for its overflow, not a light flow beside
    /// it (`a_full_classic_queue_drops_from_its_fattest_flow`).
    pub(super) fn make_room(&mut self, class: Class, flow: u64, own: u64, len: u32) -> bool {
        let c = class as usize;
        let displaces = self.queues_by_flow(class);
        loop {
            let full = match self.limit {
                QueueLimit::Packets(n) => self.queues[c].len() as u64 >= n,
                QueueLimit::Bytes(n) => self.bytes[c] + u64::from(len) > n,
            };
            if !full {
                return true;
            }
            let (fat, fat_bytes) = self.fattest[c];
            if !displaces || fat == flow || fat_bytes <= own {
                return false;
            }
            let Some(at) = self.queues[c].iter().position(|w| w.flow == fat) else {
                return false;
            };
            let Some(waiting) = self.queues[c].remove(at) else {
                return false;
            };
            self.forget(c, &waiting);
            self.counters[c].overflow += 1;
            self.dropped.push((Dropped::Overflow, waiting.packet));
        }
    }

    /// Whether a classic packet of `flow` and `len` bytes goes into the
    /// sparse section at the head of the classic queue, as FQ-CoDel serves
    /// a new flow's first quantum before the flows with a backlog (RFC 8290
    /// §4.2): under [`Discipline::Dual`], when the flow sends under
    /// [`LIGHT_FLOW`](super::flows::LIGHT_FLOW) of an equal split
    /// ([`ActiveFlows::sends_lightly`](super::ActiveFlows::sends_lightly)),
    /// has nothing waiting behind the section, and holds at most
    /// [`SPARSE_BURST`] in it with this packet. A light flow's window
    /// otherwise waits behind a greedy flow's standing queue (BBR
    /// fills the classic queue and ignores CE) and gets a fraction of its
    /// rate (`a_light_classic_flow_goes_ahead_of_a_standing_queue`). A flow
    /// gains nothing over its equal split by it, and the section's packets
    /// count in the classic queue's turns. `waits` is what the flow has
    /// waiting in the classic queue.
    pub(super) fn sparse_place(
        &self,
        now: Duration,
        class: Class,
        flow: u64,
        waits: FlowWaiting,
        len: u32,
    ) -> bool {
        class == Class::Classic
            && self.discipline == Discipline::Dual
            && waits.bytes == waits.sparse
            && waits.bytes + u64::from(len) <= SPARSE_BURST
            && self.flows.sends_lightly(now, flow)
    }

    /// Takes a packet that leaves `class`'s queue out of its byte counts.
    pub(super) fn forget(&mut self, class: usize, waiting: &Waiting<P>) {
        let len = u64::from(waiting.packet.wire_len());
        self.bytes[class] -= len;
        if waiting.sparse {
            self.sparse -= 1;
        }
        if !self.queues_by_flow(waiting.class) {
            return;
        }
        if let Some(waits) = self.flow_bytes[class].get_mut(&waiting.flow) {
            waits.bytes -= len;
            if waiting.sparse {
                waits.sparse -= len;
            }
            if self.fattest[class].0 == waiting.flow {
                self.fattest[class].1 = waits.bytes;
            }
            if waits.bytes == 0 {
                self.flow_bytes[class].remove(&waiting.flow);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::router::bottleneck::test_support::*;
    use crate::signal::PacketMarks;
    use crate::wire::ecn::{Ecn, SchemeTag};

    #[test]
    fn overflow_hands_the_packet_back() {
        let mut b = link(Discipline::Fifo);
        b.limit = QueueLimit::Packets(2);
        for _ in 0..3 {
            b.offer(Duration::ZERO, pkt(1, ERC, Ecn::Ect0)).unwrap();
        }
        let (why, back) = b.offer(Duration::ZERO, pkt(9, ERC, Ecn::Ect0)).unwrap_err();
        assert_eq!((why, back.0.flow), (Dropped::Overflow, 9));
        assert_eq!(b.counters(Class::Ecnq).overflow, 1);
    }

    #[test]
    fn a_full_classic_queue_drops_from_its_fattest_flow() {
        // The packet's hash numbers it within its flow.
        let numbered = |flow: u64, n: u32| {
            Pkt(PacketMarks {
                ecn: Ecn::NotEct,
                tag: SchemeTag::UNTAGGED,
                hash: n,
                flow,
            })
        };
        for discipline in [Discipline::Dual, Discipline::Fifo, Discipline::DualPi2] {
            let mut b = link(discipline);
            b.limit = QueueLimit::Packets(10);
            // One in service, ten waiting.
            for n in 0..11 {
                b.offer(Duration::ZERO, numbered(1, n)).unwrap();
            }
            let light = b.offer(Duration::ZERO, numbered(2, 0));
            let pushed_out: Vec<_> = b
                .take_drops()
                .map(|(why, p)| (why, p.0.flow, p.0.hash))
                .collect();
            if discipline == Discipline::Dual {
                // The heavy flow's oldest waiting packet makes room.
                assert!(light.is_ok());
                assert_eq!(pushed_out, [(Dropped::Overflow, 1, 1)]);
                // The fattest flow's own arrival is the one dropped.
                let (why, back) = b.offer(Duration::ZERO, numbered(1, 11)).unwrap_err();
                assert_eq!((why, back.0.flow), (Dropped::Overflow, 1));
                assert_eq!(b.counters(Class::Classic).overflow, 2);
            } else {
                // A FIFO and DualPI2 drop at the tail, as they did.
                let (why, back) = light.unwrap_err();
                assert_eq!((why, back.0.flow), (Dropped::Overflow, 2), "{discipline}");
                assert!(pushed_out.is_empty(), "{discipline}");
            }
        }
    }

    /// Beside a greedy classic flow that keeps a standing queue, a light
    /// one's packets go ahead of it in the dual queue's classic queue, and
    /// CoDel goes on marking the standing queue as often as without them.
    #[test]
    fn a_light_classic_flow_goes_ahead_of_a_standing_queue() {
        // Sojourns per flow, ms, over the second half of 4 s, and CoDel's
        // marks; flow 1 greedy, flow 2 one packet every 50 ms, flow 3 one
        // every 4 ms (over half an equal split).
        let run = |discipline: Discipline, with_light: bool| {
            let mut b = link(discipline);
            let mut waits: HashMap<u64, Vec<f64>> = HashMap::new();
            for t in 0..4_000u32 {
                let now = MS * t;
                while let Some(d) = b.depart_timed(now) {
                    if t >= 2_000 {
                        let ms = d.sojourn.as_secs_f64() * 1e3;
                        waits.entry(d.packet.0.flow).or_default().push(ms);
                    }
                }
                let _ = b.offer(now, pkt(1, SchemeTag::UNTAGGED, Ecn::Ect0));
                let _ = b.offer(now + MS / 2, pkt(1, SchemeTag::UNTAGGED, Ecn::Ect0));
                if with_light && t % 50 == 0 {
                    let _ = b.offer(now, pkt(2, SchemeTag::UNTAGGED, Ecn::Ect0));
                }
                if t % 4 == 0 {
                    let _ = b.offer(now, pkt(3, SchemeTag::UNTAGGED, Ecn::Ect0));
                }
            }
            let of = |flow| waits.get(&flow).map_or(&[][..], Vec::as_slice);
            let mean = |flow| of(flow).iter().sum::<f64>() / of(flow).len() as f64;
            // The light flow's packets through, and the longest wait.
            let light = (of(2).len(), of(2).iter().copied().fold(0.0, f64::max));
            (
                light,
                mean(1),
                mean(3),
                b.counters(Class::Classic).aqm_marks,
            )
        };
        let ((through, longest), greedy, faster, marks) = run(Discipline::Dual, true);
        assert_eq!(through, 40);
        assert!(longest <= 2.0, "the light flow waited up to {longest} ms");
        assert!(greedy > 50.0 && faster > 50.0, "{greedy} / {faster} ms");
        let (_, _, _, alone) = run(Discipline::Dual, false);
        assert!(
            marks as f64 >= 0.9 * alone as f64,
            "{marks} marks, {alone} without it"
        );
        // DualPI2 knows no flows: the greedy flow's overflow takes the
        // light flow's packets too.
        let ((through, _), ..) = run(Discipline::DualPi2, true);
        assert!(through < 20, "{through} of 40");
    }
}
