//! One direction of an emulated link, sans-IO (docs/design.md §4): mark at
//! enqueue → drop-tail queue → serialization at the link rate →
//! propagation delay (+ jitter, reordering) → out. Outages (blackhole),
//! loss, corruption and duplication happen at enqueue, as in netem.
//!
//! Departure times are computed exactly when a packet is enqueued:
//! `departure = max(now, previous departure) + len·8 / rate`, in integer
//! nanoseconds with the remainder carried, so a busy link sends exactly
//! `rate` bits per second whatever the caller's timer jitter — a late
//! wake-up delays a packet's release, never the departures after it.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

use ecnq::router::bottleneck::{
    Bottleneck, BottleneckConfig, Discipline, Dropped, QueueLimit, Queued,
};
use ecnq::router::{MarkingMode, RouterConfig, RouterLink};
use ecnq::{PacketMarks, WireScheme};

use super::classify::{PassCounters, PassReason};
use super::impair::{Corruption, Rng, Strikes};
use super::spec::{Limit, LinkSpec};

/// What a link carries.
pub trait LinkPacket: Clone {
    /// Size on the wire in bytes (IP header included): what is metered and queued.
    fn wire_len(&self) -> u32;
    /// The marks a marker may rewrite, or why the packet passes untouched.
    fn marks(&self) -> Result<PacketMarks, PassReason>;
    /// Stores rewritten marks.
    fn set_marks(&mut self, marks: &PacketMarks);
    /// Applies `hit` to the UDP payload (see [`Corruption::apply`]), keeping
    /// any checksum valid so the packet still reaches its endpoint. Returns
    /// whether a byte changed (not for non-UDP packets).
    fn corrupt(&mut self, hit: Corruption) -> bool;
}

/// Why a packet did not make it into the queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DropCause {
    /// The buffer was full (the arriving packet, or a heavier flow's packet
    /// pushed out for it).
    Overflow,
    /// Emulated loss.
    Loss,
    /// The link was in an outage (`blackhole`).
    Blackhole,
    /// The classic queue's AQM (CoDel) dropped a Not-ECT packet.
    Aqm,
    /// The packet was an over-share flow's excess ([`ecnq::router::policer`]).
    Policed,
}

impl From<Dropped> for DropCause {
    fn from(why: Dropped) -> DropCause {
        match why {
            Dropped::Overflow => DropCause::Overflow,
            Dropped::Aqm => DropCause::Aqm,
            Dropped::Policed => DropCause::Policed,
        }
    }
}

/// Per-link counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkCounters {
    /// Packets offered (duplicates included).
    pub arrivals: u64,
    /// Bytes offered.
    pub arrival_bytes: u64,
    /// Packets released at the far end.
    pub departures: u64,
    /// Bytes released at the far end.
    pub departure_bytes: u64,
    /// Drop-tail drops.
    pub drops_overflow: u64,
    /// Emulated-loss drops.
    pub drops_loss: u64,
    /// Drops during outages.
    pub drops_blackhole: u64,
    /// Drops by the classic queue's AQM.
    pub drops_aqm: u64,
    /// Drops of over-share flows' excess by the policer.
    pub drops_policed: u64,
    /// Packets corrupted.
    pub corrupted: u64,
    /// Duplicates made.
    pub duplicates: u64,
    /// Packets that skipped the delay (reordered).
    pub reordered: u64,
    /// Packets metered and queued but never marked, by reason.
    pub passed: PassCounters,
}

impl LinkCounters {
    /// Counts a drop.
    fn drop(&mut self, cause: DropCause) {
        match cause {
            DropCause::Overflow => self.drops_overflow += 1,
            DropCause::Loss => self.drops_loss += 1,
            DropCause::Blackhole => self.drops_blackhole += 1,
            DropCause::Aqm => self.drops_aqm += 1,
            DropCause::Policed => self.drops_policed += 1,
        }
    }
}

/// A link packet as the core's bottleneck queues it.
struct Carried<P>(P);

impl<P: LinkPacket> Queued for Carried<P> {
    fn wire_len(&self) -> u32 {
        self.0.wire_len()
    }
    fn marks(&self) -> Option<PacketMarks> {
        self.0.marks().ok()
    }
    fn set_marks(&mut self, marks: &PacketMarks) {
        self.0.set_marks(marks);
    }
}

