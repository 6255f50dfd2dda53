//! A simulated pair for the session tests, after quinn-proto's `Pair`: a
//! sending and a receiving [`Session`] over a sans-IO path, in virtual time.
//! No sockets, no clock.
//!
//! The sender sends 1200-byte data packets whenever its window and its
//! pacer (quinn's, modelled by [`Pacer`]) allow; an ecnq receiver
//! acknowledges each one and sends the reports its session asks for, a
//! vanilla one ([`VanillaPeer`]) sends QUIC ACK frames with its ECN counts. Each
//! direction ([`Leg`]) has a delay, a loss rate, jitter (which
//! reorders) and a blackout; data packets may cross a [`Bottleneck`] whose
//! router writes the schemes' marks, or one that only queues.
//!
//! Time goes from one event to the next, as quinn-proto's pair steps to the
//! earlier of its endpoints' wake-ups ([`Pair::next_event`]): an arrival on
//! a leg, a departure from the bottleneck, the sender's next chance to send
//! (its pacer's, or its gate's: [`Session::window_reaches_at`]), its loss
//! timer, the receiver's next report poll ([`Next::At`]) or a vanilla
//! peer's ACK delay. A step handles everything due at its instant, so
//! every time is exact and a test costs what its events cost. A pair with
//! no next event, or one that steps at one instant without end, fails
//! saying so ([`Pair::try_run`]; test: `a_stuck_pair_says_so`).

use std::collections::BTreeMap;
use std::ops::{Range, RangeInclusive};
use std::time::Duration;

use super::sending::QUINN_PACING_GAIN;
use super::{Event, Next, PeerEvent, PeerMode, Progress, Session, SessionStats};
use crate::router::bottleneck::{Bottleneck, BottleneckConfig, Discipline, QueueLimit, Queued};
use crate::router::capacity::{CapacitySource, LinkRate};
use crate::router::{MarkingMode, RouterConfig};
use crate::schemes::registry::Scheme;
use crate::signal::{LawConfig, PacketMarks, RttSample};
use crate::wire::ack::{ack_frames, AckRepr, EcnCounts};
use crate::wire::ecn::{Ecn, SchemeTag};
use crate::wire::hash::fmix32;

/// The packet unit, and the size of every data packet.
pub(super) const MSS: u64 = 1200;
/// IPv4 and UDP headers.
pub(super) const HEADERS: u64 = 28;
/// The bottleneck's rate, bits per second.
pub(super) const LINK_RATE: u64 = 10_000_000;
/// Steps at one instant beyond which a pair is taken to spin: each step
/// handles everything due, so only legs without delay chain steps at one
/// instant, and the pacer bounds what those carry to a few dozen packets.
const STEPS_PER_INSTANT: u32 = 10_000;

/// quinn's pacer as the pair models it (quinn-proto's `pacing` module):
/// tokens fill at [`QUINN_PACING_GAIN`] times the window per srtt and hold
/// [`PACER_SPAN`] of that, at least [`PACER_MIN_BURST`] packets; a packet
/// leaves on a full packet's tokens.
#[derive(Debug, Default)]
struct Pacer {
    tokens: f64,
    at: Option<Duration>,
}

/// What quinn's pacer holds, as time at its rate ...
const PACER_SPAN: Duration = Duration::from_millis(2);
/// ... and at least this many packets.
const PACER_MIN_BURST: f64 = 10.0;

impl Pacer {
    /// The tokens at `now` for a `window` paced over `srtt`, and their
    /// fill rate in bytes per second.
    fn filled(&self, now: Duration, window: u64, srtt: Duration) -> (f64, f64) {
        let rate = QUINN_PACING_GAIN * window as f64 / srtt.as_secs_f64();
        let capacity = (rate * PACER_SPAN.as_secs_f64()).max(PACER_MIN_BURST * MSS as f64);
        let filled = self.at.map_or(capacity, |at| {
            self.tokens + rate * now.saturating_sub(at).as_secs_f64()
        });
        (filled.min(capacity), rate)
    }

    /// Takes `bytes` of tokens at `now` if there are that many.
    fn take(&mut self, now: Duration, window: u64, srtt: Duration, bytes: u64) -> bool {
        (self.tokens, _) = self.filled(now, window, srtt);
        self.at = Some(now);
        if self.tokens < bytes as f64 {
            return false;
        }
        self.tokens -= bytes as f64;
        true
    }

