//! `ecnq-perf -c HOST`: runs one test over `-P` connections, sampling each
//! connection's throughput and congestion control every interval.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use ecnq::quic::{CongestionControl, CongestionStats, Connection, Endpoint, Options};
use rustls::RootCertStore;
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::proto::{self, TestRequest, TestResult, ALPN, MAX_CONTROL};
use super::pump::{self, Limit, Pause};
use super::report::{rate, EcnCounts, StreamInterval, Sum};

/// How long a client waits for the server to answer its handshake.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// One client test.
#[derive(Clone, Debug)]
pub struct ClientConfig {
    /// The server.
    pub server: SocketAddr,
    /// The name the server's certificate must carry.
    pub server_name: String,
    /// Trusted roots.
    pub roots: RootCertStore,
    /// This side's congestion control (it matters when this side sends).
    pub cc: CongestionControl,
    /// What to ask the server for.
    pub request: TestRequest,
    /// Reporting interval (`-i`).
    pub interval: Duration,
    /// Where to write qlog files, if anywhere.
    pub qlog: Option<PathBuf>,
    /// When this side, sending, writes nothing (`--pause`).
    pub pause: Option<Pause>,
    /// Most bytes this side holds written but not yet acknowledged (quinn's
    /// send window, `--send-window`; default 10 MB, seconds of data on a
    /// slow path). Small, a pause stops the flow on the wire soon after
    /// the writes.
    pub send_window: Option<u64>,
    /// Ask the receiver to acknowledge only every this many packets, with
    /// QUIC's ack-frequency extension (quinn's `AckFrequencyConfig`; every
    /// quinn receiver supports it). `None`: the receiver's own rule.
    pub ack_every: Option<u32>,
}

/// One connection's whole test.
#[derive(Clone, Debug)]
pub struct StreamRun {
    /// Stream number (1-based).
    pub socket: u32,
    /// Local address.
    pub local: SocketAddr,
    /// Every interval, in order.
    pub intervals: Vec<StreamInterval>,
    /// This side's bytes and seconds.
    pub local_total: Sum,
    /// What the server said it sent or received.
    pub peer_result: TestResult,
    /// Congestion control at the end.
    pub stats: CongestionStats,
}

/// Why no connection came about.
enum NotConnected {
    /// The server did not answer the handshake in time.
    NoAnswer,
    /// Anything else, said in words.
    Failed(String),
}

/// What asks a receiver to acknowledge every `every` ack-eliciting
/// packets: it may receive `every - 1` without acknowledging them
/// (draft-ietf-quic-ack-frequency's Ack-Eliciting Threshold), and waits at
/// most its own `max_ack_delay`.
fn ack_frequency(every: u32) -> quinn::AckFrequencyConfig {
    let mut config = quinn::AckFrequencyConfig::default();
    config.ack_eliciting_threshold(every.saturating_sub(1).into());
    config
}

/// A client endpoint and its connection to the server, or why not, waiting
/// at most `timeout` for the handshake.
async fn connect(
    config: &ClientConfig,
    timeout: Duration,
) -> Result<(Endpoint, Connection), NotConnected> {
    let mut options = Options::new(config.cc).alpn(&[ALPN]);
    if let Some(dir) = &config.qlog {
        options = options.qlog_dir(dir.clone());
    }
    let (send_window, ack_every) = (config.send_window, config.ack_every);
    if send_window.is_some() || ack_every.is_some() {
        options = options.transport(move |transport| {
            if let Some(window) = send_window {
                transport.send_window(window);
            }
            if let Some(every) = ack_every {
                transport.ack_frequency_config(Some(ack_frequency(every)));
            }
        });
    }
    let bind: SocketAddr = if config.server.is_ipv4() {
        "0.0.0.0:0"
    } else {
        "[::]:0"
    }
    .parse()
    .expect("literal address");
    let endpoint = Endpoint::client(bind, config.roots.clone(), options)
        .map_err(|e| NotConnected::Failed(format!("cannot open a client socket: {e}")))?;
    match tokio::time::timeout(
        timeout,
        endpoint.connect(config.server, &config.server_name),
    )
    .await
    {
        Ok(Ok(c)) => Ok((endpoint, c)),
        Ok(Err(e)) => Err(NotConnected::Failed(format!(
            "cannot connect to {}: {e}",
            config.server
        ))),
        Err(_) => Err(NotConnected::NoAnswer),
    }
}

