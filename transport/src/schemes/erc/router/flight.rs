//! The start code a router writes into a server's handshake flight: how far
//! a newcomer must slow its initial window, read by the server from its
//! client's ACK-ECN counts of the handshake (docs/design.md §2, Arrivals).
//! The flight crosses the router a round trip before the data, when a
//! crowd's later members have not arrived yet, so the router expects a
//! surge of flights above the usual ones to go on.
//! It slows their windows only as far as both of these ask: until the
//! expected windows fit in what the link leaves unused over their round
//! trip and a short queue, and until a window's pace is no more than the
//! share the expected newcomers will get. Either alone slowed short flows
//! for nothing: the room alone wherever the flows there keep the link
//! full (the 100 Mbit/s web mixes, `web-beside-long`), the share alone on
//! slow links where one window is a large part of the link but fits in
//! its buffer (`web-10mbit`).

use std::collections::VecDeque;
use std::time::Duration;

use super::super::{START_CODE_DIGITS, START_CODE_STEP};

/// The initial window a QUIC sender sends in its first round trip: 10 ×
/// 1200-byte datagrams (RFC 9002 §7.2).
const INITIAL_WINDOW: f64 = 12_000.0;

/// The round trip assumed for newcomers while the router has learnt none:
/// a short one, so that the code errs toward slowing the first windows
/// (which costs a newcomer at most that window's round trip) rather than
/// letting a crowd's windows overflow the buffer. ecnq's own.
const ASSUMED_ROUND: Duration = Duration::from_millis(40);

/// The usual flights per round trip are those of the last this many
/// round trips: long enough that a crowd arriving over a second on a
/// 40 ms path (`erc-flash-1000`) is still a surge at its end. ecnq's own.
const SURGE_ROUNDS: u32 = 25;

/// A round trip's flights are a surge where they exceed the usual by
/// this factor: steady arrivals of short flows fluctuate about their
/// mean, and those already are in the link's arrival rate. The router
/// expects only the surge to go on, as many again as it saw. Expecting
/// every flight seen and the surge again slowed steady arrivals of short
/// flows on a long path (`adpm-afct`: 1.96 × processor sharing, against
/// 1.50 with no code and 1.55 with this rule); counting only the
/// flights seen left a flash crowd's queue from its third round trip on
/// at 24 ms at p99 rather than under 2
/// (`a_flash_crowd_paces_its_initial_windows_to_the_start_code`).
/// ecnq's own.
const SURGE_FACTOR: f64 = 1.5;

/// The queue the newcomers' initial windows may build: issue 70's goal
/// for a flash crowd's queue (p99 ≤ 5 ms), and at least one initial
/// window, which a buffer of a bandwidth-delay product holds.
const QUEUE_BUDGET: Duration = Duration::from_millis(5);

/// The most flights a router remembers: a flood of flights (real or not)
/// must not grow its memory without bound. At the bound, 12 kB each, the
/// expected windows are 0.8 GB, far over what any link's round trip
/// and buffer hold, so the code is at its most already. ecnq's own.
const MOST_FLIGHTS: usize = 1 << 16;

/// The weight of each newcomer's round trip in the average the router
/// assumes for the next (RFC 6298's α for the smoothed RTT).
const ROUND_GAIN: f64 = 0.125;

/// Recent flights, the link's arrival rate, and the code each new flow's
/// flight carries.
#[derive(Clone, Debug, Default)]
pub(super) struct Flights {
    /// When each flight of the last [`SURGE_ROUNDS`] round trips came.
    recent: VecDeque<Duration>,
    /// The newcomers' round trip (flight to data), averaged.
    round: Option<Duration>,
    /// The link's arrival rate (bytes per second), averaged over about a
    /// round trip, and when it was last moved.
    arrivals: f64,
    moved: Duration,
}

impl Flights {
    /// A newcomer's data came `round` after its flight.
    pub(super) fn learn_round(&mut self, round: Duration) {
        self.round = Some(match self.round {
            None => round,
            Some(r) => r.mul_f64(1.0 - ROUND_GAIN) + round.mul_f64(ROUND_GAIN),
        });
    }

    fn round(&self) -> Duration {
        self.round.unwrap_or(ASSUMED_ROUND)
    }

    /// A packet of `len` bytes entered the link: the arrival rate decays
    /// over a round trip and takes it in (an exponential moving average in
    /// continuous time).
    pub(super) fn on_packet(&mut self, now: Duration, len: u32) {
        let tau = self.round().as_secs_f64();
        let elapsed = now.saturating_sub(self.moved).as_secs_f64();
        self.arrivals = self.arrivals * (-elapsed / tau).exp() + f64::from(len) / tau;
        self.moved = now;
    }