    /// When [`Pacer::take`] would next find `bytes` of tokens, at the rate
    /// `window` gives (quinn's pacer sets its timer so); rounded up to the
    /// next nanosecond. `None` if the rate is zero.
    fn ready_at(&self, now: Duration, window: u64, srtt: Duration, bytes: u64) -> Option<Duration> {
        let (tokens, rate) = self.filled(now, window, srtt);
        if tokens >= bytes as f64 {
            return Some(now);
        }
        let wait = Duration::try_from_secs_f64((bytes as f64 - tokens) / rate).ok()?;
        Some(now + wait + Duration::from_nanos(1))
    }
}

/// Deterministic pseudo-random numbers (the packet hash's mixer over a
/// counter), so every run repeats.
struct Rng(u32);

impl Rng {
    /// Uniform in [0, 1).
    fn unit(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(1);
        f64::from(fmix32(self.0)) / 4_294_967_296.0
    }

    /// True with probability `p`.
    fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// Uniform in [0, `max`).
    fn below(&mut self, max: Duration) -> Duration {
        max.mul_f64(self.unit())
    }
}

/// What one direction of the path does to what crosses it.
#[derive(Clone, Debug, Default)]
pub(super) struct Leg {
    pub delay: Duration,
    /// The share of items lost.
    pub loss: f64,
    /// Extra delay, uniform below this: items closer than it may swap.
    pub jitter: Duration,
    /// Everything sent in this span is lost.
    pub blackout: Option<Range<Duration>>,
}

impl Leg {
    fn new(delay: Duration) -> Leg {
        Leg {
            delay,
            ..Leg::default()
        }
    }
}

/// Items crossing one leg, by arrival time and then by order sent.
struct Wire<T> {
    leg: Leg,
    crossing: BTreeMap<(Duration, u64), T>,
    sent: u64,
}

impl<T> Wire<T> {
    fn new(leg: Leg) -> Wire<T> {
        Wire {
            leg,
            crossing: BTreeMap::new(),
            sent: 0,
        }
    }

    fn send(&mut self, now: Duration, item: T, rng: &mut Rng) {
        self.sent += 1;
        let blackout = self.leg.blackout.as_ref().is_some_and(|b| b.contains(&now));
        if blackout || rng.chance(self.leg.loss) {
            return;
        }
        let at = now + self.leg.delay + rng.below(self.leg.jitter);
        self.crossing.insert((at, self.sent), item);
    }

    /// When the next item arrives.
    fn next_arrival(&self) -> Option<Duration> {
        self.crossing.first_key_value().map(|(&(at, _), _)| at)
    }

    /// The next item that arrived by `now`, in order of arrival.
    fn arrived(&mut self, now: Duration) -> Option<T> {
        self.next_arrival().filter(|&at| at <= now)?;
        self.crossing.pop_first().map(|(_, item)| item)
    }
}

/// A data packet.
#[derive(Clone, Copy, Debug)]
pub(super) struct Datagram {
    number: u64,
    tos: u8,
    hash: u32,
}

impl Queued for Datagram {
    fn wire_len(&self) -> u32 {
        (MSS + HEADERS) as u32
    }

    fn marks(&self) -> Option<PacketMarks> {
        Some(PacketMarks {
            ecn: Ecn::from_tos(self.tos),
            tag: SchemeTag::from_tos(self.tos),
            hash: self.hash,
            flow: 1,
        })
    }

    fn set_marks(&mut self, marks: &PacketMarks) {
        self.tos = marks.tag.tos(marks.ecn);
    }
}

/// The acknowledgement of one data packet.
#[derive(Clone, Copy, Debug)]
struct Ack {
    number: u64,
    tos: u8,
    ce: bool,
}

/// A peer that does not run ecnq, as a QUIC stack acknowledges: one ACK
/// frame per `ack_every` packets, or once the oldest packet not yet
/// acknowledged has waited [`VanillaPeer::MAX_ACK_DELAY`]; its ranges the
/// packets received (up to [`VanillaPeer::MAX_RANGES`], highest first),
/// with its cumulative ECN counts once it has received an ECN-marked
/// packet if `ecn_counts` (quinn's rule).
#[derive(Clone, Debug)]
pub(super) struct VanillaPeer {
    pub ack_every: u64,
    pub ecn_counts: bool,
    /// The packets received, as ranges: first number → last.
    received: BTreeMap<u64, u64>,
    counts: EcnCounts,
    unacked: u64,
    /// When the oldest packet not yet acknowledged arrived.
    waiting_since: Option<Duration>,
}

