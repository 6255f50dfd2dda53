//! Links whose capacity changes (issue 56): the rate steps and the
//! cellular traces, every scheme and baseline side by side. Each test
//! prints its figures (`cargo test -p ecnq-sim --release --test
//! variable_links -- --nocapture`); the simulator is deterministic, so
//! none of them is timed.

use ecnq_sim::engine::Sim;
use ecnq_sim::protocol::Protocol;
use ecnq_sim::report::metrics::Summary;
use ecnq_sim::runner;
use ecnq_sim::scenario::Overrides;

mod common;

/// One second, in the link series' nanoseconds.
const S: u64 = 1_000_000_000;

/// The mean utilization of the first link's samples after `from_s`
/// seconds.
fn mean_utilization_after(sim: &Sim, from_s: u64) -> f64 {
    let after: Vec<f64> = (sim.link_series.iter())
        .filter(|x| x.link == 0 && x.time > from_s * S)
        .map(|x| x.utilization)
        .collect();
    after.iter().sum::<f64>() / after.len() as f64
}

/// One run's figures.
struct Figures {
    label: String,
    throughput_mbps: f64,
    utilization: f64,
    p50_ms: f64,
    p95_ms: f64,
    p99_ms: f64,
    loss: f64,
}

fn figures(label: &str, summary: &Summary) -> Figures {
    let l = &summary.links[0];
    Figures {
        label: label.to_owned(),
        throughput_mbps: l.throughput_bps() / 1e6,
        utilization: l.utilization,
        p50_ms: l.sojourn_ms.p50,
        p95_ms: l.sojourn_ms.p95,
        p99_ms: l.sojourn_ms.p99,
        loss: l.loss,
    }
}

fn run(name: &str, set: &[&str], protocol: &str) -> (Sim, Summary) {
    let scenario = common::scenario(name, set);
    let o = Overrides {
        scheme: Some(protocol.parse::<Protocol>().unwrap()),
        ..Overrides::default()
    };
    let r = runner::run(&scenario, &o).unwrap();
    (r.sim, r.summary)
}

fn print(title: &str, rows: &[Figures]) {
    println!("{title}");
    println!(
        "{:<14} {:>9} {:>6} {:>7} {:>7} {:>7} {:>7}",
        "scheme", "Mbit/s", "util", "p50 ms", "p95 ms", "p99 ms", "loss"
    );
    for f in rows {
        println!(
            "{:<14} {:>9.2} {:>6.3} {:>7.1} {:>7.1} {:>7.1} {:>7.4}",
            f.label, f.throughput_mbps, f.utilization, f.p50_ms, f.p95_ms, f.p99_ms, f.loss
        );
    }
}

const CELLULAR: [&str; 3] = [
    "cellular-att-lte-down",
    "cellular-att-lte-up",
    "cellular-tmobile-umts-down",
];

#[test]
fn cellular_traces_side_by_side() {
    for name in CELLULAR {
        let scenario = common::scenario(name, &[]);
        let missing = scenario.missing_traces();
        if !missing.is_empty() {
            println!("{name}: skipped, no trace at {}", missing[0].display());
            continue;
        }
        // The scenario's own line-up, as `ecnq-sim compare` runs it.
        let rows: Vec<Figures> =
            runner::compare(&scenario, &Overrides::default(), &scenario.file.compare)
                .iter()
                .map(|r| figures(&r.label[0], r.result.as_ref().unwrap()))
                .collect();
        print(name, &rows);
        // Issue 56's goals that hold on every trace: erc's p95 delay is at
        // most a third of Cubic's through the FIFO and no more than BBR's;
        // on AT&T's traces it also carries 0.9 of Cubic's throughput (on
        // T-Mobile's about 0.85). Issue 71's: erc's p99 is at most twice
        // Cubic's under CoDel, as the ecnq queue drops the flight a stall
        // held (`router::bottleneck`'s stall guard; without it 2.5 s on
        // T-Mobile's trace; with a fixed 100 ms bound 2.5 times Cubic's on
        // AT&T's downlink).
        let row = |label: &str| rows.iter().find(|f| f.label == label).unwrap();
        let (erc, cubic, bbr) = (row("erc"), row("cubic@fifo"), row("bbr@fifo"));
        let codel = row("cubic@dual");
        assert!(
            erc.p99_ms <= 2.0 * codel.p99_ms,
            "{name}: p99 {} ms, Cubic under CoDel's {} ms",
            erc.p99_ms,
            codel.p99_ms
        );
        assert!(
            erc.p95_ms <= cubic.p95_ms / 3.0,
            "{name}: {} ms",
            erc.p95_ms
        );
        assert!(erc.p95_ms <= bbr.p95_ms, "{name}: {} ms", erc.p95_ms);
        if name.starts_with("cellular-att") {
            let ratio = erc.throughput_mbps / cubic.throughput_mbps;
            assert!(ratio >= 0.9, "{name}: {ratio}");
        }
        for f in &rows {
            // Against the capacity in force, no scheme carries more.
            assert!(
                f.utilization <= 1.0 + 1e-9,
                "{name} {}: {}",
                f.label,
                f.utilization
            );
        }
    }
}

