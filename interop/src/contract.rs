//! The runner's contract: roles, test cases, requests, and where files live.

use std::fmt;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use quinn::{TransportConfig, VarInt};

/// Exit status that tells the runner a test case is not supported.
pub const EXIT_UNSUPPORTED: u8 = 127;

/// ALPN of HTTP/0.9 over QUIC, the runner's default application protocol.
pub const ALPN_HQ: &[u8] = b"hq-interop";
/// ALPN of HTTP/3 (RFC 9114 §3.1), the runner's `http3` case.
pub const ALPN_H3: &[u8] = b"h3";

/// Which side of the connection this process plays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Client,
    Server,
}

impl FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> Result<Role, String> {
        match s {
            "client" => Ok(Role::Client),
            "server" => Ok(Role::Server),
            _ => Err(format!("unknown role '{s}' (expected client or server)")),
        }
    }
}

/// The runner's test cases this endpoint implements. Anything else, for
/// example the runner's random probe name, is unsupported (exit 127).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TestCase {
    Handshake,
    Transfer,
    Multiplexing,
    Chacha20,
    Retry,
    Resumption,
    ZeroRtt,
    KeyUpdate,
    Ecn,
    /// The runner's TESTCASE for handshakeloss and handshakecorruption: one
    /// connection per file.
    MultiConnect,
    HandshakeLoss,
    TransferLoss,
    HandshakeCorruption,
    TransferCorruption,
    BlackHole,
    Goodput,
    CrossTraffic,
    /// The files over HTTP/3 instead of hq-interop.
    Http3,
}

/// The runner's names, in the order of [`TestCase`]. The runner passes some
/// network cases under another name (`multiconnect`, `transfer`); the
/// network case names are accepted too, for runs by hand.
const NAMES: [(&str, TestCase); 18] = [
    ("handshake", TestCase::Handshake),
    ("transfer", TestCase::Transfer),
    ("multiplexing", TestCase::Multiplexing),
    ("chacha20", TestCase::Chacha20),
    ("retry", TestCase::Retry),
    ("resumption", TestCase::Resumption),
    ("zerortt", TestCase::ZeroRtt),
    ("keyupdate", TestCase::KeyUpdate),
    ("ecn", TestCase::Ecn),
    ("multiconnect", TestCase::MultiConnect),
    ("handshakeloss", TestCase::HandshakeLoss),
    ("transferloss", TestCase::TransferLoss),
    ("handshakecorruption", TestCase::HandshakeCorruption),
    ("transfercorruption", TestCase::TransferCorruption),
    ("blackhole", TestCase::BlackHole),
    ("goodput", TestCase::Goodput),
    ("crosstraffic", TestCase::CrossTraffic),
    ("http3", TestCase::Http3),
];

impl TestCase {
    /// The test case called `name` by the runner, `None` if unsupported.
    pub fn from_name(name: &str) -> Option<TestCase> {
        NAMES.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
    }

    /// The runner's name of this test case.
    pub fn name(self) -> &'static str {
        NAMES
            .iter()
            .find(|(_, t)| *t == self)
            .map_or("?", |(n, _)| n)
    }

    /// Whether the client opens one connection per request (the runner
    /// counts one handshake per file in these cases).
    pub fn connection_per_request(self) -> bool {
        matches!(
            self,
            TestCase::MultiConnect | TestCase::HandshakeLoss | TestCase::HandshakeCorruption
        )
    }

    /// The application protocol of the case's ALPN.
    pub fn alpn(self) -> &'static [u8] {
        match self {
            TestCase::Http3 => ALPN_H3,
            _ => ALPN_HQ,
        }
    }

    /// Transport parameters the case calls for.
    pub fn tune(self, config: &mut TransportConfig) {
        // Start from a 100 ms RTT estimate, as quic-go and Chromium do,
        // rather than RFC 9002's 333 ms (quinn's default). Before the first
        // RTT sample the handshake timeout is 3 × this, doubling on every
        // loss: from 333 ms five lost rounds in a row (1 + 2 + 4 + 8 + 16 s)
        // outlast the 30 s idle timeout, which one of the 50 connections of
        // the runner's handshakeloss (30 % loss in bursts) hit; from 100 ms
        // it takes seven.
        config.initial_rtt(INITIAL_RTT);
        // The runner's multiplexing case requests about a thousand files on
        // one connection; let the peer open them without waiting on credit.
        config.max_concurrent_bidi_streams(VarInt::from_u32(1000));
        if self == TestCase::Transfer {
            // "transfer" exercises flow control: small windows, so the
            // multi-MiB files need many MAX_DATA / MAX_STREAM_DATA updates.
            config.stream_receive_window(VarInt::from_u32(64 * 1024));
            config.receive_window(VarInt::from_u32(256 * 1024));
        }
    }
}

