//! Coexistence (issue 20) as simulator assertions: ecnq flows beside Cubic
//! (and erc, and Cubic, beside BBR) on the dual-queue bottleneck, and every scheme
//! through a drop-tail router that knows nothing of ecnq. Each test prints its figures
//! (`cargo test -p ecnq-sim --test coexist_goals -- --nocapture`).

use ecnq::Scheme;
use ecnq_sim::engine::FeedbackPath;
use ecnq_sim::protocol::{Baseline, Protocol};
use ecnq_sim::report::metrics::Summary;
use ecnq_sim::runner;
use ecnq_sim::scenario::Overrides;

mod common;

fn run(name: &str, scheme: Scheme) -> Summary {
    run_with(name, scheme, FeedbackPath::Ack)
}

fn run_with(name: &str, scheme: Scheme, feedback: FeedbackPath) -> Summary {
    run_as(name, &[], Protocol::Ecnq(scheme), Some(feedback))
}

/// `name` with the fields `set` changed, every flow that does not fix its
/// own scheme on `protocol`, and the feedback path given, or the
/// scenario's own.
fn run_as(name: &str, set: &[&str], protocol: Protocol, feedback: Option<FeedbackPath>) -> Summary {
    let scenario = common::scenario(name, set);
    let o = Overrides {
        scheme: Some(protocol),
        feedback,
        ..Overrides::default()
    };
    runner::run(&scenario, &o).unwrap().summary
}

/// Throughput per flow of the ecnq group over that of the Cubic group,
/// and the bottleneck's utilization.
fn ratio_and_utilization(s: &Summary) -> (f64, f64) {
    let per_flow = |name: &str| {
        let g = s.groups.iter().find(|g| g.name == name).unwrap();
        g.throughput_bps / g.flows as f64
    };
    let link = s.links.iter().find(|l| l.name == "L").unwrap();
    (per_flow("ecnq") / per_flow("cubic"), link.utilization)
}

/// Every router-assisted scheme, started beside Cubic on the dual-queue
/// bottleneck (1 + 1, 2 + 2 and 1 + 4 flows): each flow gets 0.5×–2× a
/// Cubic flow's throughput and the link stays ≥ 90 % busy.
#[test]
fn every_scheme_holds_its_share_beside_cubic_on_the_dual_queue() {
    let mut misses = Vec::new();
    for name in ["coexist-dual", "coexist-2v2", "coexist-1v4"] {
        for scheme in Scheme::router_assisted() {
            let s = run(name, scheme);
            let (ratio, util) = ratio_and_utilization(&s);
            println!(
                "{name:<13} {scheme:<5} ecnq/cubic per flow {ratio:.2}, utilization {util:.3}"
            );
            if !(0.5..=2.0).contains(&ratio) || util < 0.9 {
                misses.push(format!(
                    "{name} {scheme}: ratio {ratio:.2}, utilization {util:.3}"
                ));
            }
        }
    }
    assert!(misses.is_empty(), "{misses:?}");
}

/// `protocol`'s flows beside the simulator's BBR model on the dual-queue
/// bottleneck, 1 + 1, 2 + 2 and 1 + 4 flows: the misses of 0.5×–2× a BBR
/// flow's throughput per flow, of ≥ 90 % of the link, and of a p99 of
/// `ecnq_queue_ms` for the ecnq queue (if given).
fn misses_beside_bbr(protocol: Protocol, ecnq_queue_ms: Option<f64>) -> Vec<String> {
    let mut misses = Vec::new();
    for name in ["coexist-dual", "coexist-2v2", "coexist-1v4"] {
        let s = run_as(name, &["flows.1.scheme=bbr"], protocol, None);
        let (ratio, util) = ratio_and_utilization(&s);
        let link = s.links.iter().find(|l| l.name == "L").unwrap();
        let queue = link.p99_class_queue_ms.ecnq.unwrap_or(0.0);
        let figures = format!(
            "{name}: {protocol}/bbr per flow {ratio:.2}, utilization {util:.3}, \
             ecnq queue p99 {queue:.1} ms"
        );
        println!("{figures}");
        let deep = ecnq_queue_ms.is_some_and(|bound| queue > bound);
        if !(0.5..=2.0).contains(&ratio) || util < 0.9 || deep {
            misses.push(figures);
        }
    }
    misses
}

