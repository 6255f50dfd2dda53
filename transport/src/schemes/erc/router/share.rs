//! The fair share: at the end of every interval the router water-fills the
//! capacity it targets among the flows it counts (max-min, as RCP and XCP
//! compute a rate), holds shares for young flows, and moves the spare gain.

use std::time::Duration;

use super::{ErcMarker, FlowState};
use crate::schemes::erc::{index_of, rate_of, RATE_MAX, RATE_MIN};
use crate::signal::fairness::MaxMin;
use crate::signal::LinkState;

/// Gain of the per-flow rate average (per interval).
const RATE_GAIN: f64 = 0.5;
/// A flow that sent nothing for this many intervals leaves the computation.
const IDLE_INTERVALS: u32 = 4;
/// ... unless it is a newcomer waiting for its rate, which on a long path
/// sends a window and then nothing for a round trip.
const IDLE_NEWCOMER: Duration = Duration::from_secs(1);
/// A young flow may double what it sends within a round trip, as a slow
/// start does (RFC 5681 §3.1): young flows hold no more shares than twice
/// what they send as a whole, and one more, so that a lone newcomer is
/// served before it sends (test `young_flows_hold_no_more_shares_than_they_send_for`).
const YOUNG_GROWTH: f64 = 2.0;
/// The weight of one newcomer's outcome in [`ErcMarker::show_up`]: it
/// averages about the last 16 (ecnq's own; tuned on `adpm-afct`).
const SHOW_UP_GAIN: f64 = 1.0 / 16.0;
/// The flows at the share use it when they send at least this fraction of
/// it on average; only then does the rate grow into spare capacity (a flow
/// still ramping up leaves capacity that is not spare). ecnq's own.
const SPARE_USED: f64 = 0.9;
/// The link counts as under its target when its arrivals are this
/// fraction below it: steady flows at the share, paced a little under it,
/// leave the advertised rate alone. ecnq's own.
const SPARE_DEADBAND: f64 = 0.1;
/// Per round trip, the advertised rate grows by this times the spare
/// fraction of the capacity, weighted by the newcomers that do not come.
/// RCP's rate equation uses α = 0.1 on the whole spare capacity (Dukkipati
/// and McKeown, "Why flow-completion time is the right metric for
/// congestion control"); 0.4 here, tuned on `adpm-afct`, since only the
/// part of the reserve that stays unused counts.
const SPARE_GAIN: f64 = 0.4;
/// With no young flow waiting, nothing is reserved: the gain's excess over
/// 1 shrinks by this factor every interval. ecnq's own.
const SPARE_DECAY: f64 = 0.5;
/// The most the advertised rate exceeds the max-min share. ecnq's own.
const SPARE_MAX: f64 = 8.0;
/// The least the gain falls to while flows that do not count yet send:
/// their first packets (initial windows) are traffic no share accounts
/// for, which a stream of newcomers keeps up; the gain answers the excess
/// arrivals it brings, as RCP's rate answers its arrival rate. ecnq's own:
/// with flows arriving 10 ms apart (`erc-staggered`), a floor of 1 let
/// their first packets stand in the queue, and a floor of 0.5 made the
/// gain swing. With no newcomer sending the floor stays 1: a lower floor
/// at all times cost utilization where real senders' bursts exceed the
/// target (test `a_standing_queue_takes_the_spare_gain_back`).
const SPARE_MIN: f64 = 0.9;

/// One measurement interval, as [`ErcMarker::follow_spare`] reads it.
#[derive(Clone, Copy, Debug)]
struct Spare {
    /// Its length, s.
    elapsed: f64,
    /// The rate the router targets for the flows it counts, bytes per second.
    available: f64,
    /// The rate those flows arrived at, bytes per second.
    arrivals: f64,
    /// Whether the flows at the share sent at it (at least [`SPARE_USED`]
    /// of it on average).
    used: bool,
    /// Whether shares were reserved for young flows.
    reserved: bool,
    /// Whether a queue stood all interval.
    queued: bool,
    /// Whether flows that do not count yet sent data this interval.
    uncounted: bool,
}