/// Issue 56's rate steps, 100 → 20 → 100 Mbit/s under four erc flows
/// at 40 ms, the router measuring the capacity: from 1 s after the fall
/// the queue stays under 5 ms, and from 1 s after the rise the mean
/// utilization is at least 0.9. The other schemes' figures are printed
/// beside erc's.
#[test]
fn rate_steps_erc_follows_the_fall_and_the_rise() {
    for p in [
        "erc", "cubic", "bbr", "prague", "vcp", "bmcc", "mcp", "tpcp",
    ] {
        let (sim, s) = run("rate-steps", &[], p);
        let series: Vec<_> = sim.link_series.iter().filter(|x| x.link == 0).collect();
        let q_ms =
            |x: &&&ecnq_sim::engine::LinkSample| x.queue_bytes as f64 * 8.0 / x.capacity_bps * 1e3;
        let after_fall = (series.iter())
            .filter(|x| x.time > 11 * S && x.time <= 20 * S)
            .map(|x| q_ms(&x))
            .fold(0.0, f64::max);
        let drained = (series.iter())
            .find(|x| x.time > 10 * S && q_ms(x) < 5.0)
            .map(|x| x.time as f64 / 1e9 - 10.0);
        let util_after_rise = mean_utilization_after(&sim, 21);
        println!(
            "{p:<8} util {:.3} drops {:>5}  queue from 1 s after the fall at most {:>5.1} ms, under 5 ms {:.1} s after it; utilization from 1 s after the rise {:.3}",
            s.links[0].utilization,
            s.links[0].drops,
            after_fall,
            drained.unwrap_or(f64::NAN),
            util_after_rise
        );
        if p == "erc" {
            assert!(after_fall < 5.0, "{after_fall} ms");
            assert!(util_after_rise >= 0.9, "{util_after_rise}");
        }
    }
}

/// With a measured capacity, erc on a fixed 50 Mbit/s link is within 2 %
/// of its utilization with the configured one (issue 56).
#[test]
fn a_measured_capacity_costs_erc_under_2_percent_on_a_fixed_link() {
    let util = |capacity: &str| {
        let set = ["links.0.rate=50Mbit", capacity];
        let (_, s) = run("erc-staggered", &set, "erc");
        s.links[0].utilization
    };
    let configured = util("links.0.capacity=configured");
    let measured = util("links.0.capacity=measured");
    println!("erc at 50 Mbit/s: utilization {configured:.4} configured, {measured:.4} measured");
    assert!(
        (measured / configured - 1.0).abs() <= 0.02,
        "{measured} vs {configured}"
    );
}

/// A cellular link in an outage: a generated trace of one opportunity a
/// millisecond (12 Mbit/s) with nothing from 4 s to 6 s, at 50 ms and a
/// 250-packet buffer. erc's queue stays within its flight cap (two
/// windows, each at most the rate over twice the least round trip: 200
/// packets); when the link is back the ecnq queue drops that flight, two
/// seconds old, and nothing more; from 1 s after it erc carries at least
/// 90 % of the link. A router that read the outage as
/// nearly no capacity advertised erc's floor, a sender paced at it could
/// not read the next rate for seconds, and one whose flight was not capped
/// filled the buffer while no ACK came.
#[test]
fn erc_clears_an_outage_and_is_back_within_a_second() {
    let path = std::env::temp_dir().join(format!("ecnq-outage-{}.trace", std::process::id()));
    let lines: Vec<String> = (1..=10_000u32)
        .filter(|ms| !(4_000..6_000).contains(ms))
        .map(|ms| ms.to_string())
        .collect();
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let trace = format!("links.0.trace={}", path.display());
    let (sim, s) = run(
        "cellular-att-lte-down",
        &[&trace, "duration=10s", "measure_from=1s"],
        "erc",
    );
    std::fs::remove_file(&path).unwrap();
    let series: Vec<_> = sim.link_series.iter().filter(|x| x.link == 0).collect();
    let peak = series.iter().map(|x| x.queue_packets).max().unwrap();
    let back = mean_utilization_after(&sim, 7);
    println!(
        "outage: drops {}, peak queue {peak} packets, utilization from 1 s after it {back:.3}",
        s.links[0].drops
    );
    assert!(s.links[0].drops <= peak, "{} dropped", s.links[0].drops);
    assert!(peak <= 200, "{peak} packets");
    assert!(back >= 0.9, "{back}");
}
