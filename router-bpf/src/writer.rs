//! erc's per-packet decision in the kernel path, in Rust: what the tc
//! program does to each packet, from the index the control loop leaves it
//! and the digits it has seen of the flow. `bpf/ecnq.bpf.c` (`erc_digit`)
//! does the same; tests/marks.rs replays a trace through both and compares
//! every packet.
//!
//! It is the incoming-chain half of erc's router (`ErcMarker::mark`): the
//! digit of the router's index at the packet's position, unless the
//! upstream routers' whole chain spells an index at least as large (the
//! path minimum of the rate). The index comes from `ErcMarker` itself,
//! computed by the control loop every period. A new flow's handshake
//! flight carries the start code instead ([`Writer::flight`]), from codes
//! the loop computes ahead with the router's own rule
//! (`ErcMarker::next_start_codes`). A flow silent for longer than
//! `LONGEST_ROUND` comes back as a new one, as it does to the router.
//! Three parts of the shim's per-packet rule stay out of the kernel path,
//! as they need per-packet work the program cannot do within the
//! verifier's and the speed budget: the newcomer's index for a flow that
//! does not count yet (its first ten packets, or its first whole chain
//! where it never waited for its peer; the kernel path counts a newcomer
//! from the next period on); the rule that keeps a lagging flow on its
//! last index until it has passed every position (`WrittenIndex`): a flow
//! hears a change at the next packet; and the router's forgetting of a
//! flow's incoming chain when it leaves the computation after a shorter
//! silence (a few of the router's intervals): the kernel path keeps it.

use std::collections::HashMap;
use std::time::Duration;

use ecnq::schemes::erc::{
    self, digit, digit_of, ecn_of, position, Digits, DATA_PACKET, LONGEST_ROUND, RETURN_GAP,
    START_CODE_DIGITS,
};
use ecnq::wire::ecn::{Ecn, SchemeTag};

use crate::maps::StartCodes;

/// The per-flow state the writer keeps, as the program's `flow_value` does.
#[derive(Clone, Debug, Default)]
pub struct Writer {
    incoming: HashMap<u64, Digits>,
    flights: HashMap<u64, Flight>,
    /// New flights seen, as the program counts them (`ecnq_flights`).
    counted: u64,
}

/// A flow's handshake flight, as erc's router follows it (its
/// `FlowState`): when its first and last packets came, whether its first
/// silence came, its flight datagrams seen and the code they carry.
#[derive(Clone, Copy, Debug)]
struct Flight {
    first: Duration,
    last: Duration,
    round: bool,
    seen: u8,
    code: u8,
}

impl Writer {
    /// A packet of `len` IP bytes of erc's `flow` at `now`, which came with
    /// `ecn`: `Some` of the ECN it leaves with if it is one of a new flow's
    /// flight datagrams (its first data-sized ones, up to
    /// `START_CODE_DIGITS`, before its first silence of `RETURN_GAP`), with
    /// the first `code` of them cleared where they came ECT(0), `code` the
    /// one `starts` holds for the flight's turn (none where the loop's
    /// state is stale: `None`); `None` past the flight, where the chain's
    /// digit is written ([`Writer::write`]). `ErcMarker::mark`'s rule.
    pub fn flight(
        &mut self,
        now: Duration,
        flow: u64,
        len: u32,
        ecn: Ecn,
        starts: Option<&StartCodes>,
    ) -> Option<Ecn> {
        let fresh = Flight {
            first: now,
            last: now,
            round: false,
            seen: 0,
            code: 0,
        };
        let flight = self.flights.entry(flow).or_insert(fresh);
        // A flow silent for longer than LONGEST_ROUND comes back as a new
        // one, as erc's router has forgotten it by then: a new flight,
        // its incoming chain unknown
        // (`flights_carry_the_start_code_erc_s_router_writes`).
        if now.saturating_sub(flight.last) > LONGEST_ROUND {
            *flight = fresh;
            self.incoming.remove(&flow);
        }
        if !flight.round
            && now.saturating_sub(flight.last) >= RETURN_GAP
            && now.saturating_sub(flight.first) <= LONGEST_ROUND
        {
            flight.round = true;
        }
        flight.last = now;
        if flight.round || len < DATA_PACKET || flight.seen >= START_CODE_DIGITS {
            return None;
        }
        let nth = flight.seen;
        flight.seen += 1;
        if nth == 0 {
            flight.code = starts.map_or(0, |s| s.of(self.counted));
            self.counted += 1;
        }
        Some(if ecn == Ecn::Ect0 && nth < flight.code {
            Ecn::NotEct
        } else {
            ecn
        })
    }