impl VanillaPeer {
    /// quinn keeps 32 ranges of received packets to acknowledge.
    const MAX_RANGES: usize = 32;
    /// RFC 9000 §18.2's default max_ack_delay: a receiver that decimates
    /// ACKs still acknowledges a packet within it (§13.2.1).
    const MAX_ACK_DELAY: Duration = Duration::from_millis(25);

    pub fn new(ack_every: u64, ecn_counts: bool) -> VanillaPeer {
        VanillaPeer {
            ack_every,
            ecn_counts,
            received: BTreeMap::new(),
            counts: EcnCounts::default(),
            unacked: 0,
            waiting_since: None,
        }
    }

    /// When the delay timer calls for an ACK frame, if a packet waits.
    fn ack_due(&self) -> Option<Duration> {
        self.waiting_since.map(|since| since + Self::MAX_ACK_DELAY)
    }

    /// The ACK frame the delay timer calls for at `now`, if any.
    fn on_timer(&mut self, now: Duration) -> Option<Vec<u8>> {
        let due = self.ack_due().is_some_and(|due| now >= due);
        due.then(|| self.ack_frame())
    }

    /// A data packet arrived at `now`; returns the ACK frame it calls
    /// for, if any.
    fn on_packet(&mut self, now: Duration, number: u64, ecn: Ecn) -> Option<Vec<u8>> {
        match ecn {
            Ecn::NotEct => {}
            Ecn::Ect0 => self.counts.ect0 += 1,
            Ecn::Ect1 => self.counts.ect1 += 1,
            Ecn::Ce => self.counts.ce += 1,
        }
        self.receive(number);
        self.unacked += 1;
        self.waiting_since.get_or_insert(now);
        (self.unacked >= self.ack_every).then(|| self.ack_frame())
    }

    /// Adds packet `number` to the ranges received, joining its
    /// neighbours, so that a frame costs its ranges, not its packets.
    fn receive(&mut self, number: u64) {
        let below = self.received.range(..=number).next_back();
        let (mut first, mut last) = (number, number);
        match below.map(|(&f, &l)| (f, l)) {
            Some((_, l)) if l >= number => return,
            Some((f, l)) if l + 1 == number => first = f,
            _ => {}
        }
        if let Some(l) = self.received.remove(&(number + 1)) {
            last = l;
        }
        self.received.insert(first, last);
    }

    /// An ACK frame for every packet received so far, in up to
    /// [`VanillaPeer::MAX_RANGES`] ranges, the highest first.
    fn ack_frame(&mut self) -> Vec<u8> {
        self.unacked = 0;
        self.waiting_since = None;
        let ranges: Vec<RangeInclusive<u64>> = (self.received.iter().rev())
            .take(Self::MAX_RANGES)
            .map(|(&first, &last)| first..=last)
            .collect();
        let marked = self.counts != EcnCounts::default();
        let repr = AckRepr {
            largest: *ranges[0].end(),
            delay: 0,
            ranges,
            ecn: (self.ecn_counts && marked).then_some(self.counts),
        };
        let mut frame = Vec::new();
        repr.emit(&mut frame);
        frame
    }
}

/// A bottleneck of [`LINK_RATE`] whose router marks as `marking` says
/// ([`MarkingMode::Off`]: a plain drop-tail queue, no ecnq router).
pub(super) fn bottleneck<P: Queued>(marking: MarkingMode, now: Duration) -> Bottleneck<P> {
    let mut router = RouterConfig::new(LINK_RATE as f64 / 8.0, 100 * (MSS + HEADERS));
    router.mode = marking;
    let config = BottleneckConfig {
        rate: Some(LinkRate::Fixed(LINK_RATE)),
        capacity: CapacitySource::Configured,
        limit: QueueLimit::Packets(100),
        discipline: Discipline::Fifo,
        router,
        seed: 0,
    };
    Bottleneck::new(config, now)
}

