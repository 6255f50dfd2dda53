//! Faults on the path, each a transfer that must deliver every byte
//! (issue 22): a link that loses 10 % or 30 % of packets (the
//! quic-interop-runner's handshakeloss level, handshake included), a 2 s
//! outage in the middle, reordering and corruption. QUIC's AEAD rejects a
//! corrupted packet, so bytes counted at the server are bytes intact. Each
//! test also checks from the shim's counters that the fault happened. A
//! shim restarted mid-transfer is `testbed.rs`'s
//! `transfer_survives_a_shim_restart`.

use std::time::Duration;

use ecnq::quic::CongestionControl;
use ecnq_examples::perf::client::{self, StreamRun};
use ecnq_examples::perf::loopback::{LinkSample, LinkSeries, LoopbackBed, RelayChain};
use tokio::time::Instant;

/// One fault test at a time: they are real-time runs on a 2-core machine.
static MACHINE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Sends `bytes` with erc through one relay shim whose link is `spec`,
/// within `limit`; checks the server received every byte and returns the
/// run, its duration and the shim's last sample of the link.
async fn transfer(spec: &str, bytes: u64, limit: Duration) -> (StreamRun, Duration, LinkSample) {
    let _machine = MACHINE.lock().await;
    let bed = LoopbackBed::ecnq().await.expect("bed");
    let link = spec.parse().expect("valid spec");
    let chain = RelayChain::start(&[link], bed.server()).expect("relay");
    let mut config = bed.client_config(chain.entry, CongestionControl::DEFAULT, 0.0);
    config.request.bytes = bytes;
    let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
    let start = Instant::now();
    let run = tokio::time::timeout(limit, client::run_stream(&config, 1, start, tx))
        .await
        .unwrap_or_else(|_| panic!("`{spec}`: no end within {limit:?}"))
        .unwrap_or_else(|e| panic!("`{spec}`: {e}"));
    let took = start.elapsed();
    let links: Vec<LinkSeries> = chain.stop().await;
    assert_eq!(
        run.local_total.bytes, bytes,
        "`{spec}`: the client sent all"
    );
    assert_eq!(
        run.peer_result.bytes, bytes,
        "`{spec}`: the server received every byte"
    );
    let last = links[0].samples.last().cloned().expect("the shim reported");
    println!(
        "`{spec}`: {bytes} bytes in {:.1} s; shim: {} arrivals, {} dropped, {} blackholed, {} corrupted, {} reordered",
        took.as_secs_f64(),
        last.arrivals,
        last.drops,
        last.blackholed,
        last.corrupted,
        last.reordered
    );
    (run, took, last)
}

/// A transfer through a link that loses `percent` % of packets; the shim
/// must have lost within 5 points of that.
async fn transfer_with_loss(percent: f64, bytes: u64, limit: Duration) {
    let spec = format!("rate 20mbit delay 5ms loss {percent}% limit 100");
    let (_, _, link) = transfer(&spec, bytes, limit).await;
    let lost = link.drops / link.arrivals * 100.0;
    assert!((lost - percent).abs() < 5.0, "the link lost {lost:.1} %");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transfer_survives_ten_percent_loss() {
    transfer_with_loss(10.0, 1 << 20, Duration::from_secs(60)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handshake_and_transfer_survive_thirty_percent_loss() {
    transfer_with_loss(30.0, 256 << 10, Duration::from_secs(90)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transfer_survives_a_two_second_outage() {
    // Up for 0.5 s (the handshake and the first data), dark for 2 s, once.
    let (_, took, link) = transfer(
        "rate 20mbit delay 5ms limit 100 blackhole 500ms 2s 1",
        4 << 20,
        Duration::from_secs(60),
    )
    .await;
    assert!(link.blackholed > 0.0, "the outage dropped packets");
    assert!(took > Duration::from_secs(2), "the transfer waited it out");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transfer_survives_reordering() {
    let (_, _, link) = transfer(
        "rate 20mbit delay 20ms reorder 5% limit 100",
        2 << 20,
        Duration::from_secs(60),
    )
    .await;
    assert!(link.reordered > 0.0, "packets were reordered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transfer_survives_corruption() {
    let (_, _, link) = transfer(
        "rate 20mbit delay 5ms corrupt 5% limit 100",
        2 << 20,
        Duration::from_secs(60),
    )
    .await;
    assert!(link.corrupted > 0.0, "packets were corrupted");
}