/// A packet in flight, ordered by release time then arrival order.
#[derive(Clone, Debug)]
struct InFlight<P> {
    release: Duration,
    seq: u64,
    packet: P,
}

impl<P> PartialEq for InFlight<P> {
    fn eq(&self, other: &Self) -> bool {
        (self.release, self.seq) == (other.release, other.seq)
    }
}
impl<P> Eq for InFlight<P> {}
impl<P> PartialOrd for InFlight<P> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<P> Ord for InFlight<P> {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.release, self.seq).cmp(&(other.release, other.seq))
    }
}

/// Capacity the meter assumes on an unlimited link: 10 Gbit/s.
pub const UNLIMITED_CAPACITY_BPS: u64 = 10_000_000_000;

/// One direction of a shim: the link it emulates and how it is queued,
/// metered and marked.
#[derive(Clone, Debug)]
pub struct Direction {
    /// The link.
    pub spec: LinkSpec,
    /// Its metering and marking.
    pub router: RouterConfig,
    /// How it queues packets.
    pub queue: Discipline,
}

/// Bytes per packet when a buffer limit in packets is turned into bytes
/// (for the classic marking threshold): a full-size Ethernet frame's payload.
pub const MTU: u64 = 1500;

/// A queue length in bytes, packets counted as [`MTU`] bytes.
fn bytes(limit: Limit) -> u64 {
    match limit {
        Limit::Bytes(n) => n,
        Limit::Packets(n) => n.saturating_mul(MTU),
    }
}

/// The router configuration that matches a spec: capacity = the link rate
/// (or [`UNLIMITED_CAPACITY_BPS`]), buffer = the limit, the core's defaults
/// otherwise. A spec with `ecn` gets classic marking forced on every packet
/// (which queues in one FIFO) from that queue length.
pub fn router_config(spec: &LinkSpec) -> RouterConfig {
    let bps = spec.rate.unwrap_or(UNLIMITED_CAPACITY_BPS);
    let mut config = RouterConfig::new(bps as f64 / 8.0, bytes(spec.limit));
    if let Some(threshold) = spec.ecn {
        config.mode = MarkingMode::Forced(WireScheme::CLASSIC);
        config.classic_threshold = bytes(threshold);
    }
    config
}

/// One direction of an emulated link.
pub struct Link<P> {
    spec: LinkSpec,
    /// When the link started (the blackhole schedule's origin).
    start: Duration,
    rng: Rng,
    loss: Strikes,
    corrupt: Strikes,
    bottleneck: Bottleneck<Carried<P>>,
    in_flight: BinaryHeap<Reverse<InFlight<P>>>,
    last_release: Duration,
    seq: u64,
    counters: LinkCounters,
    /// Whether the spec's `restart` has happened.
    restarted: bool,
}

impl<P: LinkPacket> Link<P> {
    /// A link starting at `now`. `router` meters and marks, `queue` says
    /// how packets wait unless the spec names a queue; `seed` drives loss,
    /// corruption, jitter, reordering, duplication and the AQM's draws.
    pub fn new(
        spec: LinkSpec,
        router: RouterConfig,
        queue: Discipline,
        seed: u64,
        now: Duration,
    ) -> Link<P> {
        let limit = match spec.limit {
            Limit::Packets(n) => QueueLimit::Packets(n),
            Limit::Bytes(n) => QueueLimit::Bytes(n),
        };
        let bottleneck = Bottleneck::new(
            BottleneckConfig {
                rate: spec.link_rate(),
                capacity: spec.capacity_source(),
                limit,
                discipline: spec.queue.unwrap_or(queue),
                router,
                seed,
            },
            now,
        );
        Link {
            start: now,
            rng: Rng(seed),
            loss: Strikes::new(spec.loss),
            corrupt: Strikes::new(spec.corrupt),
            spec,
            bottleneck,
            in_flight: BinaryHeap::new(),
            last_release: now,
            seq: 0,
            counters: LinkCounters::default(),
            restarted: false,
        }
    }

