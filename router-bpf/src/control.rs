//! The control loop: every period it reads the program's flow counters and
//! the kernel queue's backlog, runs erc's sans-IO router (`ErcMarker`, the
//! code the TUN shim runs) on them, and leaves the router's index for the
//! program with a lease. A loop that stops renewing the lease stops the
//! marks when it runs out (tests/marks.rs,
//! `marks_stop_when_the_control_loop_dies_and_nothing_is_lost`).

use std::collections::HashMap;
use std::time::Duration;

use ecnq::router::meter::{LoadFactorMeter, MeterConfig};
use ecnq::schemes::erc::{ErcConfig, ErcMarker};
use ecnq::schemes::registry::Scheme;
use ecnq::signal::flow_table::FlowTableConfig;
use ecnq::signal::{LinkState, Marker, PacketMarks};
use ecnq::wire::ecn::{Ecn, SchemeTag};

use crate::codes::Codes;
use crate::maps::{FlowKey, FlowValue, StartCodes};

/// How long the index the loop leaves stays valid: erc's shortest
/// measurement interval (`ErcConfig::min_interval`), so marks from a dead
/// loop stop within one interval.
pub fn lease() -> Duration {
    ErcConfig::default().min_interval
}

/// How often the loop runs: twice per lease, so that one late wake-up
/// does not let the lease run out.
pub fn period() -> Duration {
    lease() / 2
}

/// The most packets a flow's traffic of one period is handed to the
/// router as: the router sums bytes per flow and counts a flow's first
/// ten data packets, so a few packets of the period's average size tell
/// it the same at a bounded cost per flow.
const MOST_PACKETS: u64 = 32;

/// erc's router run from counters.
#[derive(Debug)]
pub struct ControlLoop {
    router: ErcMarker,
    /// Each flow's counters at the last step.
    last: HashMap<FlowKey, FlowValue>,
    /// The time of the last step.
    then: Option<Duration>,
    /// Whether untagged flows queue elsewhere (a dual queue's classic
    /// class) and so take no part in erc's share.
    ecnq_only: bool,
    /// The load factor meter of the shim's router, for VCP's code; made
    /// at the first step, when the capacity is known.
    meter: Option<LoadFactorMeter>,
}

impl Default for ControlLoop {
    fn default() -> ControlLoop {
        ControlLoop {
            router: ErcMarker::new(ErcConfig::default(), FlowTableConfig::default()),
            last: HashMap::new(),
            then: None,
            ecnq_only: false,
            meter: None,
        }
    }
}

/// How long the classic class's departure rate is averaged over: a few
/// of erc's intervals (`ErcConfig::min_interval`), so that one period's
/// burst of classic departures does not swing erc's capacity.
const CLASSIC_SMOOTHING: Duration = Duration::from_millis(100);

/// The capacity of a dual queue's ecnq class: the link less what the
/// other classes send, and never under the class's guaranteed rate (its
/// htb `rate`), which it gets whatever the others do; the rest of the
/// link it gets only while they leave it unused.
#[derive(Debug)]
pub struct ClassCapacity {
    link: f64,
    guaranteed: f64,
    /// The last reading: its time and the other classes' bytes by then.
    last: Option<(Duration, u64)>,
    /// The other classes' departure rate, bytes per second, averaged.
    others: f64,
}

impl ClassCapacity {
    /// The class of a link of `link` bytes per second, guaranteed
    /// `guaranteed` bytes per second.
    pub fn new(link: f64, guaranteed: f64) -> ClassCapacity {
        ClassCapacity {
            link,
            guaranteed: guaranteed.min(link),
            last: None,
            others: 0.0,
        }
    }

    /// The class's capacity at `now`, when the other classes have sent
    /// `others` bytes in all, bytes per second.
    pub fn at(&mut self, now: Duration, others: u64) -> f64 {
        if let Some((then, before)) = self.last {
            let span = now.saturating_sub(then).as_secs_f64();
            if span > 0.0 {
                let rate = others.saturating_sub(before) as f64 / span;
                let weight = (span / CLASSIC_SMOOTHING.as_secs_f64()).min(1.0);
                self.others += weight * (rate - self.others);
            }
        }
        self.last = Some((now, others));
        (self.link - self.others).max(self.guaranteed)
    }
}

