//! Engine invariants: packet conservation, link rates, FIFO order, determinism.

use std::collections::HashMap;

use ecnq::router::bottleneck::{Class, Discipline};
use ecnq_sim::engine::{FeedbackPath, Sim, TraceKind, SECOND};
use ecnq_sim::scenario::{Overrides, Scenario};

/// Two-way traffic over a two-link chain with random loss and a small
/// buffer, so drops, losses, retransmissions and timeouts all happen; one
/// link runs the dual queue (CoDel drops too), the other one FIFO.
const BUSY: &str = r#"
title = "invariants"
scheme = "reno"
duration = "8s"
seed = 7
[[links]]
name = "A"
rate = "10Mbit"
delay = "5ms"
buffer = "12pkt"
loss = 0.01
[[links]]
name = "B"
rate = "6Mbit"
delay = "10ms"
buffer = "15000b"
queue = "fifo"
[[flows]]
count = 3
rtt = ["40ms", "80ms"]
start_step = "300ms"
pace = false
[[flows]]
scheme = "vcp"
path = ["B"]
reverse = true
count = 2
delayed_ack = true
[[flows]]
scheme = "cubic-ecn"
path = ["A"]
size = "200000b"
start = "1s"
count = 4
start_jitter = "2s"
"#;

fn busy_sim(seed: u64, trace: bool, feedback: FeedbackPath) -> Sim {
    let scenario = Scenario::parse("busy", "busy", BUSY, &[]).unwrap();
    let mut config = scenario
        .build(&Overrides {
            seed: Some(seed),
            feedback: Some(feedback),
            ..Overrides::default()
        })
        .unwrap();
    config.trace = trace;
    Sim::new(config).unwrap()
}

/// With ACK feedback, and with session feedback (whose reports are
/// packets too).
#[test]
fn every_packet_is_delivered_dropped_or_in_flight() {
    for feedback in [FeedbackPath::Ack, FeedbackPath::Session] {
        every_packet_is_accounted_for(feedback);
    }
}

fn every_packet_is_accounted_for(feedback: FeedbackPath) {
    let mut sim = busy_sim(7, false, feedback);
    for step in 1..=16 {
        sim.run_until(step * SECOND / 2);
        let c = sim.counters;
        assert_eq!(
            c.injected,
            c.delivered + c.dropped + sim.packets_in_network(),
            "at {} s",
            step as f64 / 2.0
        );
    }
    let c = sim.counters;
    assert!(c.dropped > 50, "the scenario must exercise drops: {c:?}");
    let timeouts_or_losses: u64 = sim.flows.iter().map(|f| f.packets_lost).sum();
    assert!(timeouts_or_losses > 0);
    // The finite flows finished despite loss (retransmissions work).
    let done = sim
        .flows
        .iter()
        .filter(|f| f.completion().is_some())
        .count();
    assert_eq!(done, 4, "all four 200 KB flows complete");
}

#[test]
fn links_never_exceed_their_rate_and_serve_in_fifo_order() {
    let mut sim = busy_sim(3, true, FeedbackPath::Ack);
    sim.run();
    let trace = sim.trace.take().unwrap();
    let mut enqueued: HashMap<usize, Vec<u64>> = HashMap::new();
    let mut departed: HashMap<usize, Vec<(u64, u64, u32)>> = HashMap::new();
    for r in &trace {
        match r.kind {
            TraceKind::Enqueue => enqueued.entry(r.link).or_default().push(r.id),
            TraceKind::Depart => departed
                .entry(r.link)
                .or_default()
                .push((r.time, r.id, r.len)),
            TraceKind::Drop | TraceKind::Lost => {}
        }
    }
    assert!(
        departed.len() >= 4,
        "both directions of both links carried traffic"
    );
    for (link, deps) in &departed {
        let rate = sim.links[*link].spec.rate.unwrap();
        // Serialization: consecutive departures are at least one packet time apart.
        for w in deps.windows(2) {
            let min_gap = (f64::from(w[1].2) * 8e9 / rate).floor() as u64;
            assert!(
                w[1].0 - w[0].0 >= min_gap,
                "link {link} too fast at {}",
                w[1].0
            );
        }
        // Over the whole run, bytes sent ≤ rate × time (+ one packet).
        let bytes: u64 = deps.iter().map(|d| u64::from(d.2)).sum();
        let span = (deps.last().unwrap().0 - deps[0].0) as f64 / 1e9;
        assert!(bytes as f64 * 8.0 <= rate * span + 1500.0 * 8.0 + 1.0);
        // FIFO: packets leave in the order they were accepted.
        if sim.links[*link].spec.discipline != Discipline::Fifo {
            continue;
        }
        let order: Vec<u64> = deps.iter().map(|d| d.1).collect();
        let accepted = &enqueued[link];
        assert_eq!(
            &accepted[..order.len()],
            &order[..],
            "link {link} reordered"
        );
    }
}

