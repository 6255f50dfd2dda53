//! Coexistence (issue 20) as simulator assertions: ecnq flows beside Cubic
//! on the dual-queue bottleneck, and every scheme through a drop-tail router
//! that knows nothing of ecnq. Each test prints its figures
//! (`cargo test -p ecnq-sim --test coexist_goals -- --nocapture`).

use std::path::Path;

use ecnq::Scheme;
use ecnq_sim::engine::FeedbackPath;
use ecnq_sim::protocol::Protocol;
use ecnq_sim::report::metrics::Summary;
use ecnq_sim::runner;
use ecnq_sim::scenario::{Overrides, Scenario};

fn run(name: &str, scheme: Scheme) -> Summary {
    run_with(name, scheme, FeedbackPath::Ack)
}

fn run_with(name: &str, scheme: Scheme, feedback: FeedbackPath) -> Summary {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join(format!("{name}.toml"));
    let scenario = Scenario::load(&path, &[]).unwrap();
    let o = Overrides {
        scheme: Some(Protocol::Ecnq(scheme)),
        feedback: Some(feedback),
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

/// With no ecnq router on the path every scheme runs Cubic (erc by its
/// wire, the others by their presence probes): beside Cubic through a
/// drop-tail router each gets 0.5×–2× Cubic's throughput, with the papers'
/// feedback and with the QUIC stack's session. Before MCP probed (its probe
/// bit), its unassisted rule waited for a loss after 3.2 s of silence:
/// 0.60× with the papers' feedback, 0.31× with the session.
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
