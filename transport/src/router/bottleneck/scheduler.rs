//! The scheduler between the classes: the ecnq queue first within its
//! allowance, then the busy class furthest behind in bytes per unit of
//! weight, a light flow's window back to back, and DualPI2's time-shifted
//! FIFO.

use super::pi2::PI2_TSHIFT;
use super::{Bottleneck, Class, Discipline, Queued, CLASSES};

impl<P: Queued> Bottleneck<P> {
    /// Levels queue `c`, which a packet finds empty: a class that was idle
    /// banks no credit, and starts level with the busy class furthest
    /// behind or, with every queue empty, with the class furthest ahead.
    /// The ecnq queue's lead is its allowance
    /// ([`EcnqAllowance`](super::share::EcnqAllowance)), which is not
    /// banked in turns.
    pub(super) fn level_idle_class(&mut self, c: usize) {
        // Levelled only against busy classes, flows whose packets met
        // every queue empty (BBR in its ProbeRTT) bank turns and take them
        // at once when they come back, and the ecnq queue overflows
        // (`a_class_back_while_every_queue_was_empty_banks_no_turns`).
        let busy = (0..CLASSES).filter(|&o| !self.queues[o].is_empty());
        let floor = busy
            .map(|o| self.served[o])
            .min_by(f64::total_cmp)
            .or_else(|| self.served.iter().copied().max_by(f64::total_cmp));
        if let Some(floor) = floor {
            self.served[c] = self.served[c].max(floor);
        }
    }

    /// The queue to serve next, if any waits. DualPI2 serves its two
    /// queues as a time-shifted FIFO: the classic head goes first once it
    /// has waited [`PI2_TSHIFT`] longer than the L4S head. Otherwise the
    /// ecnq queue goes first while its allowance lasts, and then the busy
    /// class furthest behind in bytes per active flow.
    pub(super) fn next_class(&self) -> Option<usize> {
        let head = |class: Class| self.queues[class as usize].front().map(|w| w.since);
        if self.discipline == Discipline::DualPi2 {
            let class = match (head(Class::L4s), head(Class::Classic)) {
                (Some(l), Some(c)) if c + PI2_TSHIFT < l => Class::Classic,
                (Some(_), _) => Class::L4s,
                (None, Some(_)) => Class::Classic,
                (None, None) => return None,
            };
            return Some(class as usize);
        }
        if let Some((class, _)) = self.burst.filter(|&(c, _)| !self.queues[c].is_empty()) {
            return Some(class);
        }
        let ecnq = Class::Ecnq as usize;
        if self.discipline == Discipline::Dual
            && !self.queues[ecnq].is_empty()
            && self.allowance.left()
        {
            return Some(ecnq);
        }
        (0..CLASSES)
            .filter(|&c| !self.queues[c].is_empty())
            .min_by(|&a, &b| self.served[a].total_cmp(&self.served[b]))
    }

    /// Keeps a sparse class's backlog together: when the classic or L4S
    /// queue's first turn since it was empty comes while it holds at most
    /// [`SPARSE_BURST`] and light flows leave the ecnq queue more than an
    /// equal split, what it holds then leaves back to back; a packet of
    /// `len` bytes from `class` is starting, `fresh` if it found its queue
    /// empty.
    pub(super) fn note_burst(&mut self, class: usize, len: u32, fresh: bool) {
        let len = u64::from(len);
        self.burst = match self.burst {
            Some((c, left)) if c == class => Some((c, left.saturating_sub(len))),
            _ if self.discipline == Discipline::Dual
                && fresh
                && class != Class::Ecnq as usize
                && self.bytes[class] <= SPARSE_BURST
                && self.share > LIGHT_MARGIN * self.flows.equal_share() =>
            {
                Some((class, self.bytes[class] - len))
            }
            _ => None,
        }
        .filter(|&(_, left)| left > 0);
    }
}

/// The most a classic or L4S queue may hold for its backlog to leave back
/// to back once its turn comes: four full packets, a light flow's window.
/// Interleaved with the ecnq queue's packets, such a window reaches the
/// receiver spread out, and a receiver that acknowledges every second
/// packet (quinn) holds the ACK of the third for its ACK delay, so the
/// light flow loses rate (`a_light_flows_window_leaves_back_to_back`;
/// `erc_takes_what_a_light_flow_leaves_on_the_real_stack` in
/// tests/e2e.rs). Only a queue's first turn after it was
/// empty starts such a run, so that a long backlog draining down still
/// takes turns, and only while light flows leave the ecnq queue more than
/// an equal split: a greedy Cubic flow's queue, emptied by its own
/// reductions, refills in ACK-clocked pairs that would otherwise run
/// ahead of erc's packets.
pub(super) const SPARSE_BURST: u64 = 6_000;

