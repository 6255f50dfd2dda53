//! The router ([`ErcMarker`]): meters each flow's packets, computes the
//! fair share at the end of every interval (`share`), and writes its index
//! into the flows' packets (`written`).

mod flight;
mod share;
#[cfg(test)]
mod testing;
mod written;

use std::time::Duration;

use super::START_CODE_DIGITS;
use super::{digit, digit_of, ecn_of, position, Digits, DIGITS, RATE_MAX};
use crate::signal::flow_table::{FlowTable, FlowTableConfig};
use crate::signal::{LinkState, Marker, PacketMarks};
use crate::wire::ecn::Ecn;
use flight::Flights;
use written::WrittenIndex;
/// How an erc router computes its fair share.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ErcConfig {
    /// η: the share of the capacity the router hands out. RCP and XCP aim
    /// at full use and let the queue term absorb error; 0.98 leaves room for
    /// the index's quantization (±0.8 %) and for senders whose packets the
    /// router counts with a few bytes more header than they pace.
    pub target_utilization: f64,
    /// A standing queue is drained within about this long: the share is
    /// lowered by queue / drain_time (RCP's β·q/d term, with d fixed, since
    /// the router sees no RTTs).
    pub drain_time: Duration,
    /// The shortest measurement interval.
    pub min_interval: Duration,
    /// The longest measurement interval.
    pub max_interval: Duration,
    /// The interval is as long as a flow at the fair share takes to send
    /// this many packets (clamped to the bounds above), so that per-flow
    /// rates are measured from enough packets at any speed.
    pub interval_packets: f64,
    /// A new flow counts as bottlenecked here until it first sends at the
    /// share, whatever it sends before: it needs a chain and a round trip
    /// before it can, which on a long path takes seconds (about two on a
    /// 1 s path, its start pacing at its partial chain's bound). A flow that
    /// has not reached the share after this long is limited elsewhere.
    /// Shorter, a newcomer on a 1 s path loses its reserved share before it
    /// comes to use it and finds a queue (sim test
    /// `a_1_s_path_keeps_the_queue_empty_while_newcomers_start`).
    pub young: Duration,
    /// A flow sending at least this fraction of the smallest share the
    /// router advertised over the last [`ErcConfig::reference_span`] is
    /// bottlenecked here; one below it is limited elsewhere.
    pub bottlenecked_fraction: f64,
    /// The shortest span over which the smallest advertised share is looked
    /// for: a flow's rate reflects what it was told up to a round trip ago,
    /// so the router looks back over the longest round trip it has learnt
    /// among its flows when that is longer. A fixed second was too short
    /// for 2 s paths and too long where short flows come and go: the
    /// share's dips made every flow that had sent a window count as
    /// bottlenecked (scenario `coexist-short-flows`).
    pub reference_span: Duration,
}

impl Default for ErcConfig {
    fn default() -> ErcConfig {
        ErcConfig {
            target_utilization: 0.98,
            drain_time: Duration::from_millis(1000),
            min_interval: Duration::from_millis(10),
            max_interval: Duration::from_millis(250),
            interval_packets: 16.0,
            young: Duration::from_secs(4),
            reference_span: Duration::from_millis(250),
            bottlenecked_fraction: 0.8,
        }
    }
}

/// A silence this long among a new flow's packets ends its first flight
/// (sent at once, or paced faster than about 1 Mbit/s): the flow waits for
/// its first ACKs. ecnq's own.
pub const RETURN_GAP: Duration = Duration::from_millis(10);
/// The shortest silence after a flow's first datagrams that reads as a
/// wait for its peer. A relay or a host that hands the router packets in
/// batches delivers a back-to-back flight within one batch, in no time at
/// all, so a gap of a few microseconds before the next batch was "more
/// than twice as long": on the real stack a stream of fake newcomers
/// counted that way (`ecnq-perf demo --fake-newcomers`). ecnq's own: below
/// the 2 ms of `erc-staggered`'s shortest path, far above a host's
/// scheduling jitter (test
/// `a_flow_that_waited_on_a_short_path_counts_at_its_tenth_packet`).
pub const SHORTEST_WAIT: Duration = Duration::from_millis(1);
/// The longest round trip the router learns: a flow silent for longer after
/// its first packets has paused, not waited for its ACKs. ecnq's own.
pub const LONGEST_ROUND: Duration = Duration::from_secs(3);
/// A packet this long or longer carries data. The return direction of
/// a flow in the other direction carries only ACKs (QUIC's are 60–90 bytes
/// on the wire, the simulator's 40), which will never use a share: counted
/// as newcomers, they held one each for [`ErcConfig::young`], and left
/// much of the link idle at the start of `bmcc-fig2-4` (flows each way;
/// `a_flow_of_acks_never_becomes_a_newcomer`).
/// A sender's first flight is full-sized (QUIC pads its first packet to
/// 1200 bytes). ecnq's own.
pub const DATA_PACKET: u32 = 256;
/// Packet size assumed before the router has seen any packets.
const DEFAULT_PACKET: f64 = 1_200.0;

