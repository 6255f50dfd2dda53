//! Shared pieces of the ecnq demos and the `ecnq-perf` harness.

pub mod echo;
pub mod http3;
pub mod metrics;
pub mod perf;
pub mod scale;
