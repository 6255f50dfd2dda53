//! The bottleneck of an output link, sans-IO: its queues, the scheduler
//! between them, the classic queue's AQM, the router's meter and marker,
//! and serialization at the link rate (docs/design.md §4, "Dual-queue
//! bottleneck"). The simulator drives it with its virtual clock and the
//! shim with the real one, so both run the same link.
//!
//! Three disciplines:
//! * [`Discipline::Dual`] (the default): packets with an ecnq scheme tag wait
//!   in their own queue, metered and marked against that queue's share of the
//!   capacity; L4S traffic (untagged ECT(1) and CE, and schemes the registry
//!   marks as L4S senders, Prague) waits in a short queue CE-marked beyond
//!   1 ms of the link's capacity, as an L4S router's native AQM does (RFC
//!   9332); everything
//!   else waits in a classic queue under CoDel (RFC 8289: CE for ECT
//!   packets, drop for Not-ECT), where a light flow's few packets go
//!   ahead of the standing queue, and overflow and CoDel's signals are
//!   taken from the flow with the most bytes waiting, as in FQ-CoDel (RFC
//!   8290). The scheduler
//!   splits the capacity by the number of flows active in each class, so
//!   a flow's share is the same in
//!   every class, and Cubic's standing queue never sits in front of ecnq's
//!   or L4S packets. The ecnq queue's routers are told its flows' max-min
//!   share, in which a light classic or L4S flow (an SSH session, a web
//!   transfer in its slow start) keeps about what it sends, and the
//!   scheduler's weights give the ecnq queue that share. Within its equal
//!   split (plus 5 ms of the link) the ecnq queue goes first, so a paced
//!   flow's bursts leave at the link's rate (`EcnqAllowance`). A
//!   flow of the ecnq queue that keeps sending well over its fair share is
//!   held to it ([`crate::router::policer`]).
//! * [`Discipline::Fifo`]: one drop-tail queue metered and marked as a whole,
//!   as in the papers' experiments.
//! * [`Discipline::DualPi2`]: an L4S bottleneck that knows nothing of ecnq
//!   (RFC 9332): ECT(1) and CE packets in a low-latency queue, CE-marked from
//!   a 1 ms sojourn or with the coupled probability k·p'; the rest in a
//!   classic queue under PI2 (CE or drop with p'²); a time-shifted FIFO
//!   between them. What ecnq flows meet at an L4S network's bottleneck.
//!   Its update rule and gains are Linux `sch_dualpi2`'s (see `Pi2` for
//!   the differences, none of which moved the figures). One Cubic-with-ECN
//!   flow gets 0.57× one Prague flow's rate through it (50 Mbit/s, 40 ms,
//!   two minutes), not the 0.9× that RFC 9332 §2.1's steady-state windows
//!   give: with one flow of each, p' swings with Cubic's sawtooth (zero in
//!   14 % of updates), so the classic flow's packets are marked at
//!   1.6·E[p']² and 29 % of Prague's rounds carry no mark; held at a
//!   constant p', Cubic gets 1.1–1.4× Prague (sim/REPRODUCTION.md, "L4S").
//!
//! Departure times are exact: a packet starts when the one before it ends,
//! and `len · 8 / rate` keeps its sub-nanosecond remainder, so a caller that
//! looks late delays nothing after it.

use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::router::policer::Policer;
use crate::router::{MarkingMode, RouterConfig, RouterLink};
use crate::signal::PacketMarks;
use crate::statistics::SojournHistogram;
use crate::wire::ecn::{Ecn, WireScheme};

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
    /// Link rate in bits per second; `None` serializes instantly.
    pub rate: Option<u64>,
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

/// Each class's waiting packets by flow.
type Waits = [HashMap<u64, FlowWaiting>; CLASSES];

