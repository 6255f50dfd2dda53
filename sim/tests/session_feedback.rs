//! Session feedback (`feedback = "session"`): each end of an ecnq flow runs
//! the QUIC stack's connection session, and reports cross the reverse path
//! as packets of their own. It must carry the results of the papers' ACK
//! feedback, and report loss, a report blackout and a path without an ecnq
//! router must do what the session's design says (docs/design.md §3). Each
//! test prints its figures (`cargo test -p ecnq-sim --test session_feedback
//! -- --nocapture`).

use ecnq::session::PeerMode;
use ecnq_sim::engine::{FeedbackPath, FeedbackRecord, Nanos, SECOND};
use ecnq_sim::report::metrics::Summary;
use ecnq_sim::runner::{self, Run};
use ecnq_sim::scenario::Overrides;

mod common;

fn run(name: &str, feedback: FeedbackPath, scheme: Option<&str>, set: &[&str]) -> Run {
    let scenario = common::scenario(name, set);
    let overrides = Overrides {
        feedback: Some(feedback),
        scheme: scheme.map(|s| s.parse().unwrap()),
        ..Overrides::default()
    };
    runner::run(&scenario, &overrides).unwrap()
}

fn utilization(s: &Summary) -> f64 {
    s.links.iter().find(|l| l.name == "L").unwrap().utilization
}

/// Every flow's record of its sender session.
fn records(run: &Run) -> Vec<&FeedbackRecord> {
    let records: Vec<_> = run
        .sim
        .flows
        .iter()
        .map(|f| f.feedback_record().expect("an ecnq flow in session mode"))
        .collect();
    for (i, r) in records.iter().enumerate() {
        let changes: Vec<String> = r
            .mode_changes
            .iter()
            .map(|(t, m)| format!("{:.3} s {}", *t as f64 / 1e9, m.name()))
            .collect();
        println!(
            "  flow {i}: reports {} sent, {} arrived; {}",
            r.reports_sent,
            r.reports_arrived,
            changes.join(", ")
        );
    }
    records
}

/// The modes `record`'s sender entered, in order.
fn modes(record: &FeedbackRecord) -> Vec<PeerMode> {
    record.mode_changes.iter().map(|&(_, m)| m).collect()
}

/// Asserts that no sender of `run` fell back.
fn assert_no_fallback(run: &Run) {
    for r in records(run) {
        assert_eq!(modes(r), [PeerMode::Ecnq]);
    }
}

fn secs(t: Nanos) -> f64 {
    t as f64 / SECOND as f64
}

/// erc and TPCP, three staggered flows: the session's feedback path gives
/// the utilization of the ACK piggyback and at least its fairness, with no
/// fallback.
#[test]
fn session_feedback_matches_ack_feedback() {
    for scheme in ["erc", "tpcp"] {
        let ack = run("session-feedback", FeedbackPath::Ack, Some(scheme), &[]);
        let session = run("session-feedback", FeedbackPath::Session, Some(scheme), &[]);
        let (a, s) = (&ack.summary, &session.summary);
        println!(
            "{scheme}: utilization ack {:.3} session {:.3}, Jain ack {:.3} session {:.3}",
            utilization(a),
            utilization(s),
            a.jain.mean,
            s.jain.mean
        );
        assert!(ack.sim.flows.iter().all(|f| f.feedback_record().is_none()));
        assert!((utilization(a) - utilization(s)).abs() < 0.02, "{scheme}");
        // The session's law hears no report before its presence verdict,
        // about two round trips in, so a late TPCP flow starts a little
        // longer in multiplicative increase than with ACK feedback (Jain
        // 0.655 against 0.593): no less fair, and not much fairer.
        assert!(
            (-0.02..0.08).contains(&(s.jain.mean - a.jain.mean)),
            "{scheme}"
        );
        for r in records(&session) {
            assert_eq!(modes(r), [PeerMode::Ecnq], "{scheme}");
            // At most the last report is still on its way.
            assert!(r.reports_sent - r.reports_arrived <= 1, "{scheme}");
            // One report per RTT (40 ms) or faster while data flows.
            assert!(r.reports_sent >= 150, "{scheme}");
        }
        if scheme == "erc" {
            assert!(utilization(s) >= 0.97 && s.jain.mean >= 0.99);
        }
    }
}

