//! The JSON report of `ecnq-perf -J`, shaped like iperf3's (`start`,
//! `intervals`, `end` with per-stream figures and sums) so tools that read
//! iperf3 output read ours. ecnq adds what iperf3 cannot know: the
//! congestion controller's mode, its latest load-factor estimate and the ECN
//! codepoints seen.

use serde::Serialize;

/// The whole report.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Report {
    /// What was tested.
    pub start: Start,
    /// One entry per reporting interval (`-i`).
    pub intervals: Vec<Interval>,
    /// Totals at the end of the test.
    pub end: End,
}

/// iperf3's `start` object.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Start {
    /// One entry per connection.
    pub connected: Vec<Connected>,
    /// Program and version.
    pub version: String,
    /// Where the client connected.
    pub connecting_to: ConnectingTo,
    /// Test parameters.
    pub test_start: TestStart,
    /// Seconds since the Unix epoch when the test started.
    pub timesecs: u64,
}

/// A connection's addresses. iperf3 calls the connection a "socket"; here
/// each `-P` stream is its own QUIC connection with its own controller.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Connected {
    /// Stream number (1-based).
    pub socket: u32,
    /// Local address.
    pub local_host: String,
    /// Local port.
    pub local_port: u16,
    /// Remote address.
    pub remote_host: String,
    /// Remote port.
    pub remote_port: u16,
}

/// Where the client connected.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct ConnectingTo {
    /// Host as given.
    pub host: String,
    /// Port.
    pub port: u16,
}

/// Test parameters, as iperf3 names them.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct TestStart {
    /// Always "QUIC".
    pub protocol: String,
    /// `-P`.
    pub num_streams: u32,
    /// `-t`, seconds (0 when `-n` bounds the test).
    pub duration: f64,
    /// `-n`, bytes (0 when `-t` bounds the test).
    pub bytes: u64,
    /// `-R`: 1 when the server sends.
    pub reverse: u8,
    /// `--cc`.
    pub congestion: String,
}

/// One stream's figures over one interval.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct StreamInterval {
    /// Stream number.
    pub socket: u32,
    /// Seconds from the test start.
    pub start: f64,
    /// Seconds from the test start.
    pub end: f64,
    /// `end - start`.
    pub seconds: f64,
    /// Application bytes moved.
    pub bytes: u64,
    /// Throughput.
    pub bits_per_second: f64,
    /// Packets the sender declared lost (iperf3's `retransmits`).
    pub retransmits: u64,
    /// Congestion window, bytes.
    pub snd_cwnd: u64,
    /// Smoothed RTT, microseconds.
    pub rtt: u64,
    /// Whether this side sent the data.
    pub sender: bool,
    /// ecnq: UDP payload bytes this side put on the wire in the interval
    /// (QUIC headers and retransmissions included): the sending rate the
    /// congestion controller really allowed.
    pub wire_bytes: u64,
    /// ecnq: the controller's mode.
    pub mode: String,
    /// ecnq: the latest load-factor estimate (1.0 = 100 %), if any.
    pub load_factor: Option<f64>,
    /// ecnq: ECN codepoints seen on received packets in this interval.
    pub ecn: EcnCounts,
}

/// ECN codepoints counted.
#[derive(Clone, Copy, Debug, Default, Serialize, PartialEq, Eq)]
pub struct EcnCounts {
    /// `00`.
    pub not_ect: u64,
    /// `01`.
    pub ect1: u64,
    /// `10`.
    pub ect0: u64,
    /// `11`.
    pub ce: u64,
}

/// Sum over streams for one interval (or for the whole test).
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Sum {
    /// Seconds from the test start.
    pub start: f64,
    /// Seconds from the test start.
    pub end: f64,
    /// `end - start`.
    pub seconds: f64,
    /// Bytes.
    pub bytes: u64,
    /// Throughput.
    pub bits_per_second: f64,
    /// Lost packets.
    pub retransmits: u64,
    /// Whether this side sent the data.
    pub sender: bool,
}