/// One flow's traffic since the last step.
struct Delta {
    flow: u64,
    tag: SchemeTag,
    bytes: u64,
    packets: u64,
}

impl ControlLoop {
    /// The loop of a dual queue's ecnq class: untagged flows queue in the
    /// classic class and take no part in erc's share.
    pub fn ecnq_only() -> ControlLoop {
        ControlLoop {
            ecnq_only: true,
            ..ControlLoop::default()
        }
    }

    /// One step at `now`: the flows' counters as the program holds them,
    /// the queue's `backlog` (bytes) and the link's `capacity` (bytes per
    /// second). Returns the index the program is to write.
    pub fn step(
        &mut self,
        now: Duration,
        flows: &[(FlowKey, FlowValue)],
        backlog: u64,
        capacity: f64,
    ) -> u16 {
        let mut deltas = Vec::new();
        let mut current = HashMap::with_capacity(flows.len());
        for &(key, value) in flows.iter().filter(|(_, v)| !self.ecnq_only || v.tag != 0) {
            let before = self.last.get(&key).copied().unwrap_or_default();
            // A flow the LRU table dropped and saw again starts from zero.
            let (bytes, packets) = if value.packets >= before.packets {
                (value.bytes - before.bytes, value.packets - before.packets)
            } else {
                (value.bytes, value.packets)
            };
            if packets > 0 {
                deltas.push(Delta {
                    flow: key.flow_id(),
                    tag: SchemeTag::from_dscp(value.tag << 2 | 0b11),
                    bytes,
                    packets,
                });
            }
            current.insert(key, value);
        }
        self.last = current;
        let since = self.then.unwrap_or(now.saturating_sub(period()));
        self.then = Some(now);
        self.feed(since, now, &deltas, backlog, capacity);
        let arrived: u64 = deltas.iter().map(|d| d.bytes).sum();
        self.meter(now, arrived, backlog, capacity);
        self.router.index()
    }

    /// Hands the load factor meter the period's arrivals (as one packet:
    /// it sums bytes over its interval), the backlog and the capacity.
    fn meter(&mut self, now: Duration, arrived: u64, backlog: u64, capacity: f64) {
        let meter = (self.meter)
            .get_or_insert_with(|| LoadFactorMeter::new(MeterConfig::new(capacity), now));
        meter.set_capacity(capacity);
        meter.on_arrival(now, u32::try_from(arrived).unwrap_or(u32::MAX));
        meter.on_queue(now, backlog);
    }

    /// What the other schemes' routers write now ([`Codes`]); none
    /// before the first step.
    pub fn codes(&self) -> Codes {
        self.meter
            .as_ref()
            .map_or(Codes::default(), |meter| Codes::of(meter.load()))
    }

    /// Hands the router each flow's traffic as up to [`MOST_PACKETS`]
    /// packets of its average size, spread evenly over the period and
    /// interleaved in time, as they came.
    fn feed(
        &mut self,
        since: Duration,
        now: Duration,
        deltas: &[Delta],
        backlog: u64,
        capacity: f64,
    ) {
        let span = now.saturating_sub(since);
        let mut packets: Vec<(Duration, usize, u32)> = Vec::new();
        for (i, d) in deltas.iter().enumerate() {
            let n = d.packets.min(MOST_PACKETS);
            for k in 0..n {
                let at = since + span.mul_f64((k + 1) as f64 / n as f64);
                let len = (d.bytes / n + u64::from(k < d.bytes % n)) as u32;
                packets.push((at, i, len));
            }
        }
        packets.sort_by_key(|&(at, i, _)| (at, i));
        for (k, (at, i, len)) in packets.into_iter().enumerate() {
            let d = &deltas[i];
            let link = LinkState {
                queue_bytes: backlog,
                packet_len: len,
                capacity,
                ..LinkState::default()
            };
            // ECT(1) carries no digit: the router learns no incoming chain
            // from these packets, which only meter the flow.
            let mut pkt = PacketMarks {
                ecn: Ecn::Ect1,
                tag: d.tag,
                hash: k as u32,
                flow: d.flow,
            };
            if d.tag.wire() == Scheme::Erc.wire() {
                self.router.mark(at, &link, &mut pkt);
            } else {
                self.router.observe(at, &link, &pkt);
            }
        }
    }

