//! Human output in iperf3's style: interval lines and end lines.

use super::report::{StreamInterval, Sum};

/// Bytes in iperf3's units (binary prefixes): `55.3 MBytes`.
pub fn bytes(n: u64) -> String {
    let n = n as f64;
    match n {
        n if n >= 1024.0 * 1024.0 * 1024.0 => {
            format!("{:.2} GBytes", n / (1024.0 * 1024.0 * 1024.0))
        }
        n if n >= 1024.0 * 1024.0 => format!("{:.1} MBytes", n / (1024.0 * 1024.0)),
        n if n >= 1024.0 => format!("{:.1} KBytes", n / 1024.0),
        n => format!("{n:.0} Bytes"),
    }
}

/// A bit rate in iperf3's units (decimal prefixes): `46.4 Mbits/sec`.
pub fn bits_per_second(r: f64) -> String {
    match r {
        r if r >= 1e9 => format!("{:.2} Gbits/sec", r / 1e9),
        r if r >= 1e6 => format!("{:.1} Mbits/sec", r / 1e6),
        r if r >= 1e3 => format!("{:.1} Kbits/sec", r / 1e3),
        r => format!("{r:.0} bits/sec"),
    }
}

/// The header above interval lines.
pub const INTERVAL_HEADER: &str =
    "[ ID] Interval           Transfer     Bitrate          RTT      Cwnd        Load    Mode                 ECN 10/01/11   Lost";

/// One interval line of one stream.
pub fn interval_line(s: &StreamInterval) -> String {
    let load = s
        .load_factor
        .map_or("-".to_owned(), |l| format!("{:.1}%", l * 100.0));
    format!(
        "[{:>3}] {:>6.2}-{:<6.2} sec  {:>11}  {:>15}  {:>6.1}ms  {:>10}  {:>6}  {:<20} {:>4}/{:>4}/{:>4}  {:>5}",
        s.socket,
        s.start,
        s.end,
        bytes(s.bytes),
        bits_per_second(s.bits_per_second),
        s.rtt as f64 / 1000.0,
        bytes(s.snd_cwnd),
        load,
        s.mode,
        s.ecn.ect0,
        s.ecn.ect1,
        s.ecn.ce,
        s.retransmits
    )
}

/// The `[SUM]` line of an interval.
pub fn sum_line(s: &Sum) -> String {
    format!(
        "[SUM] {:>6.2}-{:<6.2} sec  {:>11}  {:>15}  {:>71}",
        s.start,
        s.end,
        bytes(s.bytes),
        bits_per_second(s.bits_per_second),
        s.retransmits
    )
}

/// An end line: a stream's (or the sum's) total from one side.
pub fn end_line(id: &str, s: &Sum) -> String {
    let role = if s.sender { "sender" } else { "receiver" };
    format!(
        "[{:>3}] {:>6.2}-{:<6.2} sec  {:>11}  {:>15}  {:>5}  {role}",
        id,
        s.start,
        s.end,
        bytes(s.bytes),
        bits_per_second(s.bits_per_second),
        if s.sender {
            s.retransmits.to_string()
        } else {
            String::new()
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iperf3_units() {
        assert_eq!(bytes(512), "512 Bytes");
        assert_eq!(bytes(58_000_000), "55.3 MBytes");
        assert_eq!(bits_per_second(46_400_000.0), "46.4 Mbits/sec");
        assert_eq!(bits_per_second(2.5e9), "2.50 Gbits/sec");
    }

    #[test]
    fn interval_lines_carry_ecnq_fields() {
        let line = interval_line(&StreamInterval {
            socket: 2,
            end: 1.0,
            seconds: 1.0,
            bytes: 1_048_576,
            bits_per_second: 8_388_608.0,
            load_factor: Some(0.921),
            mode: "ai".into(),
            ..StreamInterval::default()
        });
        assert!(line.starts_with("[  2]"), "{line}");
        assert!(
            line.contains("1.0 MBytes") && line.contains("92.1%") && line.contains(" ai "),
            "{line}"
        );
    }
}

/// A live status line on stderr, only when stderr is a terminal (and the
/// output is for humans): elapsed time against the test length and the
/// latest aggregate rate. Lines printed through [`Progress::line`] never
/// collide with it.
#[derive(Clone, Debug)]
pub struct Progress {
    inner: Option<std::sync::Arc<std::sync::Mutex<ProgressState>>>,
}

#[derive(Debug)]
struct ProgressState {
    start: std::time::Instant,
    total: Option<f64>,
    rate: Option<f64>,
}

impl Progress {
    /// A progress line for a test of `total` seconds (None: sized by bytes).
    pub fn new(human: bool, total: Option<f64>) -> Progress {
        use std::io::IsTerminal;
        let enabled = human && std::io::stderr().is_terminal();
        Progress {
            inner: enabled.then(|| {
                std::sync::Arc::new(std::sync::Mutex::new(ProgressState {
                    start: std::time::Instant::now(),
                    total,
                    rate: None,
                }))
            }),
        }
    }

    /// Redraws the status line every 200 ms until the returned task is aborted.
    pub fn spawn_ticker(&self) -> Option<tokio::task::JoinHandle<()>> {
        let this = self.clone();
        self.inner.as_ref()?;
        Some(tokio::spawn(async move {
            let mut tick = tokio::time::interval(std::time::Duration::from_millis(200));
            loop {
                tick.tick().await;
                this.redraw();
            }
        }))
    }

    /// Prints `text` on stdout as its own line, with the status line kept below it.
    pub fn line(&self, text: &str, rate: Option<f64>) {
        let Some(inner) = &self.inner else {
            println!("{text}");
            return;
        };
        let mut state = inner.lock().unwrap_or_else(|e| e.into_inner());
        eprint!("\r\x1b[K");
        println!("{text}");
        if rate.is_some() {
            state.rate = rate;
        }
        drop(state);
        self.redraw();
    }

    fn redraw(&self) {
        let Some(inner) = &self.inner else { return };
        let state = inner.lock().unwrap_or_else(|e| e.into_inner());
        let elapsed = state.start.elapsed().as_secs_f64();
        let of = state
            .total
            .map_or(String::new(), |t| format!(" / {t:.0} s"));
        let rate = state
            .rate
            .map_or(String::new(), |r| format!("  {}", bits_per_second(r)));
        eprint!("\r\x1b[K  [{elapsed:5.1} s{of}]{rate}");
    }

    /// Removes the status line.
    pub fn clear(&self) {
        if let Some(inner) = &self.inner {
            let _guard = inner.lock().unwrap_or_else(|e| e.into_inner());
            eprint!("\r\x1b[K");
        }
    }
}