/// What an erc router keeps per flow.
#[derive(Clone, Copy, Debug, Default)]
struct FlowState {
    /// Bytes that arrived this interval.
    bytes: u64,
    /// Arrival rate, averaged over intervals (bytes per second).
    rate: f64,
    /// Packets of at least [`DATA_PACKET`] bytes seen since the flow was
    /// listed (saturating): a flow of ACKs never becomes a newcomer.
    packets: u32,
    /// The chain positions its data packets have passed since it was
    /// listed (their digits are not kept).
    seen: Digits,
    /// Whether it counts in the share ([`FlowState::count`]).
    counts: bool,
    /// Whether it has waited for its peer ([`FlowState::answered`]).
    waited: bool,
    /// When the flow had sent enough packets to learn its rate.
    arrived: Option<Duration>,
    /// When its last packet arrived.
    last_packet: Duration,
    /// When its first packet arrived.
    first_packet: Duration,
    /// From its first packet to its first after a [`RETURN_GAP`]: about
    /// its round trip (a first flight, then the wait for its ACKs).
    round: Option<Duration>,
    /// Whether the flow's key is in the router's list of flows.
    listed: bool,
    /// The interval the flow was last counted in (a key listed twice counts once).
    counted: u64,
    /// The digits upstream routers wrote.
    incoming: Digits,
    /// The index this router writes into the flow's packets.
    written: WrittenIndex,
    /// Whether its law answers this router's signal: erc's, or another
    /// ecnq scheme's in the same queue. One that does not (Cubic, Prague,
    /// ACKs in a single FIFO) grows on loss and delay whatever the router
    /// says, so it is never young: it counts as bottlenecked once it sends
    /// at the share, and until then at its rate.
    signalled: bool,
    /// The datagrams of its handshake flight seen so far, up to
    /// [`START_CODE_DIGITS`] (a flow that came back has none to see), and
    /// how many of them to clear ([`flight`]).
    flight: u8,
    start_code: u8,
}

/// The erc router of one output link (see the [scheme's docs](crate::schemes::erc)).
#[derive(Clone, Debug)]
pub struct ErcMarker {
    config: ErcConfig,
    flows: FlowTable<FlowState>,
    listed: Vec<u64>,
    epoch: u64,
    started: bool,
    interval_start: Duration,
    interval: Duration,
    /// When the last erc packet came: with none for [`LONGEST_ROUND`],
    /// other schemes' packets are not worth counting.
    last_own: Option<Duration>,
    /// Bytes and packets of the flows counted this interval.
    bytes: u64,
    packets: u64,
    queue_min: u64,
    share: f64,
    index: u16,
    /// What the bottlenecked flows share, and how many they are: a new flow
    /// joins them at once.
    bottleneck_capacity: f64,
    bottlenecked: usize,
    /// Shares advertised recently, oldest first.
    history: Vec<(Duration, f64)>,
    packet_size: f64,
    /// The index written into the packets of a flow not counted yet: the
    /// share with it counted.
    newcomer_index: u16,
    /// The fraction of recent newcomers that came to send at the share,
    /// rather than ending while young. One still under the share when its
    /// youth ends counts neither way. Young flows reserve this many shares
    /// each: where most flows are short, the shares they would never use go
    /// to the flows that are there
    /// (`where_newcomers_end_young_they_reserve_fewer_shares`).
    show_up: f64,
    /// How far back [`ErcMarker::reference_share`] looks: the longest round
    /// trip learnt among the flows, at least [`ErcConfig::reference_span`].
    reference_span: Duration,
    /// The longest round trip learnt among the flows (the reference span
    /// while none is), at least the shortest interval: the spare gain grows
    /// per round trip, as RCP's rate does per the flows' round trip. Per
    /// reference span, at least 250 ms, it grew six times slower than that
    /// on a 40 ms path, and left the link idle beside short flows
    /// (`web-beside-long`; test `the_spare_gain_grows_per_round_trip_of_the_flows`).
    round_trip: Duration,
    /// How far above the max-min share the router advertises, ≥ 1: grows
    /// while the flows at the share use it and the link stays under its
    /// target (shares reserved for flows that never come to use them), and
    /// falls as soon as the flows' arrivals exceed the target.
    spare_gain: f64,
    /// Data packets this interval from flows that do not count yet
    /// ([`FlowState::count`]).
    uncounted_packets: u64,
    /// The newcomers' flights, for the start code.
    flights: Flights,
}