/// What every listed flow is judged against at an interval's end.
#[derive(Clone, Copy, Debug)]
struct IntervalEnd {
    now: Duration,
    /// The interval's length, s.
    elapsed: f64,
    /// The interval's number: a key listed twice counts once.
    epoch: u64,
    /// A flow sending at least this is at the share, bytes per second.
    reference: f64,
    /// The index this router writes.
    own: u16,
    /// How long a newcomer may take to reach the share
    /// ([`ErcConfig::young`](super::ErcConfig::young)).
    young: Duration,
    /// The silence that ends a flow that is not young.
    idle: Duration,
}

/// The listed flows as an interval's end sorts them.
#[derive(Clone, Debug)]
struct Census {
    /// What each flow not young would take (∞: bottlenecked here).
    demands: Vec<f64>,
    /// Newcomers that reached the share.
    came: u32,
    /// Newcomers that went quiet while young.
    stayed_away: u32,
    /// Young flows not yet at the share, and their rates' sum.
    young_waiting: usize,
    young_rate: f64,
    /// The longest round trip learnt (zero: none yet).
    longest_round: Duration,
    /// The flows at the share that are not young, and their rates' sum.
    at_share_flows: usize,
    at_share_rate: f64,
}

impl Census {
    /// Counts a flow that stays listed: at the share, young, or what it
    /// would take.
    fn count(&mut self, young: bool, at_share: bool, rate: f64, demand: f64) {
        if at_share && !young {
            self.at_share_flows += 1;
            self.at_share_rate += rate;
        }
        if young && demand.is_infinite() {
            self.young_waiting += 1;
            self.young_rate += rate;
        } else {
            self.demands.push(demand);
        }
    }

    /// Whether the flows at the share sent at least [`SPARE_USED`] of
    /// `share` on average: only then is capacity they leave spare.
    fn used(&self, share: f64) -> bool {
        self.at_share_flows > 0
            && self.at_share_rate >= SPARE_USED * share * self.at_share_flows as f64
    }
}

impl FlowState {
    /// Ends the interval for this flow: measures it and counts it in
    /// `census`; returns whether it stays listed.
    fn close(&mut self, end: &IntervalEnd, census: &mut Census) -> bool {
        if self.counted == end.epoch {
            return false;
        }
        self.counted = end.epoch;
        census.longest_round = census.longest_round.max(self.round.unwrap_or_default());
        self.measure(end.elapsed);
        let at_share = self.rate >= end.reference;
        if at_share && self.arrived.take().is_some() {
            census.came += 1;
        }
        let young = self.still_young(end.now, end.young);
        if end.now.saturating_sub(self.last_packet) >= self.idle_limit(young, end.idle) {
            if young {
                census.stayed_away += 1;
            }
            self.listed = false;
            return false;
        }
        census.count(
            young,
            at_share,
            self.rate,
            self.demand(young, at_share, end.own),
        );
        true
    }

    /// Folds the interval's bytes into the flow's averaged rate
    /// ([`RATE_GAIN`]), so that one burst does not make it bottlenecked.
    fn measure(&mut self, elapsed: f64) {
        let sample = self.bytes as f64 / elapsed;
        self.rate += RATE_GAIN * (sample - self.rate);
        self.bytes = 0;
    }

    /// Whether the flow is still young: it counted less than `young` ago
    /// and has not reached the share; past that it is limited elsewhere.
    fn still_young(&mut self, now: Duration, young: Duration) -> bool {
        if self
            .arrived
            .is_some_and(|at| now.saturating_sub(at) >= young)
        {
            self.arrived = None;
        }
        self.arrived.is_some()
    }

