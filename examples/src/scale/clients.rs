//! The clients of a run: one endpoint and connection each, started in
//! batches, moving through the phases together.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ecnq::quic::Endpoint;
use rustls::RootCertStore;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::config::{ScaleConfig, Stack};
use super::download::download;
use super::endpoints::{ecnq_options, localhost, vanilla_client_config, Conn, Packets, KEEP_ALIVE};
use super::process::{resident_bytes, Probe, POLL};

/// A handshake that takes longer failed.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(20);
/// A download that takes longer failed.
const TRANSFER_TIMEOUT: Duration = Duration::from_secs(120);

/// How much longer than a client's own timeout the controller waits for it.
const SETTLE_MARGIN: Duration = Duration::from_secs(5);

/// How often a long phase prints its progress.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);

/// The phases every client goes through together.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Phase {
    Connect,
    Transfer,
    Close,
}

/// What the controller counts while clients run.
#[derive(Debug, Default)]
pub(super) struct Counters {
    pub(super) connected: AtomicUsize,
    pub(super) refused: AtomicUsize,
    completed: AtomicUsize,
    failed: AtomicUsize,
}

impl Counters {
    pub(super) fn get(counter: &AtomicUsize) -> usize {
        counter.load(Ordering::Relaxed)
    }

    fn add(counter: &AtomicUsize) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn handshakes_settled(&self) -> usize {
        Self::get(&self.connected) + Self::get(&self.refused)
    }

    fn downloads_settled(&self) -> usize {
        Self::get(&self.completed) + Self::get(&self.failed)
    }
}

/// What every client task shares.
pub(super) struct Clients {
    pub(super) stack: Stack,
    /// Where clients send: the relay.
    pub(super) entry: SocketAddr,
    pub(super) roots: RootCertStore,
    pub(super) bytes: u64,
    pub(super) phase: watch::Receiver<Phase>,
    pub(super) counters: Counters,
}

/// How one client fared.
pub(super) struct ClientOutcome {
    result: Result<(), String>,
    packets: Packets,
}

/// A client endpoint of either stack, kept until its connection closed.
enum ClientEndpoint {
    Ecnq(Endpoint),
    Vanilla(quinn::Endpoint),
}

impl Clients {
    async fn connect(&self) -> Result<(ClientEndpoint, Conn), String> {
        match self.stack {
            Stack::Ecnq => {
                let options = ecnq_options().transport(|t| {
                    t.keep_alive_interval(Some(KEEP_ALIVE));
                });
                let endpoint = Endpoint::client(localhost(), self.roots.clone(), options)
                    .map_err(|e| e.to_string())?;
                let conn = endpoint
                    .connect(self.entry, "localhost")
                    .await
                    .map_err(|e| e.to_string())?;
                Ok((ClientEndpoint::Ecnq(endpoint), Conn::Ecnq(conn)))
            }
            Stack::Vanilla => {
                let config = vanilla_client_config(self.roots.clone())?;
                let endpoint = quinn::Endpoint::client(localhost()).map_err(|e| e.to_string())?;
                let conn = endpoint
                    .connect_with(config, self.entry, "localhost")
                    .map_err(|e| e.to_string())?
                    .await
                    .map_err(|e| e.to_string())?;
                Ok((ClientEndpoint::Vanilla(endpoint), Conn::Vanilla(conn)))
            }
        }
    }

