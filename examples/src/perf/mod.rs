//! `ecnq-perf`: an iperf3-like harness for ecnq's QUIC transport.

pub mod client;
pub mod demo;
pub mod loopback;
pub mod output;
pub mod plot;
pub mod proto;
pub mod pump;
pub mod report;
pub mod server;
pub mod stats;
pub mod testbed;
