//! The latest snapshot of every link (and the relay's session counters)
//! in Prometheus text format, served over HTTP (`--metrics ADDR`).

use std::fmt::Write as _;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use ecnq::router::bottleneck::Class;

use super::stats::{LinkSnapshot, SessionCounters};

/// The latest snapshot of each link (and of the relay's sessions), for the
/// metrics endpoint.
#[derive(Debug, Default)]
pub struct SnapshotBoard {
    links: Mutex<Vec<LinkSnapshot>>,
    sessions: Mutex<Option<SessionCounters>>,
}

impl SnapshotBoard {
    /// Replaces the snapshot of `snapshot.direction`.
    pub fn publish(&self, snapshot: LinkSnapshot) {
        let mut links = self.links.lock().unwrap_or_else(|p| p.into_inner());
        match links.iter_mut().find(|s| s.direction == snapshot.direction) {
            Some(slot) => *slot = snapshot,
            None => links.push(snapshot),
        }
    }

    /// Replaces the relay's session counters.
    pub fn publish_sessions(&self, counters: SessionCounters) {
        *self.sessions.lock().unwrap_or_else(|p| p.into_inner()) = Some(counters);
    }

    /// All links (and sessions) in Prometheus text exposition format.
    pub fn prometheus(&self) -> String {
        let links = self.links.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let mut text = prometheus_text(&links);
        if let Some(c) = *self.sessions.lock().unwrap_or_else(|p| p.into_inner()) {
            session_text(&mut text, &c);
        }
        text
    }

    /// Serves [`SnapshotBoard::prometheus`] over HTTP on `addr` from a
    /// background thread ([`serve_text`]); returns the bound address.
    pub fn serve(self: &Arc<Self>, addr: SocketAddr) -> io::Result<SocketAddr> {
        let board = self.clone();
        serve_text(addr, move || board.prometheus())
    }
}

/// Serves the text `body` makes, fresh for each request, as Prometheus text
/// exposition over HTTP on `addr` from a background thread; returns the
/// bound address. Each connection gets its own thread, up to
/// [`MAX_SCRAPES`] at once (more are closed unanswered), and
/// [`SCRAPE_TIMEOUT`] for reading and for writing, so a stalled scraper
/// delays no other. Any request is answered with the metrics.
pub fn serve_text<F>(addr: SocketAddr, body: F) -> io::Result<SocketAddr>
where
    F: Fn() -> String + Send + Sync + 'static,
{
    let listener = TcpListener::bind(addr)?;
    let local = listener.local_addr()?;
    let body = Arc::new(body);
    let scrapes = Arc::new(AtomicUsize::new(0));
    thread::Builder::new()
        .name("metrics".into())
        .spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else {
                    // Out of descriptors, say: do not spin.
                    thread::sleep(Duration::from_millis(10));
                    continue;
                };
                let Some(slot) = ScrapeSlot::take(&scrapes) else {
                    continue;
                };
                let body = body.clone();
                let _ = thread::Builder::new()
                    .name("metrics-scrape".into())
                    .spawn(move || {
                        let _slot = slot;
                        answer(stream, &*body);
                    });
            }
        })?;
    Ok(local)
}

/// Reads (some of) a request, whatever it is, and answers with `body`.
fn answer(mut stream: TcpStream, body: &dyn Fn() -> String) {
    let _ = stream.set_read_timeout(Some(SCRAPE_TIMEOUT));
    let _ = stream.set_write_timeout(Some(SCRAPE_TIMEOUT));
    let mut request = [0u8; 1024];
    let _ = stream.read(&mut request);
    let body = body();
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// Scrapes served at once.
pub const MAX_SCRAPES: usize = 16;
/// Time a scraper gets to send its request, and to take the answer.
pub const SCRAPE_TIMEOUT: Duration = Duration::from_secs(2);

/// One of the [`MAX_SCRAPES`] places, given back when dropped.
struct ScrapeSlot(Arc<AtomicUsize>);

impl ScrapeSlot {
    fn take(scrapes: &Arc<AtomicUsize>) -> Option<ScrapeSlot> {
        let taken = scrapes.fetch_add(1, Ordering::AcqRel);
        let slot = ScrapeSlot(scrapes.clone());
        (taken < MAX_SCRAPES).then_some(slot)
    }
}

impl Drop for ScrapeSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The `# HELP` and `# TYPE` lines of a metric family.
fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(
        out,
        "# HELP ecnq_shim_{name} {help}\n# TYPE ecnq_shim_{name} {kind}"
    );
}

/// One metric family: name, type, help, and a value per link.
fn family(
    out: &mut String,
    name: &str,
    kind: &str,
    help: &str,
    links: &[LinkSnapshot],
    value: impl Fn(&LinkSnapshot) -> f64,
) {
    header(out, name, kind, help);
    for s in links {
        let _ = writeln!(
            out,
            "ecnq_shim_{name}{{dir=\"{}\"}} {}",
            s.direction,
            value(s)
        );
    }
}

