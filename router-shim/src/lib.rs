//! # ecnq-shim
//!
//! The ecnq router shim (docs/design.md §4): an emulated bottleneck link that owns
//! its queue, measures its load factor with the core's
//! [`ecnq::LoadFactorMeter`] and re-marks ECN with the core's markers, both
//! through [`ecnq::router::RouterLink`], one per link direction.
//!
//! The modules, from the packet up:
//!
//! * [`wire`]: zero-copy IPv4 / IPv6 / UDP views and the TOS rewrite.
//! * [`link`]: the emulated link, sans-IO — its spec in tc/netem words,
//!   classification of packets into marks, and the link model.
//! * [`observe`]: what the links report — JSON lines, Prometheus metrics,
//!   pcap capture.
//! * [`io`]: the data paths — the link threads, the UDP relay and its
//!   sessions, the TUN router hop.
//! * [`testbed`]: network-namespace topologies with a shim per router.
//!
//! The `ecnq-shim` command line (`src/main.rs`, `src/cli/`) sits on top.

#![warn(missing_docs)]

pub mod io;
pub mod link;
pub mod observe;
pub mod testbed;
pub mod wire;

/// Completes on SIGINT or SIGTERM (never if they cannot be watched): how
/// the shim and the tools know to close down cleanly.
pub async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) {
        (Ok(mut int), Ok(mut term)) => {
            tokio::select! {
                _ = int.recv() => {}
                _ = term.recv() => {}
            }
        }
        // No signal handling: run until killed.
        _ => std::future::pending().await,
    }
}