/// How far above the equal split the ecnq queue's share must be for light
/// flows to count as there (the two are computed apart).
const LIGHT_MARGIN: f64 = 1.01;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::router::bottleneck::test_support::*;
    use crate::statistics::SojournHistogram;
    use crate::wire::ecn::{Ecn, SchemeTag};
    use std::time::Duration;

    /// A packet's sojourn runs from its arrival to the start of its
    /// serialization. In a FIFO that is the queue it found at the link's
    /// rate; in a dual queue each class waits for the other's turns too, so
    /// ten packets of each class, offered at once, wait twice as long as
    /// their own queue at the link's rate says (L4S and classic here: the
    /// ecnq queue goes first within its allowance).
    #[test]
    fn sojourn_counts_the_other_classes_turns() {
        let sojourns = |discipline: Discipline| {
            let mut b = link(discipline);
            for _ in 0..10 {
                b.offer(Duration::ZERO, pkt(1, SchemeTag::UNTAGGED, Ecn::Ect1))
                    .unwrap();
                b.offer(Duration::ZERO, pkt(2, SchemeTag::UNTAGGED, Ecn::Ect0))
                    .unwrap();
            }
            let mut by_class = [Vec::new(), Vec::new(), Vec::new()];
            while let Some(d) = b.depart_timed(MS * 100) {
                // It started a transmission time (1 ms) before it ended.
                assert_eq!(d.end, d.sojourn + MS);
                assert_eq!(d.class, b.class_of(Some(&d.packet.0)));
                by_class[d.class as usize].push(d.sojourn);
            }
            // The counters add the same sojourns up, and the histograms
            // count each of them in its class.
            for class in Class::ALL {
                let waited = &by_class[class as usize];
                let sum: Duration = waited.iter().sum();
                assert_eq!(b.counters(class).sojourn_ns, sum.as_nanos() as u64);
                let histogram = b.sojourns(class);
                assert_eq!(histogram.count(), waited.len() as u64, "{class:?}");
                let mut expected = SojournHistogram::new();
                waited.iter().for_each(|&s| expected.record(s));
                assert_eq!(histogram, &expected, "{class:?}");
                // Whole milliseconds: p100 is the longest plus a bucket.
                let longest = waited.iter().max();
                assert_eq!(
                    histogram.percentile(100.0),
                    longest.map(|&s| s + SojournHistogram::BUCKET),
                    "{class:?}"
                );
            }
            by_class
        };
        // FIFO: the k-th packet found k before it, and waited k ms.
        let fifo = sojourns(Discipline::Fifo);
        assert_eq!(
            fifo[Class::Ecnq as usize],
            (0..20).map(|k| MS * k).collect::<Vec<_>>()
        );
        // Dual: the k-th packet of each class found k before it in its
        // queue (k ms at the link's rate) but waited about 2k ms.
        let dual = sojourns(Discipline::Dual);
        for class in [Class::L4s, Class::Classic] {
            let waited = &dual[class as usize];
            assert_eq!(waited.len(), 10, "{class:?}");
            for (k, &sojourn) in waited.iter().enumerate() {
                let k = k as u32;
                assert!(
                    sojourn + MS >= MS * 2 * k && sojourn <= MS * 2 * k + MS,
                    "{class:?} packet {k} waited {sojourn:?}"
                );
            }
            assert!(waited[9] >= MS * 17, "{class:?}: {waited:?}");
        }
    }

    #[test]
    fn dual_queue_shares_by_active_flows_and_keeps_classic_out_of_the_way() {
        // One erc flow and one classic flow, each offering twice the link.
        let mut b = link(Discipline::Dual);
        let out = run(
            &mut b,
            &[(1, ERC, Ecn::Ect0), (2, SchemeTag::UNTAGGED, Ecn::NotEct)],
            2000,
        );
        let (e, c) = (out[&1] as f64, out[&2] as f64);
        assert!((e / c - 1.0).abs() < 0.05, "erc {e} classic {c}");
        assert_eq!(b.active_flows(), [1, 1, 0]);
        // CoDel held the classic queue: drops, and a short sojourn.
        assert!(b.counters(Class::Classic).aqm_drops > 0);
        // Two classic flows against one erc flow: 2:1 (over 4 s: in the
        // first interval the weights keep the share from before the second
        // classic flow counted, a half, as erc's routers still hand it out).
        let mut b = link(Discipline::Dual);
        let out = run(
            &mut b,
            &[
                (1, ERC, Ecn::Ect0),
                (2, SchemeTag::UNTAGGED, Ecn::Ect0),
                (3, SchemeTag::UNTAGGED, Ecn::Ect0),
            ],
            4000,
        );
        let classic = (out[&2] + out[&3]) as f64;
        assert!((classic / out[&1] as f64 - 2.0).abs() < 0.1, "{out:?}");
        assert!(
            b.counters(Class::Classic).aqm_marks > 0,
            "ECT is marked, not dropped"
        );
        assert_eq!(b.counters(Class::Classic).aqm_drops, 0);
    }

    /// A light flow's window leaves back to back, not spread among the
    /// ecnq queue's packets (a receiver that acknowledges every second
    /// packet would hold the third for its ACK delay); a backlog beyond
    /// [`SPARSE_BURST`], or one of a flow that is not light, takes turns.
    #[test]
    fn a_light_flows_window_leaves_back_to_back() {
        // The classic flow's departures, as runs between ecnq packets.
        let runs = |window: u32, every: u32| {
            let mut b = link(Discipline::Dual);
            let (mut runs, mut run) = (Vec::new(), 0);
            for t in 0..2_000u32 {
                let now = MS * t;
                while let Some((_, p)) = b.depart(now) {
                    match (p.0.flow, t >= 1_000) {
                        (2, true) => run += 1,
                        (_, true) if run > 0 => runs.push(std::mem::take(&mut run)),
                        _ => {}
                    }
                }
                // The ecnq flow keeps its queue from emptying.
                let _ = b.offer(now, pkt(1, ERC, Ecn::Ect0));
                let _ = b.offer(now + MS / 2, pkt(1, ERC, Ecn::Ect0));
                if t % every == 0 {
                    for _ in 0..window {
                        let _ = b.offer(now, pkt(2, SchemeTag::UNTAGGED, Ecn::NotEct));
                    }
                }
            }
            runs
        };
        let light = runs(3, 50);
        assert!(
            light.len() >= 15 && light.iter().all(|&r| r == 3),
            "{light:?}"
        );
        let heavy = runs(8, 50);
        assert!(heavy.iter().all(|&r| r < 8), "{heavy:?}");
        // Three packets every 8 ms are not light (over half an equal
        // split): the classes take turns, though the queue empties.
        let greedy = runs(3, 8);
        assert!(
            greedy.len() >= 100 && greedy.iter().all(|&r| r < 3),
            "{greedy:?}"
        );
    }

    /// A class whose packets meet every queue empty banks no turns: four
    /// light classic flows beside an ecnq flow under the link's rate (as
    /// four BBR flows in their ProbeRTT beside erc), then all greedy. The
    /// ecnq queue's lead covers only an equal split (a fifth), so the rest
    /// of its share comes by turns; levelled only against busy classes,
    /// the classic queue would bank its idle turns and take most of the
    /// next packets.
    #[test]
    fn a_class_back_while_every_queue_was_empty_banks_no_turns() {
        let mut b = link(Discipline::Dual);
        let mut ecnq = 0;
        for t in 0..2_100u32 {
            let now = MS * t;
            while let Some((_, p)) = b.depart(now) {
                ecnq += u32::from(p.0.flow == 1 && t >= 2_000);
            }
            let greedy = t >= 2_000;
            // The classic flows' packets come first in a millisecond.
            for flow in 2..6u64 {
                if greedy || u64::from(t % 40) == 10 * (flow - 2) + 1 {
                    let _ = b.offer(now, pkt(flow, SchemeTag::UNTAGGED, Ecn::NotEct));
                }
            }
            for _ in 0..if greedy { 2 } else { u32::from(t % 2 == 0) } {
                let _ = b.offer(now, pkt(1, ERC, Ecn::Ect0));
            }
        }
        // All greedy for 100 ms: the ecnq queue keeps about the share it
        // had (the classic flows were light), held for an interval.
        assert!(ecnq >= 50, "{ecnq} of 100 packets");
    }
}