#[test]
fn same_seed_same_result() {
    for feedback in [FeedbackPath::Ack, FeedbackPath::Session] {
        let run = |seed| {
            let mut sim = busy_sim(seed, false, feedback);
            sim.run();
            (
                sim.counters,
                sim.flow_series.clone(),
                sim.link_series.clone(),
            )
        };
        let a = run(11);
        assert_eq!(a, run(11));
        assert_ne!(a.0, run(12).0, "another seed gives another run");
    }
}

#[test]
fn delayed_acks_halve_the_ack_stream() {
    let text = |delayed: bool| {
        format!(
            r#"
title = "delack"
scheme = "vcp"
duration = "10s"
[[links]]
name = "L"
rate = "10Mbit"
delay = "10ms"
buffer = "50pkt"
[[flows]]
size = "2000000b"
delayed_ack = {delayed}
"#
        )
    };
    let run = |delayed| {
        let s = Scenario::parse("delack", "delack", &text(delayed), &[]).unwrap();
        let mut sim = Sim::new(s.build(&Overrides::default()).unwrap()).unwrap();
        sim.run();
        let flow = &sim.flows[0];
        assert!(
            flow.completion().is_some(),
            "the transfer completes (delayed = {delayed})"
        );
        (
            sim.links[0].stats.departed_packets,
            sim.links[1].stats.departed_packets,
        )
    };
    // Beside the data and its ACKs, the server's handshake flight crosses
    // the data link and the client's Initial and Finished the ACK link.
    let (data, acks) = run(false);
    let (data_d, acks_d) = run(true);
    let (data, data_d) = (data - HANDSHAKE_FLIGHT, data_d - HANDSHAKE_FLIGHT);
    let (acks, acks_d) = (acks - CLIENT_HANDSHAKE, acks_d - CLIENT_HANDSHAKE);
    assert_eq!(acks, data, "one ACK per data packet");
    assert_eq!(data_d, data);
    assert!(
        acks_d * 2 <= data_d + 2 && acks_d * 2 >= data_d,
        "{acks_d} ACKs for {data_d} packets"
    );
}

/// The server's handshake flight: three datagrams (RFC 9000 §8.1).
const HANDSHAKE_FLIGHT: u64 = 3;
/// The client's handshake packets: its Initial, then its Finished.
const CLIENT_HANDSHAKE: u64 = 2;

/// A flow on an idle path `rtt` long, run with `set` edits and traced.
fn handshake_sim(set: &[&str]) -> Sim {
    let text = r#"
title = "handshake"
scheme = "erc"
duration = "4s"
[[links]]
name = "L"
rate = "10Mbit"
delay = "5ms"
buffer = "50pkt"
[[flows]]
rtt = "40ms"
size = "100000b"
start = "100ms"
"#;
    let set: Vec<String> = set.iter().map(|s| (*s).to_owned()).collect();
    let scenario = Scenario::parse("handshake", "handshake", text, &set).unwrap();
    let mut config = scenario.build(&Overrides::default()).unwrap();
    config.trace = true;
    let mut sim = Sim::new(config).unwrap();
    sim.run();
    sim
}

/// When the data's first packet reached the bottleneck, and the bytes and
/// marks of every packet of flow 0 that reached it before.
fn before_the_data(sim: &Sim) -> (u64, Vec<(u32, ecnq::signal::PacketMarks)>) {
    let mss = sim.flows[0].spec.mss;
    let arrivals: Vec<_> = (sim.trace.as_ref().unwrap().iter())
        .filter(|r| r.link == 0 && r.flow == 0 && r.kind == TraceKind::Enqueue)
        .collect();
    let first = arrivals.iter().position(|r| r.len == mss).unwrap();
    let before = arrivals[..first].iter().map(|r| (r.len, r.marks)).collect();
    (arrivals[first].time, before)
}

