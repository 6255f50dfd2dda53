//! The bottleneck of an output link, sans-IO: its queues, the scheduler
//! between them, the AQMs, the router's meter and marker, and
//! serialization at the link rate (docs/design.md §4, "Dual-queue
//! bottleneck"). The simulator drives it with its virtual clock and the
//! shim with the real one, so both run the same link.
//!
//! Three disciplines:
//! * [`Discipline::Dual`] (the default): packets with an ecnq scheme tag
//!   wait in their own queue, metered and marked against that queue's
//!   share of the capacity; L4S traffic (untagged ECT(1) and CE, and the
//!   schemes the registry marks as L4S senders, Prague) waits in a short
//!   queue CE-marked beyond 1 ms of the link's capacity, as an L4S
//!   router's native AQM does (RFC 9332); everything else waits in a
//!   classic queue under CoDel (RFC 8289: CE for ECT packets, drop for
//!   Not-ECT), where a light flow's few packets go ahead of the standing
//!   queue, and overflow and CoDel's signals are taken from the flow with
//!   the most bytes waiting, as in FQ-CoDel (RFC 8290). The scheduler
//!   splits the capacity by the number of flows active in each class, so
//!   a flow's share is the same in every class, and Cubic's standing
//!   queue never sits in front of ecnq's or L4S packets. The ecnq queue's
//!   routers are told its flows' max-min share, in which a light classic
//!   or L4S flow (an SSH session, a web transfer in its slow start) keeps
//!   about what it sends, and the scheduler's weights give the ecnq queue
//!   that share. Within its equal split (plus 5 ms of the link) the ecnq
//!   queue goes first, so a paced flow's bursts leave at the link's rate
//!   (`EcnqAllowance`). A flow of the ecnq queue that keeps sending well
//!   over its fair share is held to it ([`crate::router::policer`]).
//! * [`Discipline::Fifo`]: one drop-tail queue metered and marked as a
//!   whole, as in the papers' experiments.
//! * [`Discipline::DualPi2`]: an L4S bottleneck that knows nothing of ecnq
//!   (RFC 9332): ECT(1) and CE packets in a low-latency queue, CE-marked
//!   from a 1 ms sojourn or with the coupled probability k·p'; the rest in
//!   a classic queue under PI2 (CE or drop with p'²); a time-shifted FIFO
//!   between them. What ecnq flows meet at an L4S network's bottleneck.
//!   Its update rule and gains are Linux `sch_dualpi2`'s (`Pi2` lists the
//!   differences). With one Cubic-with-ECN flow beside one Prague flow,
//!   p' swings with Cubic's sawtooth, so Cubic gets less than the 0.9× of
//!   Prague that RFC 9332 §2.1's steady-state windows give
//!   (sim/REPRODUCTION.md, "L4S").
//!
//! Departure times are exact: a packet starts when the one before it ends,
//! and `len · 8 / rate` keeps its sub-nanosecond remainder, so a caller that
//! looks late delays nothing after it.
//!
//! The files, one mechanism each, with its tests: this one holds the types
//! and the entry points ([`Bottleneck::offer`], [`Bottleneck::depart`]),
//! tested in `tests`; `scheduler` picks the class to serve, `share` keeps
//! the ecnq queue's share, weights and allowance, `flows` counts the
//! active and light flows, `by_flow` keeps each flow's waiting bytes
//! (overflow, the sparse section), `codel` and `pi2` are the AQMs,
//! `stall` clears the ecnq queue of a flight a stalled link held;
//! `test_support` has what the tests share.

use std::collections::VecDeque;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::router::capacity::{CapacitySource, DrainRate, LinkRate, Serializer};
use crate::router::policer::Policer;
use crate::router::{MarkingMode, RouterConfig, RouterLink};
use crate::signal::PacketMarks;
use crate::statistics::SojournHistogram;
use crate::wire::ecn::{Ecn, WireScheme};

use by_flow::{FlowWaiting, Waits};
use codel::Codel;
use flows::ActiveFlows;
use pi2::Pi2;
use share::EcnqAllowance;

mod by_flow;
mod codel;
mod flows;
mod pi2;
mod scheduler;
mod share;
mod stall;
#[cfg(test)]
mod test_support;
#[cfg(test)]
mod tests;

