//! The ecnq queue's share of the link: the capacity its routers meter
//! against, the scheduler's weights that give it that share, and its
//! allowance to go ahead of the other classes' turns.

use std::time::Duration;

use super::{Bottleneck, Class, Discipline, Queued, CLASSES};

impl<P: Queued> Bottleneck<P> {
    /// The ecnq queue's capacity: its flows' max-min share of the link
    /// ([`ActiveFlows::ecnq_share`](super::ActiveFlows::ecnq_share)); its
    /// lead, the equal split by active flows.
    pub(super) fn update_share(&mut self, now: Duration) {
        if self.discipline != Discipline::Dual {
            return;
        }
        let share = self.flows.ecnq_share();
        let (before, weighed) = (self.share, self.weighed_share(now));
        self.share = share;
        // A fall is held for an interval from the moment it comes (with
        // any fall held already); only a fall from a share beside other
        // flows: the whole link, held while the first other flow counts,
        // would keep that flow from its turns for an interval.
        if share < before && before < 1.0 {
            self.held = (weighed, now + self.flows.interval);
        } else if share >= self.held.0 || now >= self.held.1 || self.held.0 >= 1.0 {
            self.held = (share, now + self.flows.interval);
        }
        self.router.set_capacity(self.capacity * share);
        self.policer.set_capacity(self.capacity * share);
        // The lead before the others' turns stays at the equal split: what
        // light flows leave is taken in turn, by the weights.
        self.allowance.rate = self.capacity * self.flows.equal_share();
    }

    /// Weights of the classes: their active flows, at least one; the ecnq
    /// queue's weight grows to its max-min share where light flows leave
    /// more. Weighted by counts alone, the classic queue's turns took what
    /// the ecnq routers had handed their flows whenever short flows' slow
    /// starts queued at once, and the ecnq queue overflowed
    /// (`coexist-short-flows`). A fall in the share reaches the weights an
    /// interval after it comes, as it reaches the ecnq senders (their
    /// routers hand out a new share when their interval ends, and the
    /// senders hear it a round trip later), also when it comes at an
    /// interval's end: the ecnq flows would otherwise send into a queue
    /// that no longer serves them at that rate
    /// (`a_fall_in_the_share_is_held_for_an_interval_from_the_fall`). While
    /// the other classes hold less than [`SPARSE_BACKLOG`], the counts
    /// alone weigh.
    pub(super) fn weights(&self, now: Duration) -> [f64; CLASSES] {
        let counts = self.flows.counts();
        let mut weights = counts.map(|n| n.max(1) as f64);
        let share = self.weighed_share(now);
        let others_waiting = self.bytes[Class::Classic as usize] + self.bytes[Class::L4s as usize];
        if self.discipline == Discipline::Dual && share < 1.0 && others_waiting >= SPARSE_BACKLOG {
            let others = (counts[Class::Classic as usize] + counts[Class::L4s as usize]) as f64;
            let ecnq = &mut weights[Class::Ecnq as usize];
            *ecnq = ecnq.max(share * others / (1.0 - share));
        }
        weights
    }

    /// The ecnq queue's share the weights give it at `now`: its share, or
    /// a higher one still held after a fall.
    pub(super) fn weighed_share(&self, now: Duration) -> f64 {
        if now < self.held.1 {
            self.share.max(self.held.0)
        } else {
            self.share
        }
    }
}

/// The ecnq queue's lead over the other classes: a token bucket that fills
/// at the queue's share of the capacity and holds [`LEAD`] of the link.
/// While it holds tokens the ecnq queue goes first; once it is spent, the
/// classes take turns by bytes per active flow.
///
/// The ecnq flows are paced at, and policed to, their shares, and send a
/// little under them (erc's router targets 98 %). Taking turns alone, their
/// queue is served at about the rate they arrive at, so a bunch of bursts
/// (ACKs come in batches, quinn sends what its window opens at once, the
/// host stalls) drains at a few percent of the share behind Cubic's turns.
/// Going first within their share, a burst leaves at the link's rate, as a
/// sparse flow's packets do in FQ-CoDel (RFC 8290 §4.1) and L4S packets do
/// in DualQ (RFC 9332 §2.4), and the class still gains no more than its
/// share plus one bucket over any span. A credit granted only to an ecnq
/// queue that had been idle does not do: a flow just under its share
/// rarely is (`an_ecnq_flow_just_under_its_share_waits_for_nobody_else`).
///
/// The other classes get none: Cubic's queue, emptied by CoDel and back,
/// would go ahead of the ecnq packets that came meanwhile.
#[derive(Clone, Copy, Debug)]
pub(super) struct EcnqAllowance {
    /// The fill rate, bytes per second: the ecnq queue's share.
    pub(super) rate: f64,
    /// The most it holds, bytes.
    depth: f64,
    /// Bytes it holds now; negative after the queue went beyond its share.
    tokens: f64,
    at: Duration,
}