    /// New flights seen so far.
    pub fn flights(&self) -> u64 {
        self.counted
    }

    /// The ECN a packet of `flow` leaves with: `ecn`, its tag and hash as it
    /// came, the router's `index` (0 or stale: none).
    pub fn write(
        &mut self,
        index: Option<u16>,
        flow: u64,
        tag: SchemeTag,
        ecn: Ecn,
        hash: u32,
    ) -> Ecn {
        let Some(index) = index.filter(|&i| i != 0) else {
            return ecn;
        };
        if tag.wire() != erc::WIRE {
            return ecn;
        }
        let Some(incoming) = digit_of(ecn) else {
            return ecn;
        };
        let position = position(hash);
        let chain = self.incoming.entry(flow).or_default();
        chain.set(position, incoming);
        if chain.complete() && chain.index() >= index {
            return ecn;
        }
        ecn_of(digit(index, position))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ecnq::schemes::erc::DIGITS;

    fn erc() -> SchemeTag {
        SchemeTag::new(erc::WIRE.id())
    }

    /// The C source's copies of the schemes' wire constants are theirs,
    /// and its flow table is as large as the shim router's.
    #[test]
    fn the_programs_constants_are_the_routers() {
        let source = include_str!("../bpf/ecnq.bpf.c");
        let define = |name: &str| -> u32 {
            let line = source
                .lines()
                .find_map(|l| l.strip_prefix(&format!("#define {name} ")))
                .unwrap_or_else(|| panic!("no #define {name}"));
            line.trim()
                .parse()
                .unwrap_or_else(|_| panic!("{name}: {line}"))
        };
        assert_eq!(define("DIGITS"), DIGITS);
        assert_eq!(define("UNSPOKEN"), u32::from(erc::UNSPOKEN));
        assert_eq!(define("ERC_TAG"), u32::from(erc::WIRE.id()));
        assert_eq!(define("VCP_TAG"), u32::from(ecnq::schemes::vcp::WIRE.id()));
        use ecnq::schemes::{bmcc, mcp, mpcp::Chain};
        assert_eq!(define("DPCP_TAG"), u32::from(Chain::Two.wire().id()));
        assert_eq!(define("TPCP_TAG"), u32::from(Chain::Three.wire().id()));
        assert_eq!(define("BMCC_TAG"), u32::from(bmcc::WIRE.id()));
        assert_eq!(define("MCP_TAG"), u32::from(mcp::WIRE.id()));
        assert_eq!(define("FAIRING_PERIODS"), mcp::FAIRING_PERIODS as u32);
        assert_eq!(define("START_CODE_DIGITS"), u32::from(START_CODE_DIGITS));
        assert_eq!(define("DATA_PACKET"), DATA_PACKET);
        let ns = |name: &str| {
            let line = source
                .lines()
                .find_map(|l| l.strip_prefix(&format!("#define {name} ")))
                .unwrap_or_else(|| panic!("no #define {name}"));
            let digits = line.trim().trim_end_matches("ull");
            Duration::from_nanos(digits.parse().unwrap_or_else(|_| panic!("{name}: {line}")))
        };
        assert_eq!(ns("RETURN_GAP_NS"), RETURN_GAP);
        assert_eq!(ns("LONGEST_ROUND_NS"), LONGEST_ROUND);
        assert_eq!(define("START_CODES") as usize, crate::maps::START_CODES);
        assert_eq!(
            define("HASHED_TAIL") as usize,
            ecnq::wire::hash::HASHED_TAIL
        );
        assert_eq!(define("CLASSES"), crate::maps::CLASS_COUNT);
        let flows = ecnq::signal::flow_table::FlowTableConfig::default().capacity;
        assert_eq!(define("MAX_FLOWS") as usize, flows);
    }

    /// Where every flow is past its first chain and sends at least a
    /// quarter of its share, erc's own router (`ErcMarker::mark`, the
    /// shim's) and this rule with the router's index write the same ECN
    /// into every packet, upstream chains above and below its index
    /// included, while the share moves as the flows' rates do.
    #[test]
    fn past_their_start_flows_get_the_marks_erc_s_router_writes() {
        use ecnq::schemes::erc::{ErcConfig, ErcMarker};
        use ecnq::signal::flow_table::FlowTableConfig;
        use ecnq::signal::{LinkState, Marker, PacketMarks};
        use std::time::Duration;

        let capacity = 1.25e6;
        let mut router = ErcMarker::new(ErcConfig::default(), FlowTableConfig::default());
        let mut writer = Writer::default();
        // Flow i's upstream index (0: none, the sender's ECT(0)) and rate.
        let flows: [(u16, f64); 4] = [(0, 0.6e6), (0, 0.5e6), (250, 0.5e6), (900, 0.4e6)];
        let mut next = [Duration::ZERO; 4];
        // Each flow its own hash sequence: one sequence shared in turn
        // gives a flow only some chain positions, and a flow that never
        // waited for its peer counts only once it has passed all of them.
        let mut seeds = [0x5eed_u32, 0xb0a7, 0xc0de, 0xfeed];
        let (mut compared, mut differ) = (0, 0);
        let mut indices = std::collections::BTreeSet::new();
        let end = Duration::from_secs(12);
        loop {
            let (i, &now) = next.iter().enumerate().min_by_key(|(_, t)| **t).unwrap();
            if now >= end {
                break;
            }
            seeds[i] = seeds[i].wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            let hash = seeds[i];
            let (upstream, rate) = flows[i];
            // From 6 s on, flow 0 halves its rate: the share moves.
            let rate = if now >= Duration::from_secs(6) && i == 0 {
                rate / 2.0
            } else {
                rate
            };
            next[i] += Duration::from_secs_f64(1_200.0 / rate);
            let came = if upstream == 0 {
                Ecn::Ect0
            } else {
                ecn_of(digit(upstream, position(hash)))
            };
            let link = LinkState {
                capacity,
                packet_len: 1_200,
                ..LinkState::default()
            };
            let mut pkt = PacketMarks {
                ecn: came,
                tag: erc(),
                hash,
                flow: i as u64,
            };
            router.mark(now, &link, &mut pkt);
            // The index in force for the packet: the router closes a due
            // interval before it marks.
            let ours = writer.write(Some(router.index()), i as u64, erc(), came, hash);
            // Past the flows' first chains and the router's start.
            if now >= Duration::from_secs(5) {
                compared += 1;
                differ += usize::from(ours != pkt.ecn);
                indices.insert(router.index());
            }
        }
        assert!(compared > 10_000, "{compared}");
        assert!(indices.len() > 2, "the share did not move: {indices:?}");
        assert_eq!(differ, 0, "{differ} of {compared} packets marked otherwise");
    }

    /// A flash crowd's flights (100 within 10 ms at 100 Mbit/s, each
    /// flow's data 40 ms after its flight) leave the kernel path's rule as
    /// they leave erc's own router, with the codes the router computes
    /// ahead (`next_start_codes`) left every `period`: where the loop runs
    /// before every packet, datagram for datagram; at the loop's period,
    /// the later flights of a period share one turn's code and are cleared
    /// less, but never more. The crowd comes back after a silence longer
    /// than `LONGEST_ROUND`, and its flights carry the router's start codes
    /// again: codes computed ahead decay the arrivals to their own time, so
    /// a period's codes after an idle spell clear no more than the router.
    #[test]
    fn flights_carry_the_start_code_erc_s_router_writes() {
        use ecnq::schemes::erc::{ErcConfig, ErcMarker};
        use ecnq::signal::flow_table::FlowTableConfig;
        use ecnq::signal::{LinkState, Marker, PacketMarks};

        let capacity = 12.5e6;
        let ms = Duration::from_millis(1);
        // Each flow's datagrams, numbered: 0 to 2 its flight, 3 to 12 its
        // data; after the silence 13 to 15 its flight, then its data.
        let back = LONGEST_ROUND + ms * 100;
        let mut packets: Vec<(Duration, u64, u32)> = Vec::new();
        for flow in 0..100u64 {
            for (start, first) in [
                (ms / 10 * flow as u32, 0),
                (back + ms / 10 * flow as u32, 13),
            ] {
                for n in 0..3 {
                    packets.push((start + Duration::from_micros(n), flow, first + n as u32));
                }
                for n in 0..10 {
                    packets.push((start + ms * (40 + n), flow, first + 3 + n));
                }
            }
        }
        packets.sort();
        let in_flight = |n: u32| n % 13 < 3;
        for (period, exact) in [(Duration::ZERO, true), (crate::control::period(), false)] {
            let mut router = ErcMarker::new(ErcConfig::default(), FlowTableConfig::default());
            let mut writer = Writer::default();
            let mut starts = None;
            let mut next = Duration::ZERO;
            let (mut theirs, mut ours, mut flights) = (0, 0, 0);
            for &(now, flow, n) in packets.iter().filter(|p| p.2 < 26) {
                if now >= next {
                    let codes = router.next_start_codes(now, capacity);
                    starts = Some(StartCodes {
                        codes,
                        base: writer.flights(),
                    });
                    next = now + period;
                }
                let link = LinkState {
                    capacity,
                    packet_len: 1_200,
                    ..LinkState::default()
                };
                let mut pkt = PacketMarks {
                    ecn: Ecn::Ect0,
                    tag: erc(),
                    hash: n,
                    flow,
                };
                router.mark(now, &link, &mut pkt);
                let Some(out) = writer.flight(now, flow, 1_200, Ecn::Ect0, starts.as_ref()) else {
                    assert!(!in_flight(n), "flow {flow}'s datagram {n} is in its flight");
                    continue;
                };
                assert!(
                    in_flight(n),
                    "flow {flow}'s datagram {n} is past its flight"
                );
                flights += usize::from(n % 13 == 0);
                theirs += usize::from(pkt.ecn == Ecn::NotEct);
                ours += usize::from(out == Ecn::NotEct);
                if exact {
                    assert_eq!(out, pkt.ecn, "flow {flow}'s datagram {n}");
                }
            }
            assert_eq!(flights, 200);
            assert!(theirs > 200, "{theirs}");
            assert!(ours <= theirs && 2 * ours >= theirs, "{ours} of {theirs}");
        }
    }

    #[test]
    fn a_larger_incoming_index_is_kept() {
        let mut w = Writer::default();
        let (own, upstream) = (300, 500);
        // The upstream chain, one packet per position: the first nine are
        // rewritten (the chain is not whole yet), then the router leaves
        // the flow's packets as upstream wrote them.
        for round in 0..2 {
            for p in 0..DIGITS {
                let came = ecn_of(digit(upstream, p));
                let out = w.write(Some(own), 1, erc(), came, p);
                let whole = round == 1 || p == DIGITS - 1;
                assert_eq!(out, if whole { came } else { ecn_of(digit(own, p)) });
            }
        }
    }

    #[test]
    fn a_smaller_incoming_index_is_overwritten() {
        let mut w = Writer::default();
        for p in 0..2 * DIGITS {
            let position = p % DIGITS;
            let out = w.write(Some(500), 1, erc(), ecn_of(digit(300, position)), p);
            assert_eq!(out, ecn_of(digit(500, position)));
        }
    }

    #[test]
    fn other_schemes_ce_and_stale_state_pass() {
        let mut w = Writer::default();
        let untagged = SchemeTag::UNTAGGED;
        assert_eq!(w.write(Some(500), 1, untagged, Ecn::Ect0, 3), Ecn::Ect0);
        assert_eq!(w.write(Some(500), 1, erc(), Ecn::Ce, 3), Ecn::Ce);
        assert_eq!(w.write(Some(500), 1, erc(), Ecn::Ect1, 3), Ecn::Ect1);
        assert_eq!(w.write(None, 1, erc(), Ecn::Ect0, 3), Ecn::Ect0);
        assert_eq!(w.write(Some(0), 1, erc(), Ecn::Ect0, 3), Ecn::Ect0);
    }
}
