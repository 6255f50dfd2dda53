//! Flows active in each class, counted per measurement interval, and the
//! light classic and L4S flows among them, which the ecnq queue's max-min
//! share leaves about what they send.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use super::by_flow::Waits;
use super::{Class, CLASSES};

/// Most flows counted per class and interval: beyond it, counts saturate
/// and memory stays bounded.
const MAX_COUNTED_FLOWS: usize = 1 << 16;

/// Flows seen in each class, counted over measurement intervals. A flow
/// counts from its second packet in an interval: a flood of one-packet
/// "flows" (spoofed sources) must not shrink the other classes' shares.
/// The bytes of each counted classic and L4S flow tell which of them are
/// light (an SSH session, a call, a short web transfer):
/// [`ActiveFlows::ecnq_share`] leaves such a flow about what it sends. The
/// light flows are found once per interval (a sort of that interval's
/// flows), so the share costs O(1) whenever the counts change.
#[derive(Debug)]
pub(super) struct ActiveFlows {
    pub(super) interval: Duration,
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
    pub(super) fn new(interval: Duration, capacity: f64, now: Duration) -> ActiveFlows {
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

    /// The link carries `capacity` bytes per second from now on.
    pub(super) fn set_capacity(&mut self, capacity: f64) {
        self.capacity = capacity;
    }

    /// Notes a packet of `flow` of `len` bytes; returns whether the counts
    /// or the light flows changed.
    /// `waiting` is what each flow has waiting in each queue.
    pub(super) fn seen(
        &mut self,
        now: Duration,
        flow: u64,
        class: Class,
        len: u32,
        waiting: &Waits,
    ) -> bool {
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
    /// at what the weights let through
    /// (`a_light_flow_that_speeds_up_gets_its_share_back`). The other
    /// flows of such a class can still be light: short flows in their
    /// retransmission timeouts beside a standing queue must not take whole
    /// shares (`light_flows_beside_a_standing_classic_queue_stay_light`).
    /// A flow counted in the last interval too sent over the whole
    /// interval. A newcomer sent from its first packet, over half an
    /// interval at least: a web transfer that came and went sent its bytes
    /// in a part of the interval, and one that came just before its end is
    /// judged by its first flight, not by an average that makes it look
    /// lighter (`coexist-short-flows`). A newcomer is left
    /// [`NEWCOMER_HEADROOM`] times its rate; since every light flow is left
    /// less than what an equal split of the rest would give it, no flow's
    /// share falls below the equal split.
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
    pub(super) fn sends_lightly(&self, now: Duration, flow: u64) -> bool {
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
    pub(super) fn signalled(&mut self, flow: u64, now: Duration) {
        if self.signalled.len() < MAX_COUNTED_FLOWS || self.signalled.contains_key(&flow) {
            self.signalled.insert(flow, now);
        }
    }

    /// `class`'s queue is empty at this moment.
    pub(super) fn drained(&mut self, class: Class) {
        self.drained[class as usize] = true;
    }

    /// Flows per class: the last whole interval's, or this one's if more.
    pub(super) fn counts(&self) -> [usize; CLASSES] {
        Class::ALL.map(|c| self.last[c as usize].max(self.current[c as usize].len()))
    }

    /// The ecnq queue's fraction of the capacity: its flows' max-min
    /// share, where a light classic or L4S flow is limited elsewhere and
    /// keeps what it sent, and the other flows, every class's, split the
    /// rest equally (a light flow's rate is under half an equal split, so
    /// under that share too); an equal split would leave the light flow's
    /// unused part of its share idle
    /// (`a_light_classic_flow_leaves_the_rest_to_the_ecnq_queue`). A
    /// classic or L4S flow new in this interval counts as the fraction of
    /// the last interval's newcomers that were not light: where web
    /// transfers come and go, each would otherwise take a whole share until
    /// the interval ends (`coexist-short-flows`).
    pub(super) fn ecnq_share(&self) -> f64 {
        let expected = |c: Class| {
            let c = c as usize;
            let new = self.newcomers[c] as f64;
            (self.last[c] as f64).max(self.current[c].len() as f64 - new + self.heavy * new)
        };
        self.share_beside(self.light, expected(Class::Classic) + expected(Class::L4s))
    }

    /// The ecnq queue's fraction of the capacity split equally by active
    /// flows, light or not.
    pub(super) fn equal_share(&self) -> f64 {
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
/// the ecnq queue's share grows by what it leaves. Half: a greedy Cubic
/// flow's sawtooth stays above it (it cuts to 0.7 of its rate), so its
/// share never moves with its troughs. ecnq's own rule, after RCP's flows
/// "bottlenecked elsewhere".
pub(super) const LIGHT_FLOW: f64 = 0.5;

/// How long a classic or L4S flow that this bottleneck's AQM marked or
/// dropped counts as held back here: a flow this queue signals is
/// bottlenecked here, not elsewhere, so it is left [`MARKED_HEADROOM`]
/// times what it sent. A second spans a TCP-like flow's marks
/// (`a_reno_flow_marked_here_climbs_out_of_a_light_rate`); the figures
/// there and in `coexist-short-flows` do not depend on its exact value.
/// ecnq's own rule, after RCP's flows "bottlenecked elsewhere".
const LIMITED_HERE: Duration = Duration::from_secs(1);

/// What a flow counted in the last interval and marked or dropped here in
/// the last [`LIMITED_HERE`] is left, as a multiple of the rate it sent,
/// so that it can grow. Left only its rate, a TCP flow that a deep
/// slow-start exit put under half its share is served at about what it
/// sends, its bursts and additive increase queue past CoDel's target, and
/// CoDel marks it down again, for good
/// (`a_reno_flow_marked_here_climbs_out_of_a_light_rate`). Never light
/// while marked (a whole share), marked short transfers leave their share
/// idle (`coexist-short-flows`). The same factor as
/// [`NEWCOMER_HEADROOM`], for the same reason: the flow is still growing.
const MARKED_HEADROOM: f64 = 1.5;

/// What a light newcomer is left, as a multiple of the rate it sent: a
/// short flow's slow start sends windows that double every round trip.
/// ecnq's own figure, from `coexist-short-flows`: with 1 the short flows
/// complete later than beside a long Cubic flow, with 2 the ecnq flow
/// gets less than a long Cubic flow does there; 1.5 keeps both.
const NEWCOMER_HEADROOM: f64 = 1.5;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::router::bottleneck::test_support::*;
    use crate::router::bottleneck::{Bottleneck, Discipline};
    use crate::wire::ecn::{Ecn, SchemeTag};
    use std::collections::VecDeque;

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
        // about 0.42 of it (counted as held, the light flows would each
        // take a whole share).
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
        // Greedy from 2 s: half of it from 2.8 s on, and half the last
        // second's packets. The ecnq flow here never slows down, and each
        // fall in its share is held for an interval, as ecnq senders take
        // that long to hear it: the greedy flow's window collapses once
        // more on the way.
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
    /// ([`MARKED_HEADROOM`]).
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
}
