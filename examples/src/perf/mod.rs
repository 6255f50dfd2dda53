//! `ecnq-perf`: an iperf3-like harness for ecnq's QUIC transport.

pub mod client;
pub mod demo;
pub mod host;
pub mod loopback;
pub mod output;
pub mod proto;
pub mod pump;
pub mod report;
pub mod server;
pub mod testbed;

/// Longest time a test or a demo run may last: an hour for the demo, a day
/// for a test (`-t`).
pub const MAX_SECONDS: f64 = 86_400.0;

/// Checks that `value` seconds (option `name`) lie in `min..=max`.
pub fn check_seconds(name: &str, value: f64, min: f64, max: f64) -> Result<(), String> {
    if value.is_finite() && (min..=max).contains(&value) {
        Ok(())
    } else {
        Err(format!(
            "{name} must be between {min} and {max} seconds, got {value}"
        ))
    }
}
