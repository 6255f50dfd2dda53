//! `ecnq-perf`: an iperf3-like harness for ecnq's QUIC transport.

pub mod client;
pub mod demo;
pub mod fake_newcomers;
pub mod flood;
pub mod host;
pub mod loopback;
pub mod output;
pub mod paired;
pub mod proto;
pub mod pump;
pub mod report;
pub mod server;
pub mod testbed;

/// Longest time a test or a demo run may last: an hour for the demo, a day
/// for a test (`-t`).
pub const MAX_SECONDS: f64 = 86_400.0;

/// Reads an option given in seconds: a bare number, as iperf3 takes it
/// (`10`, `0.5`), or a time with its unit (`10s`, `500ms`).
pub fn parse_seconds(word: &str) -> Result<f64, String> {
    if let Ok(seconds) = word.trim().parse::<f64>() {
        return Ok(seconds);
    }
    ecnq::units::parse_duration(word, None)
        .map(|d| d.as_secs_f64())
        .map_err(|_| format!("`{word}` is not a time: write seconds (e.g. 10 or 0.5) or a time with its unit (e.g. 10s, 500ms)"))
}

/// Parses `words` as the options `A` of a subcommand `name` (its
/// defaults where `words` say nothing), as clap parses the command line.
pub fn parse_args<A: clap::Args + clap::FromArgMatches>(
    name: &'static str,
    words: &[&str],
) -> Result<A, String> {
    let command = A::augment_args(clap::Command::new(name));
    let argv = std::iter::once(name).chain(words.iter().copied());
    let matches = (command.try_get_matches_from(argv)).map_err(|e| e.to_string())?;
    A::from_arg_matches(&matches).map_err(|e| e.to_string())
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_are_a_number_or_a_time_with_its_unit() {
        assert_eq!(parse_seconds("10"), Ok(10.0));
        assert_eq!(parse_seconds("0.5"), Ok(0.5));
        assert_eq!(parse_seconds("1.5s"), Ok(1.5));
        assert_eq!(parse_seconds("250ms"), Ok(0.25));
        let error = parse_seconds("ten").unwrap_err();
        assert!(error.contains("`ten` is not a time"), "{error}");
        assert!(parse_seconds("5x").is_err());
    }
}