/// A sender and a receiver session over a simulated path.
pub(super) struct Pair {
    pub now: Duration,
    pub sender: Session,
    /// `None`: a peer that does not run ecnq (untagged ACKs, no reports),
    /// which acknowledges per packet, or as `vanilla` says.
    pub receiver: Option<Session>,
    pub vanilla: Option<VanillaPeer>,
    /// Between the sender and the data leg; `None`: a path of unlimited rate.
    pub bottleneck: Option<Bottleneck<Datagram>>,
    /// The data leg clears the ECN field of every packet.
    pub bleach_ecn: bool,
    data: Wire<Datagram>,
    acks: Wire<Ack>,
    ack_frames: Wire<Vec<u8>>,
    reports: Wire<Vec<u8>>,
    rng: Rng,
    pacer: Pacer,
    /// When the receiver's report policy is asked next; `None`: when a
    /// packet wakes it ([`super::Arrival::wake_reporter`]).
    report_poll: Option<Duration>,
    /// Steps taken at `now`, against [`STEPS_PER_INSTANT`].
    steps_now: u32,
    /// Packets sent and not yet acknowledged or lost, by number: when sent.
    outstanding: BTreeMap<u64, Duration>,
    sent: u64,
    received: u64,
    rtt: Option<RttSample>,
    /// Bytes acknowledged so far.
    pub acked_bytes: u64,
    /// The sender's events, with when they happened.
    pub events: Vec<(Duration, Event)>,
    /// Every data packet's TOS byte as the sender sent it, with when.
    pub sent_tos: Vec<(Duration, u8)>,
}

impl Pair {
    /// `scheme`'s sender and an ecnq receiver, 10 ms each way, across a
    /// bottleneck whose router marks every scheme.
    pub fn new(scheme: Scheme) -> Pair {
        let session = || Session::new(Some(scheme), LawConfig::with_mss(MSS), HEADERS);
        let leg = Leg::new(Duration::from_millis(10));
        Pair {
            now: Duration::ZERO,
            sender: session(),
            receiver: Some(session()),
            vanilla: None,
            bleach_ecn: false,
            bottleneck: Some(bottleneck(MarkingMode::Auto, Duration::ZERO)),
            data: Wire::new(leg.clone()),
            acks: Wire::new(leg.clone()),
            ack_frames: Wire::new(leg.clone()),
            reports: Wire::new(leg),
            rng: Rng(1 << 31),
            pacer: Pacer::default(),
            report_poll: Some(Duration::ZERO),
            steps_now: 0,
            outstanding: BTreeMap::new(),
            sent: 0,
            received: 0,
            rtt: None,
            acked_bytes: 0,
            events: Vec::new(),
            sent_tos: Vec::new(),
        }
    }

    /// Sets every leg's one-way delay (data, ACKs and reports).
    pub fn set_one_way_delay(&mut self, delay: Duration) {
        self.data.leg.delay = delay;
        self.acks.leg.delay = delay;
        self.ack_frames.leg.delay = delay;
        self.reports.leg.delay = delay;
    }

    /// The leg a vanilla peer's ACK frames cross.
    pub fn ack_frame_leg(&mut self) -> &mut Leg {
        &mut self.ack_frames.leg
    }

    /// The leg reports cross, for loss, delay, reordering and blackouts.
    pub fn report_leg(&mut self) -> &mut Leg {
        &mut self.reports.leg
    }

    /// Replaces the bottleneck by one that marks as `marking` (packets
    /// waiting in the old one are lost).
    pub fn set_router(&mut self, marking: MarkingMode) {
        self.bottleneck = Some(bottleneck(marking, self.now));
    }

    /// Runs until `end`: every event due by then, and the clock to `end`.
    pub fn run_until(&mut self, end: Duration) {
        self.run_checking(end, |_| {});
    }

    /// Runs until `end`, calling `check` after every step (each instant
    /// something was due); panics if the pair cannot go on
    /// ([`Pair::try_run`]).
    pub fn run_checking(&mut self, end: Duration, check: impl FnMut(&Pair)) {
        if let Err(stuck) = self.try_run(end, check) {
            panic!("{stuck}");
        }
    }

