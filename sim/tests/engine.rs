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
    let (data, acks) = run(false);
    let (data_d, acks_d) = run(true);
    assert_eq!(acks, data, "one ACK per data packet");
    assert_eq!(data_d, data);
    assert!(
        acks_d * 2 <= data_d + 2 && acks_d * 2 >= data_d,
        "{acks_d} ACKs for {data_d} packets"
    );
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