    /// Offers a packet to the link at `now`. Returns why it was dropped, if
    /// it was (a duplicate's fate is not reported).
    pub fn enqueue(&mut self, now: Duration, packet: P) -> Result<(), DropCause> {
        self.serialize_until(now);
        if !self.restarted
            && self
                .spec
                .restart
                .is_some_and(|at| now.saturating_sub(self.start) >= at)
        {
            self.restarted = true;
            self.bottleneck.restart_router(now);
        }
        if self.rng.chance(self.spec.duplicate) {
            self.counters.duplicates += 1;
            // The copy follows the original; it is dropped or queued on its own.
            let copy = packet.clone();
            let outcome = self.admit(now, packet);
            let _ = self.admit(now, copy);
            return outcome;
        }
        self.admit(now, packet)
    }

    fn admit(&mut self, now: Duration, mut packet: P) -> Result<(), DropCause> {
        let len = packet.wire_len();
        self.counters.arrivals += 1;
        self.counters.arrival_bytes += u64::from(len);
        if let Err(reason) = packet.marks() {
            self.counters.passed.count(reason);
        }
        let dark = self
            .spec
            .blackhole
            .is_some_and(|b| b.is_dark(now.saturating_sub(self.start)));
        let cause = if dark {
            Some(DropCause::Blackhole)
        } else if self.loss.next(&mut self.rng) {
            Some(DropCause::Loss)
        } else {
            None
        };
        if let Some(cause) = cause {
            // Lost before the queue: still load its class's meter counts.
            let marks = packet.marks().ok();
            self.bottleneck.lost_on_arrival(now, len, marks.as_ref());
            self.counters.drop(cause);
            return Err(cause);
        }
        if self.corrupt.next(&mut self.rng) && packet.corrupt(Corruption::draw(&mut self.rng)) {
            self.counters.corrupted += 1;
        }
        let offered = self.bottleneck.offer(now, Carried(packet));
        self.count_drops();
        let cause = match offered {
            Ok(()) => return Ok(()),
            Err((why, _)) => DropCause::from(why),
        };
        self.counters.drop(cause);
        Err(cause)
    }

    /// Counts the packets the bottleneck dropped after queueing them.
    fn count_drops(&mut self) {
        for (why, _) in self.bottleneck.take_drops() {
            self.counters.drop(DropCause::from(why));
        }
    }

    /// Moves every packet whose serialization ended by `now` onto the wire.
    fn serialize_until(&mut self, now: Duration) {
        while let Some((departure, Carried(packet))) = self.bottleneck.depart(now) {
            self.count_drops();
            let release = if self.rng.chance(self.spec.reorder) {
                self.counters.reordered += 1;
                departure
            } else {
                let release = (departure + self.spec.delay + self.jitter_offset())
                    .saturating_sub(self.jitter_floor())
                    .max(self.last_release);
                self.last_release = release;
                release
            };
            self.seq += 1;
            self.in_flight.push(Reverse(InFlight {
                release,
                seq: self.seq,
                packet,
            }));
        }
    }

    /// Jitter is uniform in ±jitter, drawn as `[0, 2·jitter)` then shifted
    /// back by [`Self::jitter_floor`], never below zero delay.
    fn jitter_offset(&mut self) -> Duration {
        if self.spec.jitter.is_zero() {
            return Duration::ZERO;
        }
        self.spec.jitter.mul_f64(2.0 * self.rng.unit())
    }

    fn jitter_floor(&self) -> Duration {
        self.spec.jitter.min(self.spec.delay)
    }

    /// The next packet released by `now`, if any.
    pub fn dequeue(&mut self, now: Duration) -> Option<P> {
        self.serialize_until(now);
        if self.in_flight.peek()?.0.release > now {
            return None;
        }
        let Reverse(InFlight { packet, .. }) = self.in_flight.pop()?;
        self.counters.departures += 1;
        self.counters.departure_bytes += u64::from(packet.wire_len());
        Some(packet)
    }