impl ErcMarker {
    /// A router with no flows yet.
    pub fn new(config: ErcConfig, flows: FlowTableConfig) -> ErcMarker {
        ErcMarker {
            config,
            flows: FlowTable::new(flows),
            listed: Vec::new(),
            epoch: 0,
            started: false,
            interval_start: Duration::ZERO,
            interval: config.min_interval,
            last_own: None,
            bytes: 0,
            packets: 0,
            queue_min: u64::MAX,
            share: RATE_MAX,
            index: 1,
            bottleneck_capacity: RATE_MAX,
            bottlenecked: 0,
            history: Vec::new(),
            packet_size: DEFAULT_PACKET,
            newcomer_index: 1,
            show_up: 1.0,
            reference_span: config.reference_span,
            round_trip: config.reference_span,
            spare_gain: 1.0,
            uncounted_packets: 0,
            flights: Flights::default(),
        }
    }

    /// The fair share the router advertises, bytes per second.
    pub fn share(&self) -> f64 {
        self.share
    }

    /// The index the router writes.
    pub fn index(&self) -> u16 {
        self.index
    }

    /// Flows in the current computation.
    pub fn flows(&self) -> usize {
        self.listed.len()
    }

    /// The start codes the next new flows' flights would get, one after
    /// the other, were they to come at `now` on a link of `capacity` bytes
    /// per second, as [`Marker::mark`] computes them; the router is left as
    /// it is. For a router whose packets are marked elsewhere, from codes
    /// computed ahead (router-bpf's tc program).
    pub fn next_start_codes<const N: usize>(&self, now: Duration, capacity: f64) -> [u8; N] {
        let mut flights = self.flights.clone();
        // The arrivals decay to `now`, as the flight's own packet would
        // decay them: after an idle spell codes computed ahead would
        // otherwise read the last busy moment's rate
        // (router-bpf `flights_carry_the_start_code_erc_s_router_writes`).
        flights.on_packet(now, 0);
        let target = capacity * self.config.target_utilization;
        let shared = (self.bottleneck_capacity, self.bottlenecked);
        std::array::from_fn(|_| flights.code(now, target, shared))
    }

