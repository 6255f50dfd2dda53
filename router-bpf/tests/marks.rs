//! The kernel path against the router code, packet by packet: a trace of
//! packets of every scheme the program marks, and of others and untagged
//! ones (IPv4 and IPv6, UDP and TCP, upstream chains larger and smaller
//! than this router's, every codepoint, MCP's flag bits, payloads shorter
//! than the hashed tail) goes through the tc program on a veth in a
//! namespace of its own, and through the router code: `ecnq_bpf::writer`
//! for erc with the same index, the other schemes' own markers (a probe
//! raised first, as the shim's router does) at the same load; every packet
//! leaves both with the same TOS byte, its IPv4 checksum valid, its payload
//! untouched, and the program's counters count it. Then the control loop: marks stop when it dies, and
//! detaching leaves forwarding with nothing lost.
//!
//! Needs root (skipped otherwise, failed where CI is set and the program
//! was not built).

mod common;

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

use common::{read, Lcg, Netns, PacketSocket, Seen, Spec};
use ecnq::router::meter::LinkLoad;
use ecnq::schemes::erc::{self, digit, digit_of, ecn_of, position, rate_of, Digits, DIGITS};
use ecnq::schemes::mpcp::Chain;
use ecnq::schemes::{bmcc, mcp, vcp};
use ecnq::signal::flow_table::FlowTableConfig;
use ecnq::signal::load::LoadFactor;
use ecnq::signal::{LinkState, Marker, MarkerConfig, PacketMarks};
use ecnq::wire::ecn::{Ecn, SchemeTag, WireScheme};
use ecnq::wire::hash::packet_hash;
use ecnq_bpf::codes::Codes;
use ecnq_bpf::control::lease;
use ecnq_bpf::maps::{Control, FlowKey, FlowReader, FlowValue, Maps, StartCodes};
use ecnq_bpf::run::{coarse_ns, monotonic_ns};
use ecnq_bpf::writer::Writer;
use ecnq_bpf::{sys, tc};

/// The DSCP of a scheme's pool tag (docs/design.md §2).
fn dscp(tag: u8) -> u8 {
    tag << 2 | 0b11
}

/// The flows of the trace.
#[derive(Clone, Copy, Debug)]
enum Upstream {
    /// The sender's own ECT(0), all digits 1.
    Sender,
    /// An upstream erc router wrote this index.
    Index(u16),
    /// A sender that does not speak ECN: Not-ECT.
    NotEct,
    /// Any codepoint: a presence probe, or codes and digits upstream
    /// routers wrote.
    Any,
}

struct Flow {
    src: IpAddr,
    dst: IpAddr,
    sport: u16,
    tcp: bool,
    dscp: u8,
    upstream: Upstream,
    /// CE or ECT(1) now and then (an AQM upstream, an L4S sender).
    others: bool,
    /// Any of MCP's flag bits in the tag, packet by packet.
    flags: bool,
    payload: (u32, u32),
}

