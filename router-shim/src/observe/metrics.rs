//! The latest snapshot of every link (and the relay's session counters)
//! in Prometheus text format, served over HTTP (`--metrics ADDR`).

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use ecnq::router::bottleneck::Class;
use hyper::header::CONTENT_TYPE;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::Response;
use hyper_util::rt::{TokioIo, TokioTimer};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{
    prometheus_text, DescriptorEncoder, EncodeCounterValue, EncodeGaugeValue, EncodeMetric,
    MetricEncoder,
};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;
use tokio::sync::Semaphore;

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
        let sessions = *self.sessions.lock().unwrap_or_else(|p| p.into_inner());
        prometheus_text(links, sessions)
    }

    /// Serves [`SnapshotBoard::prometheus`] over HTTP on `addr` from a
    /// background thread ([`serve_text`]); returns the bound address.
    pub fn serve(self: &Arc<Self>, addr: SocketAddr) -> io::Result<SocketAddr> {
        let board = self.clone();
        serve_text(addr, move || board.prometheus())
    }
}

/// Serves the text `body` makes, fresh for each request, as Prometheus text
/// exposition over HTTP/1.1 (hyper) on `addr` from a background thread;
/// returns the bound address. Up to [`MAX_SCRAPES`] connections are
/// served at once (more are closed unanswered), each for at most
/// [`SCRAPE_TIMEOUT`], so a stalled scraper delays no other. Any request
/// is answered with the metrics. Test: `metrics_over_http`.
pub fn serve_text<F>(addr: SocketAddr, body: F) -> io::Result<SocketAddr>
where
    F: Fn() -> String + Send + Sync + 'static,
{
    let listener = std::net::TcpListener::bind(addr)?;
    listener.set_nonblocking(true)?;
    let local = listener.local_addr()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    thread::Builder::new()
        .name("metrics".into())
        .spawn(move || runtime.block_on(accept(listener, Arc::new(body))))?;
    Ok(local)
}

/// Accepts scrapers for ever, each connection on a task of its own.
async fn accept<F>(listener: std::net::TcpListener, body: Arc<F>)
where
    F: Fn() -> String + Send + Sync + 'static,
{
    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
        return;
    };
    let scrapes = Arc::new(Semaphore::new(MAX_SCRAPES));
    loop {
        let Ok((stream, _)) = listener.accept().await else {
            // Out of descriptors, say: do not spin.
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let Ok(slot) = scrapes.clone().try_acquire_owned() else {
            continue;
        };
        let body = body.clone();
        tokio::spawn(async move {
            let answer = service_fn(move |_request| {
                let text = body();
                async move {
                    Response::builder()
                        .header(CONTENT_TYPE, prometheus_text::CONTENT_TYPE)
                        .body(text)
                }
            });
            let connection = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(SCRAPE_TIMEOUT)
                .keep_alive(false)
                .serve_connection(TokioIo::new(stream), answer);
            let _ = tokio::time::timeout(SCRAPE_TIMEOUT, connection).await;
            drop(slot);
        });
    }
}

/// Scrapes served at once.
pub const MAX_SCRAPES: usize = 16;
/// Time a scraper gets to send its request and take the answer.
pub const SCRAPE_TIMEOUT: Duration = Duration::from_secs(2);

/// What a scrape shows: the snapshots on the board when it was asked,
/// encoded by the Prometheus client library under the `ecnq_shim` prefix
/// (a counter's samples take the `_total` suffix from it).
#[derive(Debug)]
struct Scrape {
    links: Vec<LinkSnapshot>,
    sessions: Option<SessionCounters>,
}

