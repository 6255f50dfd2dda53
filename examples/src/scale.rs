//! The scale bench (issue 21): many concurrent QUIC connections through one
//! server endpoint and one in-process relay-mode shim on loopback. Each
//! client has its own endpoint (its own UDP port, so its own relay session
//! and its own flow at the shim) and downloads a pattern that it checks
//! byte by byte. Vanilla quinn (Cubic) and ecnq (the default scheme) run
//! twice each, in the order quinn, ecnq, ecnq, quinn, so that ecnq's own
//! cost is the difference of figures measured on the same machine in the
//! same minutes.
//!
//! Memory is the process's resident set (`/proc/self/statm`) after glibc
//! has given freed memory back (`malloc_trim`): quinn's and ecnq's state
//! share one heap, and no API tells them apart, so the vanilla runs are the
//! baseline. CPU is the process's user + system time (`getrusage`). The
//! shim's memory per session is measured apart, with plain UDP clients.
//!
//! `cargo bench -p ecnq-examples --bench scale` runs it, each run in a
//! fresh process; the test `examples/tests/scale.rs` runs the same code in
//! one process with 20 connections.

use std::fmt::{self, Write as _};
use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use ecnq::quic::{CongestionControl, Endpoint, Options, SelfSigned};
use ecnq::router::bottleneck::Discipline;
use ecnq::units::Size;
use ecnq_shim::io::relay::{raise_fd_limit, Relay, RelayConfig, RelayReport, FD_RESERVE};
use ecnq_shim::io::sessions::SessionLimits;
use ecnq_shim::link::spec::LinkSpec;
use ecnq_shim::link::{router_config, Direction, LinkCounters};
use ecnq_shim::observe::Observers;
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use rustls::RootCertStore;
use serde::{Deserialize, Serialize};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

use crate::perf::output::bytes as human_bytes;

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
  -b, --bytes SIZE      bytes each connection downloads, 1 to 16mb
                        (default 128kb; units b, kb, mb)
      --batch N         handshakes started at once, 1 to 10000 (default 100)
      --link SPEC       the shim's link, both directions, in netem words
                        (default \"rate 1gbit delay 1ms\")
      --no-baseline     skip the vanilla quinn runs
      --only STACK      run one stack (quinn or ecnq) in this process and
                        print its figures as one JSON line; the bench runs
                        each stack this way, in a fresh process
  -h, --help            this text";

/// Most connections a run may open (two descriptors each).
pub const MAX_CONNECTIONS: usize = 10_000;
/// Most bytes one connection may download.
pub const MAX_BYTES: u64 = 16 << 20;
/// The application protocol both ends agree on.
const ALPN: &[u8] = b"ecnq-scale";
/// A handshake that takes longer failed.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(20);
/// A download that takes longer failed.
const TRANSFER_TIMEOUT: Duration = Duration::from_secs(120);
/// Longest wait for a run's connections to drain.
pub const DRAIN_LIMIT: Duration = Duration::from_secs(30);
/// How much longer than a client's own timeout the controller waits for it.
const SETTLE_MARGIN: Duration = Duration::from_secs(5);
/// Clients keep their connections alive while the others are still
/// handshaking (quinn's idle timeout is 30 s).
const KEEP_ALIVE: Duration = Duration::from_secs(5);
/// Concurrent `accept` calls on the ecnq server: its `accept` returns
/// after the handshake, so one caller would take handshakes one by one.
const ACCEPTORS: usize = 64;
/// The server writes the pattern in pieces this large.
const CHUNK: usize = 16 << 10;
/// How often the controller looks at the counters and the memory.
const POLL: Duration = Duration::from_millis(20);
/// How often a long phase prints its progress.
const PROGRESS_EVERY: Duration = Duration::from_secs(1);
/// A request: connection number (u32) and bytes wanted (u64), big-endian.
const REQUEST_LEN: usize = 12;

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
                        format!("{flag} must be a size from 1 byte to 16mb, got `{text}`")
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

/// The pattern's 8-byte word number `word` of connection `conn`: a hash of
/// both (splitmix64), so a byte at the wrong offset or on the wrong
/// connection shows.
fn pattern_word(conn: u32, word: u64) -> u64 {
    let mut z = (word ^ (u64::from(conn) << 40)).wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Fills `buf` with connection `conn`'s pattern from byte `offset` on.
pub fn fill(conn: u32, offset: u64, buf: &mut [u8]) {
    let mut offset = offset;
    let mut rest = buf;
    while !rest.is_empty() {
        let word = pattern_word(conn, offset / 8).to_le_bytes();
        let skip = (offset % 8) as usize;
        let n = (8 - skip).min(rest.len());
        rest[..n].copy_from_slice(&word[skip..skip + n]);
        rest = &mut rest[n..];
        offset += n as u64;
    }
}

/// Checks a download, in order, against its connection's pattern.
#[derive(Debug)]
pub struct Checker {
    conn: u32,
    received: u64,
    expected: Vec<u8>,
}

impl Checker {
    /// A checker for connection `conn`'s download.
    pub fn new(conn: u32) -> Checker {
        Checker {
            conn,
            received: 0,
            expected: Vec::new(),
        }
    }

    /// Checks the next piece; names the first wrong byte.
    pub fn check(&mut self, piece: &[u8]) -> Result<(), String> {
        self.expected.resize(piece.len(), 0);
        fill(self.conn, self.received, &mut self.expected);
        if let Some(i) = piece.iter().zip(&self.expected).position(|(a, b)| a != b) {
            return Err(format!("byte {} is wrong", self.received + i as u64));
        }
        self.received += piece.len() as u64;
        Ok(())
    }

    /// Bytes checked so far.
    pub fn received(&self) -> u64 {
        self.received
    }
}

fn encode_request(conn: u32, bytes: u64) -> [u8; REQUEST_LEN] {
    let mut request = [0; REQUEST_LEN];
    request[..4].copy_from_slice(&conn.to_be_bytes());
    request[4..].copy_from_slice(&bytes.to_be_bytes());
    request
}

fn decode_request(request: &[u8]) -> Option<(u32, u64)> {
    let conn = u32::from_be_bytes(request.get(..4)?.try_into().ok()?);
    let bytes = u64::from_be_bytes(request.get(4..REQUEST_LEN)?.try_into().ok()?);
    (request.len() == REQUEST_LEN && bytes <= MAX_BYTES).then_some((conn, bytes))
}

/// The process's memory and CPU time at one instant.
#[derive(Clone, Copy, Debug)]
struct Probe {
    /// Resident set, bytes; None without `/proc`.
    rss: Option<u64>,
    /// User + system CPU time.
    cpu: Option<Duration>,
    at: Instant,
}

impl Probe {
    /// Measures now, after handing freed heap memory back to the system
    /// (`trim`), so that the resident set counts what is held rather than
    /// what the allocator keeps for later.
    fn take(trim: bool) -> Probe {
        if trim {
            #[cfg(all(target_os = "linux", target_env = "gnu"))]
            // SAFETY: malloc_trim only releases free pages of the heap.
            unsafe {
                libc::malloc_trim(0);
            }
        }
        Probe {
            rss: resident_bytes(),
            cpu: cpu_time(),
            at: Instant::now(),
        }
    }
}

/// Fixes glibc's mmap threshold at its default (128 KiB). Left dynamic,
/// it rises when a large block is freed, and later large zeroed blocks
/// then come from the heap, written with zeros and resident at once, where
/// before they were fresh untouched pages: whichever run comes second would
/// look several times bigger per connection.
fn fix_mmap_threshold() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes an allocator setting.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 128 << 10);
    }
}