    /// Counts a packet of `flow` on the link: closes the interval when it
    /// is due, and lists the flow in the computation. Returns the indices
    /// written into a newcomer's packets and into the others', as they were
    /// when the packet came, and the flow's state.
    fn meter_packet(
        &mut self,
        now: Duration,
        link: &LinkState,
        flow: u64,
        signalled: bool,
    ) -> (u16, u16, &mut FlowState) {
        if !self.started {
            self.start(now, link);
        }
        if now >= self.interval_start + self.interval {
            self.close_interval(now, link);
        }
        self.bytes += u64::from(link.packet_len);
        self.packets += 1;
        self.flights.on_packet(now, link.packet_len);
        self.queue_min = self.queue_min.min(link.queue_bytes);

        let state = self.flows.entry(now, flow);
        if !state.listed {
            // A flow that comes back after it left the computation (a
            // newcomer on a long path waits for its ACKs, an application
            // pauses) keeps what the router learnt of its round trip. One
            // that had counted before counts again from this packet on: its
            // receiver still holds a chain, and it ramps back to its rate
            // within a round trip, which the others must make room for.
            let back = state.packets > 0 && now.saturating_sub(state.last_packet) <= LONGEST_ROUND;
            let (first_packet, last_packet, round, packets) = if back {
                let packets = if state.counts { DIGITS - 1 } else { 0 };
                (state.first_packet, state.last_packet, state.round, packets)
            } else {
                (now, now, None, 0)
            };
            *state = FlowState {
                seen: if back && state.counts {
                    state.seen
                } else {
                    Digits::default()
                },
                waited: back && state.waited,
                listed: true,
                counted: self.epoch,
                first_packet,
                last_packet,
                round,
                packets,
                flight: if back { START_CODE_DIGITS } else { 0 },
                ..FlowState::default()
            };
            self.listed.push(flow);
        }
        state.bytes += u64::from(link.packet_len);
        let data = link.packet_len >= DATA_PACKET;
        if data {
            state.packets = state.packets.saturating_add(1);
        }
        if data && !state.counts {
            self.uncounted_packets += 1;
        }
        state.signalled = signalled;
        if data {
            state.answered(now);
        }
        let since_first = now.saturating_sub(state.first_packet);
        if state.round.is_none()
            && now.saturating_sub(state.last_packet) >= RETURN_GAP
            && since_first <= LONGEST_ROUND
        {
            state.round = Some(since_first);
            if state.flight > 0 {
                self.flights.learn_round(since_first);
            }
        }
        state.last_packet = now;
        (self.newcomer_index, self.index, state)
    }

    /// Writes the start code into a datagram of a new flow's handshake
    /// flight (its first data-sized packets, up to [`START_CODE_DIGITS`],
    /// before its first [`RETURN_GAP`]: a client's Initial is alone before
    /// it waits, and no 1-RTT packet follows it before then), in place of
    /// the chain's digit: the receiver reads no chain from the handshake
    /// (`handshake_datagrams_are_counted_but_not_decoded`). The first of
    /// them sets how many to clear; a datagram an upstream router cleared
    /// stays cleared, and CE passes unchanged.
    fn write_start_code(&mut self, now: Duration, nth: u8, target: f64, pkt: &mut PacketMarks) {
        let code = match nth {
            0 => {
                let shared = (self.bottleneck_capacity, self.bottlenecked);
                let code = self.flights.code(now, target, shared);
                if let Some(state) = self.flows.get_mut(now, pkt.flow) {
                    state.start_code = code;
                }
                code
            }
            _ => self.flows.get(now, pkt.flow).map_or(0, |s| s.start_code),
        };
        if nth < code && pkt.ecn == Ecn::Ect0 {
            pkt.ecn = Ecn::NotEct;
        }
    }

    /// Whether erc flows are on the link: an erc packet came within
    /// [`LONGEST_ROUND`]. Until one comes, other schemes' packets cost no
    /// more than this check.
    fn serving(&self, now: Duration) -> bool {
        self.last_own
            .is_some_and(|at| now.saturating_sub(at) <= LONGEST_ROUND)
    }
}

impl FlowState {
    /// Notes a data packet that comes after a silence, following the first
    /// [`START_CODE_DIGITS`] (its handshake flight), at least twice as long
    /// as they took to arrive: the flow waited for its peer on a path too
    /// short for a [`RETURN_GAP`] (`erc-staggered` at 2 ms,
    /// `staggered_arrivals_are_fair_within_3_s_with_a_near_empty_queue`).
    /// Packets sent evenly spaced, as a stream of fakes is, show no such
    /// silence.
    fn answered(&mut self, now: Duration) {
        let flight = self.last_packet.saturating_sub(self.first_packet);
        let silence = now.saturating_sub(self.last_packet);
        if self.packets == u32::from(START_CODE_DIGITS) + 1
            && silence > 2 * flight
            && silence >= SHORTEST_WAIT
        {
            self.waited = true;
        }
    }

    /// Records a data packet at `position` of the chain (none for another
    /// scheme's, which reads no chain); returns whether it makes the flow
    /// count. A flow counts from its [`DIGITS`]th data packet once it has
    /// waited a round trip for its peer (its handshake: the router learnt
    /// its round, or saw it wait on a short path), so that its rate is cut
    /// for before its receiver reads it (`erc-staggered`), and otherwise
    /// only once its packets have passed every position, when its receiver
    /// can first read a whole chain: a stream of fake newcomers that never wait for an answer
    /// claims no share (`erc-fake-newcomers`;
    /// `a_flow_that_never_waited_counts_once_it_could_read_a_chain`).
    fn count(&mut self, now: Duration, position: Option<u32>) -> bool {
        let answered = self.waited || self.round.is_some() || position.is_none();
        if let Some(position) = position {
            self.seen.set(position, false);
        }
        let readable = (answered && self.packets >= DIGITS) || self.seen.complete();
        let arrived = readable && !self.counts;
        if arrived {
            self.counts = true;
            if self.signalled {
                self.arrived = Some(now);
            }
        }
        arrived
    }
}

