//! What the bench is asked to run: its command line and the QUIC stacks.

use std::fmt;

use ecnq::quic::CongestionControl;
use ecnq::units::Size;
use ecnq_shim::link::spec::LinkSpec;
use serde::{Deserialize, Serialize};

/// How to run the bench.
pub const USAGE: &str = "\
usage: cargo bench -p ecnq-examples --bench scale [-- OPTIONS]

Opens many concurrent QUIC connections through one server endpoint and one
relay-mode shim on loopback, each downloading a pattern the client checks
byte by byte. Runs vanilla quinn (cubic, the baseline) and ecnq (erc) twice
each, in the order quinn, ecnq, ecnq, quinn, each run in a fresh process.
Prints connections completed / failed, memory per connection, CPU per
Gbit/s, losses and the shim's memory per session.

options:
  -n, --connections N   concurrent connections, 1 to 10000 (default 1000)
  -b, --bytes SIZE      bytes each connection downloads, 1 to 1gb
                        (default 128kb; units b, kb, mb, gb)
      --batch N         handshakes started at once, 1 to 10000 (default 100)
      --link SPEC       the shim's link, both directions, in netem words
                        (default \"rate 1gbit delay 1ms\")
      --no-relay        clients connect to the server directly, no shim
      --no-baseline     skip the vanilla quinn runs
      --only STACK      run one stack (quinn or ecnq) in this process and
                        print its figures as one JSON line; the bench runs
                        each stack this way, in a fresh process
  -h, --help            this text";

/// Most connections a run may open (two descriptors each).
pub const MAX_CONNECTIONS: usize = 10_000;
/// Most bytes one connection may download: a bulk transfer long enough for
/// the CPU bench to time (`cargo bench --bench cpu`).
pub const MAX_BYTES: u64 = 1 << 30;

/// What one run does.
#[derive(Clone, Debug, PartialEq)]
pub struct ScaleConfig {
    /// Concurrent connections.
    pub connections: usize,
    /// Bytes each connection downloads.
    pub bytes: u64,
    /// Handshakes started at once; the next batch starts when these settled.
    pub batch: usize,
    /// The shim's link, both directions.
    pub link: LinkSpec,
    /// Whether clients reach the server through the relay shim (else
    /// directly, with no router on the path).
    pub relay: bool,
    /// Whether to run vanilla quinn as the baseline.
    pub baseline: bool,
    /// Run this stack only and print its figures as JSON: what the bench's
    /// child processes do.
    pub only: Option<Stack>,
}

impl Default for ScaleConfig {
    fn default() -> Self {
        ScaleConfig {
            connections: 1000,
            bytes: 128 << 10,
            batch: 100,
            link: "rate 1gbit delay 1ms".parse().expect("literal link"),
            relay: true,
            baseline: true,
            only: None,
        }
    }
}

/// What the command line asks for.
#[derive(Clone, Debug, PartialEq)]
pub enum Command {
    /// Print [`USAGE`].
    Help,
    /// Run the bench.
    Run(Box<ScaleConfig>),
}

/// Reads the bench's arguments (without the program name). `--bench`,
/// which `cargo bench` adds, is ignored.
pub fn parse_args<I: IntoIterator<Item = String>>(args: I) -> Result<Command, String> {
    let mut config = ScaleConfig::default();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        let (flag, inline) = match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => (flag.to_owned(), Some(value.into())),
            _ => (arg, None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| args.next())
                .ok_or_else(|| format!("{flag} needs a value (see --help)"))
        };
        match flag.as_str() {
            "-h" | "--help" => return Ok(Command::Help),
            "--bench" => {}
            "--no-baseline" => config.baseline = false,
            "--no-relay" => config.relay = false,
            "--only" => {
                let text = value()?;
                config.only = Some(text.parse()?);
            }
            "-n" | "--connections" => config.connections = count(&flag, &value()?)?,
            "--batch" => config.batch = count(&flag, &value()?)?,
            "-b" | "--bytes" => {
                let text = value()?;
                config.bytes = text
                    .parse::<Size>()
                    .ok()
                    .map(Size::bytes)
                    .filter(|b| (1..=MAX_BYTES).contains(b))
                    .ok_or_else(|| {
                        format!("{flag} must be a size from 1 byte to 1gb, got `{text}`")
                    })?;
            }
            "--link" => {
                let text = value()?;
                config.link = text.parse().map_err(|e| format!("--link `{text}`: {e}"))?;
            }
            _ => return Err(format!("unknown argument `{flag}` (see --help)")),
        }
    }
    Ok(Command::Run(Box::new(config)))
}

/// A whole number in 1..=[`MAX_CONNECTIONS`].
fn count(flag: &str, text: &str) -> Result<usize, String> {
    text.parse()
        .ok()
        .filter(|n| (1..=MAX_CONNECTIONS).contains(n))
        .ok_or_else(|| {
            format!("{flag} must be a whole number from 1 to {MAX_CONNECTIONS}, got `{text}`")
        })
}

/// Which QUIC stack a run uses, on both ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Stack {
    /// quinn's own endpoints and socket, with its Cubic.
    Vanilla,
    /// ecnq endpoints with ecnq's default scheme.
    Ecnq,
}

impl Stack {
    /// The name `--only` takes.
    pub fn name(self) -> &'static str {
        match self {
            Stack::Vanilla => "quinn",
            Stack::Ecnq => "ecnq",
        }
    }
}

impl std::str::FromStr for Stack {
    type Err = String;

    fn from_str(s: &str) -> Result<Stack, String> {
        [Stack::Vanilla, Stack::Ecnq]
            .into_iter()
            .find(|stack| stack.name() == s)
            .ok_or_else(|| format!("--only takes quinn or ecnq, got `{s}`"))
    }
}

impl fmt::Display for Stack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stack::Vanilla => f.write_str("quinn (cubic)"),
            Stack::Ecnq => write!(f, "ecnq ({})", CongestionControl::DEFAULT),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Result<Command, String> {
        parse_args(list.iter().map(|s| s.to_string()))
    }

    #[test]
    fn arguments_parse_and_bad_ones_are_refused() {
        let Ok(Command::Run(config)) = args(&["--bench", "-n", "20", "--bytes=64kb"]) else {
            panic!("should parse");
        };
        assert_eq!((config.connections, config.bytes), (20, 64 << 10));
        let Ok(Command::Run(config)) = args(&["--only", "ecnq", "--no-relay"]) else {
            panic!("should parse");
        };
        assert_eq!((config.only, config.relay), (Some(Stack::Ecnq), false));
        assert_eq!(args(&["--help"]), Ok(Command::Help));
        for (bad, message) in [
            (&["-n", "0"][..], "-n must be a whole number"),
            (&["--only", "tcp"], "--only takes quinn or ecnq"),
            (&["--connections", "x"], "--connections must be"),
            (&["-n"], "-n needs a value"),
            (&["--bytes", "2gb"], "from 1 byte to 1gb"),
            (&["--batch", "-3"], "--batch must be"),
            (&["--link", "rate fast"], "--link `rate fast`"),
            (&["--frob"], "unknown argument `--frob`"),
        ] {
            let error = args(bad).unwrap_err();
            assert!(error.contains(message), "{bad:?}: {error}");
            assert!(!error.contains('\n'), "{error}");
        }
    }
}