/// erc beside the simulator's BBR model on the dual-queue bottleneck (1 + 1,
/// 2 + 2 and 1 + 4 flows): each erc flow gets 0.5×–2× a BBR flow's
/// throughput, the link stays ≥ 90 % busy, and erc's queue's p99 stays
/// under 2 ms while BBR's standing queue sits in the classic one. Each
/// ProbeRTT of a BBR flow leaves its share to erc; when BBR comes back,
/// dual-queue weights that follow the fall in erc's share at once, where
/// erc takes a round trip to slow down, build a standing ecnq queue.
#[test]
fn erc_holds_its_share_beside_bbr_on_the_dual_queue() {
    let misses = misses_beside_bbr(Protocol::Ecnq(Scheme::Erc), Some(2.0));
    assert!(misses.is_empty(), "{misses:?}");
}

/// Cubic beside BBR, both in the dual queue's classic queue (1 + 1, 2 + 2
/// and 1 + 4 flows): each Cubic flow gets 0.5×–2× a BBR flow's
/// throughput. BBR fills the queue and ignores loss, so CoDel's drops fall
/// on the flow with the most bytes waiting: dropped at the head, most of
/// them would be Cubic's to answer, and Cubic would fall below half.
#[test]
fn cubic_holds_its_share_beside_bbr_in_the_classic_queue() {
    let misses = misses_beside_bbr(Protocol::Baseline(Baseline::Cubic), None);
    assert!(misses.is_empty(), "{misses:?}");
}

/// With no ecnq router on the path every scheme runs Cubic (erc by its
/// wire, the others by their presence probes): beside Cubic through a
/// drop-tail router each gets 0.5×–2× Cubic's throughput, with the papers'
/// feedback and with the QUIC stack's session. MCP needs its probes (its
/// probe bit) here: its unassisted rule alone waits 3.2 s of silence for a
/// loss, too slow to hold its share.
#[test]
fn every_scheme_shares_with_cubic_through_a_drop_tail_router() {
    let mut misses = Vec::new();
    for feedback in [FeedbackPath::Ack, FeedbackPath::Session] {
        for scheme in Scheme::router_assisted() {
            let s = run_with("coexist-droptail", scheme, feedback);
            let (ratio, util) = ratio_and_utilization(&s);
            println!("{feedback:?} {scheme:<5} ecnq/cubic {ratio:.2}, utilization {util:.3}");
            if !(0.5..=2.0).contains(&ratio) || util < 0.9 {
                misses.push(format!(
                    "{feedback:?} {scheme}: ratio {ratio:.2}, utilization {util:.3}"
                ));
            }
        }
    }
    assert!(misses.is_empty(), "{misses:?}");
}

/// One FIFO that marks and drops for both (the papers' queue): the erc
/// router counts the Cubic flow as one more flow bottlenecked there, so erc
/// gets 0.5×–2× Cubic's throughput. A router that shared out only what
/// other traffic left would starve erc behind Cubic's standing queue.
#[test]
fn erc_shares_one_marking_fifo_with_cubic() {
    let s = run("coexist-fifo", Scheme::Erc);
    let (ratio, util) = ratio_and_utilization(&s);
    println!("erc/cubic {ratio:.2}, utilization {util:.3}");
    assert!(
        (0.5..=2.0).contains(&ratio) && util >= 0.9,
        "ratio {ratio:.2}, utilization {util:.3}"
    );
}

/// erc beside one flow of every other scheme arriving 2 s apart (the
/// demo's mixed run): the six paper schemes' flows share the ecnq queue
/// with it, and it counts them as flows, so it gets 0.5×–2× the fair share
/// of the link and they get at least half of theirs on average. Were they
/// not counted, erc would take most of the link and leave them under half.
#[test]
fn erc_leaves_the_paper_schemes_their_share_of_its_queue() {
    let s = run("erc-beside-paper-schemes", Scheme::Erc);
    let fair = s.links[0].rate_bps / s.groups.len() as f64;
    let rate = |name: &str| {
        let group = s.groups.iter().find(|g| g.name == name);
        group.expect("a flow of every scheme").throughput_bps
    };
    let papers: Vec<f64> = Scheme::router_assisted()
        .filter(|&scheme| scheme != Scheme::Erc && scheme.wire().is_ecnq())
        .map(|scheme| rate(&scheme.to_string()))
        .collect();
    let erc = rate("erc") / fair;
    let others = papers.iter().sum::<f64>() / papers.len() as f64 / fair;
    println!("of the fair share: erc {erc:.2}, the paper schemes {others:.2} on average");
    assert!(
        (0.5..=2.0).contains(&erc) && others >= 0.5,
        "erc {erc:.2}, others {others:.2}"
    );
}