fn flows() -> Vec<Flow> {
    let v4 = |a: u8| IpAddr::from([10, 0, 0, a]);
    let v6 = |a: u16| IpAddr::from([0xfd00, 0, 0, 0, 0, 0, 0, a]);
    let erc = dscp(erc::WIRE.id());
    let vcp_dscp = dscp(vcp::WIRE.id());
    let (dpcp, tpcp) = (dscp(Chain::Two.wire().id()), dscp(Chain::Three.wire().id()));
    let (bmcc, mcp) = (dscp(bmcc::WIRE.id()), dscp(mcp::WIRE.id()));
    let flow = |src, dst, sport, dscp, upstream| Flow {
        src,
        dst,
        sport,
        tcp: false,
        dscp,
        upstream,
        others: false,
        flags: false,
        payload: (4, 1200),
    };
    vec![
        Flow {
            others: true,
            ..flow(v4(1), v4(2), 40_000, erc, Upstream::Sender)
        },
        flow(v4(1), v4(2), 40_001, erc, Upstream::Index(550)),
        flow(v4(3), v4(2), 40_002, erc, Upstream::Index(250)),
        Flow {
            others: true,
            ..flow(v6(1), v6(2), 40_003, erc, Upstream::Sender)
        },
        flow(v4(1), v4(2), 40_004, 0, Upstream::Sender),
        Flow {
            tcp: true,
            ..flow(v4(1), v4(2), 40_005, erc, Upstream::Sender)
        },
        flow(v4(1), v4(2), 40_006, 46, Upstream::Sender),
        Flow {
            payload: (4, 20),
            ..flow(v4(4), v4(2), 40_007, erc, Upstream::Sender)
        },
        flow(v6(3), v6(2), 40_008, erc, Upstream::Index(550)),
        Flow {
            others: true,
            ..flow(v4(5), v4(2), 40_009, vcp_dscp, Upstream::Sender)
        },
        Flow {
            tcp: true,
            others: true,
            ..flow(v6(5), v6(2), 40_010, vcp_dscp, Upstream::Sender)
        },
        flow(v4(5), v4(2), 40_011, vcp_dscp, Upstream::NotEct),
        flow(v4(6), v4(2), 40_012, dpcp, Upstream::Any),
        flow(v6(6), v6(2), 40_013, tpcp, Upstream::Any),
        Flow {
            tcp: true,
            payload: (4, 40),
            ..flow(v4(6), v4(2), 40_014, tpcp, Upstream::Any)
        },
        flow(v4(7), v4(2), 40_015, bmcc, Upstream::Any),
        Flow {
            tcp: true,
            ..flow(v6(7), v6(2), 40_016, bmcc, Upstream::Any)
        },
        Flow {
            flags: true,
            ..flow(v4(8), v4(2), 40_017, mcp, Upstream::Any)
        },
        Flow {
            flags: true,
            ..flow(v6(8), v6(2), 40_018, mcp, Upstream::Any)
        },
    ]
}

const PORT: u16 = 443;

/// The trace: `n` packets of the flows in a seeded order, each payload
/// starting with its sequence number.
fn trace(n: u32, flows: &[Flow], rng: &mut Lcg) -> Vec<(usize, Spec)> {
    (0..n)
        .map(|seq| {
            let i = rng.below(flows.len() as u32) as usize;
            let f = &flows[i];
            let len = f.payload.0 + rng.below(f.payload.1 - f.payload.0 + 1);
            let mut payload: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            payload[..4].copy_from_slice(&seq.to_be_bytes());
            let ecn = match (f.upstream, f.others && rng.below(10) == 0) {
                (_, true) => [Ecn::Ce, Ecn::Ect1][rng.below(2) as usize],
                (Upstream::Sender, false) => Ecn::Ect0,
                (Upstream::NotEct, _) => Ecn::NotEct,
                (Upstream::Any, _) => Ecn::ALL[rng.below(4) as usize],
                (Upstream::Index(index), false) => {
                    ecn_of(digit(index, position(packet_hash(&payload))))
                }
            };
            // MCP's flag bits are the tag's low three (docs/design.md §2).
            let flags = if f.flags {
                (rng.below(8) as u8) << 2
            } else {
                0
            };
            let spec = Spec {
                src: f.src,
                dst: f.dst,
                sport: f.sport,
                dport: PORT,
                tcp: f.tcp,
                tos: (f.dscp | flags) << 2 | ecn.bits(),
                payload,
            };
            (i, spec)
        })
        .collect()
}

