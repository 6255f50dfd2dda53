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

impl<P: Queued> Bottleneck<P> {
    /// Whether `waiting`, the head of queue `class` after a `sojourn`, is
    /// part of a flight a stalled link held: a packet of a scheme that
    /// clears stalls ([`crate::wire::ecn::WireScheme::clears_stalls`]) in
    /// the ecnq queue, which waited over [`STALL_SOJOURN`] with more than
    /// [`STALL_KEEP`] behind it. Such a packet is dropped: a CE mark would
    /// slow the sender, but leave the flight in the buffer. Tests:
    /// `a_stalled_flight_is_dropped_at_dequeue`,
    /// `a_settled_queue_and_other_schemes_are_never_cleared`.
    pub(super) fn stalled_flight(
        &self,
        class: usize,
        waiting: &Waiting<P>,
        sojourn: Duration,
    ) -> bool {
        waiting.class == Class::Ecnq
            && sojourn > STALL_SOJOURN
            && self.bytes[class] > STALL_KEEP
            && waiting
                .packet
                .marks()
                .is_some_and(|m| m.tag.wire().clears_stalls())
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

    /// A flight of 300 ms at the link's rate, of an erc flow: what waited
    /// over 100 ms is dropped at dequeue, but for the last packets, which
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