    /// The silence that ends the flow. A newcomer that has come back after
    /// its first round trip and then went quiet for two has ended, or waits
    /// on its application: it frees its share as any flow would. One whose
    /// round trip is not learnt yet may be waiting for its first ACKs.
    fn idle_limit(&self, young: bool, idle: Duration) -> Duration {
        match (young, self.round) {
            (true, Some(round)) => (2 * round).max(idle),
            (true, None) => IDLE_NEWCOMER,
            (false, _) => idle,
        }
    }

    /// What the flow would take of the link: all it can (∞) while young or
    /// at the share, else its rate, and no more than an upstream router's
    /// smaller rate lets it.
    fn demand(&self, young: bool, at_share: bool, own: u16) -> f64 {
        let mut demand = if young || at_share {
            f64::INFINITY
        } else {
            self.rate
        };
        if self.incoming.complete() && self.incoming.index() > own {
            // An upstream router holds the flow to a smaller rate.
            demand = demand.min(rate_of(self.incoming.index()).unwrap_or(f64::INFINITY));
        }
        demand
    }
}

impl ErcMarker {
    /// Advertises `share`, clamped to the scale, and keeps it in the
    /// history [`ErcMarker::reference_share`] looks back over.
    fn advertise(&mut self, now: Duration, share: f64) {
        self.share = share.clamp(RATE_MIN, RATE_MAX);
        self.index = index_of(self.share);
        let keep_from = now.saturating_sub(self.reference_span);
        self.history.retain(|&(at, _)| at >= keep_from);
        self.history.push((now, self.share));
        self.count_newcomer();
    }

    /// Sets the index for flows not counted yet: the max-min share once one
    /// more flow counts ([`ErcMarker::on_new_flow`]), so that a newcomer's
    /// first chain spells one index. It leaves out the spare gain: that
    /// hands the flows there what they leave unused, and a newcomer told it
    /// would jump into room that nobody made for it (`web-beside-long`'s
    /// queue; test `a_newcomer_is_told_the_max_min_share_without_the_spare_gain`).
    fn count_newcomer(&mut self) {
        let with_one_more = self.bottleneck_capacity / (self.bottlenecked + 1) as f64;
        self.newcomer_index = index_of(with_one_more.min(self.share));
    }

    /// The smallest share advertised over the last
    /// [`ErcMarker::reference_span`].
    fn reference_share(&self) -> f64 {
        self.history
            .iter()
            .map(|&(_, s)| s)
            .fold(self.share, f64::min)
    }

    /// The first packet starts the first interval, every flow yet to be
    /// measured: the share is the whole target.
    pub(super) fn start(&mut self, now: Duration, link: &LinkState) {
        self.started = true;
        self.interval_start = now;
        let capacity = link.capacity * self.config.target_utilization;
        self.bottleneck_capacity = capacity;
        self.advertise(now, capacity);
    }

    /// Ends a measurement interval: measures and sorts the listed flows,
    /// holds shares for the young ones, moves the spare gain, advertises the
    /// max-min share of what the router targets, and starts the next.
    pub(super) fn close_interval(&mut self, now: Duration, link: &LinkState) {
        let elapsed = now.saturating_sub(self.interval_start).as_secs_f64();
        let (queue, available) = self.target(link);
        let mut census = self.census(now, elapsed);
        self.reserve(&mut census);
        self.reference_span = census.longest_round.max(self.config.reference_span);
        self.round_trip = match census.longest_round {
            Duration::ZERO => self.reference_span,
            round => round.max(self.config.min_interval),
        };
        let spare = Spare {
            elapsed,
            available,
            arrivals: self.bytes as f64 / elapsed,
            used: census.used(self.share),
            reserved: census.young_waiting > 0,
            queued: queue > 0,
            uncounted: self.uncounted_packets > 0,
        };
        self.follow_spare(spare);
        let share = self.water_fill(available, &mut census.demands);
        // No flow is told more than the whole target.
        self.advertise(now, (share * self.spare_gain).min(share.max(available)));
        self.next_interval(now);
    }