    /// [`Pair::run_checking`], or why the pair cannot go on: nothing will
    /// ever be due, or it steps at one instant without end.
    pub fn try_run(&mut self, end: Duration, mut check: impl FnMut(&Pair)) -> Result<(), String> {
        loop {
            let Some(next) = self.next_event() else {
                return Err(format!(
                    "the pair is stuck at {:?}: nothing in transit or queued, no \
                     timer set, and the sender's window ({:?} bytes) lets nothing \
                     more out with {} bytes in flight",
                    self.now,
                    self.sender.window(self.now),
                    self.in_flight(),
                ));
            };
            if next > end {
                self.now = self.now.max(end);
                return Ok(());
            }
            self.steps_now = if next == self.now {
                self.steps_now + 1
            } else {
                0
            };
            if self.steps_now == STEPS_PER_INSTANT {
                return Err(format!(
                    "the pair spins: {STEPS_PER_INSTANT} steps at {next:?}"
                ));
            }
            self.now = next;
            self.step();
            check(self);
        }
    }

    /// Bytes sent and not yet acknowledged or lost.
    pub fn in_flight(&self) -> u64 {
        self.outstanding.len() as u64 * MSS
    }

    /// The sender's stats now.
    pub fn stats(&self) -> SessionStats {
        self.sender.stats(self.now)
    }

    /// The sender's mode changes: when, and to what.
    pub fn mode_changes(&self) -> Vec<(Duration, PeerMode)> {
        self.events
            .iter()
            .filter_map(|(at, event)| match event {
                Event::ModeChanged { to, .. } => Some((*at, *to)),
                _ => None,
            })
            .collect()
    }

    /// When the sender first entered `mode` at or after `from`.
    pub fn entered(&self, mode: PeerMode, from: Duration) -> Option<Duration> {
        self.mode_changes()
            .into_iter()
            .find(|&(at, to)| to == mode && at >= from)
            .map(|(at, _)| at)
    }