impl Marker for ErcMarker {
    fn mark(&mut self, now: Duration, link: &LinkState, pkt: &mut PacketMarks) {
        self.last_own = Some(now);
        let (newcomer_index, index, state) = self.meter_packet(now, link, pkt.flow, true);
        let in_flight = state.round.is_none() && link.packet_len >= DATA_PACKET;
        if in_flight && state.flight < START_CODE_DIGITS {
            let nth = state.flight;
            state.flight += 1;
            let target = link.capacity * self.config.target_utilization;
            self.write_start_code(now, nth, target, pkt);
            return;
        }
        let position = position(pkt.hash);
        let arrived = link.packet_len >= DATA_PACKET && state.count(now, Some(position));
        // A newcomer reads its first chain mostly from packets it sent
        // before it counted: they carry the share that counts it, and so
        // does the packet that makes it count. Written with the share from
        // before, that one packet mixed two indices into the chain, which
        // spells a third, unrelated share
        // (`a_newcomers_first_chain_spells_the_share_that_counts_it`).
        let young = !state.counts || arrived;
        let wanted = if young { newcomer_index } else { index };
        let own = state.written.write(wanted, position, state.rate, young);
        let write = digit_of(pkt.ecn).is_some_and(|incoming| {
            state.incoming.set(position, incoming);
            !(state.incoming.complete() && state.incoming.index() >= own)
        });
        if arrived {
            self.on_new_flow(now);
        }
        if write {
            pkt.ecn = ecn_of(digit(own, position));
        }
    }

    fn observes_others(&self) -> bool {
        true
    }