/// How the bottleneck queues packets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Discipline {
    /// ecnq-tagged packets in their own queue, the rest under CoDel.
    #[default]
    Dual,
    /// One drop-tail queue for everyone.
    Fifo,
    /// An L4S DualPI2 bottleneck with no ecnq marking.
    DualPi2,
}

impl FromStr for Discipline {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim().to_ascii_lowercase().as_str() {
            "dual" => Ok(Discipline::Dual),
            "fifo" => Ok(Discipline::Fifo),
            "dualpi2" => Ok(Discipline::DualPi2),
            _ => Err(format!(
                "unknown queue discipline `{s}` (expected dual, fifo or dualpi2)"
            )),
        }
    }
}

impl fmt::Display for Discipline {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Discipline::Dual => "dual",
            Discipline::Fifo => "fifo",
            Discipline::DualPi2 => "dualpi2",
        })
    }
}

/// A queue's size limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QueueLimit {
    /// At most this many waiting packets.
    Packets(u64),
    /// At most this many waiting bytes.
    Bytes(u64),
}

/// How a bottleneck is built.
#[derive(Clone, Debug, PartialEq)]
pub struct BottleneckConfig {
    /// The link's capacity over time (a fixed rate, a schedule, a trace);
    /// `None` serializes instantly.
    pub rate: Option<LinkRate>,
    /// Where the router takes the capacity it meters against: the rate
    /// configured (the meter's capacity, a schedule's rate in force), or
    /// what the link drains ([`DrainRate`]).
    pub capacity: CapacitySource,
    /// Each queue's limit.
    pub limit: QueueLimit,
    /// How packets are queued.
    pub discipline: Discipline,
    /// The router's meter and marking.
    pub router: RouterConfig,
    /// Seeds the AQM's random draws (DualPI2's marks and drops), so that
    /// runs with different seeds meet different draws.
    pub seed: u64,
}

/// What the bottleneck needs of a packet.
pub trait Queued {
    /// Size on the wire in bytes (IP header included).
    fn wire_len(&self) -> u32;
    /// The marks a router may rewrite; `None` for packets it cannot (not UDP).
    fn marks(&self) -> Option<PacketMarks>;
    /// Stores rewritten marks.
    fn set_marks(&mut self, marks: &PacketMarks);
}

/// The queues of a bottleneck.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// ecnq-tagged traffic (every packet, under [`Discipline::Fifo`]).
    Ecnq = 0,
    /// Everything else.
    Classic = 1,
    /// L4S traffic: ECT(1) and CE, and the registry's L4S senders (tagged
    /// Prague) under [`Discipline::Dual`].
    L4s = 2,
}

impl Class {
    /// Every class, in index order.
    pub const ALL: [Class; CLASSES] = [Class::Ecnq, Class::Classic, Class::L4s];

    /// The queue's name in stats and metrics.
    pub const fn name(self) -> &'static str {
        match self {
            Class::Ecnq => "ecnq",
            Class::Classic => "classic",
            Class::L4s => "l4s",
        }
    }
}

/// How many queues a bottleneck has.
pub const CLASSES: usize = 3;

/// Why the bottleneck dropped a packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Dropped {
    /// Its queue was full: the arriving packet, or a heavier flow's packet
    /// pushed out for it.
    Overflow,
    /// CoDel dropped a Not-ECT packet of the classic queue.
    Aqm,
    /// The policer dropped an over-share flow's excess in the ecnq queue.
    Policed,
}

/// Per-class counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassCounters {
    /// Packets offered.
    pub arrivals: u64,
    /// Packets that left the link.
    pub departures: u64,
    /// Bytes that left the link.
    pub departure_bytes: u64,
    /// Packets dropped because the queue was full.
    pub overflow: u64,
    /// Packets CoDel dropped.
    pub aqm_drops: u64,
    /// Packets CoDel marked CE.
    pub aqm_marks: u64,
    /// Packets the policer dropped.
    pub policed: u64,
    /// The departed packets' sojourns added up, ns (see
    /// [`Departure::sojourn`]): over a span, its growth over the growth of
    /// `departures` is the mean wait, whatever share of the link the class
    /// was served at.
    pub sojourn_ns: u64,
}