/// The resident set from `/proc/self/statm` (its second field, in pages).
fn resident_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    Some(pages * u64::try_from(page).ok()?)
}

/// Datagrams the kernel dropped for want of receive-buffer space, all
/// UDP sockets of the machine (`RcvbufErrors` in `/proc/net/snmp`).
fn udp_receive_buffer_drops() -> Option<u64> {
    let snmp = std::fs::read_to_string("/proc/net/snmp").ok()?;
    let mut udp = snmp.lines().filter(|l| l.starts_with("Udp:"));
    let (names, values) = (udp.next()?, udp.next()?);
    let column = names.split_whitespace().position(|n| n == "RcvbufErrors")?;
    values.split_whitespace().nth(column)?.parse().ok()
}

/// User + system CPU time of the whole process.
fn cpu_time() -> Option<Duration> {
    // SAFETY: getrusage fills a plain struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: a valid pointer to that struct.
    if unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut usage) } != 0 {
        return None;
    }
    let time = |t: libc::timeval| {
        Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
    };
    Some(time(usage.ru_utime) + time(usage.ru_stime))
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

/// A connection of either stack.
enum Conn {
    Ecnq(ecnq::quic::Connection),
    Vanilla(quinn::Connection),
}

impl Conn {
    fn quinn(&self) -> &quinn::Connection {
        match self {
            Conn::Ecnq(c) => c.quinn(),
            Conn::Vanilla(c) => c,
        }
    }

    /// Whether its sender runs on router feedback (never for vanilla).
    fn uses_feedback(&self) -> bool {
        matches!(self, Conn::Ecnq(c) if c.congestion_stats().uses_feedback())
    }
}

/// quinn's counters of one connection that the report sums.
#[derive(Clone, Copy, Debug, Default)]
struct Packets {
    sent: u64,
    lost: u64,
}

impl Packets {
    fn of(connection: &quinn::Connection) -> Packets {
        let path = connection.stats().path;
        Packets {
            sent: path.sent_packets,
            lost: path.lost_packets,
        }
    }

    fn add(self, other: Packets) -> Packets {
        Packets {
            sent: self.sent + other.sent,
            lost: self.lost + other.lost,
        }
    }
}

/// quinn's Cubic with the clients' keep-alive, for the vanilla run.
fn vanilla_transport() -> quinn::TransportConfig {
    let mut transport = quinn::TransportConfig::default();
    transport.congestion_controller_factory(Arc::new(quinn::congestion::CubicConfig::default()));
    transport.keep_alive_interval(Some(KEEP_ALIVE));
    transport
}