    /// The start codes of the next new erc flights, were they to come at
    /// `now` on a link of `capacity` bytes per second, counted from the
    /// program's `base`th flight.
    pub fn start_codes(&self, now: Duration, capacity: f64, base: u64) -> StartCodes {
        StartCodes {
            codes: self.router.next_start_codes(now, capacity),
            base,
        }
    }

    /// The fair share the router advertises, bytes per second.
    pub fn share(&self) -> f64 {
        self.router.share()
    }

    /// Flows in the router's computation.
    pub fn flows(&self) -> usize {
        self.router.flows()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codes::vcp_code;
    use ecnq::router::meter::LinkLoad;
    use ecnq::schemes::erc::{index_of, rate_of};
    use ecnq::schemes::{bmcc, vcp};

    fn key(n: u8) -> FlowKey {
        let mut k = [0u8; FlowKey::SIZE];
        k[0] = n;
        k[37] = 4;
        FlowKey(k)
    }

    /// Two erc flows that each send more than the link: the router the
    /// counters drive advertises half of 98 % of it, as the shim's would.
    #[test]
    fn counters_of_two_greedy_flows_give_each_half_the_link() {
        let mut control = ControlLoop::default();
        let capacity = 1.25e6; // 10 Mbit/s
        let erc_tag = Scheme::Erc.wire().id();
        let mut totals = [FlowValue {
            tag: erc_tag,
            ..FlowValue::default()
        }; 2];
        let mut index = 0;
        for step in 1..=400u32 {
            let now = period() * step;
            for t in &mut totals {
                // 1 MB/s each, 1200-byte packets.
                t.bytes += (1e6 * period().as_secs_f64()) as u64;
                t.packets += (1e6 * period().as_secs_f64() / 1200.0) as u64;
            }
            let flows = [(key(1), totals[0]), (key(2), totals[1])];
            index = control.step(now, &flows, 0, capacity);
        }
        assert_eq!(control.flows(), 2);
        let expected = 0.98 * capacity / 2.0;
        let advertised = rate_of(index).expect("a rate");
        assert!(
            (advertised / expected - 1.0).abs() < 0.05,
            "advertised {advertised}, expected about {expected} (index {index} vs {})",
            index_of(expected)
        );
    }

    /// Drives `control` with an erc flow and an untagged one, each
    /// sending 1.2 MB/s, on a link of 1.25 MB/s; returns the flows in
    /// erc's computation and the share it advertises over the capacity.
    fn beside_an_untagged_flow(mut control: ControlLoop) -> (usize, f64) {
        let capacity = 1.25e6;
        let mut erc = FlowValue {
            tag: Scheme::Erc.wire().id(),
            ..FlowValue::default()
        };
        let mut other = FlowValue::default();
        for step in 1..=400u32 {
            for t in [&mut erc, &mut other] {
                t.bytes += 6_000;
                t.packets += 5;
            }
            let flows = [(key(1), erc), (key(2), other)];
            control.step(period() * step, &flows, 0, capacity);
        }
        (control.flows(), control.share() / capacity)
    }

    /// An untagged flow beside an erc flow counts as a flow (erc's
    /// `observe`): the erc flow is told half the link, not all of it.
    #[test]
    fn an_untagged_flow_counts_as_a_flow() {
        let (flows, share) = beside_an_untagged_flow(ControlLoop::default());
        assert_eq!(flows, 2);
        assert!((share / 0.49 - 1.0).abs() < 0.05, "{share}");
    }

    /// In a dual queue's ecnq class the classic class's flows do not
    /// count: the erc flow is told all of the class's capacity.
    #[test]
    fn a_classic_flow_in_its_own_class_does_not_count() {
        let (flows, share) = beside_an_untagged_flow(ControlLoop::ecnq_only());
        assert_eq!(flows, 1);
        assert!((share / 0.98 - 1.0).abs() < 0.05, "{share}");
    }

    /// VCP's code is its router's for the load the loop metered: low
    /// below 80 %, overload once the arrivals pass the capacity.
    #[test]
    fn the_vcp_code_follows_the_metered_load() {
        let mut load = LinkLoad::default();
        for (rho, code) in [(0.5, Ecn::Ect1), (0.9, Ecn::Ect0), (1.1, Ecn::Ce)] {
            load[vcp::FORMULA] = ecnq::signal::load::LoadFactor::new(rho);
            assert_eq!(vcp_code(&load), code, "{rho}");
        }
        let mut control = ControlLoop::default();
        assert_eq!(control.codes(), Codes::default());
        let capacity = 1.25e6;
        let mut flow = FlowValue {
            tag: vcp::WIRE.id(),
            ..FlowValue::default()
        };
        let mut codes = Vec::new();
        for (rate, steps) in [(0.5 * capacity, 200u32), (1.5 * capacity, 200)] {
            for _ in 0..steps {
                flow.bytes += (rate * period().as_secs_f64()) as u64;
                flow.packets += 5;
                let now = period() * (codes.len() as u32 + 1);
                control.step(now, &[(key(1), flow)], 0, capacity);
                codes.push(Ecn::from_bits(control.codes().vcp));
            }
        }
        assert_eq!(codes[190], Ecn::Ect1);
        assert_eq!(codes[390], Ecn::Ce);
    }

    /// BMCC's split of the hashes is its marker's, hash by hash: a packet
    /// whose high 16 bits are under `bmcc_below` is the one BmccMarker
    /// marks ECT(1), at loads across ADPM's three ranges and past u.
    #[test]
    fn bmcc_marks_the_hashes_its_marker_marks() {
        use ecnq::schemes::bmcc::BmccMarker;
        for f in [0.1, 0.15, 0.5, 0.75, 0.9, 1.0, 1.1, 1.19, 1.2, 1.5] {
            let mut load = LinkLoad::default();
            load[bmcc::FORMULA] = ecnq::signal::load::LoadFactor::new(f);
            let codes = Codes::of(&load);
            let link = LinkState {
                load,
                ..LinkState::default()
            };
            for high in 0..1u32 << 16 {
                let mut pkt = PacketMarks {
                    ecn: Ecn::Ect0,
                    tag: SchemeTag::new(bmcc::WIRE.id()),
                    hash: high << 16 | 0xffff,
                    flow: 0,
                };
                BmccMarker.mark(Duration::ZERO, &link, &mut pkt);
                let ours = if codes.bmcc_ce {
                    Ecn::Ce
                } else if high < codes.bmcc_below {
                    Ecn::Ect1
                } else {
                    Ecn::Ect0
                };
                assert_eq!(ours, pkt.ecn, "load {f}, high bits {high}");
            }
        }
    }

    /// The ecnq class gets the link while the others are idle, what they
    /// leave while they send less than the rest, and its guarantee while
    /// they would take more.
    #[test]
    fn the_ecnq_class_gets_what_the_others_leave_and_its_guarantee() {
        let mut class = ClassCapacity::new(2.5e6, 1.25e6);
        let mut sent = 0u64;
        let mut capacity = 0.0;
        let mut run = |rate: f64, steps: u32, base: u32| {
            for step in 1..=steps {
                sent += (rate * period().as_secs_f64()) as u64;
                capacity = class.at(period() * (base + step), sent);
            }
            capacity
        };
        assert_eq!(run(0.0, 100, 0), 2.5e6);
        let left = run(0.5e6, 200, 100);
        assert!((left / 2.0e6 - 1.0).abs() < 0.01, "{left}");
        assert_eq!(run(2.0e6, 200, 300), 1.25e6);
    }
}