struct Waiting<P> {
    since: Duration,
    /// Whether another packet of its queue waited when it came (not the
    /// one in service): only such a packet meets the L4S step, so that a
    /// packet longer than the step at a slow link is not marked for
    /// itself (Linux `sch_dualpi2`'s `apply_step`).
    queued_behind: bool,
    class: Class,
    /// Its flow (0 for a packet the router cannot read).
    flow: u64,
    /// Whether it waits in the classic queue's sparse section
    /// ([`Bottleneck::sparse_place`]).
    sparse: bool,
    packet: P,
}

/// A packet that left the link, with what its wait was (see
/// [`Bottleneck::depart_timed`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Departure<P> {
    /// When its serialization ended.
    pub end: Duration,
    /// The queue it waited in.
    pub class: Class,
    /// How long it waited: from its arrival to the start of its
    /// serialization (its own transmission time not included, as CoDel and
    /// PI2 count it). In a dual queue this includes the other classes'
    /// turns, which a queue length at the link's rate does not.
    pub sojourn: Duration,
    /// The packet.
    pub packet: P,
}

/// One output link's queues and serialization (see the module docs).
pub struct Bottleneck<P> {
    serializer: Serializer,
    limit: QueueLimit,
    discipline: Discipline,
    /// The capacity the router meters against, bytes per second.
    capacity: f64,
    source: CapacitySource,
    /// With a measured capacity, what the link drains.
    drain: Option<DrainRate>,
    /// With a configured schedule, the rate the router was last told.
    told: Option<u64>,
    /// When the link started: a schedule's and a trace's time zero.
    origin: Duration,
    router: RouterLink,
    queues: [VecDeque<Waiting<P>>; CLASSES],
    bytes: [u64; CLASSES],
    /// Each class's waiting bytes by flow, for [`Bottleneck::make_room`],
    /// [`Bottleneck::sparse_place`] and the light flows.
    flow_bytes: Waits,
    /// Each class's fattest flow, about, and its bytes waiting: the last
    /// to arrive with more bytes waiting than the one before held. A flow
    /// that stops arriving drains; the one that keeps the queue full keeps
    /// arriving.
    fattest: [(u64, u64); CLASSES],
    /// How many packets at the head of the classic queue are its sparse
    /// section.
    sparse: usize,
    /// Bytes served per unit of weight: the scheduler serves the class
    /// that is furthest behind.
    served: [f64; CLASSES],
    /// How far the ecnq queue may go ahead of the other classes' turns.
    allowance: EcnqAllowance,
    flows: ActiveFlows,
    policer: Policer,
    codel: Codel,
    stall: stall::StallGuard,
    pi2: Pi2,
    seed: u64,
    /// The packet in service: when it ends, its sojourn, the packet.
    in_service: Option<(Duration, Duration, Waiting<P>)>,
    counters: [ClassCounters; CLASSES],
    /// Each class's departed packets by sojourn, beside the counters so
    /// that those stay `Copy`.
    sojourns: [SojournHistogram; CLASSES],
    /// Packets dropped after they were queued (CoDel's, and those
    /// [`Bottleneck::make_room`] pushed out), with why.
    dropped: Vec<(Dropped, P)>,
    /// The ecnq queue's max-min share of the link, a fraction.
    share: f64,
    /// The share the scheduler's weights keep until a time: a fall in the
    /// share reaches them one measurement interval late.
    held: (f64, Duration),
    /// A small backlog of the classic or L4S queue leaving back to back:
    /// its class and the bytes of it still to go ([`SPARSE_BURST`](scheduler::SPARSE_BURST)).
    burst: Option<(usize, u64)>,
}