/// The ring provider, TLS 1.3 only, as ecnq's endpoints use.
fn tls_provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn vanilla_server_config(cert: &SelfSigned) -> Result<quinn::ServerConfig, String> {
    let identity = cert.identity();
    let mut tls = rustls::ServerConfig::builder_with_provider(tls_provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .and_then(|b| {
            b.with_no_client_auth()
                .with_single_cert(identity.chain, identity.key)
        })
        .map_err(|e| format!("server TLS: {e}"))?;
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let crypto = QuicServerConfig::try_from(tls).map_err(|e| format!("server TLS: {e}"))?;
    let mut config = quinn::ServerConfig::with_crypto(Arc::new(crypto));
    config.transport_config(Arc::new(vanilla_transport()));
    Ok(config)
}

/// A client configuration per client endpoint, as ecnq's `Endpoint::client`
/// builds one per endpoint, so the two runs hold the same.
fn vanilla_client_config(roots: RootCertStore) -> Result<quinn::ClientConfig, String> {
    let mut tls = rustls::ClientConfig::builder_with_provider(tls_provider())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| format!("client TLS: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![ALPN.to_vec()];
    let crypto = QuicClientConfig::try_from(tls).map_err(|e| format!("client TLS: {e}"))?;
    let mut config = quinn::ClientConfig::new(Arc::new(crypto));
    config.transport_config(Arc::new(vanilla_transport()));
    Ok(config)
}

fn ecnq_options() -> Options {
    Options::new(CongestionControl::DEFAULT).alpn(&[ALPN])
}

fn localhost() -> SocketAddr {
    SocketAddr::from(([127, 0, 0, 1], 0))
}

/// The one server endpoint of a run and the connections it accepted.
struct Server {
    endpoint: ServerEndpoint,
    addr: SocketAddr,
    connections: Arc<Mutex<Vec<Arc<Conn>>>>,
    /// Connections whose sender ran on router feedback at the end of its
    /// download (all data acknowledged).
    feedback_senders: Arc<AtomicUsize>,
    acceptors: Vec<JoinHandle<()>>,
}

enum ServerEndpoint {
    Ecnq(Arc<Endpoint>),
    Vanilla(quinn::Endpoint),
}

impl Server {
    fn start(stack: Stack, cert: &SelfSigned) -> Result<Server, String> {
        let connections = Arc::new(Mutex::new(Vec::new()));
        let feedback_senders = Arc::new(AtomicUsize::new(0));
        let serve = {
            let (connections, feedback_senders) = (connections.clone(), feedback_senders.clone());
            move |conn: Conn| {
                let conn = Arc::new(conn);
                lock(&connections).push(conn.clone());
                let feedback_senders = feedback_senders.clone();
                tokio::spawn(async move {
                    // A failed download shows at its client.
                    if serve_download(conn.quinn()).await.is_ok() && conn.uses_feedback() {
                        feedback_senders.fetch_add(1, Ordering::Relaxed);
                    }
                });
            }
        };
        let (endpoint, acceptors) = match stack {
            Stack::Ecnq => {
                let endpoint = Endpoint::server(localhost(), cert.identity(), ecnq_options())
                    .map_err(|e| format!("cannot start the ecnq server: {e}"))?;
                let endpoint = Arc::new(endpoint);
                let acceptors = (0..ACCEPTORS)
                    .map(|_| {
                        let (endpoint, serve) = (endpoint.clone(), serve.clone());
                        tokio::spawn(async move {
                            while let Some(accepted) = endpoint.accept().await {
                                if let Ok(conn) = accepted {
                                    serve(Conn::Ecnq(conn));
                                }
                            }
                        })
                    })
                    .collect();
                (ServerEndpoint::Ecnq(endpoint), acceptors)
            }
            Stack::Vanilla => {
                let endpoint = quinn::Endpoint::server(vanilla_server_config(cert)?, localhost())
                    .map_err(|e| format!("cannot start the quinn server: {e}"))?;
                let accepting = endpoint.clone();
                let acceptor = tokio::spawn(async move {
                    while let Some(incoming) = accepting.accept().await {
                        let serve = serve.clone();
                        tokio::spawn(async move {
                            if let Ok(conn) = incoming.await {
                                serve(Conn::Vanilla(conn));
                            }
                        });
                    }
                });
                (ServerEndpoint::Vanilla(endpoint), vec![acceptor])
            }
        };
        let addr = match &endpoint {
            ServerEndpoint::Ecnq(e) => e.local_addr(),
            ServerEndpoint::Vanilla(e) => e.local_addr(),
        }
        .map_err(|e| format!("server address: {e}"))?;
        Ok(Server {
            endpoint,
            addr,
            connections,
            feedback_senders,
            acceptors,
        })
    }

    /// Packets the server's connections sent and lost.
    fn packets(&self) -> Packets {
        lock(&self.connections)
            .iter()
            .map(|c| Packets::of(c.quinn()))
            .fold(Packets::default(), Packets::add)
    }

    async fn stop(self) {
        for acceptor in &self.acceptors {
            acceptor.abort();
        }
        let quinn = match &self.endpoint {
            ServerEndpoint::Ecnq(e) => e.quinn(),
            ServerEndpoint::Vanilla(e) => e,
        };
        quinn.close(0u32.into(), b"done");
        let _ = tokio::time::timeout(Duration::from_secs(2), quinn.wait_idle()).await;
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

/// Serves one download: reads the request, writes the pattern, waits
/// until the client acknowledged all of it.
async fn serve_download(connection: &quinn::Connection) -> Result<(), String> {
    let (mut send, mut recv) = connection.accept_bi().await.map_err(|e| e.to_string())?;
    let request = recv
        .read_to_end(REQUEST_LEN)
        .await
        .map_err(|e| e.to_string())?;
    let (conn, bytes) = decode_request(&request).ok_or("bad request")?;
    let mut chunk = vec![0; CHUNK];
    let mut offset = 0;
    while offset < bytes {
        let n = (bytes - offset).min(CHUNK as u64) as usize;
        fill(conn, offset, &mut chunk[..n]);
        send.write_all(&chunk[..n])
            .await
            .map_err(|e| e.to_string())?;
        offset += n as u64;
    }
    send.finish().map_err(|e| e.to_string())?;
    match send.stopped().await {
        Ok(None) => Ok(()),
        Ok(Some(code)) => Err(format!("stopped by the client ({code})")),
        Err(e) => Err(e.to_string()),
    }
}

/// Downloads `bytes` on a new stream, checking every byte.
async fn download(connection: &quinn::Connection, conn: u32, bytes: u64) -> Result<(), String> {
    let (mut send, mut recv) = connection.open_bi().await.map_err(|e| e.to_string())?;
    send.write_all(&encode_request(conn, bytes))
        .await
        .map_err(|e| e.to_string())?;
    send.finish().map_err(|e| e.to_string())?;
    let mut checker = Checker::new(conn);
    while let Some(chunk) = recv
        .read_chunk(usize::MAX, true)
        .await
        .map_err(|e| e.to_string())?
    {
        if checker.received() + chunk.bytes.len() as u64 > bytes {
            return Err(format!("more than the {bytes} bytes asked for"));
        }
        checker.check(&chunk.bytes)?;
    }
    match checker.received() {
        n if n == bytes => Ok(()),
        n => Err(format!("stream ended after {n} of {bytes} bytes")),
    }
}

/// The phases every client goes through together.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Phase {
    Connect,
    Transfer,
    Close,
}

/// What the controller counts while clients run.
#[derive(Debug, Default)]
struct Counters {
    connected: AtomicUsize,
    refused: AtomicUsize,
    completed: AtomicUsize,
    failed: AtomicUsize,
}

impl Counters {
    fn get(counter: &AtomicUsize) -> usize {
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
struct Clients {
    stack: Stack,
    /// Where clients send: the relay.
    entry: SocketAddr,
    roots: RootCertStore,
    bytes: u64,
    phase: watch::Receiver<Phase>,
    counters: Counters,
}

/// How one client fared.
struct ClientOutcome {
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

/// An in-process relay-mode shim, running until stopped.
struct ShimRun {
    entry: SocketAddr,
    stop: oneshot::Sender<()>,
    task: JoinHandle<io::Result<RelayReport>>,
}

impl ShimRun {
    /// A relay toward `target` with room for `sessions` clients, all from
    /// 127.0.0.1 (so the per-source limit is the whole table), and sessions
    /// that outlive any phase of the run.
    fn start(link: &LinkSpec, target: SocketAddr, sessions: usize) -> Result<ShimRun, String> {
        let direction = Direction {
            spec: *link,
            router: router_config(link),
            queue: Discipline::default(),
        };
        let config = RelayConfig {
            listen: localhost(),
            target,
            up: direction.clone(),
            down: direction,
            seed: 1,
            sessions: relay_limits(sessions),
        };
        let relay = Relay::bind(config, Observers::default())
            .map_err(|e| format!("cannot start the relay: {e}"))?;
        let entry = relay
            .local_addr()
            .map_err(|e| format!("relay address: {e}"))?;
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(relay.run(async {
            let _ = stopped.await;
        }));
        Ok(ShimRun { entry, stop, task })
    }

    async fn stop(self) -> Result<RelayReport, String> {
        let _ = self.stop.send(());
        self.task
            .await
            .map_err(|e| format!("the relay failed: {e}"))?
            .map_err(|e| format!("the relay failed: {e}"))
    }
}

/// The relay's session limits for a run of `sessions` clients.
fn relay_limits(sessions: usize) -> SessionLimits {
    SessionLimits {
        max: sessions,
        per_source: sessions,
        idle: Duration::from_secs(3600),
    }
}

/// Waits until the runtime runs no task, at most [`DRAIN_LIMIT`]; whether
/// it got there. The next run's base is taken only once the last run's
/// connections are gone: taken at once, it would count the connections of
/// the run before that are still draining.
async fn drain() -> bool {
    let metrics = tokio::runtime::Handle::current().metrics();
    let deadline = Instant::now() + DRAIN_LIMIT;
    while metrics.num_alive_tasks() > 0 {
        if Instant::now() > deadline {
            return false;
        }
        tokio::time::sleep(POLL).await;
    }
    true
}

/// Packets a link dropped, all causes (as the perf harness counts them).
fn drops(c: &LinkCounters) -> u64 {
    c.drops_overflow + c.drops_loss + c.drops_aqm + c.drops_policed + c.drops_blackhole
}

/// The figures of one stack's run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct StackReport {
    /// The stack, both ends.
    pub stack: Stack,
    /// Connections attempted.
    pub connections: usize,
    /// Connections whose handshake succeeded.
    pub opened: usize,
    /// Downloads that arrived whole, every byte checked.
    pub completed: usize,
    /// Connections that failed (handshake or download).
    pub failed: usize,
    /// The first failure, for the report.
    pub first_failure: Option<String>,
    /// Bytes checked, all connections.
    pub bytes_verified: u64,
    /// From the first handshake to the last one settled.
    pub handshake_time: Duration,
    /// From the start signal to the last download settled.
    pub transfer_time: Duration,
    /// Process CPU time over the transfer.
    pub transfer_cpu: Option<Duration>,
    /// Resident set with the server and the relay up, no client yet.
    pub rss_base: Option<u64>,
    /// With every connection open, before the transfer.
    pub rss_open: Option<u64>,
    /// Highest seen during the transfer (sampled, not trimmed).
    pub rss_peak: Option<u64>,
    /// With every connection open, after the transfer.
    pub rss_after: Option<u64>,
    /// From the close signal until the runtime ran no task of the run
    /// (every connection drained, every endpoint closed); None if some
    /// were still alive after [`DRAIN_LIMIT`].
    pub drained: Option<Duration>,
    /// Datagrams the kernel dropped on full receive buffers, from the
    /// base to the end of the transfer; counted for the whole machine.
    pub buffer_drops: Option<u64>,
    /// quinn's packets sent, both ends, all connections.
    pub packets_sent: u64,
    /// quinn's packets lost, both ends, all connections.
    pub packets_lost: u64,
    /// Packets that reached the shim, both directions.
    pub shim_arrivals: u64,
    /// Packets the shim dropped, both directions.
    pub shim_drops: u64,
    /// Sessions the relay opened.
    pub sessions_opened: u64,
    /// New sessions the relay refused.
    pub sessions_refused: u64,
    /// Sessions the relay closed to make room.
    pub sessions_evicted: u64,
    /// Server connections whose sender ran on router feedback.
    pub feedback_senders: usize,
}

impl StackReport {
    /// Resident bytes per open connection above the base.
    pub fn per_connection(&self, rss: Option<u64>) -> Option<f64> {
        let (rss, base) = (rss?, self.rss_base?);
        (self.opened > 0).then(|| (rss as f64 - base as f64) / self.opened as f64)
    }

    /// CPU seconds per Gbit of verified payload (also: cores per Gbit/s).
    pub fn cpu_per_gbit(&self) -> Option<f64> {
        let gbit = self.bytes_verified as f64 * 8.0 / 1e9;
        (gbit > 0.0).then_some(self.transfer_cpu?.as_secs_f64() / gbit)
    }

    /// Verified payload over the transfer time, bit/s.
    pub fn goodput(&self) -> f64 {
        self.bytes_verified as f64 * 8.0 / self.transfer_time.as_secs_f64().max(1e-9)
    }
}

/// The shim's own memory per session, measured apart from QUIC.
#[derive(Clone, Copy, Debug)]
pub struct ShimSessions {
    /// Sessions the relay opened.
    pub opened: u64,
    /// Sessions asked for.
    pub wanted: usize,
    /// Resident bytes per session.
    pub per_session: Option<f64>,
}

/// Everything a run measured.
#[derive(Clone, Debug)]
pub struct ScaleReport {
    /// What was run.
    pub config: ScaleConfig,
    /// The shim's memory per session.
    pub shim: ShimSessions,
    /// The runs, in the order made ([`order`]).
    pub runs: Vec<StackReport>,
}

impl ScaleReport {
    /// The runs of `stack`.
    pub fn runs_of(&self, stack: Stack) -> impl Iterator<Item = &StackReport> {
        self.runs.iter().filter(move |r| r.stack == stack)
    }

    /// The mean of a figure over the runs of `stack`; None if a run lacks it.
    pub fn mean(&self, stack: Stack, figure: impl Fn(&StackReport) -> Option<f64>) -> Option<f64> {
        let values: Option<Vec<f64>> = self.runs_of(stack).map(figure).collect();
        values
            .filter(|v| !v.is_empty())
            .map(|v| v.iter().sum::<f64>() / v.len() as f64)
    }

    /// ecnq's mean less vanilla quinn's: ecnq's own share of a figure.
    pub fn ecnq_own(&self, figure: impl Fn(&StackReport) -> Option<f64>) -> Option<f64> {
        Some(self.mean(Stack::Ecnq, &figure)? - self.mean(Stack::Vanilla, &figure)?)
    }

    /// Whether every connection of every run completed.
    pub fn all_completed(&self) -> bool {
        self.runs.iter().all(|s| s.completed == s.connections)
    }
}

/// The runs with the baseline, in this order: the machine's load changes
/// during a bench, so each stack runs once early and once late and their
/// means are compared.
const ORDER: [Stack; 4] = [Stack::Vanilla, Stack::Ecnq, Stack::Ecnq, Stack::Vanilla];

/// Raises the descriptor limit and checks that a run fits: two sockets per
/// connection (the client's and its relay session's) and the relay's reserve.
fn check_descriptors(connections: usize) -> Result<(), String> {
    let limit = raise_fd_limit().map_err(|e| format!("cannot raise the open-file limit: {e}"))?;
    let needed = 2 * connections as u64 + 2 * FD_RESERVE;
    if limit < needed {
        return Err(format!(
            "{connections} connections need about {needed} open files, the limit is {limit} (raise it with ulimit -n)"
        ));
    }
    Ok(())
}

/// The stacks to run, in order.
pub fn order(config: &ScaleConfig) -> &'static [Stack] {
    if config.baseline {
        &ORDER
    } else {
        &[Stack::Ecnq]
    }
}

/// What a run prints before its progress lines.
pub fn run_name(config: &ScaleConfig, index: usize, stack: Stack) -> String {
    format!("run {}/{}, {stack}", index + 1, order(config).len())
}

/// Runs everything in this process: the shim's session memory, then each
/// stack of [`order`]. The bench runs each stack in a fresh process instead
/// ([`run_child`]): in one process the resident set per connection grows
/// from run to run whatever the stack, most likely as the heap fragments.
/// `progress` gets a line now and then during long phases.
pub async fn run(
    config: &ScaleConfig,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<ScaleReport, String> {
    let shim = shim_sessions(config, progress).await?;
    let mut runs = Vec::new();
    for (i, &stack) in order(config).iter().enumerate() {
        let name = run_name(config, i, stack);
        let progress = |line: &str| progress(&format!("{name}: {line}"));
        runs.push(run_stack(stack, config, &progress).await?);
    }
    Ok(ScaleReport {
        config: config.clone(),
        shim,
        runs,
    })
}

/// Runs `exe ARGS --only STACK` (the bench itself) and reads the figures
/// it prints; its progress goes to this process's stderr.
pub fn run_child(exe: &Path, args: &[String], stack: Stack) -> Result<StackReport, String> {
    let output = std::process::Command::new(exe)
        .args(args)
        .args(["--only", stack.name()])
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", exe.display()))?;
    if !output.status.success() {
        return Err(format!("the {stack} run failed ({})", output.status));
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).map_err(|e| format!("the {stack} run printed no figures: {e}"))
}

/// Raises the descriptor limit, checks that the run fits and fixes the
/// allocator's mmap threshold.
fn prepare(config: &ScaleConfig) -> Result<(), String> {
    check_descriptors(config.connections)?;
    fix_mmap_threshold();
    Ok(())
}

/// The shim's memory per session: a relay like the runs' toward a plain
/// UDP sink, one datagram from each of `connections` plain UDP clients,
/// resident set before and after every session opened.
pub async fn shim_sessions(
    config: &ScaleConfig,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<ShimSessions, String> {
    prepare(config)?;
    let n = config.connections;
    progress(&format!(
        "shim: opening {n} relay sessions from plain UDP clients"
    ));
    let sink = tokio::net::UdpSocket::bind(localhost())
        .await
        .map_err(|e| format!("sink: {e}"))?;
    let target = sink.local_addr().map_err(|e| format!("sink: {e}"))?;
    let shim = ShimRun::start(&config.link, target, n)?;
    // Let the relay's threads and buffers settle before the baseline.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let before = Probe::take(true);
    let clients = (0..n)
        .map(|_| std::net::UdpSocket::bind(localhost()))
        .collect::<io::Result<Vec<_>>>()
        .map_err(|e| format!("client socket: {e}"))?;
    let mut seen = vec![false; n];
    let mut missing = n;
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut buf = [0u8; 16];
    while missing > 0 && Instant::now() < deadline {
        for (i, client) in clients.iter().enumerate().filter(|(i, _)| !seen[*i]) {
            // A datagram lost to a full queue is sent again next round.
            let _ = client.send_to(&(i as u32).to_be_bytes(), shim.entry);
        }
        let round = tokio::time::sleep(Duration::from_millis(200));
        tokio::pin!(round);
        loop {
            tokio::select! {
                received = sink.recv(&mut buf) => {
                    let i = received.ok().filter(|&len| len == 4).map(|_| {
                        u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize
                    });
                    if let Some(seen) = i.and_then(|i| seen.get_mut(i)).filter(|s| !**s) {
                        *seen = true;
                        missing -= 1;
                    }
                    if missing == 0 {
                        break;
                    }
                }
                () = &mut round => break,
            }
        }
    }
    let after = Probe::take(true);
    drop(clients);
    let report = shim.stop().await?;
    drain().await;
    let per_session = match (before.rss, after.rss) {
        (Some(b), Some(a)) if report.sessions.opened > 0 => {
            Some((a as f64 - b as f64) / report.sessions.opened as f64)
        }
        _ => None,
    };
    Ok(ShimSessions {
        opened: report.sessions.opened,
        wanted: n,
        per_session,
    })
}

/// Starts a client task per connection, `config.batch` at a time, each
/// batch once the previous one's handshakes settled.
async fn start_clients(
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
async fn await_downloads(
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
async fn join_clients(
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

/// One stack's run: server and relay up, handshakes in batches, every
/// download at once, then every connection closed.
pub async fn run_stack(
    stack: Stack,
    config: &ScaleConfig,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<StackReport, String> {
    prepare(config)?;
    let cert = &SelfSigned::new(&["localhost"]).map_err(|e| e.to_string())?;
    let n = config.connections;
    let server = Server::start(stack, cert)?;
    let shim = ShimRun::start(&config.link, server.addr, n)?;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let base = Probe::take(true);
    let buffer_drops_before = udp_receive_buffer_drops();
    let (phase_tx, phase_rx) = watch::channel(Phase::Connect);
    let clients = Arc::new(Clients {
        stack,
        entry: shim.entry,
        roots: cert.roots(),
        bytes: config.bytes,
        phase: phase_rx,
        counters: Counters::default(),
    });
    let counters = &clients.counters;

    let started = Instant::now();
    let tasks = start_clients(&clients, config, started, progress).await;
    let handshake_time = started.elapsed();
    let opened = Counters::get(&counters.connected);
    let open = Probe::take(true);

    let go = Probe::take(false);
    let _ = phase_tx.send(Phase::Transfer);
    let peak = await_downloads(counters, opened, go, progress).await;
    let done = Probe::take(false);
    let buffer_drops = udp_receive_buffer_drops()
        .zip(buffer_drops_before)
        .map(|(after, before)| after.saturating_sub(before));
    let after = Probe::take(true);
    let server_packets = server.packets();
    let feedback_senders = server.feedback_senders.load(Ordering::Relaxed);

    progress(&format!("closing {opened} connections"));
    let closing = Instant::now();
    let _ = phase_tx.send(Phase::Close);
    let (completed, failures, packets) = join_clients(tasks, server_packets).await?;
    server.stop().await;
    let relay = shim.stop().await?;
    drop(clients);
    let drained = drain().await.then(|| closing.elapsed());
    let transfer_cpu = match (go.cpu, done.cpu) {
        (Some(a), Some(b)) => Some(b.saturating_sub(a)),
        _ => None,
    };
    Ok(StackReport {
        stack,
        connections: n,
        opened,
        completed,
        failed: failures.len(),
        first_failure: failures.into_iter().next(),
        bytes_verified: completed as u64 * config.bytes,
        handshake_time,
        transfer_time: done.at - go.at,
        transfer_cpu,
        rss_base: base.rss,
        rss_open: open.rss,
        rss_peak: peak,
        rss_after: after.rss,
        drained,
        buffer_drops,
        packets_sent: packets.sent,
        packets_lost: packets.lost,
        shim_arrivals: relay.up.counters.arrivals + relay.down.counters.arrivals,
        shim_drops: drops(&relay.up.counters) + drops(&relay.down.counters),
        sessions_opened: relay.sessions.opened,
        sessions_refused: relay.sessions.refused(),
        sessions_evicted: relay.sessions.evicted,
        feedback_senders,
    })
}

/// One of a run's resident-set figures.
type RssOf = fn(&StackReport) -> Option<u64>;

/// `part (x.x %)` of `whole`.
fn share(part: u64, whole: u64) -> String {
    let percent = 100.0 * part as f64 / whole.max(1) as f64;
    format!("{part} ({percent:.1} %)")
}

/// Memory per connection or session, in kB (1000 bytes).
fn kb(bytes: Option<f64>) -> String {
    bytes.map_or("n/a".into(), |b| format!("{:.1} kB", b / 1e3))
}

/// The report as printed: one column per run, and ecnq's own cost (the
/// mean of its runs less the mean of vanilla quinn's) when the baseline ran.
pub fn render(report: &ScaleReport) -> String {
    let mut out = String::new();
    write_setup(&mut out, report);
    let own_column = report.runs_of(Stack::Vanilla).next().is_some();
    let mut table = Table {
        out: &mut out,
        runs: &report.runs,
        own_column,
    };
    outcome_rows(&mut table, report);
    packet_rows(&mut table);
    memory_rows(&mut table, report);
    write_notes(&mut out, report, own_column);
    write_goals(&mut out, report);
    out
}

/// What was run: connections, bytes, link, and the shim's memory per session.
fn write_setup(out: &mut String, report: &ScaleReport) {
    let c = &report.config;
    let _ = writeln!(
        out,
        "scale: {} concurrent connections, {} downloaded by each, one server endpoint, one relay shim on loopback",
        c.connections,
        human_bytes(c.bytes)
    );
    let _ = writeln!(
        out,
        "link: {} (both directions); relay sessions: max {n}, per source {n} (every client is 127.0.0.1), idle 1 h; handshakes in batches of {}",
        c.link,
        c.batch,
        n = c.connections
    );
    let shim = &report.shim;
    let _ = writeln!(
        out,
        "shim memory per session: {} resident ({} of {} sessions opened by plain UDP clients; the kernel's socket buffers not counted)",
        kb(shim.per_session),
        shim.opened,
        shim.wanted
    );
    let _ = writeln!(out);
}

/// The figures table: one row per figure, one column per run, then ecnq's
/// own when the baseline ran.
struct Table<'a> {
    out: &'a mut String,
    runs: &'a [StackReport],
    own_column: bool,
}

impl Table<'_> {
    /// A row: `label`, `figure` of each run, then `own` in ecnq's column.
    fn row(&mut self, label: &str, figure: &dyn Fn(&StackReport) -> String, own: Option<String>) {
        let out = &mut *self.out;
        let _ = write!(out, "{label:<42}");
        for r in self.runs {
            let _ = write!(out, " {:>18}", figure(r));
        }
        if self.own_column {
            let _ = write!(out, " {:>14}", own.unwrap_or_default());
        }
        let _ = writeln!(out);
    }
}

/// The runs' names, then whether and how fast their connections completed.
fn outcome_rows(table: &mut Table<'_>, report: &ScaleReport) {
    let number = std::cell::Cell::new(0);
    table.row(
        "run",
        &|r| {
            number.set(number.get() + 1);
            format!("#{} {}", number.get(), r.stack)
        },
        Some("ecnq's own".into()),
    );
    table.row(
        "connections completed / failed",
        &|r| format!("{} / {}", r.completed, r.failed),
        None,
    );
    table.row("bytes checked", &|r| human_bytes(r.bytes_verified), None);
    table.row(
        "handshakes, s",
        &|r| format!("{:.2}", r.handshake_time.as_secs_f64()),
        None,
    );
    table.row(
        "transfer, s (goodput)",
        &|r| {
            format!(
                "{:.2} ({:.0} Mbit/s)",
                r.transfer_time.as_secs_f64(),
                r.goodput() / 1e6
            )
        },
        None,
    );
    table.row(
        "CPU per Gbit/s, cores (whole process)",
        &|r| r.cpu_per_gbit().map_or("n/a".into(), |x| format!("{x:.2}")),
        report
            .ecnq_own(StackReport::cpu_per_gbit)
            .map(|d| format!("{d:+.2}")),
    );
    table.row(
        "close and drain, s",
        &|r| {
            r.drained
                .map_or(format!("> {}", DRAIN_LIMIT.as_secs()), |d| {
                    format!("{:.2}", d.as_secs_f64())
                })
        },
        None,
    );
}

/// Packets lost and dropped, the relay's sessions and who ran on feedback.
fn packet_rows(table: &mut Table<'_>) {
    table.row(
        "packets lost, quinn, both ends (of sent)",
        &|r| share(r.packets_lost, r.packets_sent),
        None,
    );
    table.row(
        "packets dropped by the shim (of arrived)",
        &|r| share(r.shim_drops, r.shim_arrivals),
        None,
    );
    table.row(
        "UDP receive-buffer drops (kernel, machine)",
        &|r| r.buffer_drops.map_or("n/a".into(), |d| d.to_string()),
        None,
    );
    table.row(
        "shim sessions opened / refused / evicted",
        &|r| {
            format!(
                "{} / {} / {}",
                r.sessions_opened, r.sessions_refused, r.sessions_evicted
            )
        },
        None,
    );
    table.row(
        "senders on router feedback at their end",
        &|r| match r.stack {
            Stack::Ecnq => format!("{} / {}", r.feedback_senders, r.opened),
            Stack::Vanilla => "-".into(),
        },
        None,
    );
}

/// Resident set: the whole process's, then per connection.
fn memory_rows(table: &mut Table<'_>, report: &ScaleReport) {
    table.row(
        "process RSS, MB: base -> all open, after",
        &|r| match (r.rss_base, r.rss_after) {
            (Some(b), Some(a)) => format!("{:.0} -> {:.0}", b as f64 / 1e6, a as f64 / 1e6),
            _ => "n/a".into(),
        },
        None,
    );
    let memory: [(&str, RssOf); 3] = [
        ("RSS per connection, all open, before", |r| r.rss_open),
        ("RSS per connection, peak in transfer", |r| r.rss_peak),
        ("RSS per connection, all open, after", |r| r.rss_after),
    ];
    for (label, rss) in memory {
        table.row(
            label,
            &|r| kb(r.per_connection(rss(r))),
            report
                .ecnq_own(|r| r.per_connection(rss(r)))
                .map(|d| kb(Some(d))),
        );
    }
}

/// What the table's figures mean, and the first failure if any.
fn write_notes(out: &mut String, report: &ScaleReport, own_column: bool) {
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "RSS per connection: the whole process's resident set (every client endpoint, both ends of each connection, its relay session; quinn included) over the base with the server and relay up, divided by the connections open; the peak is sampled every {} ms, the others taken after malloc_trim.",
        POLL.as_millis()
    );
    let _ = writeln!(
        out,
        "CPU per Gbit/s: user + system time of the whole process (clients, server, shim) from the start signal to the last download, in seconds per Gbit of payload checked."
    );
    if own_column {
        let _ = writeln!(
            out,
            "ecnq's own: the mean of the ecnq runs less the mean of the vanilla quinn runs (in the order quinn, ecnq, ecnq, quinn, so that the machine's changing load hits both alike)."
        );
    }
    if let Some(first) = report.runs.iter().find_map(|r| r.first_failure.as_ref()) {
        let _ = writeln!(out, "first failure: {first}");
    }
    let _ = writeln!(out);
}

/// Whether the run met its goals: every connection completed, ecnq's own
/// memory per connection.
fn write_goals(out: &mut String, report: &ScaleReport) {
    let c = &report.config;
    let ecnq_completed: Vec<String> = report
        .runs_of(Stack::Ecnq)
        .map(|r| r.completed.to_string())
        .collect();
    let _ = writeln!(
        out,
        "goal: all {} connections complete: {} (ecnq runs: {} completed)",
        c.connections,
        verdict(
            report
                .runs_of(Stack::Ecnq)
                .all(|r| r.completed == c.connections)
        ),
        ecnq_completed.join(", ")
    );
    match report.ecnq_own(|r| r.per_connection(r.rss_after)) {
        Some(own) => {
            let _ = writeln!(
                out,
                "goal: ecnq's own memory <= 100 kB per connection (all open, after the transfer): {} ({})",
                verdict(own <= 100e3),
                kb(Some(own))
            );
        }
        None => {
            let _ = writeln!(
                out,
                "goal: ecnq's own memory <= 100 kB per connection: not judged (needs the baseline runs)"
            );
        }
    }
}

fn verdict(met: bool) -> &'static str {
    if met {
        "met"
    } else {
        "NOT met"
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
        let Ok(Command::Run(config)) = args(&["--only", "ecnq"]) else {
            panic!("should parse");
        };
        assert_eq!(config.only, Some(Stack::Ecnq));
        assert_eq!(args(&["--help"]), Ok(Command::Help));
        for (bad, message) in [
            (&["-n", "0"][..], "-n must be a whole number"),
            (&["--only", "tcp"], "--only takes quinn or ecnq"),
            (&["--connections", "x"], "--connections must be"),
            (&["-n"], "-n needs a value"),
            (&["--bytes", "1gb"], "from 1 byte to 16mb"),
            (&["--batch", "-3"], "--batch must be"),
            (&["--link", "rate fast"], "--link `rate fast`"),
            (&["--frob"], "unknown argument `--frob`"),
        ] {
            let error = args(bad).unwrap_err();
            assert!(error.contains(message), "{bad:?}: {error}");
            assert!(!error.contains('\n'), "{error}");
        }
    }

    #[test]
    fn the_checker_finds_a_wrong_byte_and_pieces_may_split_anywhere() {
        let mut data = vec![0; 1000];
        fill(7, 0, &mut data);
        let mut checker = Checker::new(7);
        for piece in [&data[..3], &data[3..11], &data[11..]] {
            checker.check(piece).unwrap();
        }
        assert_eq!(checker.received(), 1000);
        // Another connection's bytes are not this one's.
        let mut other = vec![0; 1000];
        fill(8, 0, &mut other);
        assert!(Checker::new(7).check(&other).is_err());
        data[500] ^= 1;
        let mut checker = Checker::new(7);
        assert_eq!(checker.check(&data).unwrap_err(), "byte 500 is wrong");
    }

    #[test]
    fn requests_round_trip_and_oversized_ones_are_refused() {
        assert_eq!(decode_request(&encode_request(3, 4096)), Some((3, 4096)));
        assert_eq!(decode_request(&encode_request(3, MAX_BYTES + 1)), None);
        assert_eq!(decode_request(&[0; 5]), None);
    }
}