    /// The standing queue (the least seen this interval) and the rate the
    /// router hands out: `η·C` less what drains that queue within
    /// [`ErcConfig::drain_time`](super::ErcConfig::drain_time) (RCP's β·q/d).
    fn target(&self, link: &LinkState) -> (u64, f64) {
        let queue = match self.queue_min {
            u64::MAX => link.queue_bytes,
            q => q,
        };
        let target = link.capacity * self.config.target_utilization
            - queue as f64 / self.config.drain_time.as_secs_f64();
        (queue, target.max(0.0))
    }

    /// Measures every listed flow over the interval and sorts it (at the
    /// share, limited elsewhere, young, or gone), so that the water-fill
    /// knows what each would take; drops the flows that are gone.
    fn census(&mut self, now: Duration, elapsed: f64) -> Census {
        self.epoch += 1;
        let end = IntervalEnd {
            now,
            elapsed,
            epoch: self.epoch,
            reference: self.reference_share() * self.config.bottlenecked_fraction,
            own: self.index,
            young: self.config.young,
            idle: self.interval * IDLE_INTERVALS,
        };
        let mut census = Census {
            demands: Vec::with_capacity(self.listed.len()),
            came: 0,
            stayed_away: 0,
            young_waiting: 0,
            young_rate: 0.0,
            longest_round: Duration::ZERO,
            at_share_flows: 0,
            at_share_rate: 0.0,
        };
        let flows = &mut self.flows;
        self.listed.retain(|&key| {
            flows
                .get_mut(now, key)
                .is_some_and(|state| state.close(&end, &mut census))
        });
        census
    }

    /// Learns from this interval's newcomers how many come to use their
    /// share ([`ErcMarker::show_up`]) and holds that many shares for the
    /// young flows waiting: shares that short flows never use go to the
    /// flows there. Young flows hold no more than [`YOUNG_GROWTH`] times
    /// what they send, and one share more: a flow is young on its claim,
    /// and a stream of flows that each send a first flight and stop held a
    /// share each while the router was still learning that they never
    /// come (`ecnq-perf demo --fake-newcomers`).
    fn reserve(&mut self, census: &mut Census) {
        let keep = |outcomes: u32| (1.0 - SHOW_UP_GAIN).powi(outcomes as i32);
        self.show_up = (1.0 - (1.0 - self.show_up) * keep(census.came)) * keep(census.stayed_away);
        let sent = (YOUNG_GROWTH * census.young_rate / self.share).floor() as usize;
        let reserved = ((census.young_waiting as f64 * self.show_up).ceil() as usize).min(1 + sent);
        census
            .demands
            .extend(std::iter::repeat_n(f64::INFINITY, reserved));
    }

    /// Starts the next interval, as long as a flow at the share takes to
    /// send [`ErcConfig::interval_packets`](super::ErcConfig::interval_packets)
    /// packets of the size seen, so that rates are measured from enough
    /// packets at any speed.
    fn next_interval(&mut self, now: Duration) {
        if self.packets > 0 {
            self.packet_size = self.bytes as f64 / self.packets as f64;
        }
        self.interval = Duration::from_secs_f64(
            (self.config.interval_packets * self.packet_size / self.share).clamp(
                self.config.min_interval.as_secs_f64(),
                self.config.max_interval.as_secs_f64(),
            ),
        );
        self.interval_start = now;
        self.bytes = 0;
        self.packets = 0;
        self.uncounted_packets = 0;
        self.queue_min = u64::MAX;
    }