impl<P: Queued> Bottleneck<P> {
    /// A bottleneck whose first measurement interval starts at `now`.
    pub fn new(config: BottleneckConfig, now: Duration) -> Bottleneck<P> {
        let capacity = config.router.meter.capacity;
        // Dual queueing needs the tags: a forced or disabled marking is a
        // router that sorts nothing (DualPI2 sorts by ECN alone).
        let discipline = match (config.router.mode, config.discipline) {
            (_, Discipline::DualPi2) | (MarkingMode::Auto, _) => config.discipline,
            _ => Discipline::Fifo,
        };
        let interval = config.router.meter.interval;
        let drain =
            (config.capacity == CapacitySource::Measured).then(|| DrainRate::new(capacity, now));
        Bottleneck {
            serializer: Serializer::new(config.rate, now),
            limit: config.limit,
            discipline,
            capacity,
            source: config.capacity,
            drain,
            told: None,
            origin: now,
            router: RouterLink::new(config.router, now),
            queues: [VecDeque::new(), VecDeque::new(), VecDeque::new()],
            bytes: [0; CLASSES],
            flow_bytes: Default::default(),
            fattest: [(0, 0); CLASSES],
            sparse: 0,
            served: [0.0; CLASSES],
            allowance: EcnqAllowance::new(capacity, now),
            flows: ActiveFlows::new(interval, capacity, now),
            policer: Policer::new(capacity, interval, now),
            codel: Codel::default(),
            stall: stall::StallGuard::default(),
            pi2: Pi2::new(now, config.seed),
            seed: config.seed,
            in_service: None,
            counters: [ClassCounters::default(); CLASSES],
            sojourns: Default::default(),
            dropped: Vec::new(),
            share: 1.0,
            held: (1.0, Duration::ZERO),
            burst: None,
        }
    }

    /// The class a packet with these marks queues in.
    pub fn class_of(&self, marks: Option<&PacketMarks>) -> Class {
        let l4s = |m: &PacketMarks| matches!(m.ecn, Ecn::Ect1 | Ecn::Ce);
        match (self.discipline, marks) {
            (Discipline::Fifo, _) => Class::Ecnq,
            (Discipline::Dual, Some(m)) if m.tag.wire().is_l4s() => Class::L4s,
            (Discipline::Dual, Some(m)) if m.tag.wire().is_ecnq() => Class::Ecnq,
            (_, Some(m)) if l4s(m) => Class::L4s,
            _ => Class::Classic,
        }
    }

    /// Offers a packet at `now`: it is metered, marked and queued, or
    /// handed back with the reason it was dropped.
    pub fn offer(&mut self, now: Duration, packet: P) -> Result<(), (Dropped, P)> {
        self.follow_schedule(now);
        if let Some(capacity) = self.drain.as_mut().and_then(|d| d.advance(now)) {
            self.set_capacity(now, capacity);
        }
        let len = packet.wire_len();
        let marks = packet.marks();
        let class = self.class_of(marks.as_ref());
        if let Some(flow) = marks.map(|m| m.flow) {
            if self.flows.seen(now, flow, class, len, &self.flow_bytes) {
                self.update_share(now);
            }
        }
        let c = class as usize;
        self.counters[c].arrivals += 1;
        let packet = if class == Class::Ecnq {
            self.meter_and_police(now, packet, marks)?
        } else {
            packet
        };
        let flow = marks.map_or(0, |m| m.flow);
        let waits = self.waits_of(class, flow);
        if self.in_service.is_some() && !self.make_room(class, flow, waits.bytes, len) {
            self.counters[c].overflow += 1;
            return Err((Dropped::Overflow, packet));
        }
        if self.queues[c].is_empty() {
            self.flows.drained(class);
            self.level_idle_class(c);
        }
        self.enqueue(now, class, flow, waits, packet);
        if self.in_service.is_none() {
            self.start_next(now);
        }
        Ok(())
    }

    /// The ecnq queue's router meters and marks a packet that came with
    /// `marks` (none if it cannot read them), and under
    /// [`Discipline::Dual`] the policer admits it or hands it back.
    fn meter_and_police(
        &mut self,
        now: Duration,
        mut packet: P,
        marks: Option<PacketMarks>,
    ) -> Result<P, (Dropped, P)> {
        let len = packet.wire_len();
        let mut m = marks.unwrap_or(UNMARKABLE);
        self.router.on_arrival(now, len, &mut m);
        if marks.is_some() {
            packet.set_marks(&m);
        }
        let policed = self.discipline == Discipline::Dual
            && marks.is_some_and(|m| !self.policer.admit(now, m.flow, len));
        if policed {
            self.counters[Class::Ecnq as usize].policed += 1;
            return Err((Dropped::Policed, packet));
        }
        Ok(packet)
    }

