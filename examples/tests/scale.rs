//! The scale bench's code path with 20 connections: every connection of
//! every run (vanilla quinn and ecnq, twice each) completes with every
//! byte checked, and the relay gave each client its own session.

use ecnq_examples::scale::{self, ScaleConfig};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn twenty_connections_complete_with_every_byte_checked() {
    let config = ScaleConfig {
        connections: 20,
        bytes: 64 << 10,
        batch: 10,
        ..ScaleConfig::default()
    };
    let report = scale::run(&config, &|line| eprintln!("{line}"))
        .await
        .unwrap();
    eprintln!("{}", scale::render(&report));
    assert_eq!(report.shim.opened, 20);
    assert_eq!(report.runs.len(), 4);
    for run in &report.runs {
        assert_eq!((run.completed, run.failed), (20, 0), "{run:?}");
        assert_eq!(run.bytes_verified, 20 * (64 << 10));
        assert_eq!(run.sessions_opened, 20, "{run:?}");
        assert_eq!(run.sessions_refused, 0, "{run:?}");
    }
    assert!(report.all_completed());
}
