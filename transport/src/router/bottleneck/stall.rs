//! The ecnq queue's stall guard (docs/design.md §4, "Stalled links"): when
//! a link nearly stops (a cellular outage), the flight its senders had out
//! waits in the buffer until the link comes back, and then leaves seconds
//! late ahead of everything sent since. No rate the router advertises can
//! clear that flight, which left the senders before the link stopped; only
//! the queue can, at dequeue, as CoDel does (RFC 8289).

use std::time::Duration;

use super::codel::{CODEL_INTERVAL, CODEL_MIN_BACKLOG};
use super::{Bottleneck, Class, Queued, Waiting};

/// A packet that waited longer than this was held by a stalled link: CoDel's
/// interval, the worst-case round trip of the flows it serves (RFC 8289
/// §4.3). A settled erc flow's own queue is a quarter of its round trip
/// (`FLIGHT_RTT_MIN_MULTIPLE`), so it never waits this long.
const STALL_SOJOURN: Duration = CODEL_INTERVAL;

/// The guard keeps this many bytes behind the packet it drops: four
/// MTU-sized packets (RFC 8289 §5.3's least backlog, four times), which
/// keep the link busy while the senders resend what was dropped. With one
/// kept the link idled after each outage (on the T-Mobile trace 11 % less
/// goodput than without the guard, 2 % with four); with more the queue's
/// p99 grows back.
const STALL_KEEP: u64 = 4 * CODEL_MIN_BACKLOG;

/// The least bound the guard falls to in a long stall: half CoDel's
/// interval. At a quarter (25 ms, the queue a settled erc flow keeps at
/// that round trip) erc lost 7 % of its goodput on AT&T's LTE downlink
/// and the rate steps' p99 rose from 2.3 to 10.4 ms
/// (`cellular_traces_side_by_side`, `rate_steps_erc_follows_the_fall_and_the_rise`).
const STALL_FLOOR: Duration = Duration::from_millis(50);

/// A stall that starts within this many of CoDel's intervals of the
/// guard's last drop resumes its law where the last one left it, less
/// two drops, as CoDel re-enters its dropping state (RFC 8289 §5.6's
/// pseudocode: `now - drop_next < 16 * interval`).
const STALL_REENTRY: u32 = 16;

/// The guard's state: how many packets it dropped in the stall under way.
#[derive(Debug, Default)]
pub(super) struct StallGuard {
    count: u32,
    /// Whether a stall is under way, and when the guard last dropped.
    stalled: bool,
    last_drop: Option<Duration>,
}

impl StallGuard {
    /// The sojourn over which a packet is part of the stalled flight: CoDel's
    /// interval at a stall's first drop, then falling with the square root
    /// of the drops as CoDel's control law spaces its own (RFC 8289 §5.4),
    /// down to [`STALL_FLOOR`].
    fn bound(&self) -> Duration {
        (STALL_SOJOURN.div_f64(f64::from(self.count + 1).sqrt())).max(STALL_FLOOR)
    }
}