impl EcnqAllowance {
    pub(super) fn new(capacity: f64, now: Duration) -> EcnqAllowance {
        let depth = (capacity * LEAD.as_secs_f64()).max(LEAD_MIN);
        EcnqAllowance {
            rate: capacity,
            depth,
            tokens: depth,
            at: now,
        }
    }

    pub(super) fn fill(&mut self, now: Duration) {
        let span = now.saturating_sub(self.at).as_secs_f64();
        self.tokens = (self.tokens + self.rate * span).min(self.depth);
        self.at = now;
    }

    /// A packet of `len` bytes left the ecnq queue, ahead of others or not:
    /// what the queue takes beyond its share is owed (up to one bucket).
    pub(super) fn spend(&mut self, len: u32) {
        self.tokens = (self.tokens - f64::from(len)).max(-self.depth);
    }

    pub(super) fn left(&self) -> bool {
        self.tokens > 0.0
    }
}

/// The most the ecnq queue's allowance holds, as time at the link's rate:
/// 5 ms, at least what a sender's transport may let out at once after
/// quinn asked late (`session::rate_gate`'s fill span), so that such a
/// burst too leaves at the link's rate
/// (`an_ecnq_burst_goes_ahead_of_the_classic_queue_by_a_millisecond`).
const LEAD: Duration = Duration::from_millis(5);
/// The least the allowance holds, bytes: two full packets.
const LEAD_MIN: f64 = 3_000.0;

