//! A server's connections by congestion controller and mode, in Prometheus
//! text format (`ecnq-perf -s --metrics ADDR`, `h3-server --metrics ADDR`):
//! how many of a server's clients get router feedback, and why the rest
//! fall back.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use ecnq::quic::{CongestionStats, Connection, StatsHandle};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{prometheus_text, DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

/// The labels of a connection's series: its controller's name and its mode
/// (`EcnqAckCounts`, as the qlog's `ecnq:mode_updated` names it).
type Labels = (&'static str, String);

fn labels(stats: &CongestionStats) -> Labels {
    (stats.controller.name(), format!("{:?}", stats.mode))
}

/// The live connections of a server, and the modes its ended ones ended in.
#[derive(Debug, Default)]
pub struct ConnectionBoard {
    next: AtomicU64,
    state: Mutex<BoardState>,
}

#[derive(Debug, Default)]
struct BoardState {
    live: HashMap<u64, StatsHandle>,
    /// Ended connections by the labels they ended with.
    closed: BTreeMap<Labels, u64>,
    /// Every label pair a connection has had at a scrape or at its end, so
    /// that a gauge that falls to zero reads 0 rather than vanishing.
    seen: BTreeSet<Labels>,
}

impl ConnectionBoard {
    fn state(&self) -> MutexGuard<'_, BoardState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Lists `connection` until the returned guard is dropped; then its
    /// mode at that moment is counted in `ecnq_connections_closed_total`.
    pub fn track(self: &Arc<Self>, connection: &Connection) -> Tracked {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        self.state().live.insert(id, connection.stats_handle());
        Tracked {
            board: self.clone(),
            id,
        }
    }

    /// The board in Prometheus text exposition format.
    pub fn prometheus(&self) -> String {
        let mut state = self.state();
        let mut live = BTreeMap::<Labels, u64>::new();
        for handle in state.live.values() {
            *live.entry(labels(&handle.congestion_stats())).or_default() += 1;
        }
        for key in live.keys() {
            state.seen.insert(key.clone());
        }
        let open = (state.seen.iter())
            .map(|k| (k.clone(), live.get(k).copied().unwrap_or(0)))
            .collect();
        let closed = state.closed.clone().into_iter().collect();
        let mut registry = Registry::default();
        registry.register_collector(Box::new(Scrape { open, closed }));
        let mut text = String::new();
        // Writing into a String cannot fail, nor can the collector.
        let _ = prometheus_text::encode(&mut text, &registry);
        text
    }

    /// Serves [`ConnectionBoard::prometheus`] over HTTP on `addr` from a
    /// background thread; returns the bound address.
    pub fn serve(self: &Arc<Self>, addr: SocketAddr) -> io::Result<SocketAddr> {
        let board = self.clone();
        ecnq_shim::observe::serve_text(addr, move || board.prometheus())
    }
}

/// For a server's `--metrics ADDR`: a board served on `addr` (the bound
/// address printed), or none without the flag.
pub fn serve_if_asked(addr: Option<SocketAddr>) -> Result<Option<Arc<ConnectionBoard>>, String> {
    let Some(addr) = addr else {
        return Ok(None);
    };
    let board = Arc::new(ConnectionBoard::default());
    let bound = board
        .serve(addr)
        .map_err(|e| format!("cannot serve metrics on {addr}: {e}"))?;
    println!("Prometheus metrics on http://{bound}/metrics");
    Ok(Some(board))
}

/// What a scrape shows: the open connections' and the ended ones' counts
/// by their labels, encoded by the Prometheus client library.
#[derive(Debug)]
struct Scrape {
    open: Vec<(Labels, u64)>,
    closed: Vec<(Labels, u64)>,
}

impl Collector for Scrape {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let families = [
            (
                "ecnq_connections",
                MetricType::Gauge,
                "Open connections by the congestion controller of the server's \
                 sending direction and the mode it runs in now.",
                &self.open,
            ),
            (
                "ecnq_connections_closed",
                MetricType::Counter,
                "Ended connections by the congestion controller of the server's \
                 sending direction and the mode it ran in at the end.",
                &self.closed,
            ),
        ];
        for (name, kind, help, samples) in families {
            let mut family = encoder.encode_descriptor(name, help, None, kind)?;
            for ((cc, mode), value) in samples {
                let labels = [("cc", *cc), ("mode", mode.as_str())];
                let sample = family.encode_family(&labels)?;
                match kind {
                    MetricType::Counter => ConstCounter::new(*value).encode(sample)?,
                    _ => ConstGauge::new(*value).encode(sample)?,
                }
            }
        }
        Ok(())
    }
}

/// A connection listed on a [`ConnectionBoard`] ([`ConnectionBoard::track`]).
#[derive(Debug)]
pub struct Tracked {
    board: Arc<ConnectionBoard>,
    id: u64,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        let mut state = self.board.state();
        if let Some(handle) = state.live.remove(&self.id) {
            let key = labels(&handle.congestion_stats());
            state.seen.insert(key.clone());
            *state.closed.entry(key).or_default() += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ecnq::quic::{CongestionControl, Endpoint, Options, SelfSigned};

    /// Asserts the value of `family`'s sample for `series` in `text`
    /// (`None`: no such sample).
    fn assert_sample(text: &str, family: &str, series: &str, value: Option<u64>) {
        let prefix = format!("{family}{series}");
        let found = (text.lines()).find_map(|l| l.strip_prefix(&prefix)?.trim().parse().ok());
        assert_eq!(found, value, "{prefix} in\n{text}");
    }

    #[tokio::test]
    async fn a_connection_is_counted_live_then_closed_in_its_mode() {
        let cert = SelfSigned::new(&["localhost"]).unwrap();
        let options = || Options::new(CongestionControl::Cubic).alpn(&[b"test"]);
        let any = "127.0.0.1:0".parse().unwrap();
        let server = Endpoint::server(any, cert.identity(), options()).unwrap();
        let addr = server.local_addr().unwrap();
        let client = Endpoint::client(any, cert.roots(), options()).unwrap();
        let board = Arc::new(ConnectionBoard::default());
        let (accepted, connected) =
            tokio::join!(async { server.accept().await.unwrap().unwrap() }, async {
                client.connect(addr, "localhost").await.unwrap()
            },);
        let tracked = board.track(&accepted);
        let series = "{cc=\"cubic\",mode=\"Unassisted\"}";
        let open = board.prometheus();
        assert_sample(&open, "ecnq_connections", series, Some(1));
        assert_sample(&open, "ecnq_connections_closed_total", series, None);
        drop(tracked);
        let ended = board.prometheus();
        assert_sample(&ended, "ecnq_connections", series, Some(0));
        assert_sample(&ended, "ecnq_connections_closed_total", series, Some(1));
        drop(connected);
    }
}