/// The labels of one sample: the link's direction first, then the
/// family's own (`cause="loss"`).
type Labels = Vec<(&'static str, String)>;

/// One family: its name (without the `ecnq_shim_` prefix or a counter's
/// `_total`), type and help.
type Descriptor = (&'static str, MetricType, &'static str);

/// Encodes one sample of a family of `kind` with `labels`.
fn sample<V>(family: &mut MetricEncoder, kind: MetricType, labels: &Labels, value: V) -> fmt::Result
where
    V: EncodeCounterValue + EncodeGaugeValue,
{
    let encoder = family.encode_family(labels)?;
    match kind {
        MetricType::Counter => ConstCounter::new(value).encode(encoder),
        _ => ConstGauge::new(value).encode(encoder),
    }
}

/// One family with a sample per link and per `(labels, value)` that
/// `values` reads from the link's snapshot.
fn labelled<V>(
    encoder: &mut DescriptorEncoder,
    (name, kind, help): Descriptor,
    links: &[LinkSnapshot],
    values: impl Fn(&LinkSnapshot) -> Vec<(Labels, V)>,
) -> fmt::Result
where
    V: EncodeCounterValue + EncodeGaugeValue,
{
    let mut family = encoder.encode_descriptor(name, help, None, kind)?;
    for s in links {
        for (extra, value) in values(s) {
            let mut labels = vec![("dir", s.direction.to_owned())];
            labels.extend(extra);
            sample(&mut family, kind, &labels, value)?;
        }
    }
    Ok(())
}

/// One family with one sample per link, labelled by its direction alone.
fn family<V>(
    encoder: &mut DescriptorEncoder,
    descriptor: Descriptor,
    links: &[LinkSnapshot],
    value: impl Fn(&LinkSnapshot) -> V,
) -> fmt::Result
where
    V: EncodeCounterValue + EncodeGaugeValue,
{
    labelled(encoder, descriptor, links, |s| vec![(Vec::new(), value(s))])
}

/// `label="name"` for each name, with its value.
fn by<T>(
    label: &'static str,
    values: impl IntoIterator<Item = (&'static str, T)>,
) -> Vec<(Labels, T)> {
    values
        .into_iter()
        .map(|(name, value)| (vec![(label, name.to_owned())], value))
        .collect()
}

/// A family without labels beyond the direction: name, help, and how to
/// read its value from a snapshot.
type Plain<T> = (&'static str, &'static str, fn(&LinkSnapshot) -> T);

/// The link counters without labels beyond the direction.
const COUNTERS: [Plain<u64>; 10] = [
    (
        "arrivals",
        "Packets offered to the link (before drops).",
        |s| s.counters.arrivals,
    ),
    ("arrival_bytes", "Bytes offered to the link.", |s| {
        s.counters.arrival_bytes
    }),
    ("departures", "Packets that left the link.", |s| {
        s.counters.departures
    }),
    ("departure_bytes", "Bytes that left the link.", |s| {
        s.counters.departure_bytes
    }),
    ("duplicates", "Emulated duplicates.", |s| {
        s.counters.duplicates
    }),
    ("reordered", "Packets that skipped the delay.", |s| {
        s.counters.reordered
    }),
    ("corrupted", "Emulated corruptions.", |s| {
        s.counters.corrupted
    }),
    (
        "rewritten",
        "Packets whose marks the router changed.",
        |s| s.marks.rewritten,
    ),
    ("send_errors", "Packets the shim failed to write.", |s| {
        s.send_errors
    }),
    (
        "intervals_disregarded",
        "Measurement intervals that kept the previous load because the shim was stalled.",
        |s| s.intervals_disregarded,
    ),
];

impl Collector for Scrape {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let links = &self.links[..];
        for (name, help, get) in COUNTERS {
            family(&mut encoder, (name, MetricType::Counter, help), links, get)?;
        }
        drops_passed_and_marks(&mut encoder, links)?;
        queue_and_load(&mut encoder, links)?;
        if let Some(c) = &self.sessions {
            sessions(&mut encoder, c)?;
        }
        Ok(())
    }
}

/// The Prometheus text (format 0.0.4) of a set of link snapshots and the
/// relay's session counters.
fn prometheus_text(links: Vec<LinkSnapshot>, sessions: Option<SessionCounters>) -> String {
    let mut registry = Registry::with_prefix("ecnq_shim");
    registry.register_collector(Box::new(Scrape { links, sessions }));
    let mut text = String::new();
    // Writing into a String cannot fail, nor can the collector.
    let _ = prometheus_text::encode(&mut text, &registry);
    text
}

/// Drops by cause, packets passed unmarked by reason, and marks by scheme
/// and codepoint.
fn drops_passed_and_marks(encoder: &mut DescriptorEncoder, links: &[LinkSnapshot]) -> fmt::Result {
    let drops = ("drops", MetricType::Counter, "Packets dropped, by cause.");
    labelled(encoder, drops, links, |s| {
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
    })?;
    let passed = (
        "passed",
        MetricType::Counter,
        "Packets forwarded unmarked, by reason.",
    );
    labelled(encoder, passed, links, |s| {
        let p = &s.counters.passed;
        by(
            "reason",
            [
                ("fragment", p.fragment),
                ("not_udp", p.not_udp),
                ("malformed", p.malformed),
            ],
        )
    })?;
    let marks = (
        "marks",
        MetricType::Counter,
        "Packets by the scheme that marked them and the ECN codepoint they left with.",
    );
    labelled(encoder, marks, links, |s| {
        let mut values = Vec::new();
        for (wire, row) in s.marks.iter() {
            for (ecn, n) in ["00", "01", "10", "11"].iter().zip(row) {
                let labels = vec![("scheme", wire.name().to_owned()), ("ecn", ecn.to_string())];
                values.push((labels, *n));
            }
        }
        values
    })
}

/// Queue, flows, utilization and load-factor gauges.
fn queue_and_load(encoder: &mut DescriptorEncoder, links: &[LinkSnapshot]) -> fmt::Result {
    let gauges: [Plain<u64>; 3] = [
        ("queue_bytes", "Bytes waiting for serialization.", |s| {
            s.queue_bytes
        }),
        ("queue_packets", "Packets waiting for serialization.", |s| {
            s.queue_packets as u64
        }),
        (
            "policed_flows",
            "Flows of the ecnq queue held to their fair share for sending over it.",
            |s| s.policed_flows as u64,
        ),
    ];
    for (name, help, get) in gauges {
        family(encoder, (name, MetricType::Gauge, help), links, get)?;
    }
    let active = (
        "active_flows",
        MetricType::Gauge,
        "Flows active in the last interval, by queue.",
    );
    labelled(encoder, active, links, |s| {
        by(
            "queue",
            Class::ALL.map(|class| (class.name(), s.active_flows[class as usize] as u64)),
        )
    })?;
    let utilization = (
        "utilization",
        MetricType::Gauge,
        "Departures over capacity in the last interval.",
    );
    family(encoder, utilization, links, |s| {
        s.interval.map_or(0.0, |iv| iv.utilization(s.capacity))
    })?;
    let load = (
        "load_factor",
        MetricType::Gauge,
        "Load factor of the last interval, by formula.",
    );
    labelled(encoder, load, links, |s| {
        by(
            "formula",
            s.load
                .iter()
                .map(|(formula, load)| (formula.name, load.get())),
        )
    })
}

/// The relay's session counters.
fn sessions(encoder: &mut DescriptorEncoder, c: &SessionCounters) -> fmt::Result {
    use MetricType::{Counter, Gauge};
    for (name, kind, help, value) in [
        ("sessions_active", Gauge, "Relay sessions open.", c.active),
        (
            "sessions_opened",
            Counter,
            "Relay sessions opened.",
            c.opened,
        ),
        (
            "sessions_evicted",
            Counter,
            "Idlest sessions closed to make room for a new one.",
            c.evicted,
        ),
        (
            "sessions_expired",
            Counter,
            "Sessions closed after the idle time.",
            c.expired,
        ),
    ] {
        let mut family = encoder.encode_descriptor(name, help, None, kind)?;
        sample(&mut family, kind, &Vec::new(), value)?;
    }
    let refused = "New sessions refused, by cause.";
    let mut family = encoder.encode_descriptor("sessions_refused", refused, None, Counter)?;
    for (cause, n) in [("source", c.refused_source), ("sockets", c.refused_sockets)] {
        sample(&mut family, Counter, &vec![("cause", cause.to_owned())], n)?;
    }
    Ok(())
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
        use std::io::{Read, Write};
        let board = Arc::new(SnapshotBoard::default());
        board.publish(snapshot("up", 42));
        let addr = board.serve("127.0.0.1:0".parse().unwrap()).unwrap();
        // A scraper that connects and stalls holds up no other.
        let mut stalled = std::net::TcpStream::connect(addr).unwrap();
        let started = std::time::Instant::now();
        let mut conn = std::net::TcpStream::connect(addr).unwrap();
        conn.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut response = String::new();
        conn.read_to_string(&mut response).unwrap();
        assert!(response.starts_with("HTTP/1.1 200 OK"), "{response}");
        let head = response.to_ascii_lowercase();
        assert!(head.contains("content-type: text/plain; version=0.0.4"));
        assert!(response.contains("ecnq_shim_arrivals_total{dir=\"up\"} 42"));
        assert!(
            started.elapsed() < SCRAPE_TIMEOUT,
            "{:?}",
            started.elapsed()
        );
        // The stalled scraper is let go after its time.
        stalled.set_read_timeout(Some(SCRAPE_TIMEOUT * 3)).unwrap();
        // Closed or reset: the read ends well before its own timeout.
        let closed = stalled.read_to_end(&mut Vec::new());
        assert!(
            started.elapsed() < SCRAPE_TIMEOUT * 2,
            "{closed:?} after {:?}",
            started.elapsed()
        );
    }
}
