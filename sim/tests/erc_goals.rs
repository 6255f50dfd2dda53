//! erc's goals (issue 19) as simulator assertions: one bottleneck with
//! staggered arrivals across capacities and RTTs, mixed RTTs on one link,
//! and a parking lot of two bottlenecks. Each test prints its figures
//! (`cargo test -p ecnq-sim --test erc_goals -- --nocapture`); the
//! simulator is deterministic, so none of them is timed.

use ecnq_sim::report::metrics::{LinkSummary, Summary};
use ecnq_sim::runner;
use ecnq_sim::scenario::Overrides;

mod common;

/// The share of the capacity erc's routers hand out (`ErcConfig`'s η).
const ETA: f64 = 0.98;

fn run(name: &str, set: &[&str]) -> Summary {
    run_seed(name, set, None)
}

/// [`run`] with the scenario's seed replaced.
fn run_seed(name: &str, set: &[&str], seed: Option<u64>) -> Summary {
    let scenario = common::scenario(name, set);
    let overrides = Overrides {
        seed,
        ..Overrides::default()
    };
    runner::run(&scenario, &overrides).unwrap().summary
}

fn link<'a>(s: &'a Summary, name: &str) -> &'a LinkSummary {
    s.links.iter().find(|l| l.name == name).unwrap()
}