    /// Queues a packet of `flow`, which has `waits` waiting in `class`'s
    /// queue: into the classic queue's sparse section or at the tail.
    fn enqueue(&mut self, now: Duration, class: Class, flow: u64, waits: FlowWaiting, packet: P) {
        let c = class as usize;
        let len = packet.wire_len();
        let queued_behind = !self.queues[c].is_empty();
        let sparse = self.sparse_place(now, class, flow, waits, len);
        let waiting = Waiting {
            since: now,
            queued_behind,
            class,
            flow,
            sparse,
            packet,
        };
        if sparse {
            self.queues[c].insert(self.sparse, waiting);
            self.sparse += 1;
        } else {
            self.queues[c].push_back(waiting);
        }
        self.bytes[c] += u64::from(len);
        if self.queues_by_flow(class) {
            self.count_waiting(c, flow, len, sparse);
        }
        if class == Class::Ecnq {
            self.router.on_queue(now, self.bytes[c]);
        }
    }

    /// A packet with `marks` (none if they cannot be read) was lost on its
    /// way into the link at `now` (an emulated loss, an outage): if it
    /// would have queued in the ecnq queue, that queue's meter still
    /// counts it as load, unmarked, as a router counts what reaches it
    /// before its queue. Test: `a_packet_lost_on_its_way_in_loads_the_meter`.
    pub fn lost_on_arrival(&mut self, now: Duration, len: u32, marks: Option<&PacketMarks>) {
        if self.class_of(marks) == Class::Ecnq {
            self.router.on_arrival(now, len, &mut UNMARKABLE.clone());
        }
    }

    /// Nobody watched the link from `from` to `to` (the caller's thread
    /// stalled): the router's meter disregards the intervals it touches
    /// ([`RouterLink::disregard`]).
    pub fn disregard(&mut self, from: Duration, to: Duration) {
        self.router.disregard(from, to);
    }

    /// Closes the router's measurement intervals up to `now`, for a link
    /// that went idle ([`RouterLink::advance`]).
    pub fn advance(&mut self, now: Duration) {
        self.router.advance(now);
    }

    /// The router restarts at `now` (its process, say): the flow tables,
    /// meters, advertised shares, policing and AQM state are lost; the
    /// packets already queued stay, and the counters carry on.
    pub fn restart_router(&mut self, now: Duration) {
        self.router.restart(now);
        let interval = self.router.interval();
        self.flows = ActiveFlows::new(interval, self.capacity, now);
        self.policer = Policer::new(self.capacity, interval, now);
        self.codel = Codel::default();
        self.pi2 = Pi2::new(now, self.seed);
        self.update_share(now);
    }

    /// Puts the next packet into service at `start`; the AQMs' drops at
    /// the heads of the queues happen here.
    fn start_next(&mut self, start: Duration) {
        self.allowance.fill(start);
        loop {
            let Some(class) = self.next_class() else {
                // The link goes idle: no fraction to carry.
                self.serializer.idle();
                return;
            };
            let Some(mut waiting) = self.take_head(start, class) else {
                return;
            };
            let sojourn = start.saturating_sub(waiting.since);
            if self.stalled_flight(class, &waiting, sojourn) {
                self.drop_queued(class, waiting.packet);
                continue;
            }
            let signal = self.aqm_signal(start, class, &waiting, sojourn);
            if signal {
                let Some(marked) = self.mark_or_drop(start, class, waiting) else {
                    continue;
                };
                waiting = marked;
            }
            self.serve(start, class, sojourn, signal, waiting);
            return;
        }
    }

    /// Takes the head of queue `class` out of the queue and its counts, as
    /// it starts at `start`.
    fn take_head(&mut self, start: Duration, class: usize) -> Option<Waiting<P>> {
        let waiting = self.queues[class].pop_front()?;
        if self.queues[class].is_empty() {
            self.flows.drained(waiting.class);
        }
        // The head of a backlog that met an empty queue: the class's
        // first turn since it was empty.
        self.note_burst(class, waiting.packet.wire_len(), !waiting.queued_behind);
        self.forget(class, &waiting);
        if waiting.class == Class::Ecnq {
            self.router.on_queue(start, self.bytes[class]);
        }
        Some(waiting)
    }

    /// Whether its queue's AQM marks or drops `waiting`, the head of queue
    /// `class`, which starts at `start` after waiting `sojourn`.
    fn aqm_signal(
        &mut self,
        start: Duration,
        class: usize,
        waiting: &Waiting<P>,
        sojourn: Duration,
    ) -> bool {
        match (self.discipline, waiting.class) {
            (Discipline::DualPi2, _) => self.pi2_signal(start, waiting, sojourn),
            // A sparse packet's short wait must not end CoDel's
            // dropping state for the backlog behind it: per-flow CoDel
            // in FQ-CoDel never sees it either.
            (_, Class::Classic) if waiting.sparse => false,
            (_, Class::Classic) => {
                let codel = self.codel.signal(start, sojourn, self.bytes[class]);
                self.classic_signal(waiting.flow, codel)
            }
            (_, Class::L4s) => self.l4s_step(class, waiting),
            (_, Class::Ecnq) => false,
        }
    }