/// Every flow starts with QUIC's handshake: the client's Initial, the
/// server's flight of three 1200-byte datagrams through the bottleneck,
/// tagged with the flow's scheme as its data is, and the data a round trip
/// and a half after the start, once the client's Finished is in. A lost
/// Initial is sent again on the client's probe timeout, 999 ms before any
/// RTT sample (RFC 9002 §6.2.2); completion counts from the first Initial.
#[test]
fn a_flow_starts_with_the_handshake() {
    let ms = SECOND / 1000;
    let sim = handshake_sim(&[]);
    let (data_at, flight) = before_the_data(&sim);
    let erc: ecnq::Scheme = "erc".parse().unwrap();
    assert_eq!(flight.len(), HANDSHAKE_FLIGHT as usize);
    for (len, marks) in &flight {
        assert_eq!(*len, 1200);
        assert_eq!(marks.tag.wire_id, erc.wire().id());
        assert_eq!(marks.ecn, erc.wire().base_ecn());
    }
    // The data leaves about 64 ms after the start (the Initial's, the
    // flight's and the Finished's 20 ms one way, and 4 ms to serialize
    // them at 10 Mbit/s) and takes the 15 ms access delay to the
    // bottleneck.
    let start = 100 * ms;
    assert!(
        (start + 78 * ms..start + 80 * ms).contains(&data_at),
        "{data_at}"
    );
    let done = sim.flows[0].completion().unwrap();
    assert!(done > 60 * ms, "{done}");

    let lost = handshake_sim(&["links.0.reverse_blackout=[\"0s\", \"110ms\"]"]);
    let (data_at, flight) = before_the_data(&lost);
    assert_eq!(flight.len(), HANDSHAKE_FLIGHT as usize);
    let again = start + 999 * ms;
    assert!(
        (again + 78 * ms..again + 80 * ms).contains(&data_at),
        "{data_at}"
    );
    let late = lost.flows[0].completion().unwrap();
    assert!(late > done + 990 * ms, "{late} after {done}");
}

/// Two-way traffic: ACKs queue behind data and come back in bursts (ACK
/// compression). Window senders that send on ACKs alone then keep the queue
/// long; pacing at 1.25 × window / srtt, as quinn does, keeps it short.
#[test]
fn pacing_tames_ack_compression_in_two_way_traffic() {
    let text = |pace: bool| {
        format!(
            r#"
title = "two-way"
scheme = "vcp"
duration = "40s"
measure_from = "10s"
[[links]]
name = "L"
rate = "10Mbit"
delay = "40ms"
buffer = "100pkt"
[[flows]]
count = 5
pace = {pace}
[[flows]]
count = 5
reverse = true
pace = {pace}
"#
        )
    };
    let mean_queue = |pace| {
        let s = Scenario::parse("two-way", "two-way", &text(pace), &[]).unwrap();
        let mut sim = Sim::new(s.build(&Overrides::default()).unwrap()).unwrap();
        sim.run();
        sim.finish();
        let l = &sim.links[0].stats;
        l.queue_packet_ns / (30.0 * 1e9)
    };
    let (clocked, paced) = (mean_queue(false), mean_queue(true));
    assert!(
        paced * 3.0 < clocked,
        "mean queue: paced {paced:.1}, ACK-clocked {clocked:.1} packets"
    );
}

/// An erc flow and a Cubic flow on a dual-queue link: each class is served
/// at about half the link, so the classic queue's measured sojourn is well
/// above its queue length at the full link rate; every departure's sojourn
/// is counted once.
#[test]
fn dual_queue_sojourns_are_measured_not_converted_at_the_link_rate() {
    const DUAL: &str = r#"
title = "sojourn"
scheme = "erc"
duration = "20s"
measure_from = "5s"
[[links]]
name = "L"
rate = "50Mbit"
delay = "10ms"
buffer = "1bdp"
[[flows]]
name = "ecnq"
rtt = "40ms"
[[flows]]
name = "cubic"
scheme = "cubic"
rtt = "40ms"
"#;
    let scenario = Scenario::parse("sojourn", "sojourn", DUAL, &[]).unwrap();
    let run = ecnq_sim::runner::run(&scenario, &Overrides::default()).unwrap();
    let link = &run.sim.links[0];
    let counted: u64 = Class::ALL.iter().map(|&c| link.sojourns(c).count()).sum();
    assert_eq!(counted, link.stats.departed_packets);
    let l = &run.summary.links[0];
    let (queue, sojourn) = (
        l.p99_class_queue_ms.classic.unwrap(),
        l.p99_class_sojourn_ms.classic.unwrap(),
    );
    println!("classic p99: {queue:.2} ms at the link rate, {sojourn:.2} ms measured");
    assert!(queue > 1.0, "a standing classic queue: {queue:.2} ms");
    assert!(sojourn > 1.5 * queue, "{sojourn:.2} vs {queue:.2} ms");
}

/// A flood of fake newcomers beside a long flow: a new flow every 12
/// packets of 300 bytes, 1 Mbit/s from 1 s on.
const FLOOD: &str = r#"
title = "flood"
scheme = "reno"
duration = "3s"
[[links]]
name = "L"
rate = "10Mbit"
delay = "10ms"
buffer = "50pkt"
[[flows]]
name = "long"
pace = false
[[newcomer_flood]]
name = "fake"
scheme = "erc"
rate = "1Mbit"
packets = 12
size = "300B"
start = "1s"
"#;