/// One bottleneck, three flows arriving 5 s apart (the scenario's own
/// 100 Mbit/s, 40 ms), then capacities from 10 Mbit/s to 1 Gbit/s and RTTs
/// from 2 ms to 400 ms with a buffer of one bandwidth-delay product, each
/// over seeds 1–3.
///
/// The goal is utilization ≥ 0.97; at 400 ms the first flow needs about
/// 2 s to read its first chain at the pace of its initial window, which
/// costs the 30 s run 5 points: that case is held to 0.9. Every seed must
/// meet the utilization, loss and fairness goals. The queue's p99 is the
/// median over the seeds: in a 30 s run it is the third-highest of the
/// 100 ms samples, set by where the two arrivals' transients fall, so one
/// seed's says little (at 10 Mbit/s seeds 1–8 give 0–10 packets).
#[test]
fn staggered_arrivals_are_fair_within_3_s_with_a_near_empty_queue() {
    let cases: [(&str, &str, f64); 7] = [
        ("100Mbit", "40ms", 0.97),
        ("10Mbit", "40ms", 0.97),
        ("1Gbit", "40ms", 0.97),
        ("100Mbit", "2ms", 0.97),
        ("100Mbit", "10ms", 0.97),
        ("100Mbit", "100ms", 0.97),
        ("100Mbit", "400ms", 0.9),
    ];
    for (rate, rtt, util) in cases {
        let rate_set = format!("links.0.rate={rate}");
        let rtt_set = format!("flows.0.rtt={rtt}");
        let bdp_set = format!("bdp_rtt={rtt}");
        let set = [&rate_set[..], &rtt_set, &bdp_set, "links.0.delay=1ms"];
        // The seeds run side by side, one per core.
        let runs: Vec<Summary> = std::thread::scope(|scope| {
            let seeds: Vec<_> = (1..=3)
                .map(|seed| scope.spawn(move || run_seed("erc-staggered", &set, Some(seed))))
                .collect();
            seeds.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut p99s = Vec::new();
        for (seed, s) in (1..=3).zip(&runs) {
            let l = link(s, "L");
            let fair: Vec<Option<f64>> = [5.0, 10.0]
                .iter()
                .map(|&at| s.jain.fair_after(at, at + 5.0))
                .collect();
            println!(
                "{rate} {rtt} seed {seed}: util {:.3}, p99 queue {} pkt, drops {}, fair after arrivals {fair:?}",
                l.utilization, l.p99_queue_packets, l.drops
            );
            assert!(
                l.utilization >= util,
                "{rate} {rtt} seed {seed}: util {}",
                l.utilization
            );
            assert_eq!(l.drops, 0, "{rate} {rtt} seed {seed}: loss after start-up");
            for f in fair {
                assert!(
                    f.is_some_and(|f| f <= 3.0),
                    "{rate} {rtt} seed {seed}: fair after {f:?}"
                );
            }
            p99s.push(l.p99_queue_packets);
        }
        p99s.sort_unstable();
        assert!(p99s[1] <= 5, "{rate} {rtt}: p99 over seeds 1-3 {p99s:?}");
    }
}

/// A 1 s path: a newcomer needs about 4 s to read its first chain and
/// reach its share (three round trips of slow start, one for the report),
/// so utilization over the whole run misses the goal, but the router
/// keeps the newcomer's share for it: no queue, no loss, and full use once
/// the last flow has started. A share kept for less time than the
/// newcomer needs is taken by the others, and the queue fills.
#[test]
fn a_1_s_path_keeps_the_queue_empty_while_newcomers_start() {
    let path = ["flows.0.rtt=1s", "bdp_rtt=1s", "links.0.delay=1ms"];
    let s = run("erc-staggered", &path);
    let l = link(&s, "L");
    let fair = s.jain.fair_after(10.0, 30.0);
    println!(
        "1 s: util {:.3}, p99 queue {} pkt, drops {}, fair {fair:?} s after the last arrival",
        l.utilization, l.p99_queue_packets, l.drops
    );
    assert!(l.p99_queue_packets <= 5, "p99 {}", l.p99_queue_packets);
    assert_eq!(l.drops, 0);
    assert!(fair.is_some_and(|f| f <= 6.0), "fair after {fair:?}");
    let settled = run(
        "erc-staggered",
        &[path[0], path[1], path[2], "measure_from=15s"],
    );
    let util = link(&settled, "L").utilization;
    assert!(util >= 0.97, "utilization after the last start {util:.3}");
}

/// 10, 60 and 250 ms on one 20 Mbit/s link: the share does not depend on
/// the RTT.
#[test]
fn mixed_rtts_get_the_same_share() {
    let s = run("erc-mixed-rtt", &[]);
    let l = link(&s, "L");
    let fair = ETA * l.rate_bps / 3.0;
    for f in &s.flows {
        println!(
            "flow {} ({}): {:.2} Mbit/s",
            f.id,
            f.group,
            f.throughput_bps / 1e6
        );
        assert!(
            (f.throughput_bps / fair - 1.0).abs() < 0.05,
            "flow {}",
            f.id
        );
    }
    assert!(l.utilization >= 0.97 && l.p99_queue_packets <= 5);
}

/// One flow over two bottlenecks, one cross flow on each: each flow within
/// 5 % of its max-min share (10, 10 and 20 Mbit/s, times η).
#[test]
fn a_parking_lot_gets_max_min_shares() {
    let s = run("erc-parking-lot", &[]);
    for (f, share) in s.flows.iter().zip([10e6, 10e6, 20e6]) {
        let got = f.throughput_bps / (ETA * share);
        println!(
            "{}: {:.2} Mbit/s ({got:.3} of its share)",
            f.group,
            f.throughput_bps / 1e6
        );
        assert!((got - 1.0).abs() < 0.05, "{}", f.group);
    }
}

/// Issue 19's robustness goals: a flow whose application pauses for 2 s
/// and a router that restarts (its flow table, meters and shares lost) on
/// one 100 Mbit/s bottleneck with two steady flows (`erc-robustness`). The
/// steady flows take the paused flow's share, so the link stays busy; no
/// packet is lost; and the shares are fair again within a second of the
/// pause's end and of the restart. A resumed flow ramps back up over a
/// round trip rather than adding its old rate at once (before: queue
/// peak 148 packets, p99 42), and the router counts it from its first
/// packet back, so that the others make room as it returns (before: peak
/// 108 packets, 0.1 s after the resume).
#[test]
fn a_pause_and_a_router_restart_lose_nothing_and_starve_no_one() {
    let s = run("erc-robustness", &[]);
    let l = link(&s, "L");
    let (resumed, restarted) = (s.jain.fair_after(12.0, 20.0), s.jain.fair_after(20.0, 30.0));
    let lost: u64 = s.flows.iter().map(|f| f.packets_lost).sum();
    println!(
        "util {:.3}, queue p99 {} pkt, peak {} pkt, drops {}, lost {lost}, fair {resumed:?} s after the pause, {restarted:?} s after the restart",
        l.utilization, l.p99_queue_packets, l.peak_queue_packets, l.drops
    );
    assert!(l.utilization >= 0.97, "utilization {:.3}", l.utilization);
    assert_eq!((l.drops, lost), (0, 0));
    assert!(l.p99_queue_packets <= 5, "p99 {}", l.p99_queue_packets);
    assert!(l.peak_queue_packets <= 25, "peak {}", l.peak_queue_packets);
    for f in [resumed, restarted] {
        assert!(f.is_some_and(|f| f <= 1.0), "fair after {f:?}");
    }
}

/// A flash crowd (100 flows within 10 ms, `erc-flash-100`): each flow's
/// receiver reads its first chain from the data alone. The handshake
/// flight crosses the router a round trip earlier, when fewer of the
/// crowd were counted; a chain mixing its digits with the data's spelled
/// rates far above the share, and the crowd lost most of what it sent.
#[test]
fn a_flash_crowd_reads_its_first_chain_from_the_data() {
    let s = run("erc-flash-100", &["duration=3s"]);
    let arrivals = s.arrivals.as_ref().unwrap();
    let l = arrivals.links.iter().find(|l| l.name == "L").unwrap();
    println!(
        "flash crowd: loss {:.4} over the arrivals, fair after {:?} s",
        l.loss, arrivals.fair_after_s
    );
    assert!(l.loss < 0.05, "loss {:.4}", l.loss);
}

/// A crowd of 1000 over a second (`erc-flash-1000`) shares 100 Mbit/s at
/// 0.4 packets per 40 ms round trip each. Held to at least the least window
/// per round trip, the flows kept the buffer full and lost 29 % of what
/// they sent (Cubic 38 %); each now paces at its share, however small
/// (12.5 %), and a loss before its first chain lowers its start's pace
/// below the least window too (7.6 %); a start its code asked the most
/// falls far below that pace at its first loss (3.7 %). Issue 70 asks for
/// 1 %: what remains is the crowd's initial windows, ten packets each
/// within a second, about the link's capacity (docs/design.md §2,
/// Arrivals).
#[test]
fn a_crowd_of_a_thousand_paces_below_its_least_windows() {
    let s = run("erc-flash-1000", &[]);
    let l = link(&s, "L");
    println!("crowd of 1000: loss {:.4}", l.loss);
    assert!(l.loss <= 0.05, "loss {:.4}", l.loss);
}

/// A flash crowd's loss is its initial windows, sent before any router can
/// answer them: 100 flows within 10 ms send 2.4 bandwidth-delay products
/// at once. The router counts their flights and clears part of each later
/// one (the start code), and the servers pace their first windows slower:
/// issue 70's goals, no loss, a queue p99 ≤ 5 ms from the third round trip
/// on, fair within 2 s. Without the code the crowd lost 0.28 % with a
/// queue p99 of 32 ms from the third round trip on.
#[test]
fn a_flash_crowd_paces_its_initial_windows_to_the_start_code() {
    let s = run("erc-flash-100", &["duration=3s"]);
    let l = link(&s, "L");
    let third_round_on = run("erc-flash-100", &["duration=3s", "measure_from=120ms"]);
    let arrivals = third_round_on.arrivals.as_ref().unwrap();
    let a = arrivals.links.iter().find(|l| l.name == "L").unwrap();
    println!(
        "flash crowd: loss {:.4}; from the third round trip on, queue p99 {:.1} ms, fair after {:?} s",
        l.loss, a.p99_queue_ms, arrivals.fair_after_s
    );
    assert!(l.loss <= 0.001, "loss {:.4}", l.loss);
    assert!(a.p99_queue_ms <= 5.0, "queue p99 {:.1} ms", a.p99_queue_ms);
    assert!(
        arrivals.fair_after_s.is_some_and(|s| s <= 2.0),
        "fair after {:?}",
        arrivals.fair_after_s
    );
}