/// Under this many bytes waiting in the classic and L4S queues, the
/// classes take turns by their counts, not by the ecnq queue's max-min
/// share: two full packets, a light flow's burst (a few packets per round
/// trip), which must not wait for the ecnq queue's much larger weight
/// (`erc_takes_what_a_light_flow_leaves_on_the_real_stack` in tests/e2e.rs).
const SPARSE_BACKLOG: u64 = 3_000;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::router::bottleneck::test_support::*;
    use crate::wire::ecn::{Ecn, SchemeTag};

    /// An ecnq flow a little under its share, whose bursts bunch and
    /// spread as a real sender's do (ACKs come in batches, the host stalls),
    /// beside a classic queue that never empties: within its share the ecnq
    /// queue goes first, so its bursts leave at the link's rate.
    #[test]
    fn an_ecnq_flow_just_under_its_share_waits_for_nobody_else() {
        let mut b = link(Discipline::Dual);
        let mut waits = Vec::new();
        // Bursts of three, 24 packets per 49 ms: 98 % of half the link,
        // bunched up to 12 packets in 16 ms.
        let gaps = [4, 5, 4, 9, 5, 4, 9, 9];
        let (mut next, mut burst) = (0, 0);
        for t in 0..4_900u32 {
            let now = MS * t;
            while let Some(d) = b.depart_timed(now) {
                if d.class == Class::Ecnq && t > 100 {
                    waits.push(d.sojourn);
                }
            }
            for _ in 0..2 {
                let _ = b.offer(now, pkt(2, SchemeTag::UNTAGGED, Ecn::NotEct));
            }
            if t == next {
                for _ in 0..3 {
                    b.offer(now, pkt(1, ERC, Ecn::NotEct)).unwrap();
                }
                next += gaps[burst % gaps.len()];
                burst += 1;
            }
        }
        // No packet waits for more than the packet in service and its own
        // burst.
        let longest = waits.iter().max().copied();
        assert!(longest <= Some(MS * 3), "{longest:?}");
    }

    /// A paced ecnq flow's burst leaves at the link's rate beside a busy
    /// classic queue, within [`LEAD`] of the link (five packets here) ahead
    /// of Cubic's turns; a busy ecnq queue gets no more than its share.
    #[test]
    fn an_ecnq_burst_goes_ahead_of_the_classic_queue_by_a_millisecond() {
        let mut b = link(Discipline::Dual);
        let mut waits = Vec::new();
        let mut departed = [0u64; CLASSES];
        for t in 0..2_000u32 {
            let now = MS * t;
            while let Some(d) = b.depart_timed(now) {
                departed[d.class as usize] += 1;
                if d.class == Class::Ecnq {
                    waits.push(d.sojourn);
                }
            }
            // Cubic keeps two packets a millisecond coming: its queue never
            // empties. erc sends a burst of three every 20 ms, a sixth of
            // its share.
            for _ in 0..2 {
                let _ = b.offer(now, pkt(2, SchemeTag::UNTAGGED, Ecn::NotEct));
            }
            if t % 20 == 0 {
                for _ in 0..3 {
                    b.offer(now, pkt(1, ERC, Ecn::NotEct)).unwrap();
                }
            }
        }
        // Past the start, each burst waits for the packet in service and
        // then leaves back to back: the k-th packet within k + 1 ms (it
        // waited up to 2k + 1 ms behind Cubic's turns).
        for (i, &wait) in waits.iter().enumerate().skip(30) {
            let k = (i % 3) as u32;
            assert!(
                wait <= MS * (k + 1),
                "packet {k} of a burst waited {wait:?}"
            );
        }
        // Cubic had the rest of the link.
        assert!(departed[Class::Classic as usize] >= 1_990 - departed[Class::Ecnq as usize]);

        // Both offering twice the link: the halves stay equal.
        let mut b = link(Discipline::Dual);
        let out = run(
            &mut b,
            &[(1, ERC, Ecn::Ect0), (2, SchemeTag::UNTAGGED, Ecn::Ect0)],
            2_000,
        );
        assert!(out[&1].abs_diff(out[&2]) <= 10, "{out:?}");
    }

    /// A fall in the ecnq queue's share reaches the weights an interval
    /// after it comes, as it reaches the ecnq senders, also when it comes
    /// at an interval's end (a light classic flow that turned greedy).
    #[test]
    fn a_fall_in_the_share_is_held_for_an_interval_from_the_fall() {
        let mut b = link(Discipline::Dual);
        let interval = b.flows.interval;
        let mut seen = Vec::new();
        for t in 0..3_000u32 {
            let now = MS * t;
            while b.depart(now).is_some() {}
            let _ = b.offer(now, pkt(1, ERC, Ecn::Ect0));
            let classic = if t < 1_500 { u32::from(t % 20 == 0) } else { 2 };
            for _ in 0..classic {
                let _ = b.offer(now, pkt(2, SchemeTag::UNTAGGED, Ecn::NotEct));
            }
            seen.push((now, b.share, b.weighed_share(now)));
        }
        let fall = seen
            .iter()
            .position(|&(now, share, _)| now >= MS * 1_500 && share < 0.9);
        let fall = fall.expect("the share falls once the classic flow is greedy");
        let (at, _, _) = seen[fall];
        let before = seen[fall - 1].1;
        assert!(before > 0.9, "{before}");
        for &(now, share, weighed) in &seen[fall..] {
            if now < at + interval {
                assert_eq!(
                    weighed, before,
                    "at {now:?}, an interval from the fall at {at:?}"
                );
            } else if now > at + interval {
                assert_eq!(weighed, share, "at {now:?}");
            }
        }
    }

    #[test]
    fn the_ecnq_queue_is_metered_against_its_share() {
        let mut b = link(Discipline::Dual);
        run(
            &mut b,
            &[
                (1, ERC, Ecn::Ect0),
                (2, SchemeTag::UNTAGGED, Ecn::NotEct),
                (3, SchemeTag::UNTAGGED, Ecn::NotEct),
                (4, SchemeTag::UNTAGGED, Ecn::NotEct),
            ],
            1000,
        );
        let capacity = ecnq_capacity(&b);
        assert!((capacity - 0.25e6).abs() < 1.0, "{capacity}");
        // Alone again: the whole link.
        let mut later = MS * 1000;
        for _ in 0..1000 {
            later += MS;
            while b.depart(later).is_some() {}
            let _ = b.offer(later, pkt(1, ERC, Ecn::Ect0));
        }
        assert_eq!(ecnq_capacity(&b), 1e6);
    }
}