/// Runs stream `socket` of a test whose clock started at `start`, sending
/// each interval to `intervals` as it completes.
pub async fn run_stream(
    config: &ClientConfig,
    socket: u32,
    start: Instant,
    intervals: mpsc::UnboundedSender<StreamInterval>,
) -> Result<StreamRun, String> {
    match connect(config, CONNECT_TIMEOUT).await {
        Ok((endpoint, connection)) => {
            run_test(config, socket, start, intervals, endpoint, connection).await
        }
        Err(NotConnected::Failed(e)) => Err(e),
        Err(NotConnected::NoAnswer) => Err(format!(
            "cannot reach {}: no answer within {} s (is `ecnq-perf -s` running there?)",
            config.server,
            CONNECT_TIMEOUT.as_secs()
        )),
    }
}

/// Runs a flow of a scheduled run (the demo, the testbeds) that starts now
/// and is scheduled to end at `end`. A flow joining a bottleneck that others
/// flood (quinn's BBR lost half its packets there) can lose handshake after
/// handshake: it keeps trying, with a fresh connection every
/// [`CONNECT_TIMEOUT`], until `end`, then sends for the time left. None if it
/// never got in. Interval times count from now, like its schedule's.
pub async fn run_scheduled(
    config: &ClientConfig,
    socket: u32,
    end: Instant,
) -> Result<Option<StreamRun>, String> {
    let scheduled = Instant::now();
    let (endpoint, connection) = loop {
        let left = end.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(None);
        }
        match connect(config, left.min(CONNECT_TIMEOUT)).await {
            Ok(connected) => break connected,
            Err(NotConnected::NoAnswer) => continue,
            Err(NotConnected::Failed(e)) => return Err(e),
        }
    };
    let joined = Instant::now();
    let mut config = config.clone();
    if config.request.bytes == 0 {
        config.request.seconds = end.saturating_duration_since(joined).as_secs_f64();
    }
    let (tx, _rx) = mpsc::unbounded_channel();
    let mut run = run_test(&config, socket, joined, tx, endpoint, connection).await?;
    let late = (joined - scheduled).as_secs_f64();
    for interval in &mut run.intervals {
        interval.start += late;
        interval.end += late;
    }
    Ok(Some(run))
}

/// The test over a fresh `connection` of `endpoint`.
async fn run_test(
    config: &ClientConfig,
    socket: u32,
    start: Instant,
    intervals: mpsc::UnboundedSender<StreamInterval>,
    endpoint: Endpoint,
    connection: Connection,
) -> Result<StreamRun, String> {
    let local = endpoint.local_addr().map_err(|e| e.to_string())?;
    let (mut control_send, mut control_recv) = connection
        .open_bi()
        .await
        .map_err(|e| format!("cannot open the control stream: {e}"))?;
    control_send
        .write_all(&proto::encode(&config.request))
        .await
        .map_err(|e| format!("cannot send the request: {e}"))?;
    control_send
        .finish()
        .map_err(|e| format!("cannot send the request: {e}"))?;

    let connection = Arc::new(connection);
    let counter = Arc::new(AtomicU64::new(0));
    let sampler = Sampler::new(
        connection.clone(),
        socket,
        !config.request.reverse,
        counter.clone(),
        start,
    );
    let (stop, stopped) = tokio::sync::oneshot::channel();
    let sampling = tokio::spawn(sampler.run(config.interval, intervals, stopped));
    let outcome = move_data(config, &connection, &counter).await;
    let result = match &outcome {
        Ok(_) => control_recv
            .read_to_end(MAX_CONTROL)
            .await
            .map_err(|e| format!("no result from the server: {e}")),
        Err(e) => Err(e.clone()),
    };
    let _ = stop.send(());
    let recorded = sampling.await.unwrap_or_default();
    let stats = connection.congestion_stats();
    connection.close(0u32.into(), b"done");
    endpoint.close(0u32.into(), b"done");
    let (bytes, seconds) = outcome?;
    let peer_result: TestResult = proto::decode(&result?)?;
    Ok(StreamRun {
        socket,
        local,
        intervals: recorded,
        local_total: Sum {
            start: 0.0,
            end: seconds,
            seconds,
            bytes,
            bits_per_second: rate(bytes, seconds),
            retransmits: connection.quinn().stats().path.lost_packets,
            sender: !config.request.reverse,
        },
        peer_result,
        stats,
    })
}

/// The test's data stream: receives all the server sends (`--reverse`)
/// or sends until the request's limit, counting bytes in `counter`;
/// returns the bytes and seconds.
async fn move_data(
    config: &ClientConfig,
    connection: &Connection,
    counter: &AtomicU64,
) -> Result<(u64, f64), String> {
    if config.request.reverse {
        let mut recv = connection
            .accept_uni()
            .await
            .map_err(|e| format!("no data stream from the server: {e}"))?;
        pump::receive_all(&mut recv, counter).await
    } else {
        let mut send = connection
            .open_uni()
            .await
            .map_err(|e| format!("cannot open the data stream: {e}"))?;
        pump::send_until(&mut send, Limit::of(&config.request), config.pause, counter).await
    }
}