    /// Data packets sent in `span`, by TOS byte.
    pub fn tos_sent(&self, span: Range<Duration>) -> impl Iterator<Item = u8> + '_ {
        self.sent_tos
            .iter()
            .filter(move |(at, _)| span.contains(at))
            .map(|(_, tos)| *tos)
    }

    /// The earliest time anything is due: an arrival on a leg, the
    /// bottleneck's next departure, a timer of either end, the sender's
    /// next chance to send; `None` if nothing ever is.
    fn next_event(&self) -> Option<Duration> {
        let report_poll = self.receiver.as_ref().and(self.report_poll);
        [
            self.bottleneck.as_ref().and_then(|b| b.next_departure()),
            self.data.next_arrival(),
            self.acks.next_arrival(),
            self.ack_frames.next_arrival(),
            self.reports.next_arrival(),
            self.vanilla.as_ref().and_then(VanillaPeer::ack_due),
            report_poll,
            self.next_timeout(),
            self.next_send(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// When the sender may send its next packet: once its window lets one
    /// more out (only time opens a rate law's gate; otherwise, an
    /// acknowledgement: `None`) and its pacer has the tokens.
    fn next_send(&self) -> Option<Duration> {
        let open = self
            .sender
            .window_reaches_at(self.now, self.in_flight() + MSS)?;
        let window = self.sender.window(open)?;
        self.pacer.ready_at(open, window, self.srtt(), MSS)
    }

    /// Handles everything due at `self.now`.
    fn step(&mut self) {
        let now = self.now;
        self.forward_data(now);
        self.deliver_data(now);
        if let Some(frame) = self.vanilla.as_mut().and_then(|v| v.on_timer(now)) {
            self.ack_frames.send(now, frame, &mut self.rng);
        }
        self.deliver_ack_frames(now);
        self.deliver_acks(now);
        self.detect_timeouts(now);
        while let Some(report) = self.reports.arrived(now) {
            self.sender.on_peer(now, PeerEvent::Report(&report));
        }
        self.poll_reports(now);
        self.transmit(now);
        while let Some(event) = self.sender.poll_event() {
            self.events.push((now, event));
        }
    }

    fn srtt(&self) -> Duration {
        self.rtt.map_or(Duration::from_millis(100), |r| r.smoothed)
    }

    fn transmit(&mut self, now: Duration) {
        loop {
            // A sender without a law sends nothing (and the pair is stuck).
            let Some(window) = self.sender.window(now) else {
                return;
            };
            if self.in_flight() + MSS > window || !self.pacer.take(now, window, self.srtt(), MSS) {
                return;
            }
            self.sent += 1;
            let packet = Datagram {
                number: self.sent,
                tos: self.sender.send_tos(Ecn::Ect0, 1),
                hash: fmix32(self.sent as u32),
            };
            self.sender.on_sent(now, MSS);
            self.sender.on_packet_sent(now, packet.number, packet.hash);
            self.outstanding.insert(packet.number, now);
            self.sent_tos.push((now, packet.tos));
            match self.bottleneck.as_mut() {
                // A packet the bottleneck drops is lost: the acks of later
                // ones tell.
                Some(bottleneck) => {
                    let _ = bottleneck.offer(now, packet);
                }
                None => self.data.send(now, packet, &mut self.rng),
            }
        }
    }

    fn forward_data(&mut self, now: Duration) {
        let Some(bottleneck) = self.bottleneck.as_mut() else {
            return;
        };
        while let Some((end, packet)) = bottleneck.depart(now) {
            self.data.send(end, packet, &mut self.rng);
        }
    }

    fn deliver_data(&mut self, now: Duration) {
        while let Some(mut packet) = self.data.arrived(now) {
            self.received += 1;
            if self.bleach_ecn {
                packet.tos &= !0b11;
            }
            if let Some(vanilla) = self.vanilla.as_mut() {
                let ecn = Ecn::from_tos(packet.tos);
                if let Some(frame) = vanilla.on_packet(now, packet.number, ecn) {
                    self.ack_frames.send(now, frame, &mut self.rng);
                }
                continue;
            }
            let tos = match self.receiver.as_mut() {
                Some(receiver) => {
                    let hash = std::iter::once(Some(packet.hash));
                    let arrival = receiver.on_receive(now, packet.tos, hash);
                    if arrival.wake_reporter {
                        self.report_poll = Some(now);
                    }
                    receiver.send_tos(Ecn::Ect0, 1)
                }
                None => SchemeTag::UNTAGGED.tos(Ecn::Ect0),
            };
            let ack = Ack {
                number: packet.number,
                tos,
                ce: Ecn::from_tos(packet.tos) == Ecn::Ce,
            };
            self.acks.send(now, ack, &mut self.rng);
        }
    }

    fn deliver_acks(&mut self, now: Duration) {
        while let Some(ack) = self.acks.arrived(now) {
            let hash = fmix32(!(ack.number as u32));
            self.sender
                .on_receive(now, ack.tos, std::iter::once(Some(hash)));
            self.acknowledge(now, &[ack.number], ack.ce);
        }
    }

    /// A vanilla peer's ACK frames: the session reads each before the
    /// packets it acknowledges are, as the QUIC glue's packet keys do.
    fn deliver_ack_frames(&mut self, now: Duration) {
        while let Some(bytes) = self.ack_frames.arrived(now) {
            let Some(Ok(frame)) = ack_frames(&bytes).next() else {
                continue;
            };
            let untagged = SchemeTag::UNTAGGED.tos(Ecn::Ect0);
            let hash = fmix32(!(frame.largest() as u32));
            self.sender
                .on_receive(now, untagged, std::iter::once(Some(hash)));
            self.sender.on_peer(now, PeerEvent::AckFrame(frame));
            let numbers: Vec<u64> = frame
                .ranges()
                .flat_map(|r| {
                    self.outstanding
                        .range(r)
                        .map(|(&n, _)| n)
                        .collect::<Vec<_>>()
                })
                .collect();
            self.acknowledge(now, &numbers, false);
        }
    }

    /// Packets `numbers` were acknowledged; `ce`: the first carried CE.
    fn acknowledge(&mut self, now: Duration, numbers: &[u64], ce: bool) {
        let Some(&largest) = numbers.iter().max() else {
            return;
        };
        for &number in numbers {
            let Some(sent) = self.outstanding.remove(&number) else {
                continue;
            };
            let rtt = self.sample_rtt(now - sent);
            self.acked_bytes += MSS;
            let acked = PeerEvent::Acked {
                bytes: MSS,
                app_limited: false,
                rtt,
            };
            self.sender.on_peer(now, acked);
            if ce {
                let lost_bytes = 0;
                self.sender
                    .on_peer(now, PeerEvent::Congestion { sent, lost_bytes });
            }
        }
        // RFC 9002's packet threshold: three later packets acknowledged.
        let lost: Vec<_> = self
            .outstanding
            .range(..largest.saturating_sub(2))
            .map(|(&n, &at)| (n, at))
            .collect();
        self.declare_lost(now, &lost);
        let in_flight = self.outstanding.len() as u64 * MSS;
        self.sender.on_peer(now, PeerEvent::AcksDone { in_flight });
    }

    /// Packets unacknowledged for three smoothed RTTs are lost (a tail the
    /// packet threshold cannot catch).
    fn loss_timeout(&self) -> Duration {
        (self.srtt() * 3).max(Duration::from_millis(200))
    }

    /// When the oldest packet outstanding times out.
    fn next_timeout(&self) -> Option<Duration> {
        let (_, &sent) = self.outstanding.first_key_value()?;
        Some(sent + self.loss_timeout())
    }

    /// Declares lost the packets that timed out by `now`: packets are
    /// numbered in the order sent, so they are the first ones.
    fn detect_timeouts(&mut self, now: Duration) {
        let limit = self.loss_timeout();
        let lost: Vec<_> = self
            .outstanding
            .iter()
            .take_while(|(_, &at)| now.saturating_sub(at) >= limit)
            .map(|(&n, &at)| (n, at))
            .collect();
        self.declare_lost(now, &lost);
    }

    fn declare_lost(&mut self, now: Duration, lost: &[(u64, Duration)]) {
        for &(number, sent) in lost {
            self.outstanding.remove(&number);
            let lost_bytes = MSS;
            self.sender
                .on_peer(now, PeerEvent::Congestion { sent, lost_bytes });
        }
    }

    fn sample_rtt(&mut self, latest: Duration) -> RttSample {
        let rtt = match self.rtt {
            None => RttSample::uniform(latest),
            Some(r) => RttSample {
                smoothed: (r.smoothed * 7 + latest) / 8,
                min: r.min.min(latest),
                latest,
            },
        };
        self.rtt = Some(rtt);
        rtt
    }

    fn poll_reports(&mut self, now: Duration) {
        let srtt = self.srtt();
        // The sender's own reports (on the ACKs it receives) are not under
        // test; polling tells its session how much data it sent.
        let progress = Progress {
            sent: self.sent,
            received: 0,
        };
        let _ = self.sender.poll_report(now, srtt, progress);
        let Some(receiver) = self.receiver.as_mut() else {
            return;
        };
        if self.report_poll.is_none_or(|at| at > now) {
            return;
        }
        let progress = Progress {
            sent: 0,
            received: self.received,
        };
        // As the QUIC glue does: after a report, ask again at once.
        self.report_poll = loop {
            match receiver.poll_report(now, srtt, progress) {
                (_, Some(report)) => self.reports.send(now, report, &mut self.rng),
                (Next::At(at), None) => break Some(at),
                (_, None) => break None,
            }
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ranges of the frame a vanilla peer sends on receiving `numbers`.
    fn ranges_after(numbers: impl IntoIterator<Item = u64>) -> Vec<RangeInclusive<u64>> {
        let mut peer = VanillaPeer::new(u64::MAX, false);
        for number in numbers {
            let _ = peer.on_packet(Duration::ZERO, number, Ecn::Ect0);
        }
        let bytes = peer.ack_frame();
        let frame = ack_frames(&bytes).next().expect("a frame").expect("valid");
        frame.ranges().collect()
    }

    /// Packets join their neighbours' ranges whatever their order, a
    /// duplicate changes nothing, and a frame holds the highest
    /// [`VanillaPeer::MAX_RANGES`] ranges.
    #[test]
    fn a_vanilla_peer_acknowledges_the_ranges_it_received() {
        assert_eq!(ranges_after([1, 2, 3, 5, 9, 8, 4, 3]), [8..=9, 1..=5]);
        assert_eq!(ranges_after([7, 5, 6, 1]), [5..=7, 1..=1]);
        let gaps = ranges_after((0..100).map(|n| 2 * n));
        assert_eq!(gaps.len(), VanillaPeer::MAX_RANGES);
        assert_eq!((gaps[0].clone(), gaps[31].clone()), (198..=198, 136..=136));
    }
}