impl<P: Queued> Bottleneck<P> {
    /// Whether `waiting`, the head of queue `class` after a `sojourn`, is
    /// part of a flight a stalled link held: a packet of a scheme that
    /// clears stalls ([`crate::wire::ecn::WireScheme::clears_stalls`]) in
    /// the ecnq queue, which waited over the guard's bound
    /// ([`StallGuard::bound`]) with more than [`STALL_KEEP`] behind it.
    /// Such a packet is dropped: a CE mark would slow the sender, but leave
    /// the flight in the buffer. The stall ends when a packet leaves having
    /// waited no more than [`STALL_FLOOR`], or the queue is down to the keep.
    /// Tests: `a_stalled_flight_is_dropped_at_dequeue`,
    /// `a_settled_queue_and_other_schemes_are_never_cleared`,
    /// `the_bound_falls_with_the_drops_to_the_floor`.
    pub(super) fn stalled_flight(
        &mut self,
        class: usize,
        waiting: &Waiting<P>,
        sojourn: Duration,
    ) -> bool {
        let clears = waiting.class == Class::Ecnq
            && waiting
                .packet
                .marks()
                .is_some_and(|m| m.tag.wire().clears_stalls());
        if !clears {
            return false;
        }
        let now = waiting.since + sojourn;
        if self.bytes[class] <= STALL_KEEP || sojourn <= STALL_FLOOR {
            self.stall.stalled = false;
            return false;
        }
        if sojourn > self.stall.bound() {
            if !self.stall.stalled {
                // A stall soon after the last resumes the law near where
                // it was ([`STALL_REENTRY`]).
                let recent = self
                    .stall
                    .last_drop
                    .is_some_and(|at| now < at + STALL_SOJOURN * STALL_REENTRY);
                self.stall.count = if recent {
                    self.stall.count.saturating_sub(2)
                } else {
                    0
                };
                self.stall.stalled = true;
            }
            self.stall.count += 1;
            self.stall.last_drop = Some(now);
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::router::bottleneck::test_support::*;
    use crate::router::bottleneck::{Discipline, Dropped};
    use crate::schemes::vcp;
    use crate::wire::ecn::{Ecn, SchemeTag};

    /// Offers `n` packets of `tag` at once to an 8 Mbit/s link (one
    /// packet a millisecond) and lets them all leave: how many left, how
    /// many the AQMs dropped, and the longest sojourn.
    fn burst(discipline: Discipline, tag: SchemeTag, n: u32) -> (u32, u32, Duration) {
        let mut b = link(discipline);
        for _ in 0..n {
            b.offer(Duration::ZERO, pkt(1, tag, Ecn::NotEct)).unwrap();
        }
        let (mut left, mut longest) = (0, Duration::ZERO);
        while let Some(d) = b.depart_timed(MS * 10 * n) {
            left += 1;
            longest = longest.max(d.sojourn);
        }
        let dropped = b
            .take_drops()
            .filter(|(why, _)| *why == Dropped::Aqm)
            .count();
        (left, dropped as u32, longest)
    }

    /// The bound starts at CoDel's interval, falls as CoDel spaces its
    /// drops (interval / sqrt(count + 1)) and stops at the floor.
    #[test]
    fn the_bound_falls_with_the_drops_to_the_floor() {
        let bound = |count| {
            StallGuard {
                count,
                ..StallGuard::default()
            }
            .bound()
        };
        assert_eq!(bound(0), STALL_SOJOURN);
        assert!(bound(1) < STALL_SOJOURN && bound(1) > STALL_FLOOR);
        assert_eq!(bound(3), STALL_SOJOURN / 2);
        assert_eq!(bound(100), STALL_FLOOR);
    }

    /// A flight of 300 ms at the link's rate, of an erc flow: what waited
    /// over the guard's bound is dropped at dequeue, but for the last packets, which
    /// keep the link busy; nothing that leaves waited much longer.
    #[test]
    fn a_stalled_flight_is_dropped_at_dequeue() {
        for discipline in [Discipline::Dual, Discipline::Fifo] {
            let (left, dropped, longest) = burst(discipline, ERC, 300);
            let kept = (STALL_KEEP / 1000) as u32;
            assert_eq!(left + dropped, 300, "{discipline:?}");
            assert!(left > 100 && left <= 102 + kept, "{discipline:?}: {left}");
            assert!(longest <= STALL_SOJOURN * 2, "{discipline:?}: {longest:?}");
        }
    }

    /// A queue shorter than the bound (a settled flow's), and other
    /// schemes' and untagged packets however long they waited, are never
    /// dropped by the guard.
    #[test]
    fn a_settled_queue_and_other_schemes_are_never_cleared() {
        assert_eq!(burst(Discipline::Dual, ERC, 90), (90, 0, MS * 89));
        let vcp = SchemeTag::new(vcp::WIRE.id());
        assert_eq!(burst(Discipline::Dual, vcp, 300), (300, 0, MS * 299));
        let untagged = SchemeTag::UNTAGGED;
        assert_eq!(burst(Discipline::Fifo, untagged, 300), (300, 0, MS * 299));
    }
}