    /// Moves [`ErcMarker::spare_gain`] over one interval (see [`Spare`]).
    /// It falls at once to what the target carries when arrivals exceed it
    /// and a queue stands, never below 1, or [`SPARE_MIN`] while flows that
    /// do not count yet send. Shares reserved for young flows
    /// are spare in so far as young flows do not come to use them (most do
    /// where flows are long): while some are reserved, the flows at the
    /// share use it and the link is under its target, it grows as RCP's
    /// rate does into spare capacity, by [`SPARE_GAIN`] × (1 − show_up) ×
    /// the spare fraction per round trip of the flows
    /// ([`ErcMarker::round_trip`]). With none reserved there is nothing to
    /// hand out, and it decays.
    fn follow_spare(&mut self, interval: Spare) {
        let Spare {
            elapsed,
            available,
            arrivals,
            used,
            reserved,
            queued,
            uncounted,
        } = interval;
        let under = arrivals < (1.0 - SPARE_DEADBAND) * available;
        if arrivals > available && queued {
            let floor = if uncounted { SPARE_MIN } else { 1.0 };
            self.spare_gain = (self.spare_gain * available / arrivals).max(floor);
        } else if reserved && used && under {
            let spare = (1.0 - self.show_up) * (1.0 - arrivals / available);
            let rounds = elapsed / self.round_trip.as_secs_f64();
            self.spare_gain =
                (self.spare_gain * (SPARE_GAIN * spare * rounds).exp()).min(SPARE_MAX);
        }
        if !reserved {
            self.spare_gain = 1.0 + (self.spare_gain - 1.0) * SPARE_DECAY;
        }
    }

    /// The max-min fair share of `capacity` among flows with these demands
    /// (∞: bottlenecked here), recording what the bottlenecked flows share.
    fn water_fill(&mut self, capacity: f64, demands: &mut [f64]) -> f64 {
        let split = MaxMin::split(capacity, demands);
        self.bottleneck_capacity = split.remaining;
        self.bottlenecked = split.limited;
        if let Some(share) = split.share() {
            return share;
        }
        let remaining = split.remaining;
        // Every flow is limited elsewhere: the largest ones may grow into
        // what is left (sharing it, so that they cannot all take it at once).
        let largest = demands.last().copied().unwrap_or(0.0);
        let near_largest = demands.iter().filter(|&&d| d >= 0.9 * largest).count();
        largest + remaining / near_largest.max(1) as f64
    }