/// One metric family with labels beyond the direction: per link, the
/// values with their labels (`cause="loss"`).
fn labelled<T: std::fmt::Display>(
    out: &mut String,
    (name, kind, help): (&str, &str, &str),
    links: &[LinkSnapshot],
    values: impl Fn(&LinkSnapshot) -> Vec<(String, T)>,
) {
    header(out, name, kind, help);
    for s in links {
        for (labels, value) in values(s) {
            let _ = writeln!(
                out,
                "ecnq_shim_{name}{{dir=\"{}\",{labels}}} {value}",
                s.direction
            );
        }
    }
}

/// `label="name"` for each name, with its value.
fn by<T>(label: &str, values: impl IntoIterator<Item = (&'static str, T)>) -> Vec<(String, T)> {
    values
        .into_iter()
        .map(|(name, value)| (format!("{label}=\"{name}\""), value))
        .collect()
}

/// A family without labels beyond the direction: name, help, and how to
/// read its value from a snapshot.
type Plain<T> = (&'static str, &'static str, fn(&LinkSnapshot) -> T);

/// The link counters without labels beyond the direction.
const COUNTERS: [Plain<u64>; 10] = [
    (
        "arrivals_total",
        "Packets offered to the link (before drops).",
        |s| s.counters.arrivals,
    ),
    ("arrival_bytes_total", "Bytes offered to the link.", |s| {
        s.counters.arrival_bytes
    }),
    ("departures_total", "Packets that left the link.", |s| {
        s.counters.departures
    }),
    ("departure_bytes_total", "Bytes that left the link.", |s| {
        s.counters.departure_bytes
    }),
    ("duplicates_total", "Emulated duplicates.", |s| {
        s.counters.duplicates
    }),
    ("reordered_total", "Packets that skipped the delay.", |s| {
        s.counters.reordered
    }),
    ("corrupted_total", "Emulated corruptions.", |s| {
        s.counters.corrupted
    }),
    (
        "rewritten_total",
        "Packets whose marks the router changed.",
        |s| s.marks.rewritten,
    ),
    (
        "send_errors_total",
        "Packets the shim failed to write.",
        |s| s.send_errors,
    ),
    (
        "intervals_disregarded_total",
        "Measurement intervals that kept the previous load because the shim was stalled.",
        |s| s.intervals_disregarded,
    ),
];

/// The Prometheus text for a set of link snapshots.
fn prometheus_text(links: &[LinkSnapshot]) -> String {
    let mut out = String::new();
    for (name, help, get) in COUNTERS {
        family(&mut out, name, "counter", help, links, |s| get(s) as f64);
    }
    drops_passed_and_marks(&mut out, links);
    queue_and_load(&mut out, links);
    out
}

/// Drops by cause, packets passed unmarked by reason, and marks by scheme
/// and codepoint.
fn drops_passed_and_marks(out: &mut String, links: &[LinkSnapshot]) {
    let drops = ("drops_total", "counter", "Packets dropped, by cause.");
    labelled(out, drops, links, |s| {
        let c = &s.counters;
        by(
            "cause",
            [
                ("overflow", c.drops_overflow),
                ("loss", c.drops_loss),
                ("blackhole", c.drops_blackhole),
                ("aqm", c.drops_aqm),
                ("policed", c.drops_policed),
            ],
        )
    });
    let passed = (
        "passed_total",
        "counter",
        "Packets forwarded unmarked, by reason.",
    );
    labelled(out, passed, links, |s| {
        let p = &s.counters.passed;
        by(
            "reason",
            [
                ("fragment", p.fragment),
                ("not_udp", p.not_udp),
                ("malformed", p.malformed),
            ],
        )
    });
    let marks = (
        "marks_total",
        "counter",
        "Packets by the scheme that marked them and the ECN codepoint they left with.",
    );
    labelled(out, marks, links, |s| {
        let mut values = Vec::new();
        for (wire, row) in s.marks.iter() {
            let scheme = wire.name();
            for (ecn, n) in ["00", "01", "10", "11"].iter().zip(row) {
                values.push((format!("scheme=\"{scheme}\",ecn=\"{ecn}\""), *n));
            }
        }
        values
    });
}

/// Queue, flows, utilization and load-factor gauges.
fn queue_and_load(out: &mut String, links: &[LinkSnapshot]) {
    let gauges: [Plain<f64>; 3] = [
        ("queue_bytes", "Bytes waiting for serialization.", |s| {
            s.queue_bytes as f64
        }),
        ("queue_packets", "Packets waiting for serialization.", |s| {
            s.queue_packets as f64
        }),
        (
            "policed_flows",
            "Flows of the ecnq queue held to their fair share for sending over it.",
            |s| s.policed_flows as f64,
        ),
    ];
    for (name, help, get) in gauges {
        family(out, name, "gauge", help, links, get);
    }
    let active = (
        "active_flows",
        "gauge",
        "Flows active in the last interval, by queue.",
    );
    labelled(out, active, links, |s| {
        by(
            "queue",
            Class::ALL.map(|class| (class.name(), s.active_flows[class as usize])),
        )
    });
    family(
        out,
        "utilization",
        "gauge",
        "Departures over capacity in the last interval.",
        links,
        |s| s.interval.map_or(0.0, |iv| iv.utilization(s.capacity)),
    );
    let load = (
        "load_factor",
        "gauge",
        "Load factor of the last interval, by formula.",
    );
    labelled(out, load, links, |s| {
        by(
            "formula",
            s.load
                .iter()
                .map(|(formula, load)| (formula.name, load.get())),
        )
    });
}

/// The relay's session counters in Prometheus text.
fn session_text(out: &mut String, c: &SessionCounters) {
    for (name, kind, help, value) in [
        ("sessions_active", "gauge", "Relay sessions open.", c.active),
        (
            "sessions_opened_total",
            "counter",
            "Relay sessions opened.",
            c.opened,
        ),
        (
            "sessions_evicted_total",
            "counter",
            "Idlest sessions closed to make room for a new one.",
            c.evicted,
        ),
        (
            "sessions_expired_total",
            "counter",
            "Sessions closed after the idle time.",
            c.expired,
        ),
    ] {
        header(out, name, kind, help);
        let _ = writeln!(out, "ecnq_shim_{name} {value}");
    }
    let refused = "sessions_refused_total";
    header(out, refused, "counter", "New sessions refused, by cause.");
    for (cause, n) in [("source", c.refused_source), ("sockets", c.refused_sockets)] {
        let _ = writeln!(out, "ecnq_shim_{refused}{{cause=\"{cause}\"}} {n}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::link::LinkCounters;
    use ecnq::router::MarkCounters;
    use ecnq::LinkLoad;

    fn snapshot(direction: &'static str, arrivals: u64) -> LinkSnapshot {
        LinkSnapshot {
            direction,
            time: Duration::from_secs(1),
            counters: LinkCounters {
                arrivals,
                drops_overflow: 3,
                ..LinkCounters::default()
            },
            marks: MarkCounters::default(),
            queue_bytes: 1500,
            queue_packets: 1,
            interval: None,
            load: LinkLoad::default(),
            capacity: 1e6,
            router_capacity: 1e6,
            capacity_bytes: Some(125_000.0),
            send_errors: 0,
            intervals_disregarded: 0,
            active_flows: [1, 0, 0],
            policed_flows: 0,
            class_bytes: [1500, 0, 0],
            class_departures: [0; 3],
            class_sojourn_ns: [0; 3],
            class_sojourn_hist: Default::default(),
        }
    }

    #[test]
    fn prometheus_lines() {
        let board = SnapshotBoard::default();
        board.publish(snapshot("up", 5));
        board.publish(snapshot("down", 1));
        board.publish(snapshot("up", 9)); // replaces the first
        board.publish_sessions(SessionCounters {
            evicted: 4,
            refused_sockets: 2,
            ..SessionCounters::default()
        });
        let text = board.prometheus();
        for want in [
            "# TYPE ecnq_shim_arrivals_total counter",
            "ecnq_shim_arrivals_total{dir=\"up\"} 9",
            "ecnq_shim_arrivals_total{dir=\"down\"} 1",
            "ecnq_shim_drops_total{dir=\"up\",cause=\"overflow\"} 3",
            "ecnq_shim_marks_total{dir=\"up\",scheme=\"vcp\",ecn=\"11\"} 0",
            "ecnq_shim_queue_bytes{dir=\"up\"} 1500",
            "ecnq_shim_load_factor{dir=\"down\",formula=\"bmcc\"} 0",
            "# TYPE ecnq_shim_sessions_evicted_total counter\necnq_shim_sessions_evicted_total 4",
            "ecnq_shim_sessions_refused_total{cause=\"sockets\"} 2",
        ] {
            assert!(text.contains(want), "missing {want:?} in\n{text}");
        }
        assert!(!text.contains("} 5\n"), "old snapshot replaced");
        // Every sample line is `name{labels} number`.
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let value = line.rsplit(' ').next().unwrap();
            assert!(value.parse::<f64>().is_ok(), "{line}");
        }
    }

    #[test]
    fn metrics_over_http() {
        let board = Arc::new(SnapshotBoard::default());
        board.publish(snapshot("up", 42));
        let addr = board.serve("127.0.0.1:0".parse().unwrap()).unwrap();
        // A scraper that connects and stalls holds up no other.
        let _stalled = std::net::TcpStream::connect(addr).unwrap();
        let started = std::time::Instant::now();
        let mut conn = std::net::TcpStream::connect(addr).unwrap();
        conn.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut response = String::new();
        conn.read_to_string(&mut response).unwrap();
        assert!(response.starts_with("HTTP/1.1 200 OK"));
        assert!(response.contains("ecnq_shim_arrivals_total{dir=\"up\"} 42"));
        assert!(
            started.elapsed() < SCRAPE_TIMEOUT,
            "{:?}",
            started.elapsed()
        );
    }
}
