//! # ecnq-shim
//!
//! The ecnq router shim (docs/design.md §4): an emulated bottleneck link that owns
//! its queue, measures its load factor with the core's
//! [`ecnq::LoadFactorMeter`] and re-marks ECN with the core's markers, both
//! through [`ecnq::router::RouterLink`], one per link direction.
//!
//! * [`wire`]: zero-copy IPv4 / IPv6 / UDP views and the TOS rewrite.
//! * [`classify`]: raw packet → [`ecnq::PacketMarks`] and back.
//! * [`spec`]: link specs in tc/netem words.
//! * [`link`]: the sans-IO link model (queue, rate, delay, loss, ...).
//! * [`pump`]: the thread that drives a link in real time.
//! * [`observe`]: Prometheus metrics and pcap capture.
//! * [`stats`]: per-link snapshots as JSON lines.
//! * [`relay`]: the UDP relay data path.
//! * [`sessions`]: the relay's bounded session table.
//! * [`tos_socket`]: UDP send/receive with the TOS byte (relay mode).
//! * [`tun`]: the TUN data path (`ecnq-shim tun`).
//! * [`testbed`]: network-namespace topologies with a shim per router.

#![warn(missing_docs)]

pub mod classify;
pub mod link;
pub mod observe;
pub mod pump;
pub mod relay;
pub mod sessions;
pub mod spec;
pub mod stats;
pub mod testbed;
pub mod tos_socket;
pub mod tun;
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
