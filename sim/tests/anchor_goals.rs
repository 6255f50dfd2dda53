//! The explicit-rate anchors, RCP and XCP, held to a figure of their own
//! papers (sim/REPRODUCTION.md, "RCP and XCP"), so that the arrival
//! benchmarks compare erc with working baselines. Each test prints its
//! figures (`cargo test -p ecnq-sim --test anchor_goals -- --nocapture`).

use ecnq_sim::protocol::{Baseline, Protocol};
use ecnq_sim::report::metrics::Summary;
use ecnq_sim::runner;
use ecnq_sim::scenario::Overrides;

mod common;

fn run(name: &str, set: &[&str], protocol: Protocol) -> Summary {
    let scenario = common::scenario(name, set);
    let o = Overrides {
        scheme: Some(protocol),
        ..Overrides::default()
    };
    runner::run(&scenario, &o).unwrap().summary
}

/// The CCR 2006 paper's AFCT figure (`rcp-afct`, at 500 Mbit/s and 4 s of
/// arrivals): in every size class with ten flows or more, RCP's mean
/// completion time is within 1.2× of processor sharing's (whose reference
/// pays the handshake too, as RCP's SYN picks up the rate there); and for
/// the flows of 100 kB and more, below Cubic's and XCP's, as the paper's
/// TCP and XCP curves lie above RCP's.
#[test]
fn rcp_finishes_flows_close_to_processor_sharing() {
    const SET: &[&str] = &["links.0.rate=500Mbit", "pareto.0.stop=4s", "duration=8s"];
    let classes = |p: Baseline| {
        let s = run("rcp-afct", SET, Protocol::Baseline(p));
        s.completion.unwrap().by_size_class
    };
    let (rcp, cubic, xcp) = (
        classes(Baseline::Rcp),
        classes(Baseline::Cubic),
        classes(Baseline::Xcp),
    );
    let mut checked = 0;
    for (i, class) in rcp.iter().enumerate().filter(|(_, c)| c.flows >= 10) {
        let (mean, sharing) = (class.mean_s.unwrap(), class.sharing_mean_s.unwrap());
        let ratio = mean / sharing;
        let others = [&cubic[i], &xcp[i]].map(|c| c.mean_s.unwrap_or(f64::INFINITY));
        println!(
            "from {} B: {} flows, RCP {mean:.3} s, PS {sharing:.3} s ({ratio:.2}x), Cubic {:.3} s, XCP {:.3} s",
            class.from_bytes,
            class.flows,
            others[0],
            others[1]
        );
        assert!(ratio <= 1.2, "{ratio:.2}x PS from {} B", class.from_bytes);
        if class.from_bytes >= 100_000 {
            assert!(
                others.iter().all(|&o| mean < o),
                "from {} B",
                class.from_bytes
            );
        }
        checked += 1;
    }
    assert!(checked >= 3, "only {checked} classes with ten flows");
}

/// The SIGCOMM 2002 paper's dumbbell (`xcp-fig4`, 50 long-lived flows at
/// 155 Mbit/s and 80 ms, one way): XCP keeps the link at least 95 % busy
/// with a queue that stays near empty (mean under 1 % of the buffer of one
/// bandwidth-delay product, p99 under 5 %), no loss, and fair flows.
#[test]
fn xcp_fills_the_link_with_a_near_empty_queue() {
    let s = run(
        "xcp-fig4",
        &["flows.1.count=0", "duration=20s"],
        Protocol::Baseline(Baseline::Xcp),
    );
    let link = s.links.iter().find(|l| l.name == "L").unwrap();
    let buffer = 1550.0;
    println!(
        "utilization {:.3}, queue mean {:.1} p99 {} packets, loss {}, Jain {:.3}",
        link.utilization, link.mean_queue_packets, link.p99_queue_packets, link.loss, s.jain.last
    );
    assert!(link.utilization >= 0.95, "{}", link.utilization);
    assert!(
        link.mean_queue_packets <= 0.01 * buffer,
        "{}",
        link.mean_queue_packets
    );
    assert!(
        link.p99_queue_packets as f64 <= 0.05 * buffer,
        "{}",
        link.p99_queue_packets
    );
    assert_eq!(link.drops, 0);
    assert!(s.jain.last >= 0.99, "{}", s.jain.last);
}