/// Samples one connection every interval.
struct Sampler {
    connection: Arc<Connection>,
    socket: u32,
    sender: bool,
    counter: Arc<AtomicU64>,
    start: Instant,
}

impl Sampler {
    fn new(
        connection: Arc<Connection>,
        socket: u32,
        sender: bool,
        counter: Arc<AtomicU64>,
        start: Instant,
    ) -> Sampler {
        Sampler {
            connection,
            socket,
            sender,
            counter,
            start,
        }
    }

    /// Emits an interval record every `period`, and a last partial one when
    /// told to stop; returns them all.
    async fn run(
        self,
        period: Duration,
        out: mpsc::UnboundedSender<StreamInterval>,
        mut stop: tokio::sync::oneshot::Receiver<()>,
    ) -> Vec<StreamInterval> {
        let mut recorded = Vec::new();
        let mut ticker = tokio::time::interval_at(self.start + period, period);
        let (mut last_t, mut last_bytes, mut last_lost, mut last_ecn, mut last_wire) =
            (0.0, 0u64, 0u64, [0u64; 4], 0u64);
        loop {
            let last = tokio::select! {
                _ = ticker.tick() => false,
                _ = &mut stop => true,
            };
            let t = self.start.elapsed().as_secs_f64();
            let bytes = self.counter.load(Ordering::Relaxed);
            let stats = self.connection.congestion_stats();
            let quinn_stats = self.connection.quinn().stats();
            let (lost, wire) = (quinn_stats.path.lost_packets, quinn_stats.udp_tx.bytes);
            // The sender learns marks from the receiver's reports; the receiver counts its own.
            let ecn = if self.sender {
                stats.peer_ecn_counts.unwrap_or_default()
            } else {
                stats.ecn_received
            };
            let delta = |i: usize| ecn[i].saturating_sub(last_ecn[i]);
            // A load read while no router feedback is in use (no ecnq
            // router, reports stopped) decodes the fallback's own ECT(0):
            // shown as `-`, not as a load no router wrote.
            let load = if self.sender {
                stats.path_load
            } else {
                stats.local_estimate
            }
            .filter(|_| stats.uses_feedback());
            let record = StreamInterval {
                socket: self.socket,
                start: last_t,
                end: t,
                seconds: t - last_t,
                bytes: bytes - last_bytes,
                bits_per_second: rate(bytes - last_bytes, t - last_t),
                retransmits: lost.saturating_sub(last_lost),
                wire_bytes: wire.saturating_sub(last_wire),
                snd_cwnd: stats.window,
                rtt: stats.srtt.as_micros() as u64,
                sender: self.sender,
                mode: mode_name(&stats),
                load_factor: load.map(|f| f.load.get()),
                ecn: EcnCounts {
                    not_ect: delta(0),
                    ect1: delta(1),
                    ect0: delta(2),
                    ce: delta(3),
                },
            };
            (last_t, last_bytes, last_lost, last_ecn, last_wire) = (t, bytes, lost, ecn, wire);
            // A final sliver shorter than a tenth of the interval is not worth a line.
            if last && record.seconds < period.as_secs_f64() / 10.0 {
                return recorded;
            }
            recorded.push(record.clone());
            if out.send(record).is_err() || last {
                return recorded;
            }
        }
    }
}

/// The mode to show: the law's mode while feedback is in use, else why not.
pub fn mode_name(stats: &CongestionStats) -> String {
    match (stats.uses_feedback(), stats.law_mode) {
        (true, Some(mode)) => mode.name().to_owned(),
        _ => format!("{:?}", stats.mode).to_lowercase(),
    }
}

/// Runs a test over `parallel` connections at once. Every interval record
/// goes to `on_interval` as it completes; the streams' results come back in
/// stream order, or the first error.
pub async fn run_parallel(
    config: &ClientConfig,
    parallel: u32,
    mut on_interval: impl FnMut(StreamInterval),
) -> Result<Vec<StreamRun>, String> {
    let start = Instant::now();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut tasks = Vec::new();
    for socket in 1..=parallel.max(1) {
        let (config, tx) = (config.clone(), tx.clone());
        tasks.push(tokio::spawn(async move {
            run_stream(&config, socket, start, tx).await
        }));
    }
    drop(tx);
    while let Some(record) = rx.recv().await {
        on_interval(record);
    }
    let mut runs = Vec::new();
    for task in tasks {
        runs.push(
            task.await
                .map_err(|e| format!("a stream task failed: {e}"))??,
        );
    }
    Ok(runs)
}