impl Sum {
    /// The sum of `streams` (which all cover `start..end`).
    pub fn of(streams: &[StreamInterval], start: f64, end: f64, sender: bool) -> Sum {
        let bytes = streams.iter().map(|s| s.bytes).sum();
        let seconds = end - start;
        Sum {
            start,
            end,
            seconds,
            bytes,
            bits_per_second: rate(bytes, seconds),
            retransmits: streams.iter().map(|s| s.retransmits).sum(),
            sender,
        }
    }
}

/// Bits per second for `bytes` over `seconds` (0 for an empty interval).
pub fn rate(bytes: u64, seconds: f64) -> f64 {
    if seconds > 0.0 {
        bytes as f64 * 8.0 / seconds
    } else {
        0.0
    }
}

/// iperf3's interval object.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Interval {
    /// Per stream.
    pub streams: Vec<StreamInterval>,
    /// Over all streams.
    pub sum: Sum,
}

/// Totals of one stream at the end, from each side.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct StreamEnd {
    /// What the sender sent.
    pub sender: Sum,
    /// What the receiver received.
    pub receiver: Sum,
    /// Largest window seen, bytes.
    pub max_snd_cwnd: u64,
    /// RTT figures, microseconds.
    pub min_rtt: u64,
    /// Largest smoothed RTT seen, microseconds.
    pub max_rtt: u64,
    /// Mean of the interval RTTs, microseconds.
    pub mean_rtt: u64,
}

/// iperf3's end object.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct End {
    /// Per stream.
    pub streams: Vec<StreamEnd>,
    /// Total sent.
    pub sum_sent: Sum,
    /// Total received.
    pub sum_received: Sum,
    /// The sender's congestion control.
    pub sender_tcp_congestion: String,
    /// The receiver's congestion control.
    pub receiver_tcp_congestion: String,
    /// ecnq: Jain's index over the streams' received bytes.
    pub fairness: f64,
}

impl Interval {
    /// Groups per-stream records into iperf3 intervals (records with the same
    /// index in each stream's sequence form one interval).
    pub fn group(runs: &[Vec<StreamInterval>]) -> Vec<Interval> {
        let count = runs.iter().map(Vec::len).max().unwrap_or(0);
        (0..count)
            .map(|i| {
                let streams: Vec<StreamInterval> =
                    runs.iter().filter_map(|r| r.get(i).cloned()).collect();
                let start = streams
                    .iter()
                    .map(|s| s.start)
                    .fold(f64::INFINITY, f64::min);
                let end = streams.iter().map(|s| s.end).fold(0.0, f64::max);
                let sender = streams.first().is_some_and(|s| s.sender);
                let sum = Sum::of(&streams, start, end, sender);
                Interval { streams, sum }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sums_and_iperf3_field_names() {
        let s = StreamInterval {
            socket: 1,
            start: 0.0,
            end: 1.0,
            seconds: 1.0,
            bytes: 1_000_000,
            bits_per_second: 8e6,
            retransmits: 2,
            sender: true,
            ..StreamInterval::default()
        };
        let sum = Sum::of(&[s.clone(), s.clone()], 0.0, 1.0, true);
        assert_eq!(sum.bytes, 2_000_000);
        assert_eq!(sum.bits_per_second, 16e6);
        assert_eq!(sum.retransmits, 4);
        let report = Report {
            intervals: vec![Interval {
                streams: vec![s],
                sum,
            }],
            ..Report::default()
        };
        let json: serde_json::Value = serde_json::to_value(&report).unwrap();
        for key in ["start", "intervals", "end"] {
            assert!(json.get(key).is_some(), "{key}");
        }
        let stream = &json["intervals"][0]["streams"][0];
        for key in [
            "socket",
            "start",
            "end",
            "seconds",
            "bytes",
            "bits_per_second",
            "retransmits",
            "snd_cwnd",
            "rtt",
            "sender",
        ] {
            assert!(stream.get(key).is_some(), "{key}");
        }
        assert_eq!(json["intervals"][0]["sum"]["bits_per_second"], 16e6);
        assert_eq!(rate(10, 0.0), 0.0);
    }
}