    /// Carries an AQM's signal on `waiting`, from queue `class`, out at
    /// `start`: CE for an ECN-capable packet; the others are dropped
    /// (`None`).
    fn mark_or_drop(
        &mut self,
        start: Duration,
        class: usize,
        mut waiting: Waiting<P>,
    ) -> Option<Waiting<P>> {
        if self.discipline == Discipline::Dual && waiting.class != Class::Ecnq {
            self.flows.signalled(waiting.flow, start);
        }
        let marks = waiting.packet.marks().filter(|m| m.ecn.is_ect());
        if let Some(mut marks) = marks {
            marks.ecn = Ecn::Ce;
            waiting.packet.set_marks(&marks);
            self.counters[class].aqm_marks += 1;
            Some(waiting)
        } else {
            self.drop_queued(class, waiting.packet);
            None
        }
    }

    /// Drops `packet`, taken from the head of queue `class` by its AQM.
    fn drop_queued(&mut self, class: usize, packet: P) {
        self.counters[class].aqm_drops += 1;
        self.dropped.push((Dropped::Aqm, packet));
    }

    /// Starts serializing `waiting`, from queue `class`, at `start` after
    /// it waited `sojourn`; `signal` if its AQM marked it.
    fn serve(
        &mut self,
        start: Duration,
        class: usize,
        sojourn: Duration,
        signal: bool,
        waiting: Waiting<P>,
    ) {
        let len = waiting.packet.wire_len();
        if waiting.class != Class::Ecnq {
            // The router's marking counters cover what the AQMs passed.
            let ecn = waiting.packet.marks().map_or(Ecn::NotEct, |m| m.ecn);
            self.router.count(WireScheme::CLASSIC, ecn, signal);
        }
        self.served[class] += f64::from(len) / self.weights(start)[class];
        if waiting.class == Class::Ecnq {
            self.allowance.spend(len);
        }
        let end = self.serializer.end(start, len);
        if let Some(capacity) = self.drain.as_mut().and_then(|d| d.on_start(start)) {
            self.set_capacity(start, capacity);
        }
        self.in_service = Some((end, sojourn, waiting));
    }

    /// A configured schedule tells the router each new rate as it comes
    /// into force (`a_configured_schedule_is_metered_at_its_rate_in_force`).
    fn follow_schedule(&mut self, now: Duration) {
        if self.source != CapacitySource::Configured {
            return;
        }
        let Some(LinkRate::Schedule(s)) = self.serializer.rate() else {
            return;
        };
        let bps = s.rate_at(now.saturating_sub(self.origin));
        if self.told != Some(bps) {
            let first = self.told.is_none();
            self.told = Some(bps);
            if !first || bps as f64 / 8.0 != self.capacity {
                self.set_capacity(now, bps as f64 / 8.0);
            }
        }
    }

    /// The router meters against `capacity` bytes per second from `now`:
    /// the ecnq queue's share of it, its flows' light-flow test and
    /// policing, and the L4S step's length in bytes all follow.
    fn set_capacity(&mut self, now: Duration, capacity: f64) {
        self.capacity = capacity;
        self.flows.set_capacity(capacity);
        if self.discipline == Discipline::Dual {
            self.update_share(now);
        } else {
            self.router.set_capacity(capacity);
            self.policer.set_capacity(capacity);
        }
    }

    /// When the packet in service ends, if one is.
    pub fn next_departure(&self) -> Option<Duration> {
        self.in_service.as_ref().map(|(end, _, _)| *end)
    }

    /// The next packet whose serialization ended by `now`, with the time it
    /// ended; the one after it starts then.
    pub fn depart(&mut self, now: Duration) -> Option<(Duration, P)> {
        self.depart_timed(now).map(|d| (d.end, d.packet))
    }