/// Sends `packets` out of `va` and collects what `vb` receives of them,
/// by sequence number, with the time each was sent on the coarse clock,
/// as the program read it within the send call: the clock's reading on
/// both sides of the call where they agree, else the one the program left
/// in the flow's entry. (On the exact clock, or from one side alone, a
/// silence just under erc's RETURN_GAP for the program was at it for the
/// model now and then, and the two disagreed on a flight's end.)
fn replay(
    tx: &PacketSocket,
    rx: &PacketSocket,
    maps: &Maps,
    packets: &[(usize, Spec)],
) -> (HashMap<u32, Seen>, Vec<Duration>) {
    let mut seen = HashMap::new();
    let mut sent_at = Vec::with_capacity(packets.len());
    for (_, spec) in packets {
        let before = coarse_ns();
        tx.send(&spec.build());
        let mut at = coarse_ns();
        if at != before {
            let parts = (spec.src, spec.sport, spec.dst, spec.dport, 17);
            let flows = maps.flows().unwrap();
            if let Some((_, flow)) = flows.iter().find(|(key, _)| key.parts() == parts) {
                at = at.min(flow.last_ns.max(before));
            }
        }
        sent_at.push(Duration::from_nanos(at));
        // Drain as we go: the receive buffer holds the rest.
        while let Some(p) = rx.recv(Duration::ZERO) {
            keep(&mut seen, &p);
        }
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while seen.len() < packets.len() && Instant::now() < deadline {
        if let Some(p) = rx.recv(Duration::from_millis(100)) {
            keep(&mut seen, &p);
        }
    }
    (seen, sent_at)
}

/// The bytes a packet's hash is taken over, as the shim's router takes
/// it: a UDP packet's payload, a TCP packet's whole segment.
fn hashed(spec: &Spec) -> Vec<u8> {
    if !spec.tcp {
        return spec.payload.clone();
    }
    // The built packet's segment: its 20-byte header, then the payload.
    let mut packet = spec.build();
    packet.drain(..packet.len() - spec.payload.len() - 20);
    packet
}

fn keep(seen: &mut HashMap<u32, Seen>, packet: &[u8]) {
    if let Some(s) = read(packet).filter(|s| s.dport == PORT && s.payload.len() >= 4) {
        let seq = u32::from_be_bytes(s.payload[..4].try_into().unwrap());
        assert!(seen.insert(seq, s).is_none(), "packet {seq} arrived twice");
    }
}

#[test]
fn the_kernel_path_marks_as_the_router_code_does() {
    let Some(_ns) = Netns::for_test("the_kernel_path_marks_as_the_router_code_does") else {
        return;
    };
    let prog = tc::attach("va").expect("attach");
    // The program runs in one place: on tcx where the kernel has it (tc's
    // filter, which loaded it, gone), else in that filter.
    let ifindex = sys::ifindex("va").expect("the test's device");
    let on_tcx = sys::tcx_programs(ifindex).unwrap() == [prog];
    let filters = std::process::Command::new("tc")
        .args(["filter", "show", "dev", "va", "egress"])
        .output()
        .unwrap();
    let in_filter = String::from_utf8_lossy(&filters.stdout).contains("ecnq_egress");
    assert!(on_tcx != in_filter, "tcx: {on_tcx}, filter: {in_filter}");
    eprintln!(
        "attached at {}",
        if on_tcx { "tcx" } else { "a clsact filter" }
    );
    let maps = Maps::open(prog).expect("maps");
    let (tx, rx) = (PacketSocket::open("va"), PacketSocket::open("vb"));
    let flows = flows();
    let mut rng = Lcg(0x65_63_6e_71);
    let mut model = Writer::default();
    // The other schemes' routers, one marker per wire, as the shim's
    // router holds them.
    let config = MarkerConfig {
        flows: FlowTableConfig::default(),
        classic_threshold: 0,
    };
    let wires: Vec<WireScheme> = ecnq_bpf::SCHEMES.iter().map(|s| s.wire()).collect();
    let mut markers: HashMap<WireScheme, Box<dyn Marker>> = wires
        .iter()
        .filter(|&&w| w != erc::WIRE)
        .map(|&w| (w, w.marker(&config)))
        .collect();
    let mut sent: HashMap<usize, (u64, u64)> = HashMap::new();
    let mut rewritten: HashMap<WireScheme, u64> = HashMap::new();
    // Rounds: no index yet, two indices on either side of the upstream
    // chains' (kept under 550 and 250, overwritten above), then a stale
    // one; the load factors of VCP's formula (VCP's three levels, MPCP's
    // levels), BMCC's (each of ADPM's ranges, past u) and MCP's (its four
    // codes), and the meter's interval, which times MCP's fairing.
    let far = monotonic_ns() + 3_600_000_000_000;
    // erc's flights, the first round's: the start codes of their turns.
    let starts = StartCodes {
        codes: [2, 1, 2, 2, 0, 2, 1, 2],
        base: 0,
    };
    let mut flight_cleared = 0;
    let rounds = [
        (400, far, [0.9, 0.9, 0.6]),
        (0, far, [0.3, 0.5, 0.3]),
        (700, far, [1.1, 1.3, 0.9]),
        (550, far, [0.7, 1.1, 1.1]),
        (400, 1, [1.1, 1.1, 0.6]),
        // After a silence longer than erc's LONGEST_ROUND: each erc flow
        // comes back as a new one, with a new flight.
        (550, far, [0.9, 0.9, 0.6]),
    ];
    let (count, silent_before) = (rounds.len() as u64, rounds.len() - 1);
    for (round, (index, expires_ns, factors)) in rounds.into_iter().enumerate() {
        if round == silent_before {
            std::thread::sleep(erc::LONGEST_ROUND + Duration::from_millis(100));
        }
        let mut load = LinkLoad {
            epoch: round as u64 + 1,
            ..LinkLoad::default()
        };
        for (formula, f) in [vcp::FORMULA, bmcc::FORMULA, mcp::FORMULA]
            .into_iter()
            .zip(factors)
        {
            load[formula] = LoadFactor::new(f);
        }
        maps.set_control(Control {
            expires_ns,
            index,
            l3: 14,
            ready: true,
            ecnq_class: 0,
            codes: Codes::of(&load),
            starts,
        })
        .unwrap();
        let packets = trace(700, &flows, &mut rng);
        let (seen, sent_at) = replay(&tx, &rx, &maps, &packets);
        assert_eq!(seen.len(), packets.len(), "packets lost at index {index}");
        let live = (expires_ns > 1).then_some(index);
        let link = LinkState {
            load,
            ..LinkState::default()
        };
        for ((i, spec), &now) in packets.iter().zip(&sent_at) {
            let seq = u32::from_be_bytes(spec.payload[..4].try_into().unwrap());
            let got = &seen[&seq];
            let came = Ecn::from_tos(spec.tos);
            let tag = SchemeTag::from_tos(spec.tos);
            let wire = tag.wire();
            let expected = if wire == erc::WIRE && !spec.tcp {
                // A flight's datagram carries the start code, the others
                // the chain's digit.
                let len = spec.build().len() as u32;
                let speaks = live.filter(|&index| index != 0).map(|_| &starts);
                let ecn = match model.flight(now, *i as u64, len, came, speaks) {
                    Some(ecn) => {
                        flight_cleared += u32::from(ecn != came);
                        ecn
                    }
                    None => model.write(live, *i as u64, tag, came, packet_hash(&spec.payload)),
                };
                spec.tos & !0b11 | ecn.bits()
            } else if let Some(marker) = markers.get_mut(&wire).filter(|_| live.is_some()) {
                // The scheme's own router: a presence probe raised, then
                // marked; the TOS byte written as the shim writes it.
                let mut pkt = PacketMarks {
                    ecn: came,
                    tag,
                    hash: packet_hash(&hashed(spec)),
                    flow: *i as u64,
                };
                wire.raise_probe(&mut pkt);
                marker.mark(Duration::ZERO, &link, &mut pkt);
                if pkt.tag == tag {
                    spec.tos & !0b11 | pkt.ecn.bits()
                } else {
                    pkt.tag.tos(pkt.ecn)
                }
            } else {
                spec.tos
            };
            let f = &flows[*i];
            assert_eq!(
                got.tos, expected,
                "packet {seq} of flow {i} ({:?}, {wire}, round {round}): came {:#04x}",
                f.upstream, spec.tos
            );
            assert!(got.checksum_ok, "packet {seq}: IPv4 checksum");
            assert_eq!(got.payload, spec.payload, "packet {seq}: payload");
            *rewritten.entry(wire).or_default() += u64::from(expected != spec.tos);
            let count = sent.entry(*i).or_default();
            count.0 += spec.build().len() as u64;
            count.1 += 1;
        }
    }
    assert!(
        flight_cleared >= 3,
        "{flight_cleared} flight datagrams cleared"
    );
    assert_eq!(model.flights(), maps.flights().unwrap());
    // Every scheme's packets were rewritten, many of them.
    for wire in &wires {
        let n = rewritten.get(wire).copied().unwrap_or(0);
        assert!(n > 50, "only {n} packets of {wire} rewritten");
    }
    // The counters: every flow by its 5-tuple, every mark by its class.
    let counted = maps.flows().unwrap();
    for (i, f) in flows.iter().enumerate() {
        let (_, value) = counted
            .iter()
            .find(|(key, _)| {
                key.parts() == (f.src, f.sport, f.dst, PORT, if f.tcp { 6 } else { 17 })
            })
            .unwrap_or_else(|| panic!("flow {i} not counted"));
        assert_eq!(
            (value.bytes, value.packets),
            sent[&i],
            "flow {i}'s counters"
        );
        // MCP's flag bits change packet by packet: the tag without them.
        let flags = if f.flags { 0b111 } else { 0 };
        assert_eq!(
            value.tag & !flags,
            f.dscp >> 2 & if f.dscp & 3 == 3 { 0xf } else { 0 },
            "flow {i}'s tag"
        );
    }
    // The control loop's reader finds the same flows (the program queued
    // each new one for it) without walking the table.
    let by_key = |mut flows: Vec<(FlowKey, FlowValue)>| {
        flows.sort_by_key(|(key, _)| key.0);
        flows
    };
    let read = FlowReader::default().read(&maps).unwrap();
    assert_eq!(by_key(read), by_key(counted));
    let classes = maps.all_classes().unwrap();
    assert_eq!(classes.marked, rewritten.values().sum::<u64>());
    assert_eq!(classes.packets, count * 700);
    tc::detach("va").unwrap();
    assert_eq!(tc::program_id("va").unwrap(), None);
}

/// The fewest packets [`steady`] sends on either side of its call: on a
/// busy host its sleeps run long, and half a span's packets were too few
/// to read the loop's marks from.
const HALF_AT_LEAST: u32 = 500;

/// One flow's packets sent at a steady rate for `span`, each carrying its
/// sequence number and send time; calls `at` once, halfway (and once at
/// least [`HALF_AT_LEAST`] were sent), and returns what arrived with its
/// send time, and how many were sent.
fn steady(
    tx: &PacketSocket,
    rx: &PacketSocket,
    span: Duration,
    at: impl FnOnce(),
) -> (u32, Vec<(u64, Seen)>) {
    let mut rng = Lcg(7);
    let mut got = HashMap::new();
    let mut at = Some(at);
    let start = Instant::now();
    let mut seq = 0u32;
    let mut called = 0;
    while start.elapsed() < span || at.is_some() || seq < called + HALF_AT_LEAST {
        if start.elapsed() >= span / 2 && seq >= HALF_AT_LEAST {
            if let Some(f) = at.take() {
                f();
                called = seq;
            }
        }
        let mut payload: Vec<u8> = (0..1200).map(|_| rng.next() as u8).collect();
        payload[..4].copy_from_slice(&seq.to_be_bytes());
        payload[4..12].copy_from_slice(&monotonic_ns().to_be_bytes());
        let f = &flows()[0];
        let spec = Spec {
            src: f.src,
            dst: f.dst,
            sport: f.sport,
            dport: PORT,
            tcp: false,
            tos: f.dscp << 2 | Ecn::Ect0.bits(),
            payload,
        };
        tx.send(&spec.build());
        seq += 1;
        while let Some(p) = rx.recv(Duration::ZERO) {
            keep(&mut got, &p);
        }
        // About 2000 packets a second: 19 Mbit/s, under the tbf's rate.
        std::thread::sleep(Duration::from_micros(500));
    }
    while let Some(p) = rx.recv(Duration::from_millis(300)) {
        keep(&mut got, &p);
    }
    let seen = got
        .into_values()
        .map(|s| (u64::from_be_bytes(s.payload[4..12].try_into().unwrap()), s))
        .collect();
    (seq, seen)
}

/// The control loop (`ecnq-bpf attach`, a process of its own) marks a
/// flow through a tbf it reads the rate of; killed, it leaves the program
/// attached, which stops marking when the lease runs out; stopped, it
/// withdraws the index and detaches. No packet is lost either way.
#[test]
fn marks_stop_when_the_control_loop_dies_and_nothing_is_lost() {
    let Some(ns) = Netns::for_test("marks_stop_when_the_control_loop_dies_and_nothing_is_lost")
    else {
        return;
    };
    let status = std::process::Command::new("tc")
        .args(["qdisc", "add", "dev", "va", "root", "tbf", "rate", "50mbit"])
        .args(["burst", "32k", "latency", "100ms"])
        .status()
        .unwrap();
    assert!(status.success());
    let (tx, rx) = (PacketSocket::open("va"), PacketSocket::open("vb"));
    let bin = env!("CARGO_BIN_EXE_ecnq-bpf");
    // A lease runs out within this of the loop's end: its length, and the
    // time a packet takes from the send call to the program.
    let slack = lease() + Duration::from_millis(2);
    for (signal, attached_after) in [(libc::SIGKILL, true), (libc::SIGTERM, false)] {
        // The killed loop's program stays attached until the next one
        // replaces it: wait for the new one.
        let before = tc::program_id("va").unwrap();
        let mut child = std::process::Command::new("ip")
            .args([
                "netns", "exec", &ns.name, bin, "attach", "--dev", "va", "--stats", "0",
            ])
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        while tc::program_id("va")
            .unwrap()
            .is_none_or(|id| Some(id) == before)
        {
            assert!(Instant::now() < deadline, "ecnq-bpf attach did not attach");
            std::thread::sleep(Duration::from_millis(20));
        }
        // Let it step a few times.
        std::thread::sleep(Duration::from_millis(200));
        let mut ended = 0;
        let (sent, seen) = steady(&tx, &rx, Duration::from_millis(1_200), || {
            // SAFETY: signals the child this test started.
            unsafe { libc::kill(child.id() as i32, signal) };
            child.wait().unwrap();
            ended = monotonic_ns();
        });
        assert_eq!(seen.len() as u32, sent, "packets lost ({signal})");
        let marked = |s: &Seen| Ecn::from_tos(s.tos) != Ecn::Ect0;
        let before = seen.iter().filter(|(t, s)| *t < ended && marked(s)).count();
        let late = seen
            .iter()
            .filter(|(t, s)| *t > ended + slack.as_nanos() as u64 && marked(s))
            .count();
        assert!(
            before > 100,
            "only {before} marks while the loop ran ({signal})"
        );
        // The marks spell the rate erc's router advertises for the link:
        // at least its 98 % target, with one flow limited elsewhere (at
        // most the spare gain's 8 times over it).
        // Each position's digit is the one most of its packets carry: a
        // late wake-up of the loop on a busy host lets a packet or two
        // through unmarked.
        let mut ones = [(0u32, 0u32); DIGITS as usize];
        for (_, s) in seen.iter().filter(|(t, _)| *t < ended) {
            let digit = digit_of(Ecn::from_tos(s.tos)).expect("a digit");
            let count = &mut ones[position(packet_hash(&s.payload)) as usize];
            *count = (count.0 + u32::from(digit), count.1 + 1);
        }
        let mut chain = Digits::default();
        for (p, (one, all)) in (0..).zip(ones) {
            if all > 0 {
                chain.set(p, 2 * one > all);
            }
        }
        let rate = rate_of(chain.index()).expect("an index") * 8.0;
        eprintln!("advertised {:.1} Mbit/s", rate / 1e6);
        assert!(chain.complete());
        assert!((0.98 * 50e6 * 0.98..=8.0 * 50e6).contains(&rate), "{rate}");
        assert_eq!(late, 0, "marks after the loop ended ({signal})");
        assert!(seen.iter().all(|(_, s)| s.checksum_ok));
        assert_eq!(tc::program_id("va").unwrap().is_some(), attached_after);
    }
}