    /// Another scheme's flow in the same queue shares the link as an erc
    /// flow does, so it counts in the max-min computation as one: at the
    /// share, limited elsewhere at its rate, or, if its law answers this
    /// router's load signal (the paper schemes), young. Left out, as other
    /// traffic the share is computed after, it was starved: erc took the
    /// ecnq queue from the paper schemes beside it, which read high load and
    /// never grew, and in one FIFO Cubic left erc almost nothing
    /// (`erc-beside-paper-schemes`;
    /// `another_schemes_flows_in_the_queue_count_as_flows`).
    fn observe(&mut self, now: Duration, link: &LinkState, pkt: &PacketMarks) {
        if !self.serving(now) {
            return;
        }
        let signalled = pkt.tag.wire().is_ecnq();
        let (_, _, state) = self.meter_packet(now, link, pkt.flow, signalled);
        let arrived = link.packet_len >= DATA_PACKET && state.count(now, None);
        if signalled && arrived {
            self.on_new_flow(now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testing::*;
    use super::*;
    use crate::schemes::erc::{index_of, rate_of, ErcDecoder, WIRE};
    use crate::signal::Decoder;
    use crate::wire::ecn::{Ecn, SchemeTag};

    #[test]
    fn another_schemes_flows_in_the_queue_count_as_flows() {
        let capacity = 1e6;
        let mut r = ErcMarker::new(ErcConfig::default(), FlowTableConfig::default());
        // One erc flow beside two of another scheme, all sending more than
        // any share: three bottlenecked flows. Left out of the computation,
        // the other two would leave the erc flow only what they do not send.
        let other = (2, other_ecnq_tag());
        drive_beside(
            &mut r,
            capacity,
            &[2e6, 2e6, 2e6],
            other,
            Duration::ZERO,
            MS * 2_000,
        );
        let expected = 0.98 * capacity / 3.0;
        assert_share(&r, expected);
        // One of them limited elsewhere to 100 kB/s frees its share once it
        // is no longer young, as an erc flow would.
        let span = ErcConfig::default().young + MS * 1_000;
        drive_beside(&mut r, capacity, &[2e6, 2e6, 1e5], other, MS * 2_000, span);
        let expected = (0.98 * capacity - 1e5) / 2.0;
        assert_share(&r, expected);
    }

    #[test]
    fn a_flow_of_acks_never_becomes_a_newcomer() {
        let capacity = 1e6;
        let mut r = ErcMarker::new(ErcConfig::default(), FlowTableConfig::default());
        // One erc flow sending more than any share, and the ACKs of a flow
        // in the other direction: 60-byte erc packets, 500 a second. Were
        // they a newcomer, half the link would wait for them while young.
        let (mut t, mut next_ack) = (Duration::ZERO, Duration::ZERO);
        let ack = LinkState {
            packet_len: 60,
            ..link(capacity, 0)
        };
        let mut hash = 0u32;
        while t < MS * 2_000 {
            hash = hash.wrapping_add(0x9e37_79b9);
            if t >= next_ack {
                r.mark(t, &ack, &mut packet(2, hash));
                next_ack += MS * 2;
            }
            r.mark(t, &link(capacity, 0), &mut packet(1, hash));
            t += Duration::from_secs_f64(1_000.0 / 2e6);
        }
        let expected = 0.98 * capacity - 500.0 * 60.0;
        assert_share(&r, expected);
    }

    #[test]
    fn untagged_traffic_is_never_young() {
        let capacity = 1e6;
        // An erc flow beside an untagged one of 100 kB/s in one FIFO (Cubic,
        // say): its law grows on loss and delay whatever the router says,
        // so no share waits for it; it counts at its rate until it sends
        // at the share. An ecnq scheme's flow as slow is young and holds a
        // share meanwhile.
        for (tag, expected) in [
            (SchemeTag::UNTAGGED, 0.98 * capacity - 1e5),
            (other_ecnq_tag(), 0.98 * capacity / 2.0),
        ] {
            let mut r = ErcMarker::new(ErcConfig::default(), FlowTableConfig::default());
            drive_beside(
                &mut r,
                capacity,
                &[2e6, 1e5],
                (1, tag),
                Duration::ZERO,
                MS * 2_000,
            );
            assert_share(&r, expected);
        }
    }

    #[test]
    fn a_flow_back_from_a_pause_counts_from_its_first_packet() {
        let capacity = 1e6;
        let mut r = ErcMarker::new(ErcConfig::default(), FlowTableConfig::default());
        drive(&mut r, capacity, &[2e6, 2e6], Duration::ZERO, MS * 1_000);
        // Flow 2 pauses; flow 1 is alone and takes the link.
        drive(&mut r, capacity, &[2e6], MS * 1_000, MS * 1_000);
        assert_eq!(r.flows(), 1);
        let alone = r.share();
        assert_share(&r, 0.98 * capacity);
        // Its first packet back halves the share: it will send at its
        // rate within a round trip, before ten packets would count it.
        let mut pkt = packet(2, 7);
        r.mark(MS * 2_000, &link(capacity, 0), &mut pkt);
        assert_eq!(r.flows(), 2);
        assert_share(&r, alone / 2.0);
    }

    #[test]
    fn a_new_flow_lowers_the_share_at_once() {
        let capacity = 1e6;
        let mut r = ErcMarker::new(ErcConfig::default(), FlowTableConfig::default());
        drive(&mut r, capacity, &[2e6], Duration::ZERO, MS * 1_000);
        // Its handshake flight, then its data a round trip later.
        send_flight(&mut r, 99, MS * 1_000, capacity);
        drive(&mut r, capacity, &[2e6], MS * 1_000, MS * 100);
        let alone = r.share();
        assert_share(&r, 0.98 * capacity);
        let mut pkt = packet(99, 0);
        // A flow too short to read a chain takes nothing from the others ...
        for _ in 1..DIGITS {
            r.mark(MS * 1_100, &link(capacity, 0), &mut pkt);
        }
        assert_eq!(r.share(), alone);
        // ... from its tenth packet on it is one of two.
        r.mark(MS * 1_100, &link(capacity, 0), &mut pkt);
        assert_share(&r, alone / 2.0);
    }

    /// On a path too short for a [`RETURN_GAP`], a silence after the
    /// handshake flight twice as long as the flight took is its wait for
    /// the peer: the flow counts at its tenth data packet, as on a long
    /// path. Evenly spaced packets show none.
    #[test]
    fn a_flow_that_waited_on_a_short_path_counts_at_its_tenth_packet() {
        let capacity = 1e6;
        let us = Duration::from_micros(1);
        let cases = [
            (us * 100, MS * 2, true),
            (MS, MS, false),
            // A flight delivered in one batch, then a scheduling hiccup.
            (Duration::ZERO, us * 100, false),
        ];
        for (spacing, wait, counts) in cases {
            let mut r = ErcMarker::new(ErcConfig::default(), FlowTableConfig::default());
            drive(&mut r, capacity, &[2e6], Duration::ZERO, MS * 1_000);
            let alone = r.share();
            let mut t = MS * 1_000;
            for n in 0..DIGITS {
                // One position only: no chain is ever complete.
                r.mark(t, &link(capacity, 0), &mut packet(99, 0));
                t += if n + 1 == u32::from(START_CODE_DIGITS) {
                    wait
                } else {
                    spacing
                };
            }
            let expected = if counts { alone / 2.0 } else { alone };
            assert_share(&r, expected);
        }
    }

    /// A flow that never waited for an answer (no handshake: a fake
    /// newcomer's packets sent back to back) counts only once its packets
    /// have passed every position of the chain, when its receiver could
    /// first read one.
    #[test]
    fn a_flow_that_never_waited_counts_once_it_could_read_a_chain() {
        let capacity = 1e6;
        let mut r = ErcMarker::new(ErcConfig::default(), FlowTableConfig::default());
        drive(&mut r, capacity, &[2e6], Duration::ZERO, MS * 1_000);
        let alone = r.share();
        // Its flight carries no chain; the packets after it pass every
        // position but the third ...
        let mut pkt = |n: u32| {
            r.mark(MS * 1_000, &link(capacity, 0), &mut packet(99, n));
            r.share()
        };
        for n in 0..u32::from(START_CODE_DIGITS) {
            assert_eq!(pkt(n), alone);
        }
        for n in (0..DIGITS).filter(|&p| p != 2).cycle().take(20) {
            assert_eq!(pkt(n), alone, "position {n}");
        }
        // ... and the one that passes it makes the flow one of two.
        let two = pkt(2);
        assert!((two / (alone / 2.0) - 1.0).abs() < 0.02, "{two} vs {alone}");
    }

    /// A flow's data packets until it counts (here its flight and one at
    /// every position) are traffic no share accounts for yet; ACKs never
    /// are.
    #[test]
    fn a_flows_first_data_packets_are_uncounted_traffic() {
        let mut r = ErcMarker::new(ErcConfig::default(), FlowTableConfig::default());
        let until_counted = u32::from(START_CODE_DIGITS) + DIGITS;
        for n in 0..until_counted + 5 {
            r.mark(MS, &link(1e6, 0), &mut packet(7, n));
        }
        assert_eq!(r.uncounted_packets, u64::from(until_counted));
        let acks = LinkState {
            packet_len: 60,
            ..link(1e6, 0)
        };
        for n in 0..20 {
            r.mark(MS, &acks, &mut packet(8, n));
        }
        assert_eq!(r.uncounted_packets, u64::from(until_counted));
    }

    #[test]
    fn the_path_carries_the_largest_index() {
        let config = ErcConfig::default();
        let mut fast = ErcMarker::new(config, FlowTableConfig::default());
        let mut slow = ErcMarker::new(config, FlowTableConfig::default());
        drive(&mut fast, 1e7, &[2e7], Duration::ZERO, MS * 500);
        drive(&mut slow, 1e6, &[2e7], Duration::ZERO, MS * 500);
        assert!(slow.index() > fast.index());
        for (flow, fast_first) in [(7, true), (8, false)] {
            let mut d = ErcDecoder::default();
            for i in 0..200u32 {
                let mut pkt = packet(flow, i.wrapping_mul(2_654_435_761));
                let mut through = |router: &mut ErcMarker, capacity| {
                    router.mark(MS * 500, &link(capacity, 0), &mut pkt)
                };
                if fast_first {
                    through(&mut fast, 1e7);
                    through(&mut slow, 1e6);
                } else {
                    through(&mut slow, 1e6);
                    through(&mut fast, 1e7);
                }
                d.on_packet(MS, pkt.ecn, pkt.tag, pkt.hash);
            }
            assert!(slow.index() > fast.index());
            assert_eq!(d.index(), slow.index());
        }
    }

    #[test]
    fn ce_and_ect1_pass_unchanged() {
        let mut r = ErcMarker::new(ErcConfig::default(), FlowTableConfig::default());
        for ecn in [Ecn::Ce, Ecn::Ect1] {
            let mut pkt = PacketMarks {
                ecn,
                tag: SchemeTag::new(WIRE.id()),
                hash: 0,
                flow: 1,
            };
            r.mark(MS, &link(1e6, 0), &mut pkt);
            assert_eq!(pkt.ecn, ecn);
        }
    }

    /// An L4S bottleneck downstream classifies by ECT(1): a flow whose
    /// packets carried it on some digits only would be split across its two
    /// queues and reordered. Every codepoint an erc router writes is classic.
    #[test]
    fn a_routers_digits_keep_the_flow_in_one_classic_queue() {
        let mut r = ErcMarker::new(ErcConfig::default(), FlowTableConfig::default());
        drive(&mut r, 1e6, &[2e6, 2e6], Duration::ZERO, MS * 1_000);
        let mut written = [0usize; 4];
        for i in 0..1_000u32 {
            let mut pkt = packet(1, i.wrapping_mul(2_654_435_761));
            r.mark(MS * 1_000, &link(1e6, 0), &mut pkt);
            written[pkt.ecn.bits() as usize] += 1;
        }
        assert_eq!(written[Ecn::Ect1.bits() as usize], 0, "{written:?}");
        assert_eq!(written[Ecn::Ce.bits() as usize], 0, "{written:?}");
        // Both digits occur: the router spoke.
        assert!(written[Ecn::NotEct.bits() as usize] > 0, "{written:?}");
        assert!(written[Ecn::Ect0.bits() as usize] > 0, "{written:?}");
    }

    /// A newcomer's first packets, sent before the router counts it, carry
    /// the share with it counted: its first chain does not tell it the
    /// share of the flows already there.
    #[test]
    fn a_newcomers_first_packets_carry_the_share_that_counts_it() {
        let capacity = 1e6;
        let mut r = ErcMarker::new(ErcConfig::default(), FlowTableConfig::default());
        let span = ErcConfig::default().young + MS * 1_000;
        drive(&mut r, capacity, &[2e6, 2e6], Duration::ZERO, span);
        let (two, index) = (r.share(), r.index());
        let three = index_of(two * 2.0 / 3.0);
        assert!(
            three.abs_diff(r.newcomer_index) <= 1,
            "{three} vs {}",
            r.newcomer_index
        );
        send_flight(&mut r, 99, span + MS, capacity);
        let mut differs = false;
        for n in u32::from(START_CODE_DIGITS)..DIGITS - 1 {
            let hash = n.wrapping_mul(0x9e37_79b9);
            let mut pkt = packet(99, hash);
            let newcomer = r.newcomer_index;
            r.mark(span + MS, &link(capacity, 0), &mut pkt);
            let expected = digit(newcomer, position(hash));
            assert_eq!(pkt.ecn, ecn_of(expected), "packet {n}");
            differs |= expected != digit(index, position(hash));
        }
        assert!(differs, "the chain spells the two flows' share");
    }

    /// The packet that makes a newcomer count carries the same share as
    /// the ones before it: the chain they make spells one index.
    #[test]
    fn a_newcomers_first_chain_spells_the_share_that_counts_it() {
        let capacity = 1e6;
        let mut r = ErcMarker::new(ErcConfig::default(), FlowTableConfig::default());
        drive(&mut r, capacity, &[2e6], Duration::ZERO, MS * 1_000);
        let mut d = ErcDecoder::default();
        // The receiver reads no chain from the flight; of the packets
        // after it, one per position, the seventh makes the flow count.
        send_flight(&mut r, 99, MS * 1_000, capacity);
        for position in 0..DIGITS {
            let mut pkt = packet(99, position);
            r.mark(MS * 1_000, &link(capacity, 0), &mut pkt);
            d.on_packet(MS, pkt.ecn, pkt.tag, pkt.hash);
        }
        assert_eq!(d.index(), r.index());
        let share = rate_of(d.index()).expect("a rate");
        assert!(
            (share / (0.98 * capacity / 2.0) - 1.0).abs() < 0.02,
            "{share}"
        );
    }
}