    /// [`Bottleneck::depart`], with the packet's class and sojourn.
    pub fn depart_timed(&mut self, now: Duration) -> Option<Departure<P>> {
        let end = self.next_departure().filter(|&end| end <= now)?;
        let (_, sojourn, waiting) = self.in_service.take()?;
        let len = waiting.packet.wire_len();
        if let Some(capacity) = self.drain.as_mut().and_then(|d| d.on_departure(end, len)) {
            self.set_capacity(end, capacity);
        }
        self.follow_schedule(end);
        let c = waiting.class as usize;
        self.counters[c].departures += 1;
        self.counters[c].departure_bytes += u64::from(len);
        self.counters[c].sojourn_ns += sojourn.as_nanos() as u64;
        self.sojourns[c].record(sojourn);
        if waiting.class == Class::Ecnq {
            self.router.on_departure(end, len);
        }
        self.start_next(end);
        Some(Departure {
            end,
            class: waiting.class,
            sojourn,
            packet: waiting.packet,
        })
    }

    /// Packets dropped after they were queued since the last call, with
    /// why: CoDel's, and those pushed out for a lighter flow's packet.
    pub fn take_drops(&mut self) -> std::vec::Drain<'_, (Dropped, P)> {
        self.dropped.drain(..)
    }

    /// The link's capacity over time, if it has a rate.
    pub fn link_rate(&self) -> Option<&LinkRate> {
        self.serializer.rate()
    }

    /// Where the router takes its capacity from.
    pub fn capacity_source(&self) -> CapacitySource {
        self.source
    }

    /// The capacity the router meters against now, bytes per second (the
    /// whole link's; the ecnq queue's router is told its share of it).
    pub fn capacity(&self) -> f64 {
        self.capacity
    }

    /// Bytes the link could carry from `from` to `to` (the capacity in
    /// force, not the router's figure); `None` for a link with no rate.
    pub fn capacity_bytes(&self, from: Duration, to: Duration) -> Option<f64> {
        let since = |t: Duration| t.saturating_sub(self.origin);
        let rate = self.serializer.rate()?;
        Some(rate.bytes_between(since(from), since(to)))
    }

    /// Waiting bytes (not the packet in service), every class.
    pub fn queue_bytes(&self) -> u64 {
        self.bytes.iter().sum()
    }

    /// Waiting packets, every class.
    pub fn queue_packets(&self) -> usize {
        self.queues.iter().map(VecDeque::len).sum()
    }

    /// Waiting packets of one class.
    pub fn class_packets(&self, class: Class) -> usize {
        self.queues[class as usize].len()
    }

    /// Waiting bytes of one class.
    pub fn class_bytes(&self, class: Class) -> u64 {
        self.bytes[class as usize]
    }

    /// Counters of one class.
    pub fn counters(&self, class: Class) -> &ClassCounters {
        &self.counters[class as usize]
    }

    /// The sojourns of the packets that left one class's queue so far
    /// (see [`Departure::sojourn`]); they carry on over a router restart,
    /// as the counters do.
    pub fn sojourns(&self, class: Class) -> &SojournHistogram {
        &self.sojourns[class as usize]
    }

    /// Flows of the ecnq queue held to their share now.
    pub fn policed_flows(&self) -> usize {
        self.policer.policed_flows()
    }

    /// Flows active in each class over the last interval.
    pub fn active_flows(&self) -> [usize; CLASSES] {
        self.flows.counts()
    }

    /// The discipline in force (dual falls back to FIFO when marking is
    /// forced or off).
    pub fn discipline(&self) -> Discipline {
        self.discipline
    }

    /// The router: meter, marker, counters.
    pub fn router(&self) -> &RouterLink {
        &self.router
    }

    /// The router, to close idle intervals or disregard a stall.
    pub fn router_mut(&mut self) -> &mut RouterLink {
        &mut self.router
    }
}

impl<P> fmt::Debug for Bottleneck<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Bottleneck")
            .field("discipline", &self.discipline)
            .field("bytes", &self.bytes)
            .field("counters", &self.counters)
            .finish_non_exhaustive()
    }
}

/// The marks counted for a packet the router cannot read (not UDP): metered,
/// never rewritten.
const UNMARKABLE: PacketMarks = PacketMarks {
    ecn: Ecn::NotEct,
    tag: crate::wire::ecn::SchemeTag::UNTAGGED,
    hash: 0,
    flow: 0,
};