/// erc's start code reaches a session-mode server as it reaches the QUIC
/// stack's: the client's ACK frames of the handshake, with their ECN
/// counts, then the handshake's end. A flash crowd of 100 flows within
/// 10 ms then paces its first windows as with ACK feedback and loses no
/// more (no packet either way); a session that never heard the code lost
/// 1.8 %.
#[test]
fn session_mode_hears_the_start_code() {
    let set = ["duration=3s"];
    let loss = |run: &Run| {
        let l = run.summary.links.iter().find(|l| l.name == "L").unwrap();
        l.loss
    };
    let ack = run("erc-flash-100", FeedbackPath::Ack, None, &set);
    let session = run("erc-flash-100", FeedbackPath::Session, None, &set);
    let (a, s) = (loss(&ack), loss(&session));
    println!("flash crowd of 100: loss ack {a:.4} session {s:.4}");
    assert!(a <= 0.001, "ack feedback's loss {a:.4}");
    assert!(s <= 0.001, "session feedback's loss {s:.4}");
}

/// 30 % of the reports lost on the reverse path (ACKs pass): the next
/// report replaces a lost one well within the timeout, so no sender falls
/// back and erc's figures hold.
#[test]
fn report_loss_causes_no_fallback() {
    let set = [
        "links.0.reverse_loss=0.3",
        "links.0.reverse_reports_only=true",
    ];
    let lossy = run("session-feedback", FeedbackPath::Session, None, &set);
    let s = &lossy.summary;
    println!("utilization {:.3}, Jain {:.3}", utilization(s), s.jain.mean);
    for r in records(&lossy) {
        assert_eq!(modes(r), [PeerMode::Ecnq]);
        let arrived = r.reports_arrived as f64 / r.reports_sent as f64;
        assert!((0.6..0.8).contains(&arrived), "{arrived}");
    }
    assert!(utilization(s) >= 0.97 && s.jain.mean >= 0.99);
}

/// Reports stop from 8 s to 10 s while ACKs still arrive: every sender
/// falls back to Cubic once the report timeout (500 ms at this RTT) runs
/// out, and erc takes over again with the first report after 10 s.
#[test]
fn a_report_blackout_falls_back_and_recovers() {
    let blackout = run("session-report-blackout", FeedbackPath::Session, None, &[]);
    for r in records(&blackout) {
        assert_eq!(
            modes(r),
            [
                PeerMode::Ecnq,
                PeerMode::ClassicReportsStopped,
                PeerMode::Ecnq
            ]
        );
        let (fell, resumed) = (secs(r.mode_changes[1].0), secs(r.mode_changes[2].0));
        // The last report before 8 s arrived up to one report period
        // (the 40 ms RTT) earlier.
        assert!((8.45..8.6).contains(&fell), "fell back at {fell} s");
        assert!((10.0..10.1).contains(&resumed), "resumed at {resumed} s");
        assert_eq!((r.fallbacks(), r.recoveries()), (1, 1));
    }
    assert!(utilization(&blackout.summary) >= 0.97);
}

/// The same blackout taking the ACKs too is a pause, not a reason to fall
/// back: reports are due only while ACKs show data flowing.
#[test]
fn a_blackout_of_acks_and_reports_is_a_pause() {
    let set = ["links.0.reverse_reports_only=false"];
    assert_no_fallback(&run(
        "session-report-blackout",
        FeedbackPath::Session,
        None,
        &set,
    ));
}

/// A drop-tail router that knows nothing of ecnq: TPCP's presence probes
/// arrive unraised, so each sender's session hands its window to Cubic
/// (and the link stays busy); with the router marking, none does.
#[test]
fn a_path_without_an_ecnq_router_falls_back_to_classic() {
    let plain = run("session-no-router", FeedbackPath::Session, None, &[]);
    for (f, r) in plain.sim.flows.iter().zip(records(&plain)) {
        assert_eq!(modes(r), [PeerMode::Ecnq, PeerMode::ClassicNoRouter]);
        let after_start = secs(r.mode_changes[1].0 - f.spec.start);
        assert!(after_start < 1.0, "no verdict {after_start} s after start");
    }
    assert!(utilization(&plain.summary) >= 0.95);
    let set = ["links.0.marking=\"auto\""];
    assert_no_fallback(&run("session-no-router", FeedbackPath::Session, None, &set));
}

/// Flows that run no ecnq scheme ignore the switch: the same run, to the
/// last figure.
#[test]
fn baselines_ignore_the_switch() {
    for scheme in ["cubic", "reno-ecn"] {
        let ack = run("session-feedback", FeedbackPath::Ack, Some(scheme), &[]);
        let session = run("session-feedback", FeedbackPath::Session, Some(scheme), &[]);
        let json = |r: &Run| serde_json::to_string(&r.summary).unwrap();
        assert_eq!(json(&ack), json(&session), "{scheme}");
    }
}