/// A flow's packets waiting in one class's queue.
#[derive(Clone, Copy, Debug, Default)]
struct FlowWaiting {
    bytes: u64,
    /// Of those, in the sparse section.
    sparse: u64,
    /// CoDel signals that other flows' packets passed to it
    /// ([`Bottleneck::classic_signal`]).
    owed: u32,
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
    rate: Option<u64>,
    limit: QueueLimit,
    discipline: Discipline,
    capacity: f64,
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
    pi2: Pi2,
    seed: u64,
    /// The packet in service: when it ends, its sojourn, the packet.
    in_service: Option<(Duration, Duration, Waiting<P>)>,
    remainder: u128,
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
    /// its class and the bytes of it still to go ([`SPARSE_BURST`]).
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
        Bottleneck {
            rate: config.rate,
            limit: config.limit,
            discipline,
            capacity,
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
            pi2: Pi2::new(now, config.seed),
            seed: config.seed,
            in_service: None,
            remainder: 0,
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
    pub fn offer(&mut self, now: Duration, mut packet: P) -> Result<(), (Dropped, P)> {
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
        if class == Class::Ecnq {
            let mut m = marks.unwrap_or(UNMARKABLE);
            self.router.on_arrival(now, len, &mut m);
            if marks.is_some() {
                packet.set_marks(&m);
            }
            let policed = self.discipline == Discipline::Dual
                && marks.is_some_and(|m| !self.policer.admit(now, m.flow, len));
            if policed {
                self.counters[c].policed += 1;
                return Err((Dropped::Policed, packet));
            }
        }
        let flow = marks.map_or(0, |m| m.flow);
        let by_flow = self.queues_by_flow(class);
        let waits = if by_flow {
            self.flow_bytes[c].get(&flow).copied().unwrap_or_default()
        } else {
            FlowWaiting::default()
        };
        if self.in_service.is_some() && !self.make_room(class, flow, waits.bytes, len) {
            self.counters[c].overflow += 1;
            return Err((Dropped::Overflow, packet));
        }
        if self.queues[c].is_empty() {
            self.flows.drained(class);
            // A class that was idle banks no credit: it starts level with
            // the busy class furthest behind or, with every queue empty,
            // with the class furthest ahead. The ecnq queue's lead is its
            // allowance ([`EcnqAllowance`]), which is not banked in turns.
            // Levelled only against busy classes, four BBR flows in their
            // ProbeRTT, whose packets met empty queues while erc used the
            // link, banked 300 kB of turns and took them at once when they
            // came back: erc's queue overflowed (`coexist-1v4` beside BBR,
            // seed 3: 139 packets lost, none with this).
            let busy = (0..CLASSES).filter(|&o| !self.queues[o].is_empty());
            let floor = busy
                .map(|o| self.served[o])
                .min_by(f64::total_cmp)
                .or_else(|| self.served.iter().copied().max_by(f64::total_cmp));
            if let Some(floor) = floor {
                self.served[c] = self.served[c].max(floor);
            }
        }
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
        if by_flow {
            self.count_waiting(c, flow, len, sparse);
        }
        if class == Class::Ecnq {
            self.router.on_queue(now, self.bytes[c]);
        }
        if self.in_service.is_none() {
            self.start_next(now);
        }
        Ok(())
    }

    /// Whether `class` keeps its bytes waiting by flow: the dual queue's
    /// classic and L4S queues, for [`Bottleneck::make_room`] and
    /// [`Bottleneck::sparse_place`].
    fn queues_by_flow(&self, class: Class) -> bool {
        self.discipline == Discipline::Dual && class != Class::Ecnq
    }

    /// Counts a packet of `flow` and `len` bytes into queue `c`'s bytes
    /// by flow, and its fattest flow.
    fn count_waiting(&mut self, c: usize, flow: u64, len: u32, sparse: bool) {
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
    /// most bytes waiting (as arrivals left it: no search per packet, which
    /// cost 1.8 µs a packet with 1000 flows waiting) loses its oldest
    /// packets to make room, as FQ-CoDel drops from its fattest queue (RFC
    /// 8290 §4.1), unless it is the packet's own flow or holds no more than
    /// `own`. A flow that fills the queue (quinn's BBR ignores CE and
    /// overflows it) pays for its overflow, not a light flow beside it,
    /// which lost 37 packets in 13 s there beside BBR.
    fn make_room(&mut self, class: Class, flow: u64, own: u64, len: u32) -> bool {
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
    /// [`LIGHT_FLOW`] of an equal split ([`ActiveFlows::sends_lightly`]),
    /// has nothing waiting behind the section, and holds at most
    /// [`SPARSE_BURST`] in it with this packet. A light flow's window
    /// otherwise waited behind a greedy flow's standing queue: beside
    /// quinn's BBR, which fills the classic queue and ignores CE, a Cubic
    /// flow held to a 3 kB window got a fifth of its rate alone. A flow
    /// gains nothing over its equal split by it, and the section's packets
    /// count in the classic queue's turns. `waits` is what the flow has
    /// waiting in the classic queue.
    fn sparse_place(
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
    fn forget(&mut self, class: usize, waiting: &Waiting<P>) {
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

    /// The ecnq queue's capacity: its flows' max-min share of the link
    /// ([`ActiveFlows::ecnq_share`]); its lead, the equal split by
    /// active flows.
    fn update_share(&mut self, now: Duration) {
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
    /// starts queued at once (`coexist-short-flows`, seeds 1–3: the ecnq
    /// queue full, 65–70 ms of sojourn at p99, 3.7–6.2 thousand of erc's
    /// packets lost). A fall in the share reaches the weights an interval
    /// after it comes, as it reaches the ecnq senders (their routers hand
    /// out a new share when their interval ends, and the senders hear it
    /// a round trip later): with no hold, 191–881 packets lost and a queue
    /// p99 of 15–18 ms there. Until 2026-11-29 a fall was held only until
    /// an interval after the share's last rise, so a fall at an interval's
    /// end reached the weights at once: 0–71 lost and 10–13 ms there, and
    /// beside BBR back from its ProbeRTT (`coexist-dual` with BBR) 10–20
    /// ms; held from the fall, none lost and 1.1–2.1 ms at 30 % load
    /// (seeds 1–3), 0.2 ms beside BBR. While the other classes hold less
    /// than [`SPARSE_BACKLOG`], the counts alone weigh.
    fn weights(&self, now: Duration) -> [f64; CLASSES] {
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
    fn weighed_share(&self, now: Duration) -> f64 {
        if now < self.held.1 {
            self.share.max(self.held.0)
        } else {
            self.share
        }
    }

    /// Puts the next packet into service at `start`; CoDel drops at the
    /// head of the classic queue happen here.
    fn start_next(&mut self, start: Duration) {
        self.allowance.fill(start);
        loop {
            let Some(class) = self.next_class() else {
                // The link goes idle: no fraction to carry.
                self.remainder = 0;
                return;
            };
            let Some(mut waiting) = self.queues[class].pop_front() else {
                return;
            };
            if self.queues[class].is_empty() {
                self.flows.drained(waiting.class);
            }
            let len = waiting.packet.wire_len();
            // The head of a backlog that met an empty queue: the class's
            // first turn since it was empty.
            self.note_burst(class, len, !waiting.queued_behind);
            self.forget(class, &waiting);
            if waiting.class == Class::Ecnq {
                self.router.on_queue(start, self.bytes[class]);
            }
            let sojourn = start.saturating_sub(waiting.since);
            let signal = match (self.discipline, waiting.class) {
                (Discipline::DualPi2, class) => {
                    // PI2 follows the longer of the two queues' delays
                    // (Linux's `calculate_probability`).
                    let oldest = self
                        .queues
                        .iter()
                        .filter_map(|q| q.front())
                        .map(|w| w.since);
                    let delay = oldest
                        .map(|since| start.saturating_sub(since))
                        .fold(sojourn, Duration::max);
                    self.pi2.update(start, delay);
                    // RFC 9332 Appendix A.1, `dualpi2_dequeue`: classic
                    // packets with p_C = p'², L4S ones with p_L =
                    // max(step, p_CL = k·p'): with a step of 0 or 1, the
                    // draw's union with it is that maximum.
                    let (p, step) = match class {
                        Class::Classic => (self.pi2.p * self.pi2.p, false),
                        _ => (
                            (PI2_K * self.pi2.p).min(1.0),
                            waiting.queued_behind && sojourn > PI2_STEP,
                        ),
                    };
                    step || self.pi2.chance(p)
                }
                // A sparse packet's short wait must not end CoDel's
                // dropping state for the backlog behind it: per-flow CoDel
                // in FQ-CoDel never sees it either.
                (_, Class::Classic) if waiting.sparse => false,
                (_, Class::Classic) => {
                    let codel = self.codel.signal(start, sojourn, self.bytes[class]);
                    self.classic_signal(waiting.flow, codel)
                }
                // The step on the queue's length at the link's rate, as an
                // L4S router's queue drains when its packets go first: its
                // sojourn here also counts the other classes' turns.
                (_, Class::L4s) => {
                    let backlog = self.bytes[class] + u64::from(len);
                    waiting.queued_behind && backlog as f64 > self.capacity * PI2_STEP.as_secs_f64()
                }
                (_, Class::Ecnq) => false,
            };
            if signal {
                if self.discipline == Discipline::Dual && waiting.class != Class::Ecnq {
                    self.flows.signalled(waiting.flow, start);
                }
                let marks = waiting.packet.marks().filter(|m| m.ecn.is_ect());
                if let Some(mut marks) = marks {
                    marks.ecn = Ecn::Ce;
                    waiting.packet.set_marks(&marks);
                    self.counters[class].aqm_marks += 1;
                } else {
                    self.counters[class].aqm_drops += 1;
                    self.dropped.push((Dropped::Aqm, waiting.packet));
                    continue;
                }
            }
            if waiting.class != Class::Ecnq {
                // The router's marking counters cover what the AQMs passed.
                let ecn = waiting.packet.marks().map_or(Ecn::NotEct, |m| m.ecn);
                self.router.count(WireScheme::CLASSIC, ecn, signal);
            }
            self.served[class] += f64::from(len) / self.weights(start)[class];
            if waiting.class == Class::Ecnq {
                self.allowance.spend(len);
            }
            let end = start + self.transmission_time(len);
            self.in_service = Some((end, sojourn, waiting));
            return;
        }
    }

    /// Whether the classic packet of `flow` that starts now is marked or
    /// dropped, where CoDel's verdict on it is `codel`. In the dual queue
    /// CoDel's signals go to the flow with the most bytes waiting, at its
    /// next departure, when that is another flow: one flow that fills the
    /// queue and ignores loss must not pass its drops to the flows that
    /// answer them, as FQ-CoDel keeps each flow's drops to its own queue
    /// (RFC 8290 §1.2) and AFD drops in proportion to a flow's excess.
    /// Cubic beside BBR (`coexist-dual`, flow 0 Cubic, flow 1 BBR) got
    /// 10.74 against 38.46 Mbit/s with the head's packet signalled, 19.57
    /// against 29.74 with this; three Cubic flows of 10, 60 and 250 ms
    /// (`erc-mixed-rtt --scheme cubic`), Jain's index 0.671 → 0.948. What
    /// a flow owes is forgiven when nothing of it waits any more.
    fn classic_signal(&mut self, flow: u64, codel: bool) -> bool {
        let waiting = &mut self.flow_bytes[Class::Classic as usize];
        let own = waiting.get(&flow).map_or(0, |w| w.bytes);
        let fattest = self.fattest[Class::Classic as usize].0;
        let mut signal = codel;
        if let Some(fat) = waiting.get_mut(&fattest) {
            if codel && fattest != flow && fat.bytes > own {
                fat.owed += 1;
                signal = false;
            }
        }
        match waiting.get_mut(&flow) {
            Some(w) if !signal && w.owed > 0 => {
                w.owed -= 1;
                true
            }
            _ => signal,
        }
    }

    /// The queue to serve next, if any waits. DualPI2 serves its two
    /// queues as a time-shifted FIFO: the classic head goes first once it
    /// has waited [`PI2_TSHIFT`] longer than the L4S head. Otherwise the
    /// ecnq queue goes first while its allowance lasts, and then the busy
    /// class furthest behind in bytes per active flow.
    fn next_class(&self) -> Option<usize> {
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
    fn note_burst(&mut self, class: usize, len: u32, fresh: bool) {
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

    /// `len · 8 / rate` with the sub-nanosecond remainder carried over.
    fn transmission_time(&mut self, len: u32) -> Duration {
        let Some(rate) = self.rate.filter(|&r| r > 0) else {
            return Duration::ZERO;
        };
        let numerator = u128::from(len) * 8 * 1_000_000_000 + self.remainder;
        let rate = u128::from(rate);
        self.remainder = numerator % rate;
        Duration::from_nanos((numerator / rate) as u64)
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

/// Most flows counted per class and interval: beyond it, counts saturate
/// and memory stays bounded.
const MAX_COUNTED_FLOWS: usize = 1 << 16;

/// The ecnq queue's lead over the other classes: a token bucket that fills
/// at the queue's share of the capacity and holds [`LEAD`] of the link.
/// While it holds tokens the ecnq queue goes first; once it is spent, the
/// classes take turns by bytes per active flow.
///
/// The ecnq flows are paced at, and policed to, their shares, and send a
/// little under them (erc's router targets 98 %). Taking turns alone, their
/// queue was served at about the rate they arrive at, so a bunch of bursts
/// (ACKs come in batches, quinn sends what its window opens at once, the
/// host stalls) drained at a few percent of the share behind Cubic's turns.
/// Going first within their share, a burst leaves at the link's rate, as a
/// sparse flow's packets do in FQ-CoDel (RFC 8290 §4.1) and L4S packets do
/// in DualQ (RFC 9332 §2.4), and the class still gains no more than its
/// share plus one bucket over any span. Real stack, erc beside one Cubic
/// flow (50 Mbit/s, 40 ms, 30 s): p99 wait per packet 1.2–1.3 ms over
/// eight runs, against 1.3–2.2 ms over seven when the lead was a 5 ms
/// credit granted only to an ecnq queue that had been idle, which a flow at
/// 98 % of its share rarely is.
///
/// The other classes get none: Cubic's queue, emptied by CoDel and back,
/// would go ahead of the ecnq packets that came meanwhile (in the
/// simulator, 1 ms of idle credit for it tripled the ecnq queue's wait).
#[derive(Clone, Copy, Debug)]
struct EcnqAllowance {
    /// The fill rate, bytes per second: the ecnq queue's share.
    rate: f64,
    /// The most it holds, bytes.
    depth: f64,
    /// Bytes it holds now; negative after the queue went beyond its share.
    tokens: f64,
    at: Duration,
}

impl EcnqAllowance {
    fn new(capacity: f64, now: Duration) -> EcnqAllowance {
        let depth = (capacity * LEAD.as_secs_f64()).max(LEAD_MIN);
        EcnqAllowance {
            rate: capacity,
            depth,
            tokens: depth,
            at: now,
        }
    }

    fn fill(&mut self, now: Duration) {
        let span = now.saturating_sub(self.at).as_secs_f64();
        self.tokens = (self.tokens + self.rate * span).min(self.depth);
        self.at = now;
    }

    /// A packet of `len` bytes left the ecnq queue, ahead of others or not:
    /// what the queue takes beyond its share is owed (up to one bucket).
    fn spend(&mut self, len: u32) {
        self.tokens = (self.tokens - f64::from(len)).max(-self.depth);
    }

    fn left(&self) -> bool {
        self.tokens > 0.0
    }
}

/// The most the ecnq queue's allowance holds, as time at the link's rate:
/// 5 ms, at least what a sender's transport may let out at once after
/// quinn asked late (`session::rate_gate`'s fill span), so that such
/// a burst too leaves at the link's rate. As an idle credit (see
/// [`EcnqAllowance`]), 1 ms of it left erc beside 1, 2 and 4 Cubic flows
/// waiting 2.2–6.8 ms at p99 on the real stack, 5 ms 1.0–1.9 ms.
const LEAD: Duration = Duration::from_millis(5);
/// The least the allowance holds, bytes: two full packets.
const LEAD_MIN: f64 = 3_000.0;

/// Under this many bytes waiting in the classic and L4S queues, the
/// classes take turns by their counts, not by the ecnq queue's max-min
/// share: two full packets, a light flow's burst (a few packets per round
/// trip), which must not wait for the ecnq queue's much larger weight.
/// On the real stack a Cubic flow held to a 3 kB window beside erc got
/// 0.29–0.30 Mbit/s with the share's weights for every packet, 0.40 with
/// this, 0.43 with four packets (`erc_takes_what_a_light_flow_leaves_on_
/// the_real_stack`); in `coexist-short-flows` erc lost 0–32 packets with
/// the share's weights always, 0–71 with this (seeds 1–3).
const SPARSE_BACKLOG: u64 = 3_000;

/// The most a classic or L4S queue may hold for its backlog to leave back
/// to back once its turn comes: four full packets, a light flow's window.
/// Interleaved with the ecnq queue's packets, such a window reached the
/// receiver spread out, and quinn acknowledged its first two packets at
/// once and the third after its 25 ms ACK delay: a Cubic flow held to a
/// 3 kB window beside erc waited for that timer on half of its round
/// trips, against a quarter through one FIFO, and got 0.39 Mbit/s where
/// it got 0.49 alone; back to back, 0.51–0.54 (`erc_takes_what_a_light_
/// flow_leaves_on_the_real_stack`; its packets waited under a millisecond
/// at the bottleneck either way). Only a queue's first turn after it was
/// empty starts such a run, so that a long backlog draining down still
/// takes turns, and only while light flows leave the ecnq queue more than
/// an equal split: a greedy Cubic flow's queue, emptied by its own
/// reductions, refills in ACK-clocked pairs that would otherwise run
/// ahead of erc's packets.
const SPARSE_BURST: u64 = 6_000;

/// How far above the equal split the ecnq queue's share must be for light
/// flows to count as there (the two are computed apart).
const LIGHT_MARGIN: f64 = 1.01;

/// Flows seen in each class, counted over measurement intervals. A flow
/// counts from its second packet in an interval: a flood of one-packet
/// "flows" (spoofed sources) must not shrink the other classes' shares.
/// The bytes of each counted classic and L4S flow tell which of them are
/// light (an SSH session, a call, a short web transfer):
/// [`ActiveFlows::ecnq_share`] leaves such a flow about what it sends. The
/// light flows are found once per interval (a sort of that interval's
/// flows), so the share costs O(1) whenever the counts change.
#[derive(Debug)]
struct ActiveFlows {
    interval: Duration,
    ends: Duration,
    /// The link's capacity, bytes per second.
    capacity: f64,
    /// Flows seen once this interval, with that packet's bytes and when
    /// it came.
    once: [HashMap<u64, (u32, Duration)>; CLASSES],
    /// Flows seen twice or more this interval, with their bytes and when
    /// the first came.
    current: [HashMap<u64, (u64, Duration)>; CLASSES],
    /// Whether each class's queue was empty at some moment this interval.
    drained: [bool; CLASSES],
    /// Classic and L4S flows counted this interval that were not counted
    /// in the last one (the ecnq slot stays 0: the erc routers count their
    /// own newcomers).
    newcomers: [usize; CLASSES],
    /// The fraction of the last interval's classic and L4S newcomers that
    /// were not light.
    heavy: f64,
    last: [usize; CLASSES],
    /// The classic and L4S flows counted in the last whole interval.
    last_flows: HashSet<u64>,
    /// The classic flows counted in the last whole interval, with their
    /// bytes then ([`ActiveFlows::sends_lightly`]).
    last_classic: HashMap<u64, (u64, Duration)>,
    /// The light flows of the last whole interval (see
    /// [`ActiveFlows::find_light_flows`]): how many, and what they are
    /// left, bytes per second.
    light: (usize, f64),
    /// Classic and L4S flows this bottleneck's AQM marked or dropped, with
    /// when it last did; those older than [`LIMITED_HERE`] at an
    /// interval's end leave before its light flows are found.
    signalled: HashMap<u64, Duration>,
    /// The interval's classic and L4S flows by what they would be left,
    /// with whether each was counted in the interval before: kept between
    /// intervals so that finding the light flows allocates nothing.
    rates: Vec<(f64, bool)>,
}

impl ActiveFlows {
    fn new(interval: Duration, capacity: f64, now: Duration) -> ActiveFlows {
        ActiveFlows {
            interval: interval.max(Duration::from_millis(1)),
            ends: now + interval,
            capacity,
            once: Default::default(),
            current: Default::default(),
            drained: [false; CLASSES],
            newcomers: [0; CLASSES],
            heavy: 1.0,
            last: [0; CLASSES],
            last_flows: HashSet::new(),
            last_classic: HashMap::new(),
            light: (0, 0.0),
            signalled: HashMap::new(),
            rates: Vec::new(),
        }
    }

    /// Notes a packet of `flow` of `len` bytes; returns whether the counts
    /// or the light flows changed.
    /// `waiting` is what each flow has waiting in each queue.
    fn seen(&mut self, now: Duration, flow: u64, class: Class, len: u32, waiting: &Waits) -> bool {
        let before = self.counts();
        let closed = now >= self.ends;
        if closed {
            let idle = now.saturating_sub(self.ends) >= self.interval;
            self.close_interval(idle, waiting);
            self.ends = now + self.interval;
        }
        let c = class as usize;
        if let Some((bytes, _)) = self.current[c].get_mut(&flow) {
            *bytes += u64::from(len);
        } else if let Some(&(first, at)) = self.once[c].get(&flow) {
            if self.current[c].len() < MAX_COUNTED_FLOWS {
                self.current[c].insert(flow, (u64::from(first) + u64::from(len), at));
                if class != Class::Ecnq && !self.last_flows.contains(&flow) {
                    self.newcomers[c] += 1;
                }
            }
        } else if self.once[c].len() < MAX_COUNTED_FLOWS {
            self.once[c].insert(flow, (len, now));
        }
        closed || self.counts() != before
    }

    /// Ends the interval: its counts and light flows become the last
    /// whole interval's (none after an idle one).
    fn close_interval(&mut self, idle: bool, waiting: &Waits) {
        self.light = (0, 0.0);
        let ends = self.ends;
        self.signalled
            .retain(|_, at| ends.saturating_sub(*at) < LIMITED_HERE);
        if idle {
            self.last = [0; CLASSES];
            self.last_flows.clear();
        } else {
            self.last = self.current.each_ref().map(HashMap::len);
            self.find_light_flows(waiting);
            let others = [Class::Classic, Class::L4s].map(|c| &self.current[c as usize]);
            self.last_flows = others
                .iter()
                .flat_map(|flows| flows.keys().copied())
                .collect();
        }
        let classic = &mut self.current[Class::Classic as usize];
        std::mem::swap(&mut self.last_classic, classic);
        if idle {
            self.last_classic.clear();
        }
        self.once.iter_mut().for_each(HashMap::clear);
        self.current.iter_mut().for_each(HashMap::clear);
        self.drained = [false; CLASSES];
        self.newcomers = [0; CLASSES];
    }

    /// Finds the light flows of the interval that ends: the classic and
    /// L4S flows under [`LIGHT_FLOW`] of what an equal split of the rest
    /// would give them, slowest first (max-min's water filling), but those
    /// with packets `waiting` at the end of an interval in which their
    /// queue never emptied: those are held here, not limited elsewhere, and
    /// a light flow that speeds up must get its share back, not be measured
    /// at what the weights let through (a TCP-like flow took 1.2 s to climb
    /// out of its light rate without this rule, one interval with it).
    /// Until 2026-11-29 no flow of such a class was light: thirty short
    /// flows in their retransmission timeouts, 2 Mbit/s together, then cut
    /// the ecnq queue's share from 0.96 to 1/32 of the link, and erc sent
    /// 0.7 Mbit/s for 40 s of `coexist-short-flows` (seed 2, 50 % load). A
    /// flow counted in the last interval too sent over the whole interval.
    /// A newcomer sent from its first packet, over half an interval at
    /// least: a web transfer that came and went sent its bytes in a part
    /// of the interval, and one that came just before its end is judged by
    /// its first flight (over the whole interval erc beside
    /// `coexist-short-flows` got 13.6–14.7 Mbit/s, over its presence alone
    /// 27.0–27.9 with the half). A newcomer is left [`NEWCOMER_HEADROOM`]
    /// times its rate; since every light flow is left less than what an
    /// equal split of the rest would give it, no flow's share falls below
    /// the equal split.
    fn find_light_flows(&mut self, waiting: &Waits) {
        let start = self.ends.saturating_sub(self.interval);
        let half = self.ends.saturating_sub(self.interval / 2);
        let drained = self.drained;
        let signalled = &self.signalled;
        self.rates.clear();
        self.rates.extend(
            [Class::Classic, Class::L4s]
                .into_iter()
                .flat_map(|c| {
                    let c = c as usize;
                    let held = move |flow: &u64| !drained[c] && waiting[c].contains_key(flow);
                    self.current[c].iter().filter(move |(flow, _)| !held(flow))
                })
                .map(|(flow, &(bytes, first))| {
                    let known = self.last_flows.contains(flow);
                    let from = if known { start } else { first.min(half) };
                    let seconds = self.ends.saturating_sub(from).as_secs_f64();
                    let rate = bytes as f64 / seconds.max(f64::EPSILON);
                    if known && signalled.contains_key(flow) {
                        (MARKED_HEADROOM * rate, true)
                    } else if known {
                        (rate, true)
                    } else {
                        (NEWCOMER_HEADROOM * rate, false)
                    }
                }),
        );
        self.rates.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (mut left, mut sharing) = (self.capacity, self.last.iter().sum::<usize>() as f64);
        let mut light_newcomers = 0;
        for &(reserved, known) in &self.rates {
            if reserved >= LIGHT_FLOW * left / sharing {
                break;
            }
            left -= reserved;
            sharing -= 1.0;
            self.light.0 += 1;
            self.light.1 += reserved;
            light_newcomers += usize::from(!known);
        }
        let newcomers =
            self.newcomers[Class::Classic as usize] + self.newcomers[Class::L4s as usize];
        if newcomers > 0 {
            self.heavy = 1.0 - light_newcomers as f64 / newcomers as f64;
        }
    }

    /// Whether classic `flow` sends under [`LIGHT_FLOW`] of an equal split
    /// of the link: over the last whole interval and this one if it was
    /// counted in the last, else since its first packet (over half an
    /// interval at least, so that a first window does not read as fast).
    fn sends_lightly(&self, now: Duration, flow: u64) -> bool {
        let c = Class::Classic as usize;
        let (mut bytes, first) = match (self.current[c].get(&flow), self.once[c].get(&flow)) {
            (Some(&(bytes, at)), _) => (bytes, at),
            (None, Some(&(bytes, at))) => (u64::from(bytes), at),
            (None, None) => (0, now),
        };
        let start = self.ends.saturating_sub(self.interval);
        let span = match self.last_classic.get(&flow) {
            Some(&(before, _)) => {
                bytes += before;
                now.saturating_sub(start) + self.interval
            }
            None => now.saturating_sub(first).max(self.interval / 2),
        };
        let flows = self.counts().iter().sum::<usize>().max(1);
        (bytes as f64) < LIGHT_FLOW * self.capacity / flows as f64 * span.as_secs_f64()
    }

    /// This bottleneck's AQM marked or dropped a packet of the classic or
    /// L4S `flow` at `now`.
    fn signalled(&mut self, flow: u64, now: Duration) {
        if self.signalled.len() < MAX_COUNTED_FLOWS || self.signalled.contains_key(&flow) {
            self.signalled.insert(flow, now);
        }
    }

    /// `class`'s queue is empty at this moment.
    fn drained(&mut self, class: Class) {
        self.drained[class as usize] = true;
    }

    /// Flows per class: the last whole interval's, or this one's if more.
    fn counts(&self) -> [usize; CLASSES] {
        Class::ALL.map(|c| self.last[c as usize].max(self.current[c as usize].len()))
    }

    /// The ecnq queue's fraction of the capacity: its flows' max-min
    /// share, where a light classic or L4S flow is limited elsewhere and
    /// keeps what it sent, and the other flows, every class's, split the
    /// rest equally (a light flow's rate is under half an equal split, so
    /// under that share too). A light flow beside an erc flow used to take
    /// half the link's share from it and leave that half idle. A classic or
    /// L4S flow new in this interval counts as the fraction of the last
    /// interval's newcomers that were not light: where web transfers come
    /// and go, each would otherwise take a whole share until the interval
    /// ends (counted whole, erc beside `coexist-short-flows` got 22.2–23.6
    /// Mbit/s instead of 27.0–27.9).
    fn ecnq_share(&self) -> f64 {
        let expected = |c: Class| {
            let c = c as usize;
            let new = self.newcomers[c] as f64;
            (self.last[c] as f64).max(self.current[c].len() as f64 - new + self.heavy * new)
        };
        self.share_beside(self.light, expected(Class::Classic) + expected(Class::L4s))
    }

    /// The ecnq queue's fraction of the capacity split equally by active
    /// flows, light or not.
    fn equal_share(&self) -> f64 {
        let [_, classic, l4s] = self.counts();
        self.share_beside((0, 0.0), (classic + l4s) as f64)
    }

    /// The ecnq queue's fraction of the capacity when `light` classic and
    /// L4S flows (how many, their rates added up) keep what they sent and
    /// the other flows, every class's, split the rest equally.
    fn share_beside(&self, light: (usize, f64), others: f64) -> f64 {
        let ecnq = self.counts()[Class::Ecnq as usize] as f64;
        if ecnq == 0.0 || others <= 0.0 {
            return 1.0;
        }
        let (light, light_rate) = light;
        let sharing = ecnq + (others - light as f64).max(0.0);
        let per_flow = (self.capacity - light_rate).max(0.0) / sharing;
        (ecnq * per_flow / self.capacity).clamp(0.0, 1.0)
    }
}

/// A classic or L4S flow sending under this fraction of what an equal
/// split of the rest of the link would give it is limited elsewhere, and
/// the ecnq queue's share grows by what it leaves. Half: a greedy Cubic flow's sawtooth stays above it
/// (it cuts to 0.7 of its rate), so its share never moves with its
/// troughs. ecnq's own rule, after RCP's flows "bottlenecked elsewhere".
const LIGHT_FLOW: f64 = 0.5;

/// How long a classic or L4S flow that this bottleneck's AQM marked or
/// dropped counts as held back here: a flow this queue signals is
/// bottlenecked here, not elsewhere, so it is left [`MARKED_HEADROOM`]
/// times what it sent. A second spans such a flow's marks (0.4–0.6 s
/// apart in `a_reno_flow_marked_here_climbs_out_of_a_light_rate`); with
/// marked flows never light, 0.5, 1, 2 and 4 s gave the same figures
/// there and in `coexist-short-flows`. ecnq's own rule, after RCP's flows
/// "bottlenecked elsewhere".
const LIMITED_HERE: Duration = Duration::from_secs(1);

/// What a flow counted in the last interval and marked or dropped here in
/// the last [`LIMITED_HERE`] is left, as a multiple of the rate it sent,
/// so that it can grow. Left only its rate, a TCP flow that a deep
/// slow-start exit put under half its share was served at about what it
/// sent, its bursts and additive increase queued past CoDel's target, and
/// CoDel marked it down again: kernel Reno beside erc through the testbed
/// sat at 6–13 of 25 Mbit/s for whole runs, and the test's flow above at
/// 13 % of the link. Never light while marked (a whole share), it cost
/// erc 6 % of its rate beside `coexist-short-flows` at 10 % load (seeds
/// 1–3, 42.2 → 39.8 Mbit/s, the link 0.906 → 0.859 busy), where marked
/// transfers left their share idle; with 1.5 × its rate, 0.8 % (seeds 1
/// and 2, 42.3 → 41.9). The same factor as [`NEWCOMER_HEADROOM`], for
/// the same reason: the flow is still growing; 2 gave the same figures.
const MARKED_HEADROOM: f64 = 1.5;

/// What a light newcomer is left, as a multiple of the rate it sent: a
/// short flow's slow start sends windows that double every round trip.
/// ecnq's own figure, measured on `coexist-short-flows` (seeds 1–3): with
/// 1 (its rate), erc got 30.6–31.8 Mbit/s and the short flows' mean
/// completion was 0.128–0.182 s; with 1.5, 27.0–27.9 and 0.103–0.150 s;
/// with 2, 21.7–23.1 and 0.103–0.121 s. A long Cubic flow there gets
/// 22.3–25.6 Mbit/s, and the short flows complete in 0.120–0.131 s.
const NEWCOMER_HEADROOM: f64 = 1.5;

/// PI2's target queue delay (RFC 9332 Appendix A.1, `dualpi2_params_init`
/// line 8: 15 ms; Linux `sch_dualpi2`'s default too).
const PI2_TARGET: Duration = Duration::from_millis(15);
/// PI2 updates its base probability this often. RFC 9332 Appendix A.1
/// line 12 derives Tupdate = min(target, RTT_max / 3) = 15 ms; this is
/// Linux `sch_dualpi2`'s default, 16 ms, which its α and β go with.
const PI2_UPDATE: Duration = Duration::from_millis(16);
/// PI2's integral gain α, applied once per update to delays in seconds
/// (RFC 9332 Appendix A.1, `dualpi2_update`: p' += α·(curq − target) +
/// β·(curq − prevq)). Line 13 derives α = 0.1·Tupdate / RTT_max² = 0.15
/// Hz for 15 ms; Linux's 41/256 ≈ 0.16 Hz for 16 ms integrates as fast
/// (α / Tupdate = 10 s⁻²).
const PI2_ALPHA: f64 = 0.16;
/// PI2's proportional gain β, applied once per update (RFC 9332 Appendix
/// A.1 line 14: β = 0.3 / RTT_max = 3 Hz; Linux's 819/256 ≈ 3.2 Hz).
const PI2_BETA: f64 = 3.2;
/// The coupling factor k: the L4S queue is marked with k·p' where the
/// classic queue sees p'² (RFC 9332 §2.1, p_C = (p_CL / k)², and Appendix
/// A.1 line 3: k = 2).
const PI2_K: f64 = 2.0;
/// The L4S queue's native AQM: CE for a packet whose sojourn exceeds this
/// (Linux `sch_dualpi2`'s `step_thresh`, 1 ms; RFC 9332 Appendix A.1
/// lines 17–18 ramp from 800 µs over 400 µs, and allow a step). The dual
/// discipline's L4S step uses it too.
const PI2_STEP: Duration = Duration::from_millis(1);
/// The time shift of the time-shifted FIFO between the queues, one of the
/// schedulers RFC 9332 §4.2.2 discusses (Linux uses a weighted round robin
/// with 10 % for the classic queue instead): twice the classic target, a
/// choice of this model; it never binds while the L4S queue stays short.
const PI2_TSHIFT: Duration = Duration::from_millis(30);

/// PI2's base probability p' (RFC 9332 Appendix A.1, `dualpi2_update`),
/// updated every [`PI2_UPDATE`] from the queue delay and held in [0, 1],
/// and the random draws of its marks.
///
/// Where this differs from the RFC's pseudocode and Linux's qdisc, and
/// what each difference was measured to change (sim/REPRODUCTION.md,
/// "L4S"): the delay is the longer of the two queues' head sojourns, as
/// Linux's `calculate_probability` takes it (the RFC's uses the classic
/// queue's alone); p' is brought up to date by the first dequeue at or
/// after each update time, not by a timer; the RFC marks through
/// `recur()`, a deterministic accumulator, where this draws as Linux does,
/// and the classic p'² in one draw where Linux draws p' twice (the same
/// probability); Linux never marks or drops by p' while under two MTUs
/// wait; there is no overload mode (L4S drop once k·p' ≥ 1). None of
/// these, nor Linux's WRR scheduler or the RFC's 0.15 / 3.0 / 15 ms gains,
/// moved Cubic with ECN against Prague off 0.55–0.59×.
#[derive(Debug)]
struct Pi2 {
    p: f64,
    previous: Duration,
    next_update: Duration,
    rng: u64,
}

impl Pi2 {
    fn new(now: Duration, seed: u64) -> Pi2 {
        Pi2 {
            p: 0.0,
            previous: Duration::ZERO,
            next_update: now + PI2_UPDATE,
            rng: seed ^ 0x9e37_79b9_7f4a_7c15,
        }
    }

    /// Brings p' up to date at `now` with the queue delay `delay`.
    fn update(&mut self, now: Duration, delay: Duration) {
        while now >= self.next_update {
            let (q, previous, target) = (
                delay.as_secs_f64(),
                self.previous.as_secs_f64(),
                PI2_TARGET.as_secs_f64(),
            );
            // Per update, delays in seconds, as PIE applies its gains
            // (RFC 8033 §4.2).
            self.p += PI2_ALPHA * (q - target) + PI2_BETA * (q - previous);
            self.p = self.p.clamp(0.0, 1.0);
            self.previous = delay;
            self.next_update += PI2_UPDATE;
        }
    }

    /// True with probability `p` (SplitMix64).
    fn chance(&mut self, p: f64) -> bool {
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        ((z >> 11) as f64) < p * (1u64 << 53) as f64
    }
}

/// CoDel's target sojourn time (RFC 8289 §4.4).
const CODEL_TARGET: Duration = Duration::from_millis(5);
/// CoDel's interval (RFC 8289 §4.3).
const CODEL_INTERVAL: Duration = Duration::from_millis(100);
/// Below this backlog CoDel never signals: one MTU-sized packet (RFC 8289 §5.3).
const CODEL_MIN_BACKLOG: u64 = 1500;

/// CoDel's state (RFC 8289 §5): decides at dequeue whether a packet
/// carries a congestion signal.
#[derive(Debug, Default)]
struct Codel {
    first_above: Option<Duration>,
    dropping: bool,
    next_signal: Duration,
    count: u32,
    last_count: u32,
}

impl Codel {
    /// The next signal time after `t`: interval / √count later.
    fn control_law(t: Duration, count: u32) -> Duration {
        t + CODEL_INTERVAL.div_f64(f64::from(count.max(1)).sqrt())
    }

    /// A packet leaves after waiting `sojourn`, `backlog` bytes behind it:
    /// whether to mark or drop it.
    fn signal(&mut self, now: Duration, sojourn: Duration, backlog: u64) -> bool {
        let above = if sojourn < CODEL_TARGET || backlog <= CODEL_MIN_BACKLOG {
            self.first_above = None;
            false
        } else {
            match self.first_above {
                None => {
                    self.first_above = Some(now + CODEL_INTERVAL);
                    false
                }
                Some(t) => now >= t,
            }
        };
        if self.dropping {
            if !above {
                self.dropping = false;
                return false;
            }
            if now >= self.next_signal {
                self.count += 1;
                self.next_signal = Self::control_law(self.next_signal, self.count);
                return true;
            }
            return false;
        }
        if !above {
            return false;
        }
        self.dropping = true;
        // Resume near the previous rate if the last episode was recent.
        let delta = self.count.saturating_sub(self.last_count);
        self.count = if delta > 1 && now.saturating_sub(self.next_signal) < CODEL_INTERVAL * 16 {
            delta
        } else {
            1
        };
        self.last_count = self.count;
        self.next_signal = Self::control_law(now, self.count);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::ecn::SchemeTag;

    /// A 1000-byte packet: only its marks vary.
    #[derive(Clone, Debug)]
    struct Pkt(PacketMarks);

    impl Queued for Pkt {
        fn wire_len(&self) -> u32 {
            1000
        }
        fn marks(&self) -> Option<PacketMarks> {
            Some(self.0)
        }
        fn set_marks(&mut self, marks: &PacketMarks) {
            self.0 = *marks;
        }
    }

    fn pkt(flow: u64, tag: SchemeTag, ecn: Ecn) -> Pkt {
        Pkt(PacketMarks {
            ecn,
            tag,
            hash: flow as u32,
            flow,
        })
    }

    /// 8 Mbit/s: one 1000-byte packet per millisecond.
    fn link(discipline: Discipline) -> Bottleneck<Pkt> {
        link_from(discipline, Duration::ZERO)
    }

    /// The same link, its first interval starting at `start`.
    fn link_from(discipline: Discipline, start: Duration) -> Bottleneck<Pkt> {
        link_at(discipline, 8_000_000, start)
    }

    /// A link of `rate` bits per second, its first interval starting at
    /// `start`.
    fn link_at(discipline: Discipline, rate: u64, start: Duration) -> Bottleneck<Pkt> {
        Bottleneck::new(
            BottleneckConfig {
                rate: Some(rate),
                limit: QueueLimit::Packets(1000),
                discipline,
                router: RouterConfig::new(rate as f64 / 8.0, 1_000_000),
                seed: 0,
            },
            start,
        )
    }

    /// The capacity the ecnq queue's router meters against, bytes per
    /// second: its share of the link.
    fn ecnq_capacity(b: &Bottleneck<Pkt>) -> f64 {
        b.router().meter().config().capacity
    }

    const MS: Duration = Duration::from_millis(1);
    const ERC: SchemeTag = SchemeTag::new(6);

    /// Offers `per_ms` packets of each flow every millisecond for `ms`
    /// milliseconds and returns the departed packets per flow.
    fn run(
        b: &mut Bottleneck<Pkt>,
        flows: &[(u64, SchemeTag, Ecn)],
        ms: u64,
    ) -> std::collections::HashMap<u64, u64> {
        let mut out = std::collections::HashMap::new();
        for t in 0..ms {
            let now = MS * t as u32;
            while let Some((_, p)) = b.depart(now) {
                *out.entry(p.0.flow).or_default() += 1;
            }
            for &(flow, tag, ecn) in flows {
                let _ = b.offer(now, pkt(flow, tag, ecn));
            }
        }
        out
    }

    #[test]
    fn a_restarted_router_marks_as_a_new_one_does() {
        // Two erc flows at a quarter of the link each, so that nothing
        // waits when the router restarts at 2 s.
        let offer_until = |b: &mut Bottleneck<Pkt>, from: u32, until: u32| {
            let mut marks = Vec::new();
            for t in from..until {
                let now = MS * t;
                while let Some((_, p)) = b.depart(now) {
                    marks.push((p.0.flow, p.0.ecn));
                }
                if t % 4 == 0 {
                    for flow in [1, 2] {
                        b.offer(now, pkt(flow, ERC, Ecn::NotEct)).unwrap();
                    }
                }
            }
            marks
        };
        let mut restarted = link(Discipline::Dual);
        let mut kept = link(Discipline::Dual);
        let before = offer_until(&mut restarted, 0, 2_000);
        offer_until(&mut kept, 0, 2_000);
        restarted.restart_router(MS * 2_000);
        let mut fresh = link_from(Discipline::Dual, MS * 2_000);
        let after = offer_until(&mut restarted, 2_000, 4_000);
        assert_eq!(after, offer_until(&mut fresh, 2_000, 4_000));
        // What the router had learned before shows in the marks of one
        // that did not restart.
        assert_ne!(after, offer_until(&mut kept, 2_000, 4_000));
        // Its counters carry on.
        let total =
            |b: &Bottleneck<Pkt>| -> u64 { b.router().counters().by_scheme.iter().flatten().sum() };
        assert_eq!(total(&restarted), total(&fresh) + before.len() as u64);
    }

    #[test]
    fn departures_are_exact_at_the_link_rate() {
        let mut b = link(Discipline::Fifo);
        for _ in 0..10 {
            b.offer(Duration::ZERO, pkt(1, ERC, Ecn::Ect0)).unwrap();
        }
        let ends: Vec<Duration> =
            std::iter::from_fn(|| b.depart(MS * 100).map(|(t, _)| t)).collect();
        assert_eq!(ends, (1..=10).map(|i| MS * i).collect::<Vec<_>>());
    }

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
        // burst (the old lead, granted only to an idle queue: up to 7 ms).
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

    /// Untagged ECT(1) and CE, and tagged Prague, wait in the L4S queue,
    /// CE-marked beyond 1 ms of the link; an erc, an L4S and a classic flow
    /// split the link three ways.
    #[test]
    fn l4s_traffic_gets_a_step_marked_queue_and_an_equal_share() {
        let mut b = link(Discipline::Dual);
        let prague = SchemeTag::new(crate::schemes::prague::WIRE.id());
        let untagged = SchemeTag::UNTAGGED;
        for (tag, ecn, class) in [
            (prague, Ecn::Ect1, Class::L4s),
            (untagged, Ecn::Ect1, Class::L4s),
            (untagged, Ecn::Ce, Class::L4s),
            (untagged, Ecn::Ect0, Class::Classic),
            (untagged, Ecn::NotEct, Class::Classic),
            (ERC, Ecn::NotEct, Class::Ecnq),
        ] {
            assert_eq!(
                b.class_of(Some(&pkt(1, tag, ecn).0)),
                class,
                "{tag:?} {ecn:?}"
            );
        }
        let out = run(
            &mut b,
            &[
                (1, ERC, Ecn::Ect0),
                (2, untagged, Ecn::Ect1),
                (3, untagged, Ecn::Ect0),
            ],
            3000,
        );
        let total = out.values().sum::<u64>() as f64;
        for flow in 1..=3 {
            let share = out[&flow] as f64 / total;
            assert!((share - 1.0 / 3.0).abs() < 0.02, "{out:?}");
        }
        assert_eq!(b.active_flows(), [1, 1, 1]);
        let capacity = ecnq_capacity(&b);
        assert!((capacity - 1e6 / 3.0).abs() < 1.0, "{capacity}");
        assert!(b.counters(Class::L4s).aqm_marks > 0);
        assert_eq!(b.counters(Class::L4s).aqm_drops, 0);
    }

    /// A classic flow far under an equal split (an SSH session, say) is
    /// limited elsewhere: the ecnq queue's share grows by what it leaves,
    /// from the end of the flow's first whole interval on. A greedy classic
    /// flow keeps its equal split.
    #[test]
    fn a_light_classic_flow_leaves_the_rest_to_the_ecnq_queue() {
        // 1 MB/s link; the classic flow sends a 1000-byte packet every
        // 20 ms, 50 kB/s.
        let shares = ecnq_capacities(2_000, |b, now, t| {
            if t % 20 == 0 {
                let _ = b.offer(now, pkt(2, SchemeTag::UNTAGGED, Ecn::NotEct));
            }
        });
        // Its first interval: an equal split.
        assert!((shares[0] - 0.5e6).abs() < 1.0, "{shares:?}");
        let last = *shares.last().unwrap();
        assert!((last - 0.95e6).abs() < 0.01e6, "{shares:?}");
        // A greedy classic flow: half.
        let mut b = link(Discipline::Dual);
        run(
            &mut b,
            &[(1, ERC, Ecn::Ect0), (2, SchemeTag::UNTAGGED, Ecn::NotEct)],
            2_000,
        );
        assert!(
            (ecnq_capacity(&b) - 0.5e6).abs() < 1.0,
            "{}",
            ecnq_capacity(&b)
        );
    }

    /// Light classic flows beside a greedy classic flow whose backlog never
    /// empties are still light: only a flow with packets waiting is held
    /// by the classic queue.
    #[test]
    fn light_flows_beside_a_standing_classic_queue_stay_light() {
        let shares = ecnq_capacities(3_000, |b, now, t| {
            // Greedy and ECN-capable: CoDel marks it, the backlog stands.
            let _ = b.offer(now, pkt(2, SchemeTag::UNTAGGED, Ecn::Ect0));
            // Six flows of one packet every 40 ms: 15 % of the link.
            for flow in 10..16 {
                if t % 40 == flow as u32 {
                    let _ = b.offer(now, pkt(flow, SchemeTag::UNTAGGED, Ecn::Ect0));
                }
            }
        });
        // The link less the light flows, split between the two greedy ones:
        // about 0.42 of it; counted as held, the ecnq queue got an eighth.
        let settled = &shares[5..];
        assert!(settled.iter().all(|&s| s > 0.35e6), "{shares:?}");
    }

    /// The ecnq queue's capacity at the end of every 200 ms of a dual
    /// queue where an ecnq flow sends a packet every millisecond and
    /// `classic` offers the rest at each millisecond `t`.
    fn ecnq_capacities(
        ms: u32,
        mut classic: impl FnMut(&mut Bottleneck<Pkt>, Duration, u32),
    ) -> Vec<f64> {
        let mut b = link(Discipline::Dual);
        let mut shares = Vec::new();
        for t in 0..ms {
            let now = MS * t;
            while b.depart(now).is_some() {}
            let _ = b.offer(now, pkt(1, ERC, Ecn::Ect0));
            classic(&mut b, now, t);
            if t % 200 == 199 {
                shares.push(ecnq_capacity(&b));
            }
        }
        shares
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

    /// A light classic flow that speeds up (a download after a page's
    /// small requests) gets its equal split back within a few intervals.
    /// The flow here answers as TCP does: a window of packets, one more
    /// per window delivered, halved on a drop. Its queue's turns leave it
    /// about what it sent while light, so it arrives at about that rate;
    /// the queue it keeps is what tells that it is held here.
    #[test]
    fn a_light_flow_that_speeds_up_gets_its_share_back() {
        let mut b = link(Discipline::Dual);
        let (mut window, mut in_flight, mut served) = (2.0_f64, 0_u32, 0);
        let mut shares = Vec::new();
        for t in 0..5_000u32 {
            let now = MS * t;
            while let Some((_, p)) = b.depart(now) {
                if p.0.flow == 2 {
                    in_flight -= 1;
                    window += 1.0 / window;
                    served += u32::from(t >= 4_000);
                }
            }
            let drops = b.take_drops().filter(|(_, p)| p.0.flow == 2).count();
            if drops > 0 {
                in_flight -= drops as u32;
                window = (window / 2.0).max(1.0);
            }
            let _ = b.offer(now, pkt(1, ERC, Ecn::Ect0));
            // One packet every 20 ms for 2 s, then all its window allows.
            let mut wants = if t < 2_000 {
                u32::from(t % 20 == 0)
            } else {
                u32::MAX
            };
            while wants > 0 && f64::from(in_flight) < window {
                wants -= 1;
                match b.offer(now, pkt(2, SchemeTag::UNTAGGED, Ecn::NotEct)) {
                    Ok(()) => in_flight += 1,
                    Err(_) => window = (window / 2.0).max(1.0),
                }
            }
            if t % 200 == 199 {
                shares.push(ecnq_capacity(&b));
            }
        }
        // Light at first: the ecnq queue had nearly the whole link.
        assert!(shares[9] > 0.9e6, "{shares:?}");
        // Greedy from 2 s: half of it from 2.8 s on (judged by its rate
        // alone, it took 1.2 s to climb out of its light rate), and half
        // the last second's packets. The ecnq flow here never slows down,
        // and each fall in its share is held for an interval, as ecnq
        // senders take that long to hear it: the greedy flow's window
        // collapses once more on the way (half from 2.6 s on while falls
        // at an interval's end reached the weights at once).
        assert!(
            shares[13..].iter().all(|&s| (s - 0.5e6).abs() < 1.0),
            "{shares:?}"
        );
        assert!(served >= 450, "{served}");
    }

    /// A Reno-like classic flow that a deep slow-start exit left under
    /// half its share climbs back to it beside an ecnq flow that sends at
    /// its advertised share. Its 40 ms round trip empties its queue between
    /// its flights, so it counts as light, and it must not stay there: the
    /// queue that its bursts and additive increase build here is CoDel's
    /// to mark, and a flow marked here is limited here
    /// ([`MARKED_HEADROOM`]). It got 13 % of the link in the last two
    /// seconds when left only its rate.
    #[test]
    fn a_reno_flow_marked_here_climbs_out_of_a_light_rate() {
        const RTT: Duration = Duration::from_millis(40);
        const ACK_EVERY: u32 = 20;
        let mut b = link(Discipline::Dual);
        // Reno: four packets a round trip (0.1 of the link, under half of
        // its half), one more per round trip, halved at most once per
        // round trip on CE or a drop; its ACKs come in batches, every
        // 20 ms, as a receiver's delayed and coalesced ACKs do.
        let (mut window, mut in_flight, mut recovered_at) = (4.0_f64, 0_u32, Duration::ZERO);
        let mut acks: VecDeque<(Duration, bool)> = VecDeque::new();
        let (mut credit, mut served) = (0.0_f64, 0_u32);
        for t in 0..8_000u32 {
            let now = MS * t;
            while let Some((_, p)) = b.depart(now) {
                if p.0.flow == 2 {
                    acks.push_back((now + RTT, p.0.ecn == Ecn::Ce));
                    served += u32::from(t >= 6_000);
                }
            }
            let dropped = b.take_drops().filter(|(_, p)| p.0.flow == 2).count() as u32;
            in_flight -= dropped;
            let mut congested = dropped > 0;
            while t % ACK_EVERY == 0 && acks.front().is_some_and(|&(at, _)| at <= now) {
                let (_, ce) = acks.pop_front().unwrap();
                in_flight -= 1;
                congested |= ce;
                window += 1.0 / window;
            }
            if congested && now >= recovered_at {
                window = (window / 2.0).max(2.0);
                recovered_at = now + RTT;
            }
            // The ecnq flow: its share, a packet at a time.
            credit += ecnq_capacity(&b) / 1_000.0 / 1_000.0;
            while credit >= 1.0 {
                credit -= 1.0;
                let _ = b.offer(now, pkt(1, ERC, Ecn::Ect0));
            }
            while f64::from(in_flight) < window {
                in_flight += 1;
                let _ = b.offer(now, pkt(2, SchemeTag::UNTAGGED, Ecn::Ect0));
            }
        }
        // The last two seconds: over 0.4 of the link (0.5 is its share).
        assert!(served >= 800, "{served} packets in 2 s");
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

    /// A class whose packets meet every queue empty banks no turns: four
    /// light classic flows beside an ecnq flow under the link's rate (as
    /// four BBR flows in their ProbeRTT beside erc), then all greedy. The
    /// ecnq queue's lead covers only an equal split (a fifth), so the rest
    /// of its share comes by turns; levelled only against busy classes,
    /// the classic queue had banked about 950 packets' worth of turns, and
    /// the ecnq queue got 15 of the next 100 packets.
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

    /// Spoofed sources, one packet each, are no flows: the ecnq flow keeps
    /// the whole link's share.
    #[test]
    fn one_packet_flows_do_not_shrink_the_shares() {
        let mut b = link(Discipline::Dual);
        for t in 0..1000u32 {
            let now = MS * t;
            while b.depart(now).is_some() {}
            let _ = b.offer(now, pkt(1, ERC, Ecn::Ect0));
            let _ = b.offer(
                now,
                pkt(1_000 + u64::from(t), SchemeTag::UNTAGGED, Ecn::NotEct),
            );
        }
        assert_eq!(b.active_flows(), [1, 0, 0]);
        assert_eq!(ecnq_capacity(&b), 1e6);
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

    /// A sender tagged erc that ignores every signal, offering three times
    /// the link, beside an honest one at half the link: the policer holds
    /// the first to its share and the second keeps all of its own.
    #[test]
    fn an_unresponsive_flow_gets_no_more_than_its_share() {
        let mut b = link(Discipline::Dual);
        let mut out = [0u64; 2];
        for t in 0..6000u32 {
            let now = MS * t;
            while let Some((_, p)) = b.depart(now) {
                if t >= 2000 {
                    out[usize::from(p.0.flow == 2)] += 1;
                }
            }
            for _ in 0..3 {
                let _ = b.offer(now, pkt(1, ERC, Ecn::Ect0));
            }
            if t % 2 == 0 {
                let _ = b.offer(now, pkt(2, ERC, Ecn::Ect0));
            }
        }
        // 4 s judged on a 1000-packet/s link: 500 packets per second each.
        assert!(out[0] <= 2100, "the unresponsive flow got {}", out[0]);
        assert!(out[1] >= 1990, "the honest flow got {}", out[1]);
        assert_eq!(b.policed_flows(), 1);
        assert!(b.counters(Class::Ecnq).policed > 0);
    }

    #[test]
    fn fifo_and_forced_marking_keep_one_queue() {
        let mut b = link(Discipline::Fifo);
        b.offer(Duration::ZERO, pkt(2, SchemeTag::UNTAGGED, Ecn::NotEct))
            .unwrap();
        assert_eq!(b.counters(Class::Ecnq).arrivals, 1);
        let mut config = RouterConfig::new(1e6, 1_000_000);
        config.mode = MarkingMode::Off;
        let b: Bottleneck<Pkt> = Bottleneck::new(
            BottleneckConfig {
                rate: Some(8_000_000),
                limit: QueueLimit::Packets(10),
                discipline: Discipline::Dual,
                router: config,
                seed: 0,
            },
            Duration::ZERO,
        );
        assert_eq!(b.discipline(), Discipline::Fifo);
        assert_eq!("FIFO".parse(), Ok(Discipline::Fifo));
        assert!("red".parse::<Discipline>().is_err());
    }

    /// p' moves by RFC 9332 Appendix A.1's rule, once per interval:
    /// p' += α·(q − target) + β·(q − q_prev), delays in seconds, held in
    /// [0, 1].
    #[test]
    fn pi2_updates_p_by_the_rfc_rule_once_per_interval() {
        let mut pi2 = Pi2::new(Duration::ZERO, 0);
        let delay = MS * 20;
        pi2.update(PI2_UPDATE - Duration::from_nanos(1), delay);
        assert_eq!(pi2.p, 0.0, "no update before the first interval ends");
        // Ten intervals at once: the integral term counts each of them, the
        // proportional term the delay's one rise from 0 to 20 ms.
        pi2.update(PI2_UPDATE * 10, delay);
        let expected = 10.0 * PI2_ALPHA * (0.020 - 0.015) + PI2_BETA * 0.020;
        assert!((pi2.p - expected).abs() < 1e-12, "{} vs {expected}", pi2.p);
        // The queue empties: the fall takes β·20 ms off at once, then the
        // integral α·15 ms per interval, down to zero and not below.
        pi2.update(PI2_UPDATE * 11, Duration::ZERO);
        let expected = expected - PI2_ALPHA * 0.015 - PI2_BETA * 0.020;
        assert!((pi2.p - expected).abs() < 1e-12, "{} vs {expected}", pi2.p);
        pi2.update(PI2_UPDATE * 20, Duration::ZERO);
        assert_eq!(pi2.p, 0.0);
        // A second of queue saturates it at 1.
        pi2.update(PI2_UPDATE * 21, Duration::from_secs(1));
        assert_eq!(pi2.p, 1.0);
    }

    /// At a steady p', DualPI2 CE-marks classic ECT packets with p'²,
    /// drops classic Not-ECT ones with p'², and marks L4S packets with
    /// k·p' (RFC 9332 §2.1: p_C = (p_CL / k)²); an L4S packet that waited
    /// over a millisecond is marked whatever p' is.
    #[test]
    fn dualpi2_marks_classic_with_p_squared_and_l4s_with_k_times_p() {
        let mut b = link(Discipline::DualPi2);
        b.pi2.p = 0.1;
        b.pi2.next_update = Duration::MAX;
        let kinds = [
            (1, SchemeTag::UNTAGGED, Ecn::Ect0),
            (2, SchemeTag::UNTAGGED, Ecn::NotEct),
            (3, SchemeTag::UNTAGGED, Ecn::Ect1),
        ];
        // One packet a millisecond, a millisecond each: none waits.
        let (mut sent, mut ce) = ([0u32; 3], [0u32; 3]);
        for t in 0..60_000u32 {
            let now = MS * t;
            while let Some((_, p)) = b.depart(now) {
                let kind = p.0.flow as usize - 1;
                sent[kind] += 1;
                ce[kind] += u32::from(p.0.ecn == Ecn::Ce);
            }
            let (flow, tag, ecn) = kinds[t as usize % 3];
            b.offer(now, pkt(flow, tag, ecn)).unwrap();
        }
        let dropped = b.counters(Class::Classic).aqm_drops as u32;
        let fraction = |n: u32, of: u32| f64::from(n) / f64::from(of);
        let (ect, not_ect, l4s) = (
            fraction(ce[0], sent[0]),
            fraction(dropped, sent[1] + dropped),
            fraction(ce[2], sent[2]),
        );
        assert!((ect - 0.01).abs() < 0.002, "classic ECT marked {ect}");
        assert!(
            (not_ect - 0.01).abs() < 0.002,
            "classic Not-ECT dropped {not_ect}"
        );
        assert_eq!(ce[1], 0);
        assert!((l4s - 0.2).abs() < 0.01, "L4S marked {l4s}");
        assert_eq!(b.counters(Class::L4s).aqm_drops, 0);
        // The step: at p' = 0, three L4S packets at once wait 0, 1 and 2 ms.
        let mut b = link(Discipline::DualPi2);
        for _ in 0..3 {
            b.offer(Duration::ZERO, pkt(3, SchemeTag::UNTAGGED, Ecn::Ect1))
                .unwrap();
        }
        let marks: Vec<bool> = std::iter::from_fn(|| b.depart(MS * 10))
            .map(|(_, p)| p.0.ecn == Ecn::Ce)
            .collect();
        assert_eq!(marks, [false, false, true]);
    }

    /// At a link so slow that one packet takes longer than the step, an
    /// L4S packet is marked only when it joined a waiting packet: a lone
    /// packet, or one behind the packet in service, is not (Linux's
    /// `apply_step`). Marking every packet for its own length had Prague
    /// at 5 % of a 10 Mbit/s link on the real stack.
    #[test]
    fn the_l4s_step_marks_only_a_packet_that_joined_a_queue() {
        for discipline in [Discipline::Dual, Discipline::DualPi2] {
            // 4 Mbit/s: a 1000-byte packet takes 2 ms, twice the step.
            let mut b = link_at(discipline, 4_000_000, Duration::ZERO);
            let mut marks = Vec::new();
            for group in 0..20u32 {
                // Three packets 0.5 ms apart, then 20 ms of idle link.
                for k in 0..3u32 {
                    let now = MS * (20 * group) + MS * k / 2;
                    marks.extend(std::iter::from_fn(|| b.depart(now)).map(|(_, p)| p.0.ecn));
                    b.offer(now, pkt(1, SchemeTag::UNTAGGED, Ecn::Ect1))
                        .unwrap();
                }
            }
            marks.extend(std::iter::from_fn(|| b.depart(MS * 1000)).map(|(_, p)| p.0.ecn));
            let expected = [Ecn::Ect1, Ecn::Ect1, Ecn::Ce].repeat(20);
            assert_eq!(marks, expected, "{discipline:?}");
        }
    }

    /// The seed decides which packets DualPI2's draws mark, and only that.
    #[test]
    fn the_seed_drives_dualpi2s_draws() {
        let marks = |seed: u64| {
            let mut b = link(Discipline::DualPi2);
            b.pi2 = Pi2::new(Duration::ZERO, seed);
            b.pi2.p = 0.1;
            b.pi2.next_update = Duration::MAX;
            let mut ce = Vec::new();
            for t in 0..2_000u32 {
                let now = MS * t;
                ce.extend(std::iter::from_fn(|| b.depart(now)).map(|(_, p)| p.0.ecn == Ecn::Ce));
                b.offer(now, pkt(1, SchemeTag::UNTAGGED, Ecn::Ect1))
                    .unwrap();
            }
            ce
        };
        let count = |ce: &[bool]| ce.iter().filter(|&&c| c).count();
        let (a, b) = (marks(1), marks(2));
        assert_eq!(marks(1), a);
        assert_ne!(a, b);
        // Both near k·p' = 0.2 of 2000.
        for ce in [&a, &b] {
            assert!((350..450).contains(&count(ce)), "{}", count(ce));
        }
    }

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

    /// CoDel's drops in the dual queue's classic queue fall on the flow
    /// with the most bytes waiting, not on whoever is at the head: a flow
    /// that answers them keeps its packets beside one that fills the queue
    /// and ignores them (quinn's BBR).
    #[test]
    fn codel_signals_the_flow_with_the_most_bytes_waiting() {
        // Flow 1 greedy (two packets a millisecond), flow 2 one packet
        // every 2 ms, both Not-ECT, for 4 s: CoDel's drops per flow.
        let run = |discipline: Discipline| {
            let mut b = link(discipline);
            b.limit = QueueLimit::Packets(100);
            let mut dropped: HashMap<u64, u64> = HashMap::new();
            for t in 0..4_000u32 {
                let now = MS * t;
                while b.depart(now).is_some() {}
                let _ = b.offer(now, pkt(1, SchemeTag::UNTAGGED, Ecn::NotEct));
                let _ = b.offer(now + MS / 2, pkt(1, SchemeTag::UNTAGGED, Ecn::NotEct));
                if t % 2 == 0 {
                    let _ = b.offer(now, pkt(2, SchemeTag::UNTAGGED, Ecn::NotEct));
                }
                for (why, p) in b.take_drops() {
                    if why == Dropped::Aqm {
                        *dropped.entry(p.0.flow).or_default() += 1;
                    }
                }
            }
            let of = |flow| dropped.get(&flow).copied().unwrap_or(0);
            (of(1), of(2))
        };
        let (greedy, other) = run(Discipline::Dual);
        assert!(greedy > 20, "CoDel dropped {greedy} of the greedy flow's");
        assert_eq!(other, 0, "CoDel dropped {other} of the other flow's");
        // DualPI2 knows no flows: its drops fall on both.
        let (greedy, other) = run(Discipline::DualPi2);
        assert!(greedy > 0 && other > 0, "{greedy} / {other}");
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

    #[test]
    fn codel_waits_an_interval_then_signals_faster() {
        let mut c = Codel::default();
        let late = Duration::from_millis(20);
        assert!(!c.signal(Duration::ZERO, late, 100_000));
        assert!(!c.signal(MS * 99, late, 100_000));
        assert!(c.signal(MS * 100, late, 100_000));
        assert!(!c.signal(MS * 150, late, 100_000));
        assert!(c.signal(MS * 200, late, 100_000));
        // The next gap is 100 ms / √2.
        assert!(!c.signal(MS * 270, late, 100_000));
        assert!(c.signal(MS * 271, late, 100_000));
        // A short sojourn ends the episode.
        assert!(!c.signal(MS * 272, MS, 100_000));
        assert!(!c.dropping);
    }
}
