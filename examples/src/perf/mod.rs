//! `ecnq-perf`: an iperf3-like harness for ecnq's QUIC transport.

pub mod plot;
pub mod report;
pub mod stats;