    /// A new flow's flight comes at `now` to a link whose router hands out
    /// `target` bytes per second, `capacity` of it shared by `bottlenecked`
    /// flows: the number of its flight's datagrams to clear (0 to
    /// [`START_CODE_DIGITS`] − 1; all cleared would spell a path that
    /// bleaches ECN, read as no router). Each cleared datagram halves the
    /// initial window's pace [`START_CODE_STEP`] times.
    pub(super) fn code(
        &mut self,
        now: Duration,
        target: f64,
        (capacity, bottlenecked): (f64, usize),
    ) -> u8 {
        let round = self.round();
        let span = round * SURGE_ROUNDS;
        while self
            .recent
            .front()
            .is_some_and(|&at| now.saturating_sub(at) > span)
            || self.recent.len() >= MOST_FLIGHTS
        {
            self.recent.pop_front();
        }
        self.recent.push_back(now);
        let last_round = (self.recent.iter().rev())
            .take_while(|&&at| now.saturating_sub(at) <= round)
            .count() as f64;
        let usual = self.recent.len() as f64 / f64::from(SURGE_ROUNDS);
        let expected = 2.0 * (last_round - SURGE_FACTOR * usual).max(0.0);
        let spare = (target - self.arrivals).max(0.0) * round.as_secs_f64();
        let queue = (target * QUEUE_BUDGET.as_secs_f64()).max(INITIAL_WINDOW);
        let over_room = expected * INITIAL_WINDOW / (spare + queue);
        let share = capacity / (bottlenecked as f64 + expected);
        let over_share = INITIAL_WINDOW / round.as_secs_f64() / share;
        let halvings = over_room.min(over_share).log2().ceil().max(0.0);
        let most = START_CODE_DIGITS - 1;
        ((halvings / f64::from(START_CODE_STEP)).ceil() as u8).min(most)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::*;
    use super::super::{ErcConfig, ErcMarker};
    use super::*;
    use crate::signal::flow_table::FlowTableConfig;
    use crate::signal::Marker;
    use crate::wire::ecn::Ecn;

    fn cleared(flight: &[Ecn]) -> usize {
        flight.iter().filter(|&&e| e == Ecn::NotEct).count()
    }

    /// 100 Mbit/s, in bytes per second.
    const CAPACITY: f64 = 12.5e6;

    #[test]
    fn a_lone_newcomer_on_an_idle_link_is_asked_nothing() {
        let mut r = ErcMarker::new(ErcConfig::default(), FlowTableConfig::default());
        let flight = send_flight(&mut r, 1, MS, CAPACITY);
        assert_eq!(flight, vec![Ecn::Ect0; usize::from(START_CODE_DIGITS)]);
    }

    /// 100 flights within 10 ms (`erc-flash-100`): their initial windows
    /// are 2.4 bandwidth-delay products at 40 ms. The first few fit in the
    /// idle link; the later ones are asked to slow, never with the whole
    /// flight cleared (which reads as a bleaching path).
    #[test]
    fn a_crowds_later_flights_ask_their_windows_to_slow() {
        let mut r = ErcMarker::new(ErcConfig::default(), FlowTableConfig::default());
        let codes: Vec<usize> = (0..100u64)
            .map(|i| cleared(&send_flight(&mut r, i, MS / 10 * i as u32, CAPACITY)))
            .collect();
        assert_eq!(codes[0], 0, "{codes:?}");
        assert!(codes.windows(2).all(|w| w[0] <= w[1]), "{codes:?}");
        let most = usize::from(START_CODE_DIGITS) - 1;
        assert_eq!(codes[99], most, "{codes:?}");
    }

    /// Routers only clear: a datagram an upstream router cleared stays
    /// cleared, and CE keeps its meaning.
    #[test]
    fn a_flight_keeps_what_upstream_wrote() {
        let mut r = ErcMarker::new(ErcConfig::default(), FlowTableConfig::default());
        for (n, ecn) in [Ecn::NotEct, Ecn::Ce, Ecn::Ect0].into_iter().enumerate() {
            let mut pkt = packet(1, n as u32);
            pkt.ecn = ecn;
            r.mark(MS, &link(CAPACITY, 0), &mut pkt);
            assert_eq!(pkt.ecn, ecn);
        }
    }

    /// A flood of flights is remembered up to a bound, and still asks the
    /// most of each.
    #[test]
    fn a_flood_of_flights_is_remembered_up_to_a_bound() {
        let mut flights = Flights::default();
        let mut code = 0;
        for i in 0..2 * MOST_FLIGHTS as u32 {
            code = flights.code(Duration::from_nanos(u64::from(i)), CAPACITY, (CAPACITY, 0));
        }
        assert_eq!(flights.recent.len(), MOST_FLIGHTS);
        assert_eq!(code, START_CODE_DIGITS - 1);
    }

    /// On a link the flows there keep full, a newcomer's window goes into
    /// the queue: at 100 Mbit/s it fits in the queue's budget and its pace
    /// is under the share it will get, so it is asked nothing; at 10
    /// Mbit/s beside four flows it is neither, and is asked to slow.
    #[test]
    fn a_full_slow_link_asks_a_newcomer_to_slow_and_a_fast_one_does_not() {
        for (capacity, flows, slowed) in [(CAPACITY, 1, false), (CAPACITY / 10.0, 4, true)] {
            let mut r = ErcMarker::new(ErcConfig::default(), FlowTableConfig::default());
            let rates = vec![2.0 * capacity; flows];
            drive(&mut r, capacity, &rates, Duration::ZERO, MS * 500);
            let code = cleared(&send_flight(&mut r, 50, MS * 500, capacity));
            assert_eq!(code > 0, slowed, "{capacity}: {code}");
        }
    }
}