/// Runs [`FLOOD`] with `set` edits, traced.
fn flood_sim(set: &[&str]) -> Sim {
    let set: Vec<String> = set.iter().map(|s| (*s).to_owned()).collect();
    let scenario = Scenario::parse("flood", "flood", FLOOD, &set).unwrap();
    let mut config = scenario.build(&Overrides::default()).unwrap();
    config.trace = true;
    let mut sim = Sim::new(config).unwrap();
    sim.run();
    sim
}

/// The fake flows' packets as they arrived at the bottleneck (accepted or
/// dropped): (time, flow id, bytes), and the flood's engine flow.
fn fake_arrivals(sim: &Sim) -> (Vec<(u64, u64, u32)>, u32) {
    let fake = sim
        .flows
        .iter()
        .position(|f| f.spec.group == "fake")
        .unwrap() as u32;
    let arrivals = (sim.trace.as_ref().unwrap().iter())
        .filter(|r| r.link == 0 && r.flow == fake)
        .filter(|r| matches!(r.kind, TraceKind::Enqueue | TraceKind::Drop))
        .map(|r| (r.time, r.marks.flow, r.len))
        .collect();
    (arrivals, fake)
}

/// Each fake flow is a new flow id with the configured packets, marked as a
/// fresh erc sender marks them (its tag, ECT(0)); together they offer the
/// configured rate, their delivered bytes count to their own flow, and
/// nothing answers them.
#[test]
fn a_newcomer_flood_offers_its_rate_from_a_new_flow_every_few_packets() {
    let sim = flood_sim(&[]);
    let (arrivals, fake) = fake_arrivals(&sim);
    let mut per_flow: HashMap<u64, (u64, u32)> = HashMap::new();
    for &(time, id, len) in &arrivals {
        assert_eq!(len, 300);
        per_flow.entry(id).or_insert((time, 0)).1 += 1;
    }
    // One new flow every 12 × 300 × 8 bits / 1 Mbit/s = 28.8 ms from 1 s
    // (back to back, its packets all arrive at its start): 70 of them
    // start before 3 s.
    assert_eq!(per_flow.len(), 70);
    assert!(per_flow.values().all(|&(_, n)| n == 12), "{per_flow:?}");
    assert!(per_flow.keys().all(|&id| id != 0), "the long flow's id");
    let mut starts: Vec<u64> = per_flow.values().map(|&(t, _)| t).collect();
    starts.sort_unstable();
    assert_eq!(starts[0], SECOND);
    for w in starts.windows(2) {
        assert!(w[1] - w[0] == 28_800_000, "{} ns apart", w[1] - w[0]);
    }
    let trace = sim.trace.as_ref().unwrap();
    let tags: Vec<_> = (trace.iter())
        .filter(|r| r.flow == fake && r.kind == TraceKind::Enqueue && r.link == 0)
        .map(|r| (r.marks.tag, r.marks.ecn))
        .collect();
    let erc: ecnq::Scheme = "erc".parse().unwrap();
    let fresh = (ecnq::SchemeTag::new(erc.wire().id()), erc.wire().base_ecn());
    assert!(tags.iter().all(|&t| t == fresh), "{:?}", tags[0]);
    let reverse = sim
        .links
        .iter()
        .position(|l| l.spec.name == "L-rev")
        .unwrap();
    assert!(
        !trace.iter().any(|r| r.link == reverse && r.flow == fake),
        "nothing answers a fake flow"
    );
    let f = &sim.flows[fake as usize];
    assert_eq!(f.packets_sent, arrivals.len() as u64);
    let delivered = f.received_bytes as f64 * 8.0 / 2.0;
    assert!((0.95e6..1.01e6).contains(&delivered), "{delivered}");
}

/// The flood sends the same packets at the same times whether its packets
/// meet an empty link or one whose buffer a long flow keeps full (drops,
/// and an erc router rewriting their marks): it never reacts to anything.
#[test]
fn a_newcomer_flood_ignores_losses_and_marks() {
    let quiet = flood_sim(&["flows.0.count=0"]);
    let busy = flood_sim(&["links.0.buffer=6pkt"]);
    let (alone, _) = fake_arrivals(&quiet);
    let (beside, fake) = fake_arrivals(&busy);
    assert_eq!(alone, beside);
    let dropped = (busy.trace.as_ref().unwrap().iter())
        .filter(|r| r.flow == fake && r.kind == TraceKind::Drop)
        .count();
    assert!(dropped > 0, "the busy link drops fake packets too");
}