/// Every scheme beside a light classic flow: one held to two packets per
/// round trip (0.48 Mbit/s, an SSH session or a call), and the ACKs of a
/// Cubic download the other way (`coexist-two-way`). The light flow is
/// limited elsewhere, so the ecnq queue's share is the link less what it
/// sends, not an equal split. erc fills the link (≥ 95 %), every other
/// scheme uses at least 78 % of it (their laws' own utilization: VCP is
/// still in its additive increase over the measured span, so a start one
/// handshake later costs it 0.015), and the light flow and the download
/// keep their rates. An equal split would tell each ecnq scheme half the
/// link, and it would use about half.
#[test]
fn a_light_classic_flow_leaves_the_link_to_the_ecnq_flow() {
    let mut misses = Vec::new();
    for (name, other, kept) in [
        ("coexist-light", "light", 0.45),
        ("coexist-two-way", "down", 44.0),
    ] {
        for scheme in Scheme::router_assisted() {
            let s = run(name, scheme);
            let mbit = |group: &str| {
                let g = s.groups.iter().find(|g| g.name == group).unwrap();
                g.throughput_bps / 1e6
            };
            let util = s.links.iter().find(|l| l.name == "L").unwrap().utilization;
            println!(
                "{name:<15} {scheme:<6} {:.2} Mbit/s, {other} {:.2}, utilization {util:.3}",
                mbit("ecnq"),
                mbit(other)
            );
            let floor = if scheme == Scheme::Erc { 0.95 } else { 0.78 };
            if util < floor || mbit(other) < kept {
                misses.push(format!(
                    "{name} {scheme}: utilization {util:.3}, {other} {:.2}",
                    mbit(other)
                ));
            }
        }
    }
    assert!(misses.is_empty(), "{misses:?}");
}

/// A long erc flow beside web transfers (short Cubic flows at 30 % of the
/// link, `coexist-short-flows`), against a long Cubic flow in the same
/// place: erc carries at least as much, the short flows complete within a
/// quarter of their time beside Cubic, erc loses under 0.1 % of its
/// packets and its queue stays under Cubic's. A short flow must not count
/// as a whole share while it lives: that would leave erc a fraction of
/// what Cubic carries.
#[test]
fn erc_beside_short_flows_carries_what_cubic_carries() {
    let name = "coexist-short-flows";
    let erc = run_as(name, &[], Protocol::Ecnq(Scheme::Erc), None);
    let cubic = run_as(name, &[], Protocol::Baseline(Baseline::Cubic), None);
    let figures = |s: &Summary| {
        let long = s.flows.iter().find(|f| f.group == "ecnq").unwrap();
        let link = s.links.iter().find(|l| l.name == "L").unwrap();
        let queue = &link.p99_class_queue_ms;
        let queue = if s.scheme == "erc" {
            queue.ecnq
        } else {
            queue.classic
        };
        let mbit = long.throughput_bps / 1e6;
        let packets = long.throughput_bps / 8.0 * (s.duration_s - s.measure_from_s) / 1200.0;
        (
            mbit,
            long.packets_lost as f64 / packets,
            queue.unwrap_or(0.0),
            s.completion.as_ref().unwrap().mean_s,
        )
    };
    let (e, c) = (figures(&erc), figures(&cubic));
    for (name, (mbit, lost, queue, afct)) in [("erc", e), ("cubic", c)] {
        println!(
            "{name:<5} long flow {mbit:.2} Mbit/s, lost {:.3} %, its queue p99 {queue:.1} ms; \
             short flows' mean completion {afct:.3} s",
            lost * 100.0
        );
    }
    assert!(e.0 >= c.0, "erc {:.2} Mbit/s, Cubic {:.2}", e.0, c.0);
    assert!(e.1 < 0.001, "erc lost {:.3} %", e.1 * 100.0);
    assert!(e.2 <= c.2, "erc's queue {:.1} ms, Cubic's {:.1}", e.2, c.2);
    assert!(
        e.3 <= 1.25 * c.3,
        "completion {:.3} s, beside Cubic {:.3}",
        e.3,
        c.3
    );
}