impl fmt::Display for TestCase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The RTT assumed before the first sample (quic-go's `defaultInitialRTT`).
const INITIAL_RTT: Duration = Duration::from_millis(100);

/// One URL of `REQUESTS`: `https://host[:port]/path`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    pub host: String,
    pub port: u16,
    /// Always starts with `/`.
    pub path: String,
}

impl FromStr for Request {
    type Err = String;
    fn from_str(url: &str) -> Result<Request, String> {
        let rest = url
            .strip_prefix("https://")
            .ok_or_else(|| format!("request '{url}' is not an https:// URL"))?;
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        let (host, port) = if let Some(v6) = authority.strip_prefix('[') {
            let (host, after) = v6
                .split_once(']')
                .ok_or_else(|| format!("request '{url}' has an unclosed IPv6 literal"))?;
            (host, after.strip_prefix(':'))
        } else {
            match authority.rsplit_once(':') {
                Some((h, p)) => (h, Some(p)),
                None => (authority, None),
            }
        };
        let port = match port {
            Some(p) => p
                .parse()
                .map_err(|_| format!("request '{url}' has a bad port '{p}'"))?,
            None => 443,
        };
        if host.is_empty() {
            return Err(format!("request '{url}' has no host"));
        }
        Ok(Request {
            host: host.to_string(),
            port,
            path: path.to_string(),
        })
    }
}

impl Request {
    /// `host:port` as a URL writes it (an IPv6 host in brackets).
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }
}

/// Everything the runner hands an endpoint, after flags and environment.
#[derive(Clone, Debug)]
pub struct Config {
    pub role: Role,
    pub testcase: TestCase,
    pub requests: Vec<Request>,
    /// Files the server serves (`/www`).
    pub www: PathBuf,
    /// `priv.key`, `cert.pem` (and `ca.pem`) (`/certs`).
    pub certs: PathBuf,
    /// Where the client stores downloads (`/downloads`).
    pub downloads: PathBuf,
    /// NSS key log (`SSLKEYLOGFILE`).
    pub keylog: Option<PathBuf>,
    /// Server listen address (UDP 443 on all interfaces).
    pub listen: SocketAddr,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_unknown_is_none() {
        for (name, case) in NAMES {
            assert_eq!(TestCase::from_name(name), Some(case));
            assert_eq!(case.name(), name);
        }
        assert_eq!(TestCase::from_name("x7f3q"), None);
    }

    #[test]
    fn runner_multiconnect_opens_a_connection_per_file() {
        for name in ["multiconnect", "handshakeloss", "handshakecorruption"] {
            let case = TestCase::from_name(name).expect("known");
            assert!(case.connection_per_request(), "{name}");
        }
        assert!(!TestCase::Transfer.connection_per_request());
    }

    #[test]
    fn only_http3_speaks_h3() {
        assert_eq!(TestCase::Http3.alpn(), b"h3");
        assert_eq!(TestCase::Transfer.alpn(), b"hq-interop");
    }

    #[test]
    fn parses_request_urls() {
        let r: Request = "https://server4:443/abc".parse().unwrap();
        assert_eq!(
            (r.host.as_str(), r.port, r.path.as_str()),
            ("server4", 443, "/abc")
        );
        let r: Request = "https://[fd00::1]:4433/x/y".parse().unwrap();
        assert_eq!(
            (r.host.as_str(), r.port, r.path.as_str()),
            ("fd00::1", 4433, "/x/y")
        );
        assert_eq!(r.authority(), "[fd00::1]:4433");
        let r: Request = "https://h/".parse().unwrap();
        assert_eq!(r.port, 443);
        assert_eq!(r.authority(), "h:443");
        for bad in [
            "http://h/x",
            "https://:443/x",
            "https://h:99999/x",
            "https://[::1/x",
        ] {
            assert!(bad.parse::<Request>().is_err(), "{bad}");
        }
    }
}