    /// A flow that can learn its rate from now on joins the bottlenecked
    /// flows at once.
    pub(super) fn on_new_flow(&mut self, now: Duration) {
        self.bottlenecked += 1;
        let share = self.spare_gain * self.bottleneck_capacity / self.bottlenecked as f64;
        if share < self.share {
            self.advertise(now, share);
        } else {
            self.count_newcomer();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::*;
    use crate::schemes::erc::{ErcConfig, ErcDecoder, DIGITS, START_CODE_DIGITS};
    use crate::signal::flow_table::FlowTableConfig;
    use crate::signal::{Decoder, Marker};
    use crate::wire::ecn::Ecn;

    #[test]
    fn the_router_splits_its_capacity_max_min_fairly() {
        let capacity = 1e6;
        let mut r = ErcMarker::new(ErcConfig::default(), FlowTableConfig::default());
        // Two flows bottlenecked here (sending more than any share) and one
        // limited elsewhere to 100 kB/s, which counts as bottlenecked until
        // [`ErcConfig::young`] has passed without it reaching the share.
        let span = ErcConfig::default().young + MS * 1_000;
        drive(&mut r, capacity, &[2e6, 2e6, 1e5], Duration::ZERO, span);
        let expected = (0.98 * capacity - 1e5) / 2.0;
        assert_share(&r, expected);
        // A flow written by this router carries its index.
        let mut d = ErcDecoder::default();
        let mut pkt = packet(1, 0);
        for p in 0..DIGITS {
            pkt.ecn = Ecn::Ect0;
            pkt.hash = p;
            r.mark(span, &link(capacity, 0), &mut pkt);
            d.on_packet(MS, pkt.ecn, pkt.tag, pkt.hash);
        }
        assert_eq!(d.index(), r.index());
    }

    #[test]
    fn a_newcomer_that_came_back_and_went_quiet_frees_its_share() {
        let mut r = ErcMarker::new(ErcConfig::default(), FlowTableConfig::default());
        // Flow 2 sends its two flights and ends; flow 3 sends a first
        // flight only, long enough to count, as a newcomer on a long path
        // does while it waits.
        let mut packets: Vec<_> = short_flow(2, Duration::ZERO).collect();
        packets.extend((0..u32::from(START_CODE_DIGITS) + DIGITS).map(|i| (3, MS * i)));
        beside_a_long_flow(&mut r, Duration::ZERO, MS * 500, packets);
        // Quiet for two of its round trips, flow 2 has left; flow 3 may
        // still come back (it is held for a second).
        assert_eq!(r.flows(), 2);
        beside_a_long_flow(&mut r, MS * 500, MS * 1_200, Vec::new());
        assert_eq!(r.flows(), 1);
    }

    #[test]
    fn where_newcomers_end_young_they_reserve_fewer_shares() {
        // Four newcomers that send a packet a millisecond (1 MB/s, under
        // the share) for 250 ms.
        let newcomers =
            |at: Duration| (10..14).flat_map(move |f| (0..250).map(move |i| (f, at + MS * i)));
        let mut fresh = ErcMarker::new(ErcConfig::default(), FlowTableConfig::default());
        beside_a_long_flow(
            &mut fresh,
            Duration::ZERO,
            MS * 300,
            newcomers(MS * 50).collect(),
        );
        // The long flow and four newcomers, each reserved a share.
        let each = 0.98 * 1e7 / 5.0;
        assert!(
            (fresh.share() / each - 1.0).abs() < 0.05,
            "{}",
            fresh.share()
        );

        // Four seconds of short flows that all end before their share
        // reaches them, then the same four newcomers.
        let mut r = ErcMarker::new(ErcConfig::default(), FlowTableConfig::default());
        let shorts = (0..40).flat_map(|k| short_flow(100 + k, MS * 100 * k as u32));
        beside_a_long_flow(&mut r, Duration::ZERO, MS * 5_000, shorts.collect());
        assert!(r.show_up < 0.2, "{}", r.show_up);
        let from = MS * 5_000;
        beside_a_long_flow(
            &mut r,
            from,
            from + MS * 300,
            newcomers(from + MS * 50).collect(),
        );
        assert!(r.share() > 2.0 * each, "{} vs {each}", r.share());
    }

    /// Forty young flows that send little between them (a stream of first
    /// flights that stop) hold one share, not forty, while the router has
    /// not yet learnt that newcomers do not come; forty that send hold what
    /// they send, twice over.
    #[test]
    fn young_flows_hold_no_more_shares_than_they_send_for() {
        let mut r = ErcMarker::new(ErcConfig::default(), FlowTableConfig::default());
        r.share = 1e6;
        let held = |r: &mut ErcMarker, young_rate: f64| {
            let mut census = Census {
                demands: vec![f64::INFINITY],
                came: 0,
                stayed_away: 0,
                young_waiting: 40,
                young_rate,
                longest_round: Duration::ZERO,
                at_share_flows: 1,
                at_share_rate: 1e6,
            };
            r.reserve(&mut census);
            assert_eq!(r.show_up, 1.0, "no newcomer's outcome is known yet");
            census.demands.len() - 1
        };
        assert_eq!(held(&mut r, 1e4), 1);
        // 40 × 0.1 MB/s: eight shares' worth of growth, and one more.
        assert_eq!(held(&mut r, 4e6), 9);
        assert_eq!(held(&mut r, 40e6), 40);
    }

    #[test]
    fn shares_reserved_for_newcomers_that_never_come_go_to_the_flows_there() {
        // One long flow sends at whatever the router advertises; every
        // 300 ms a newcomer sends a first flight and is never heard of
        // again, so a share stays reserved for one that does not come.
        let capacity = 1e6;
        let mut r = ErcMarker::new(ErcConfig::default(), FlowTableConfig::default());
        let (mut t, mut next_newcomer, mut hash) = (Duration::ZERO, Duration::ZERO, 0u32);
        let mut newcomer = 100;
        let mut sent_since = Vec::new();
        while t < MS * 30_000 {
            if t >= next_newcomer {
                // Its flight, then a packet at every position: it counts.
                for i in 0..u32::from(START_CODE_DIGITS) + DIGITS {
                    let mut pkt = packet(newcomer, i);
                    r.mark(t, &link(capacity, 0), &mut pkt);
                }
                newcomer += 1;
                next_newcomer += MS * 300;
            }
            hash = hash.wrapping_add(0x9e37_79b9);
            let mut pkt = packet(1, hash);
            r.mark(t, &link(capacity, 0), &mut pkt);
            if t >= MS * 25_000 {
                sent_since.push(t);
            }
            t += Duration::from_secs_f64(1_000.0 / r.share().min(capacity));
        }
        // Max-min alone holds the long flow to half the link (itself and
        // the reserved share); the spare capacity comes back to it.
        let rate = sent_since.len() as f64 * 1_000.0 / 5.0;
        assert!(rate > 0.8 * capacity, "{rate} of {capacity}");
        assert!(r.share() <= 0.98 * capacity, "{}", r.share());
        assert!(r.spare_gain > 1.5, "{}", r.spare_gain);
    }

    #[test]
    fn a_standing_queue_takes_the_spare_gain_back() {
        let mut r = ErcMarker::new(ErcConfig::default(), FlowTableConfig::default());
        r.spare_gain = 4.0;
        r.show_up = 0.0;
        let interval = |arrivals: f64, used: bool, queued: bool| Spare {
            elapsed: 0.1,
            available: 1e6,
            arrivals,
            used,
            reserved: true,
            queued,
            uncounted: false,
        };
        // No queue: arrivals over the target are a passing burst.
        r.follow_spare(interval(2e6, true, false));
        assert_eq!(r.spare_gain, 4.0);
        // A queue stands: the gain falls to what the target carries ...
        r.follow_spare(interval(2e6, true, true));
        assert_eq!(r.spare_gain, 2.0);
        // ... never below the max-min share.
        r.follow_spare(interval(4e6, true, true));
        assert_eq!(r.spare_gain, 1.0);
        // ... unless flows that do not count yet send.
        r.follow_spare(Spare {
            uncounted: true,
            ..interval(4e6, true, true)
        });
        assert!(r.spare_gain < 1.0 && r.spare_gain == SPARE_MIN);
        r.spare_gain = 1.0;
        // Capacity that is not likely spare (flows still ramping up, or
        // newcomers that come) leaves it alone.
        r.follow_spare(interval(1e5, false, false));
        assert_eq!(r.spare_gain, 1.0);
        r.show_up = 1.0;
        r.follow_spare(interval(1e5, true, false));
        assert_eq!(r.spare_gain, 1.0);
        r.show_up = 0.5;
        r.follow_spare(interval(1e5, true, false));
        assert!(r.spare_gain > 1.0);
        // With no share reserved, the excess decays.
        let grown = r.spare_gain;
        r.follow_spare(Spare {
            reserved: false,
            ..interval(1e5, true, false)
        });
        assert!((r.spare_gain - 1.0 - (grown - 1.0) * SPARE_DECAY).abs() < 1e-12);
    }

    #[test]
    fn the_router_judges_flows_over_the_longest_round_trip_it_learnt() {
        let mut r = ErcMarker::new(ErcConfig::default(), FlowTableConfig::default());
        beside_a_long_flow(&mut r, Duration::ZERO, MS * 100, Vec::new());
        assert_eq!(r.reference_span, ErcConfig::default().reference_span);
        // A newcomer on a 2 s path: its first flight, then nothing until its
        // ACKs return. It leaves the computation after a second of silence
        // and comes back with its round trip learnt.
        let first = (0..DIGITS).map(|i| (2, MS * (100 + i)));
        let second = (0..DIGITS).map(|i| (2, MS * (2_100 + i)));
        beside_a_long_flow(&mut r, MS * 100, MS * 2_300, first.chain(second).collect());
        assert_eq!(r.reference_span, MS * 2_000);
        assert_eq!(r.round_trip, MS * 2_000);
    }

    /// The spare gain grows per round trip of the flows, as RCP's rate
    /// does: a router whose flows learnt a 100 ms round trip judges them
    /// over at least 250 ms, but grows the gain per 100 ms.
    #[test]
    fn the_spare_gain_grows_per_round_trip_of_the_flows() {
        let mut r = ErcMarker::new(ErcConfig::default(), FlowTableConfig::default());
        assert_eq!(r.round_trip, ErcConfig::default().reference_span);
        let short = short_flow(2, MS * 100).collect();
        beside_a_long_flow(&mut r, Duration::ZERO, MS * 300, short);
        assert_eq!(r.round_trip, MS * 100);
        assert_eq!(r.reference_span, ErcConfig::default().reference_span);
        // One interval of 10 ms, a tenth of a round trip, with half the
        // target spare: the gain grows by e^(0.4 × 0.5 × 0.1).
        (r.spare_gain, r.show_up) = (1.0, 0.0);
        r.follow_spare(Spare {
            elapsed: 0.01,
            available: 1e6,
            arrivals: 0.5e6,
            used: true,
            reserved: true,
            queued: false,
            uncounted: false,
        });
        let expected = (SPARE_GAIN * 0.5 * 0.1).exp();
        assert!((r.spare_gain - expected).abs() < 1e-9, "{}", r.spare_gain);
    }

    /// The spare gain hands the flows there what they leave unused; a
    /// newcomer's first chain spells the max-min share with it counted,
    /// without the gain.
    #[test]
    fn a_newcomer_is_told_the_max_min_share_without_the_spare_gain() {
        let capacity = 1e6;
        let mut r = ErcMarker::new(ErcConfig::default(), FlowTableConfig::default());
        let span = ErcConfig::default().young + MS * 1_000;
        drive(&mut r, capacity, &[2e6], Duration::ZERO, span);
        r.spare_gain = 3.0;
        r.advertise(span, 3.0 * 0.98 * capacity);
        let without_gain = index_of(0.98 * capacity / 2.0);
        assert!(
            r.newcomer_index.abs_diff(without_gain) <= 1,
            "{} vs {without_gain}",
            r.newcomer_index
        );
    }

    #[test]
    fn a_standing_queue_lowers_the_share_until_it_drains() {
        let capacity = 1e6;
        let mut r = ErcMarker::new(ErcConfig::default(), FlowTableConfig::default());
        for i in 0..200u32 {
            r.mark(MS * i, &link(capacity, 100_000), &mut packet(1, i));
        }
        let drain = ErcConfig::default().drain_time.as_secs_f64();
        let expected = 0.98 * capacity - 100_000.0 / drain;
        assert!((r.share() / expected - 1.0).abs() < 0.05, "{}", r.share());
    }

    /// A router that restarts (its flow table lost) finds the fair share
    /// again from the flows' arrivals: no flow starves.
    #[test]
    fn a_restarted_router_finds_the_fair_share_again() {
        let capacity = 1e6;
        let span = ErcConfig::default().young + MS * 1_000;
        let expected = 0.98 * capacity / 2.0;
        let mut r = ErcMarker::new(ErcConfig::default(), FlowTableConfig::default());
        drive(&mut r, capacity, &[2e6, 2e6], Duration::ZERO, span);
        assert_share(&r, expected);
        let mut restarted = ErcMarker::new(ErcConfig::default(), FlowTableConfig::default());
        drive(&mut restarted, capacity, &[2e6, 2e6], span, span * 2);
        assert_share(&restarted, expected);
    }
}