    /// One client: handshake, wait, download and check, wait, close.
    async fn run(self: Arc<Self>, conn_id: u32) -> ClientOutcome {
        let connected = tokio::time::timeout(HANDSHAKE_TIMEOUT, self.connect())
            .await
            .unwrap_or_else(|_| Err("handshake timed out".into()));
        let (endpoint, conn) = match connected {
            Ok(connected) => connected,
            Err(e) => {
                Counters::add(&self.counters.refused);
                return ClientOutcome {
                    result: Err(format!("handshake: {e}")),
                    packets: Packets::default(),
                };
            }
        };
        Counters::add(&self.counters.connected);
        let mut phase = self.phase.clone();
        let _ = phase.wait_for(|p| *p >= Phase::Transfer).await;
        let result = tokio::time::timeout(
            TRANSFER_TIMEOUT,
            download(conn.quinn(), conn_id, self.bytes),
        )
        .await
        .unwrap_or_else(|_| Err("download timed out".into()));
        Counters::add(if result.is_ok() {
            &self.counters.completed
        } else {
            &self.counters.failed
        });
        let _ = phase.wait_for(|p| *p >= Phase::Close).await;
        let packets = Packets::of(conn.quinn());
        conn.quinn().close(0u32.into(), b"done");
        let idle = async {
            match &endpoint {
                ClientEndpoint::Ecnq(e) => e.wait_idle().await,
                ClientEndpoint::Vanilla(e) => e.wait_idle().await,
            }
        };
        let _ = tokio::time::timeout(Duration::from_secs(2), idle).await;
        ClientOutcome { result, packets }
    }
}

/// Starts a client task per connection, `config.batch` at a time, each
/// batch once the previous one's handshakes settled.
pub(super) async fn start_clients(
    clients: &Arc<Clients>,
    config: &ScaleConfig,
    started: Instant,
    progress: &(dyn Fn(&str) + Sync),
) -> Vec<JoinHandle<ClientOutcome>> {
    let n = config.connections;
    let counters = &clients.counters;
    let mut tasks = Vec::with_capacity(n);
    for first in (0..n).step_by(config.batch) {
        let last = (first + config.batch).min(n);
        for id in first..last {
            tasks.push(tokio::spawn(clients.clone().run(id as u32)));
        }
        // Each handshake settles within its timeout; the deadline only
        // guards against a client task that died.
        let deadline = Instant::now() + HANDSHAKE_TIMEOUT + SETTLE_MARGIN;
        while counters.handshakes_settled() < last && Instant::now() < deadline {
            tokio::time::sleep(POLL).await;
        }
        progress(&format!(
            "handshakes {last}/{n} ({} failed), {:.1} s",
            Counters::get(&counters.refused),
            started.elapsed().as_secs_f64()
        ));
    }
    tasks
}

/// Waits until the `opened` connections' downloads, started at `go`,
/// settled (or timed out); returns the highest resident set seen.
pub(super) async fn await_downloads(
    counters: &Counters,
    opened: usize,
    go: Probe,
    progress: &(dyn Fn(&str) + Sync),
) -> Option<u64> {
    let mut peak = go.rss;
    let mut last_progress = Instant::now();
    let deadline = go.at + TRANSFER_TIMEOUT + SETTLE_MARGIN;
    while counters.downloads_settled() < opened && Instant::now() < deadline {
        tokio::time::sleep(POLL).await;
        peak = peak.max(resident_bytes());
        if last_progress.elapsed() >= PROGRESS_EVERY {
            last_progress = Instant::now();
            progress(&format!(
                "downloads {}/{opened} done, {:.1} s",
                counters.downloads_settled(),
                go.at.elapsed().as_secs_f64()
            ));
        }
    }
    peak
}

/// Waits for every client task to end: the downloads completed, the
/// failures, and the packets of both ends (`server_packets` plus the
/// clients').
pub(super) async fn join_clients(
    tasks: Vec<JoinHandle<ClientOutcome>>,
    server_packets: Packets,
) -> Result<(usize, Vec<String>, Packets), String> {
    let mut failures = Vec::new();
    let mut packets = server_packets;
    let mut completed = 0;
    for task in tasks {
        let outcome = task
            .await
            .map_err(|e| format!("a client task failed: {e}"))?;
        packets = packets.add(outcome.packets);
        match outcome.result {
            Ok(()) => completed += 1,
            Err(e) => failures.push(e),
        }
    }
    Ok((completed, failures, packets))
}