    /// When the link next has something to do (a departure or a release).
    pub fn next_wakeup(&self) -> Option<Duration> {
        let serialized = self.bottleneck.next_departure();
        let released = self.in_flight.peek().map(|f| f.0.release);
        match (serialized, released) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Bytes the link could carry from its start to `now`: the capacity in
    /// force, not the router's figure ([`Bottleneck::capacity_bytes`]);
    /// `None` for a link with no rate.
    pub fn capacity_bytes(&self, now: Duration) -> Option<f64> {
        self.bottleneck.capacity_bytes(self.start, now)
    }

    /// The queue waiting for serialization, in bytes.
    pub fn queue_bytes(&self) -> u64 {
        self.bottleneck.queue_bytes()
    }

    /// The queue waiting for serialization, in packets.
    pub fn queue_packets(&self) -> usize {
        self.bottleneck.queue_packets()
    }

    /// The queues, their classes and counters.
    pub fn bottleneck(&self) -> &Bottleneck<impl Queued> {
        &self.bottleneck
    }

    /// Counters.
    pub fn counters(&self) -> &LinkCounters {
        &self.counters
    }

    /// The router (meter, marks).
    pub fn router(&self) -> &RouterLink {
        self.bottleneck.router()
    }

    /// Nobody watched the link from `from` to `to` (the link's thread
    /// stalled): the router's meter disregards that time
    /// ([`Bottleneck::disregard`]).
    pub fn disregard(&mut self, from: Duration, to: Duration) {
        self.bottleneck.disregard(from, to);
    }

    /// Closes the router's measurement intervals up to `now`, so that an
    /// idle link's figures are current ([`Bottleneck::advance`]).
    pub fn advance(&mut self, now: Duration) {
        self.bottleneck.advance(now);
    }

    /// The spec this link emulates.
    pub fn spec(&self) -> &LinkSpec {
        &self.spec
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::link::CORRUPT_SPAN;
    use ecnq::router::bottleneck::Class;
    use ecnq::{Ecn, Scheme, SchemeTag};

    /// A test packet: a size, an id, VCP-tagged marks and a UDP payload.
    #[derive(Clone, Debug, PartialEq)]
    pub(crate) struct Pkt {
        len: u32,
        id: u64,
        marks: PacketMarks,
        payload: Vec<u8>,
    }

    impl LinkPacket for Pkt {
        fn wire_len(&self) -> u32 {
            self.len
        }
        fn marks(&self) -> Result<PacketMarks, PassReason> {
            Ok(self.marks)
        }
        fn set_marks(&mut self, marks: &PacketMarks) {
            self.marks = *marks;
        }
        fn corrupt(&mut self, hit: Corruption) -> bool {
            hit.apply(&mut self.payload).is_some()
        }
    }

    pub(crate) fn pkt(id: u64, len: u32) -> Pkt {
        Pkt {
            len,
            id,
            marks: PacketMarks {
                ecn: Ecn::Ect1,
                tag: SchemeTag::new(1),
                hash: id as u32,
                flow: 7,
            },
            payload: vec![0x40; 72],
        }
    }

    /// Offers `n` packets 1 ms apart from `start` and returns, per packet,
    /// whether it was dropped for `cause`.
    fn fates(l: &mut Link<Pkt>, start: Duration, n: u64, cause: DropCause) -> Vec<bool> {
        (0..n)
            .map(|i| {
                let at = start + Duration::from_millis(i);
                let fate = l.enqueue(at, pkt(i, 100));
                while l.dequeue(at).is_some() {}
                fate == Err(cause)
            })
            .collect()
    }

    /// Lengths of the runs of `true`.
    fn run_lengths(hits: &[bool]) -> Vec<usize> {
        hits.split(|h| !h)
            .map(<[bool]>::len)
            .filter(|&n| n > 0)
            .collect()
    }

    pub(crate) fn link(spec: &str) -> Link<Pkt> {
        let spec: LinkSpec = spec.parse().unwrap();
        Link::new(
            spec.clone(),
            router_config(&spec),
            Discipline::Fifo,
            1,
            Duration::ZERO,
        )
    }

    #[test]
    fn a_spec_that_names_its_queue_overrides_the_default() {
        assert_eq!(
            link("rate 1mbit").bottleneck().discipline(),
            Discipline::Fifo
        );
        for (words, queue) in [
            ("rate 1mbit queue dualpi2", Discipline::DualPi2),
            ("rate 1mbit queue dual", Discipline::Dual),
        ] {
            assert_eq!(link(words).bottleneck().discipline(), queue, "{words}");
        }
    }

    /// `restart T`: T after the link starts, its router starts afresh, as a
    /// new one would, while the link carries on.
    #[test]
    fn a_restart_spec_restarts_the_router_on_time() {
        const SPEC: &str = "rate 8mbit limit 100";
        // Two erc flows, one packet each every 2 ms (nothing waits), whose
        // digits the router writes from the share it computes; the second
        // ends as the router restarts, so a router that remembers it halves
        // the first one's share for a while.
        let marks = |l: &mut Link<Pkt>, from: u64, to: u64| -> Vec<Ecn> {
            let mut out = Vec::new();
            for t in (from..to).filter(|&t| t % 2 == 0 || t < 2_000) {
                let now = Duration::from_millis(t);
                let mut p = pkt(t, 300);
                p.marks.ecn = Ecn::Ect0;
                p.marks.tag = SchemeTag::new(ecnq::schemes::erc::WIRE.id());
                p.marks.flow = 7 + t % 2;
                l.enqueue(now, p).unwrap();
                while let Some(p) = l.dequeue(now) {
                    out.push(p.marks.ecn);
                }
            }
            let end = Duration::from_millis(to);
            while let Some(p) = l.dequeue(end) {
                out.push(p.marks.ecn);
            }
            out
        };
        let mut restarted = link(&format!("{SPEC} restart 2s"));
        let mut kept = link(SPEC);
        let before = marks(&mut restarted, 0, 2_000);
        assert_eq!(before, marks(&mut kept, 0, 2_000));
        let spec: LinkSpec = SPEC.parse().unwrap();
        let start = Duration::from_secs(2);
        let mut fresh = Link::new(
            spec.clone(),
            router_config(&spec),
            Discipline::Fifo,
            1,
            start,
        );
        let after = marks(&mut restarted, 2_000, 4_000);
        assert!(after == marks(&mut fresh, 2_000, 4_000), "as a new router");
        assert!(
            after != marks(&mut kept, 2_000, 4_000),
            "not as the old one"
        );
    }

    /// `ecn N` is a classic RFC 3168 ECN AQM: one FIFO whose router marks
    /// every ECT packet CE, whatever its tag, while N packets or more wait.
    #[test]
    fn an_ecn_spec_marks_ect_packets_beyond_its_queue_length() {
        let mut l = link("rate 1mbit limit 100 ecn 3 queue fifo");
        assert_eq!(l.bottleneck().discipline(), Discipline::Fifo);
        let router = router_config(l.spec());
        assert_eq!(router.mode, MarkingMode::Forced(WireScheme::CLASSIC));
        assert_eq!(router.classic_threshold, 3 * MTU);
        let bytes = router_config(&"limit 250kb ecn 30kb".parse().unwrap());
        assert_eq!(bytes.classic_threshold, 30 * 1024);
        // Ten full-size packets at once, every other one Not-ECT, never
        // marked: the third arrives with at most two waiting, the fifth with
        // at least three (4500 bytes).
        for i in 0..10 {
            let mut p = pkt(i, MTU as u32);
            if i % 2 == 1 {
                p.marks.ecn = Ecn::NotEct;
            }
            l.enqueue(Duration::ZERO, p).unwrap();
        }
        let out: Vec<Pkt> = drain(&mut l).into_iter().map(|(_, p)| p).collect();
        let ecn: Vec<Ecn> = out.iter().map(|p| p.marks.ecn).collect();
        let (ect, not) = (Ecn::Ect1, Ecn::NotEct);
        assert_eq!(
            ecn,
            [ect, not, ect, not, Ecn::Ce, not, Ecn::Ce, not, Ecn::Ce, not]
        );
        assert!(
            out.iter().all(|p| p.marks.tag == SchemeTag::new(1)),
            "tags untouched: no ecnq router on the path"
        );
    }

    /// Drains everything, returning (release time, packet).
    fn drain(link: &mut Link<Pkt>) -> Vec<(Duration, Pkt)> {
        let mut out = Vec::new();
        while let Some(t) = link.next_wakeup() {
            while let Some(p) = link.dequeue(t) {
                out.push((t, p));
            }
        }
        out
    }

    #[test]
    fn rate_is_exact_in_virtual_time() {
        for (spec, rate) in [
            ("rate 10mbit limit 100000", 10e6),
            ("rate 100mbit limit 100000", 100e6),
        ] {
            let mut l = link(spec);
            // 10 000 packets of 1234 bytes offered at once; 1234·8 bits at
            // these rates are not a whole number of nanoseconds.
            for i in 0..10_000 {
                l.enqueue(Duration::ZERO, pkt(i, 1234)).unwrap();
            }
            let out = drain(&mut l);
            assert_eq!(out.len(), 10_000);
            let last = out.last().unwrap().0.as_secs_f64();
            let expect = 10_000.0 * 1234.0 * 8.0 / rate;
            // Exact to the nanosecond, not merely to 2 %.
            assert!((last - expect).abs() < 1e-9, "{spec}: {last} vs {expect}");
            assert!(out.windows(2).all(|w| w[0].1.id < w[1].1.id), "FIFO");
        }
    }

    /// Every packet that leaves a queue has its sojourn counted in that
    /// queue's histogram: ten 1 ms packets offered at once wait 0 to 9 ms.
    #[test]
    fn departures_are_counted_in_their_queue_sojourn_histogram() {
        let mut l = link("rate 1mbit limit 1000");
        for i in 0..10 {
            l.enqueue(Duration::ZERO, pkt(i, 125)).unwrap(); // 1 ms each
        }
        assert!(l.bottleneck().sojourns(Class::Ecnq).is_empty());
        assert_eq!(drain(&mut l).len(), 10);
        let waits = l.bottleneck().sojourns(Class::Ecnq);
        let expect: Vec<u64> = (0..91).map(|b| u64::from(b % 10 == 0)).collect();
        assert_eq!(waits.buckets(), &expect[..]);
        assert_eq!(
            waits.count(),
            l.bottleneck().counters(Class::Ecnq).departures
        );
        assert_eq!(waits.percentile_ms(50.0), Some(4.1));
        assert_eq!(waits.percentile_ms(100.0), Some(9.1));
        assert!(l.bottleneck().sojourns(Class::Classic).is_empty());
    }

    #[test]
    fn late_polls_do_not_drift() {
        // Every poll comes 2.5 ms after the wake-up asked for. Late polls
        // change when packets are handed out, never the schedule: at every
        // poll time T exactly ⌊T / 1 ms⌋ packets have been released.
        let mut l = link("rate 1mbit limit 1000");
        for i in 0..100 {
            l.enqueue(Duration::ZERO, pkt(i, 125)).unwrap(); // 1 ms each
        }
        let mut released = 0u128;
        let mut polls = 0;
        while let Some(t) = l.next_wakeup() {
            let late = t + Duration::from_micros(2500);
            while l.dequeue(late).is_some() {
                released += 1;
            }
            polls += 1;
            let due = (late.as_micros() / 1000).min(100);
            assert_eq!(released, due, "at {late:?}");
        }
        assert_eq!(released, 100);
        assert!(polls < 100, "late polls batch releases: {polls}");
        assert_eq!(l.router().meter().queue_bytes(), 0);
    }

    #[test]
    fn drop_tail_in_packets_and_bytes() {
        // The limit counts waiting packets, not the one being sent (as in
        // the simulator: one link model).
        let mut l = link("rate 1mbit limit 3");
        let results: Vec<_> = (0..6)
            .map(|i| l.enqueue(Duration::ZERO, pkt(i, 100)))
            .collect();
        assert_eq!(results[..4], [Ok(()), Ok(()), Ok(()), Ok(())]);
        assert_eq!(
            results[4..],
            [Err(DropCause::Overflow), Err(DropCause::Overflow)]
        );
        assert_eq!(l.counters().drops_overflow, 2);
        assert_eq!(l.counters().arrivals, 6);
        let mut l = link("rate 1mbit limit 250b");
        for i in 0..3 {
            assert!(l.enqueue(Duration::ZERO, pkt(i, 100)).is_ok());
        }
        assert_eq!(
            l.enqueue(Duration::ZERO, pkt(3, 100)),
            Err(DropCause::Overflow)
        );
        assert_eq!(l.queue_bytes(), 200);
        // Once the first has left (0.8 ms at 1 Mbit/s) there is room again.
        assert!(l.enqueue(Duration::from_micros(800), pkt(4, 100)).is_ok());
        assert_eq!(l.queue_packets(), 2);
    }

    #[test]
    fn propagation_delay_is_added() {
        let mut l = link("rate 8mbit delay 20ms");
        l.enqueue(Duration::from_millis(5), pkt(0, 1000)).unwrap(); // 1 ms to serialize
        assert_eq!(l.next_wakeup(), Some(Duration::from_millis(6)));
        assert_eq!(
            l.dequeue(Duration::from_millis(6)),
            None,
            "still propagating"
        );
        assert_eq!(l.next_wakeup(), Some(Duration::from_millis(26)));
        assert!(l.dequeue(Duration::from_millis(26)).is_some());
        assert_eq!(l.next_wakeup(), None);
    }

    #[test]
    fn jitter_stays_in_bounds_and_keeps_order() {
        let mut l = link("delay 10ms 2ms limit 100000");
        for i in 0..2000 {
            l.enqueue(Duration::from_micros(500 * i), pkt(i, 100))
                .unwrap();
        }
        let out = drain(&mut l);
        assert!(out.windows(2).all(|w| w[0].1.id < w[1].1.id), "order kept");
        let delays: Vec<f64> = out
            .iter()
            .map(|(t, p)| (t.as_secs_f64() - p.id as f64 * 500e-6) * 1e3)
            .collect();
        let min = delays.iter().cloned().fold(f64::MAX, f64::min);
        let max = delays.iter().cloned().fold(0.0, f64::max);
        assert!(min >= 8.0 - 1e-9 && max <= 12.0 + 0.5, "{min}..{max}");
        assert!(
            min < 8.5 && max > 11.5,
            "jitter spans its range: {min}..{max}"
        );
    }

    #[test]
    fn loss_duplicate_and_reorder_rates() {
        let n = 20_000;
        let mut l = link("delay 10ms loss 10% duplicate 5% reorder 20% limit 100000");
        for i in 0..n {
            let _ = l.enqueue(Duration::from_micros(100 * i), pkt(i, 100));
        }
        let out = drain(&mut l);
        let c = *l.counters();
        let frac = |x: u64| x as f64 / n as f64;
        assert!((frac(c.drops_loss) - 0.105).abs() < 0.01, "{c:?}");
        assert!((frac(c.duplicates) - 0.05).abs() < 0.01, "{c:?}");
        assert!(
            (c.reordered as f64 / c.departures as f64 - 0.2).abs() < 0.02,
            "{c:?}"
        );
        assert_eq!(out.len() as u64, c.departures);
        assert_eq!(c.arrivals, n + c.duplicates);
        assert!(
            out.windows(2).any(|w| w[0].1.id > w[1].1.id),
            "some reordering"
        );
    }

    #[test]
    fn capped_random_loss_as_the_interop_runner() {
        // The runner's drop-rate with --rate=30 --burst=3: 30 % per packet,
        // a packet spared after 4 in a row.
        let mut l = link("loss 30% maxrun 4 limit 1000000");
        let n = 200_000;
        let lost = fates(&mut l, Duration::ZERO, n, DropCause::Loss);
        let rate = lost.iter().filter(|&&x| x).count() as f64 / n as f64;
        let want = l.spec().loss.mean_rate();
        assert!((want - 0.2983).abs() < 1e-4, "closed form {want}");
        assert!(
            (rate - want).abs() < 0.005,
            "measured {rate}, expected {want}"
        );
        let runs = run_lengths(&lost);
        let count = |k: usize| runs.iter().filter(|&&r| r == k).count() as f64 / runs.len() as f64;
        // Run lengths are geometric (ratio 0.3) truncated at 4.
        for (k, expect) in [(1, 0.7), (2, 0.21), (3, 0.063), (4, 0.027)] {
            assert!(
                (count(k) - expect).abs() < 0.01,
                "runs of {k}: {} vs {expect}",
                count(k)
            );
        }
        assert_eq!(runs.iter().max(), Some(&4));
        assert_eq!(l.counters().drops_loss as usize, runs.iter().sum::<usize>());
    }

    #[test]
    fn gilbert_elliott_loss_comes_in_bursts() {
        // Good → bad 2 %, bad → good 25 %, loss only in the bad state: 7.4 %
        // of packets lost, in bursts of 1/r = 4 on average.
        let mut l = link("loss gemodel 2% 25% limit 1000000");
        let n = 400_000;
        let lost = fates(&mut l, Duration::ZERO, n, DropCause::Loss);
        let rate = lost.iter().filter(|&&x| x).count() as f64 / n as f64;
        assert!((rate - 0.02 / 0.27).abs() < 0.005, "loss {rate}");
        let runs = run_lengths(&lost);
        let mean = runs.iter().sum::<usize>() as f64 / runs.len() as f64;
        assert!((mean - 4.0).abs() < 0.2, "mean burst {mean}");
        let single = runs.iter().filter(|&&r| r == 1).count() as f64 / runs.len() as f64;
        assert!((single - 0.25).abs() < 0.02, "bursts of one {single}");
        // Random loss of the same rate has bursts of 1.08 on average.
        let mut random = link("loss 7.4% limit 1000000");
        let random_runs = run_lengths(&fates(&mut random, Duration::ZERO, n, DropCause::Loss));
        let random_mean = random_runs.iter().sum::<usize>() as f64 / random_runs.len() as f64;
        assert!(random_mean < 1.2, "{random_mean}");
    }

    #[test]
    fn corruption_rate_and_bytes() {
        let mut l = link("corrupt 10% limit 1000000");
        let n = 50_000;
        for i in 0..n {
            l.enqueue(Duration::from_micros(i), pkt(i, 100)).unwrap();
        }
        let out = drain(&mut l);
        assert_eq!(out.len() as u64, n, "corrupted packets are delivered");
        let clean = pkt(0, 100).payload;
        let mut corrupted = 0;
        let mut positions = [0u32; CORRUPT_SPAN];
        for (_, p) in &out {
            let changed: Vec<usize> = (0..clean.len())
                .filter(|&i| p.payload[i] != clean[i])
                .collect();
            match changed[..] {
                [] => {}
                [i] => {
                    corrupted += 1;
                    positions[i] += 1;
                }
                _ => panic!("more than one byte changed: {changed:?}"),
            }
        }
        assert_eq!(corrupted, l.counters().corrupted);
        let rate = corrupted as f64 / n as f64;
        assert!((rate - 0.1).abs() < 0.005, "corrupted {rate}");
        // Uniform over the first CORRUPT_SPAN bytes (≈ 98 each).
        let expect = corrupted as f64 / CORRUPT_SPAN as f64;
        assert!(
            positions
                .iter()
                .all(|&c| (f64::from(c) - expect).abs() < 0.4 * expect),
            "{positions:?}"
        );
    }

    #[test]
    fn blackhole_follows_its_schedule() {
        // Up 5 s, down 2 s, once, from when the link started (t = 3 s here).
        let start = Duration::from_secs(3);
        for (words, outages) in [
            ("blackhole 5s 2s 1", vec![(5_000, 7_000)]),
            (
                "blackhole 5s 2s",
                vec![(5_000, 7_000), (12_000, 14_000), (19_000, 20_000)],
            ),
        ] {
            let spec: LinkSpec = words.parse().unwrap();
            let mut l: Link<Pkt> = Link::new(
                spec.clone(),
                router_config(&spec),
                Discipline::Fifo,
                1,
                start,
            );
            let dropped = fates(&mut l, start, 20_000, DropCause::Blackhole);
            for (ms, &d) in dropped.iter().enumerate() {
                let dark = outages.iter().any(|&(a, b)| (a..b).contains(&ms));
                assert_eq!(d, dark, "{words}: packet at {ms} ms");
            }
            let total: usize = outages.iter().map(|(a, b)| b - a).sum();
            assert_eq!(l.counters().drops_blackhole as usize, total);
            assert_eq!(l.counters().departures as usize, 20_000 - total);
        }
    }

    #[test]
    fn overload_is_marked_at_enqueue() {
        // 2 Mbit/s offered to a 1 Mbit/s link for 1 s: after the first
        // interval the VCP marker sees ρ ≥ 1 and stamps 11.
        let mut l = link("rate 1mbit limit 1000");
        let mut released = Vec::new();
        for i in 0..2000u64 {
            let now = Duration::from_micros(500 * i);
            let _ = l.enqueue(now, pkt(i, 125));
            while let Some(p) = l.dequeue(now) {
                released.push(p);
            }
        }
        released.extend(drain(&mut l).into_iter().map(|(_, p)| p));
        let late = released.iter().filter(|p| p.id > 600);
        assert!(late.clone().count() > 100);
        assert!(late.clone().all(|p| p.marks.ecn == Ecn::Ce));
        let early = released.iter().filter(|p| p.id < 300);
        assert!(
            early.clone().all(|p| p.marks.ecn == Ecn::Ect1),
            "no load measured yet"
        );
        assert!(l.router().counters().get(Scheme::Vcp.wire(), Ecn::Ce) > 100);
    }
}
