//! An ecnq connection: a quinn connection plus the feedback tasks that
//! carry reports in DATAGRAM frames, and its congestion stats.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use quinn::{ConnectionError, SendDatagramError, TransportConfig};
use tokio::sync::{mpsc, Notify};

use super::cid::issuing_for;
use super::congestion::CongestionControl;
use super::controller::EcnqControllerFactory;
use super::demux::Routes;
use super::peer::{reading_stats, Peer};
use super::socket::EcnSocket;
use super::tap::{Tap, TappedClient, TappedServer};
use crate::session::report::{self, Next};
use crate::session::{PeerEvent, PeerMode, Progress};
use crate::signal::{Feedback, Mode};

/// Application datagrams waiting for [`Connection::read_datagram`] at most;
/// beyond that new ones are dropped (and counted), as quinn does.
const APP_DATAGRAM_QUEUE: usize = 1024;

/// A connection registered with an [`EcnSocket`] but not yet established:
/// put [`Prepared::configure`] into its `TransportConfig`, start it with
/// [`Prepared::connect`] or [`Prepared::accept`], then [`Prepared::attach`]
/// the established quinn connection.
///
/// This is how ecnq joins a quinn endpoint the application builds itself
/// (the module docs show a whole client and server):
///
/// ```no_run
/// # async fn demo(roots: rustls::RootCertStore) -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use ecnq::quic::{CongestionControl, EcnSocket};
///
/// let cc = CongestionControl::DEFAULT;
/// let socket = EcnSocket::bind("[::]:0".parse()?, cc)?;
/// let endpoint = quinn::Endpoint::new_with_abstract_socket(
///     socket.endpoint_config(),
///     None,
///     socket.clone(),
///     Arc::new(quinn::TokioRuntime),
/// )?;
/// let server: std::net::SocketAddr = "[::1]:4433".parse()?;
/// let prepared = socket.prepare(server, cc);
/// let mut transport = quinn::TransportConfig::default();
/// prepared.configure(&mut transport);
/// let crypto = quinn::crypto::rustls::QuicClientConfig::try_from(
///     rustls::ClientConfig::builder().with_root_certificates(roots).with_no_client_auth(),
/// )?;
/// let mut config = quinn::ClientConfig::new(prepared.client_crypto(Arc::new(crypto)));
/// config.transport_config(Arc::new(transport));
/// let quinn_connection = prepared.connect(&endpoint, config, server, "localhost")?.await?;
/// let connection = prepared.attach(quinn_connection);
/// println!("{:?}", connection.congestion_stats());
/// # Ok(()) }
/// ```
pub struct Prepared {
    routes: Arc<Routes>,
    key: u32,
    peer: Arc<Peer>,
    tap: Arc<Tap>,
}

impl std::fmt::Debug for Prepared {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Prepared")
            .field("key", &self.key)
            .field("peer", &self.peer)
            .finish()
    }
}

impl EcnSocket {
    /// Registers a connection with `remote`; any number may share a remote
    /// address. For a connection this socket opens, `cc` is its
    /// controller; for one the peer opened, pass the socket's default (what
    /// its handshake packets were already counted under).
    pub fn prepare(self: &Arc<Self>, remote: SocketAddr, cc: CongestionControl) -> Prepared {
        let (key, peer) = self.routes.prepare(remote, cc);
        Prepared {
            routes: self.routes.clone(),
            key,
            tap: Tap::new(self.routes.clone(), key, peer.clone()),
            peer,
        }
    }
}

impl Prepared {
    /// quinn's controller factory for this connection: the scheme given to
    /// [`EcnSocket::prepare`], wired to this connection's feedback.
    pub fn controller_factory(&self) -> Arc<EcnqControllerFactory> {
        Arc::new(EcnqControllerFactory::new(self.peer.clone()))
    }

    /// The connection's shared state.
    #[cfg(feature = "qlog")]
    pub(crate) fn peer(&self) -> &Arc<Peer> {
        &self.peer
    }

    /// Sets this connection's congestion controller in `transport`.
    pub fn configure(&self, transport: &mut TransportConfig) {
        transport.congestion_controller_factory(self.controller_factory());
    }

    /// Wraps the client crypto configuration of this connection so that the
    /// socket learns every connection ID it uses (its packet keys see them
    /// all). Without it, connection IDs issued after the handshake are
    /// bound by remote address, which fails when several connections share
    /// one. It also marks the connection as opened here, so that the socket
    /// lets its server's Retry through, however the application then
    /// connects (ecnq's endpoint, or its own quinn endpoint as the interop
    /// client does: the interop matrix's retry cells).
    pub fn client_crypto(
        &self,
        crypto: Arc<dyn quinn::crypto::ClientConfig>,
    ) -> Arc<dyn quinn::crypto::ClientConfig> {
        self.routes.opened_here(self.key);
        Arc::new(TappedClient {
            inner: crypto,
            tap: self.tap.clone(),
        })
    }

    /// [`Prepared::client_crypto`] for a connection this end accepts.
    pub fn server_crypto(
        &self,
        crypto: Arc<dyn quinn::crypto::ServerConfig>,
    ) -> Arc<dyn quinn::crypto::ServerConfig> {
        Arc::new(TappedServer {
            inner: crypto,
            tap: self.tap.clone(),
        })
    }

    /// `endpoint.connect_with(..)`, issuing this connection's first
    /// connection ID so that the socket knows it from the first packet.
    pub fn connect(
        &self,
        endpoint: &quinn::Endpoint,
        config: quinn::ClientConfig,
        addr: SocketAddr,
        server_name: &str,
    ) -> Result<quinn::Connecting, quinn::ConnectError> {
        issuing_for(self.key, || {
            endpoint.connect_with(config, addr, server_name)
        })
    }

    /// `incoming.accept_with(..)`, issuing this connection's first
    /// connection ID so that the socket knows it from the first packet.
    pub fn accept(
        &self,
        incoming: quinn::Incoming,
        config: Arc<quinn::ServerConfig>,
    ) -> Result<quinn::Connecting, ConnectionError> {
        issuing_for(self.key, || incoming.accept_with(config))
    }

    /// Starts the feedback tasks for the established connection. Must be
    /// called inside a tokio runtime.
    pub fn attach(self, connection: quinn::Connection) -> Connection {
        self.routes.attach(self.key, connection.clone());
        let (app_tx, app_rx) = mpsc::channel(APP_DATAGRAM_QUEUE);
        let dropped = Arc::new(AtomicU64::new(0));
        let app_received = Arc::new(AtomicU64::new(0));
        let app_sent = Arc::new(AtomicU64::new(0));
        let mut companions = Companions(Vec::with_capacity(2));
        companions.0.push(
            tokio::spawn(send_reports(
                connection.clone(),
                self.peer.clone(),
                app_received.clone(),
                app_sent.clone(),
            ))
            .abort_handle(),
        );
        // quinn's own controllers have no law, so never a rate to fall short of.
        if self.peer.cc.in_session() {
            let ask = ask_while_under_rate(connection.clone(), self.peer.clone());
            companions.0.push(tokio::spawn(ask).abort_handle());
        }
        tokio::spawn(read_datagrams(
            connection.clone(),
            self.peer.clone(),
            AppDatagrams {
                queue: app_tx,
                received: app_received,
                dropped: dropped.clone(),
            },
            self.routes,
            self.key,
            companions,
        ));
        Connection {
            inner: connection,
            peer: self.peer,
            app_datagrams: tokio::sync::Mutex::new(app_rx),
            dropped,
            app_sent,
        }
    }

    /// Unregisters a connection that failed to establish.
    pub fn abandon(self) {
        self.routes.remove(self.key);
    }

    /// Attaches the connection if the handshake succeeded, else gives the
    /// registration back.
    pub(crate) fn settle(
        self,
        result: Result<quinn::Connection, super::Error>,
    ) -> Result<Connection, super::Error> {
        match result {
            Ok(connection) => Ok(self.attach(connection)),
            Err(error) => {
                self.abandon();
                Err(error)
            }
        }
    }
}

impl std::fmt::Debug for Peer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Peer")
            .field("cc", &self.cc)
            .field("mode", &self.published().mode())
            .finish_non_exhaustive()
    }
}

/// The receiver side of feedback: reports the decoder's estimate of the
/// peer's traffic, following [`report::FeedbackSender`]'s policy.
///
/// One timer serves the whole task: it is moved only when the policy's
/// deadline moves, so a wake by news that leaves the deadline where it was
/// costs no timer work (`a_task_timer_moves_only_with_its_deadline`).
/// It ends with the connection as one of its [`Companions`].
async fn send_reports(
    connection: quinn::Connection,
    peer: Arc<Peer>,
    app_received: Arc<AtomicU64>,
    app_sent: Arc<AtomicU64>,
) {
    let mut timer = TaskTimer::new();
    loop {
        // Data progress both ways: what was exchanged besides ACKs and reports.
        let stats = reading_stats(|| connection.stats());
        let progress = Progress {
            sent: stats.frame_tx.stream + app_sent.load(Ordering::Relaxed),
            received: stats.frame_rx.stream + app_received.load(Ordering::Relaxed),
        };
        let (next, report) = peer.poll_report(Instant::now(), connection.rtt(), progress);
        match (next, report) {
            (Next::Send, Some(report)) => match connection.send_datagram(report.into()) {
                Ok(()) => {}
                Err(SendDatagramError::ConnectionLost(_)) => return,
                Err(error) => {
                    tracing::warn!(%error, "cannot send ecnq feedback reports");
                    return;
                }
            },
            (Next::At(at), _) => {
                timer.set(tokio::time::Instant::from_std(peer.epoch() + at));
                tokio::select! {
                    biased;
                    _ = peer.notify.notified() => {}
                    _ = timer.fired() => {}
                }
            }
            _ => peer.notify.notified().await,
        }
    }
}

/// A feedback task's one timer: armed at a deadline, moved only when the
/// deadline moves. A fresh sleep per wait cost a timer entry's
/// registration and its removal under the timer driver's lock each time.
struct TaskTimer {
    sleep: std::pin::Pin<Box<tokio::time::Sleep>>,
    deadline: Option<tokio::time::Instant>,
}

impl TaskTimer {
    fn new() -> TaskTimer {
        TaskTimer {
            sleep: Box::pin(tokio::time::sleep(Duration::ZERO)),
            deadline: None,
        }
    }

    /// Arms the timer at `at`; a timer already at `at` is left alone.
    /// Returns whether it was moved.
    fn set(&mut self, at: tokio::time::Instant) -> bool {
        if self.deadline == Some(at) {
            return false;
        }
        self.deadline = Some(at);
        self.sleep.as_mut().reset(at);
        true
    }

    /// Waits for the deadline; a fired timer fires again at once until it
    /// is moved, as a fresh sleep until a past deadline would.
    async fn fired(&mut self) {
        self.sleep.as_mut().await;
    }
}

/// How often at most quinn is made to ask for its window while a rate law
/// is under its rate ([`crate::session::Session::under_rate`]): the gate
/// lets 1 ms of the rate out per ask.
const ASK_GAP: Duration = Duration::from_millis(1);

/// quinn asks for its congestion window when ACKs arrive or its timers fire;
/// a rate law's gate lets one burst through per ask. At a start on a long
/// path few ACKs come, and on a cellular link the ACKs pause with the link:
/// asked only as they came, a flow sent one burst per ACK, under its rate
/// (docs/design.md §3). While the law has room under its flight cap this
/// wakes quinn's driver when the gate lets one more packet out
/// ([`crate::session::Session::next_packet_at`]), at most every
/// [`ASK_GAP`]; the rest of the time it sleeps until the session is left
/// under its rate. quinn has no call that only wakes it; setting the receive window to the
/// value ecnq leaves it at (quinn's default, unlimited) changes nothing
/// else. An ask while the driver has not read its window since the last
/// one is skipped: that wake is still pending, and another adds nothing
/// but a lock and a wake-up (on a busy host, hundreds of connections asked
/// every millisecond; `an_ask_waits_for_quinn_to_read_its_window`). It
/// ends with the connection as one of its [`Companions`].
async fn ask_while_under_rate(connection: quinn::Connection, peer: Arc<Peer>) {
    let last_read = AtomicU64::new(NEVER_ASKED);
    let ask = || {
        if window_read_since(&last_read, peer.window_reads()) {
            connection.set_receive_window(quinn::VarInt::MAX);
        }
    };
    let under_rate = &peer.under_rate;
    let next = || {
        if !under_rate.get() {
            return None;
        }
        let now = peer.since_epoch(Instant::now());
        let at = peer.reading().next_packet_at(now)?;
        Some(tokio::time::Instant::from_std(peer.epoch() + at))
    };
    ask_while(next, ask, &under_rate.became).await;
}

/// No ask yet: no count of window reads is this high.
const NEVER_ASKED: u64 = u64::MAX;

/// Whether quinn read its window since the last ask: `reads` (its count of
/// reads now) differs from the count at the last ask, which `last` keeps.
fn window_read_since(last: &AtomicU64, reads: u64) -> bool {
    last.swap(reads, Ordering::Relaxed) != reads
}

/// Calls `ask` once the time `next()` names has come, at most every
/// [`ASK_GAP`], sleeping until then on the task's one timer; while it
/// names none, waits for `became_under`, which whatever makes it name one
/// notifies.
async fn ask_while(
    next: impl Fn() -> Option<tokio::time::Instant>,
    ask: impl Fn(),
    became_under: &Notify,
) {
    let mut timer = TaskTimer::new();
    loop {
        let wake = match next() {
            Some(at) if at <= tokio::time::Instant::now() => {
                ask();
                tokio::time::Instant::now() + ASK_GAP
            }
            Some(at) => at,
            None => {
                became_under.notified().await;
                continue;
            }
        };
        timer.set(wake);
        timer.fired().await;
    }
}

/// Where application datagrams go, and their counters.
struct AppDatagrams {
    queue: mpsc::Sender<Bytes>,
    received: Arc<AtomicU64>,
    dropped: Arc<AtomicU64>,
}

/// A connection's other feedback tasks, ended with [`read_datagrams`]:
/// its read fails exactly when the connection ends, so they need not each
/// wait for the end themselves. A wait on quinn's `closed()` beside each
/// of their sleeps took a lock on every wake, every millisecond while a
/// law is under its rate (`the_feedback_tasks_end_with_the_connection`).
struct Companions(Vec<tokio::task::AbortHandle>);

impl Drop for Companions {
    fn drop(&mut self) {
        for task in &self.0 {
            task.abort();
        }
    }
}

/// Splits incoming DATAGRAM frames into reports (to the law) and the
/// application's datagrams; unregisters the connection, and ends its
/// `companions`, when it ends.
async fn read_datagrams(
    connection: quinn::Connection,
    peer: Arc<Peer>,
    app: AppDatagrams,
    routes: Arc<Routes>,
    key: u32,
    companions: Companions,
) {
    while let Ok(datagram) = connection.read_datagram().await {
        if report::is_report(&datagram) {
            peer.on_peer(Instant::now(), PeerEvent::Report(&datagram));
            continue;
        }
        app.received.fetch_add(1, Ordering::Relaxed);
        if app.queue.try_send(datagram).is_err() {
            app.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
    routes.remove(key);
    drop(companions);
}

/// An established ecnq connection. Streams are plain quinn streams; use
/// [`Connection::send_datagram`] / [`Connection::read_datagram`] (not quinn's,
/// which would take the feedback reports) for datagrams.
#[derive(Debug)]
pub struct Connection {
    inner: quinn::Connection,
    peer: Arc<Peer>,
    app_datagrams: tokio::sync::Mutex<mpsc::Receiver<Bytes>>,
    dropped: Arc<AtomicU64>,
    app_sent: Arc<AtomicU64>,
}

/// Why an application datagram was not sent.
#[derive(Debug)]
pub enum DatagramError {
    /// The datagram starts with the report magic ([`report::MAGIC`]).
    Reserved,
    /// quinn refused it.
    Quinn(SendDatagramError),
}

impl std::error::Error for DatagramError {}

impl std::fmt::Display for DatagramError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DatagramError::Reserved => {
                f.write_str("datagram starts with the ecnq report magic EC 0E C9 51")
            }
            DatagramError::Quinn(e) => write!(f, "{e}"),
        }
    }
}

impl Connection {
    /// The underlying quinn connection, for streams and anything else quinn
    /// offers. Do not call its `read_datagram`: ecnq reads the reports there.
    pub fn quinn(&self) -> &quinn::Connection {
        &self.inner
    }

    /// Opens a bidirectional stream.
    pub async fn open_bi(&self) -> Result<(quinn::SendStream, quinn::RecvStream), ConnectionError> {
        self.inner.open_bi().await
    }

    /// Accepts a bidirectional stream the peer opened.
    pub async fn accept_bi(
        &self,
    ) -> Result<(quinn::SendStream, quinn::RecvStream), ConnectionError> {
        self.inner.accept_bi().await
    }

    /// Opens a unidirectional stream.
    pub async fn open_uni(&self) -> Result<quinn::SendStream, ConnectionError> {
        self.inner.open_uni().await
    }

    /// Accepts a unidirectional stream the peer opened.
    pub async fn accept_uni(&self) -> Result<quinn::RecvStream, ConnectionError> {
        self.inner.accept_uni().await
    }

    /// Sends an unreliable application datagram (RFC 9221).
    pub fn send_datagram(&self, data: Bytes) -> Result<(), DatagramError> {
        if report::is_report(&data) {
            return Err(DatagramError::Reserved);
        }
        self.inner
            .send_datagram(data)
            .map_err(DatagramError::Quinn)?;
        self.app_sent.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// Receives the next application datagram.
    pub async fn read_datagram(&self) -> Result<Bytes, ConnectionError> {
        match self.app_datagrams.lock().await.recv().await {
            Some(datagram) => Ok(datagram),
            None => Err(self
                .inner
                .close_reason()
                .unwrap_or(ConnectionError::LocallyClosed)),
        }
    }

    /// The peer's address.
    pub fn remote_address(&self) -> SocketAddr {
        self.inner.remote_address()
    }

    /// Closes the connection.
    pub fn close(&self, code: quinn::VarInt, reason: &[u8]) {
        self.inner.close(code, reason)
    }

    /// Waits until the connection is closed.
    pub async fn closed(&self) -> ConnectionError {
        self.inner.closed().await
    }

    /// What the congestion controller and the feedback channel are doing.
    pub fn congestion_stats(&self) -> CongestionStats {
        self.stats_handle().congestion_stats()
    }

    /// A handle that reads [`Connection::congestion_stats`] from elsewhere
    /// (a metrics endpoint listing its connections, say). It keeps the
    /// connection open while held, as a quinn connection handle does.
    pub fn stats_handle(&self) -> StatsHandle {
        StatsHandle {
            inner: self.inner.clone(),
            peer: self.peer.clone(),
            dropped: self.dropped.clone(),
        }
    }
}

/// Reads one connection's [`CongestionStats`] ([`Connection::stats_handle`]).
#[derive(Clone, Debug)]
pub struct StatsHandle {
    inner: quinn::Connection,
    peer: Arc<Peer>,
    dropped: Arc<AtomicU64>,
}

impl StatsHandle {
    /// What the congestion controller and the feedback channel are doing.
    pub fn congestion_stats(&self) -> CongestionStats {
        let srtt = self.inner.rtt();
        let session = self
            .peer
            .reading()
            .stats(self.peer.since_epoch(Instant::now()));
        // Without a law, the sender runs one of quinn's controllers.
        let window = session
            .window
            .unwrap_or_else(|| self.inner.stats().path.cwnd);
        CongestionStats {
            controller: self.peer.cc,
            mode: session.mode,
            law_mode: session.law_mode,
            window,
            rate: session
                .pacing_rate
                .unwrap_or(window as f64 / srtt.as_secs_f64().max(1e-6)),
            srtt,
            path_load: session
                .last_report
                .map(|r| r.feedback)
                .or(session.counts_estimate),
            peer_ecn_counts: session.last_report.map(|r| r.counts),
            peer_unraised_probes: session.last_report.map(|r| r.unraised_probes),
            local_estimate: session.local_estimate,
            ecn_received: session.ecn_received,
            reports_sent: session.reports_sent,
            reports_received: session.reports_accepted,
            reports_rejected: session.reports_rejected,
            decreases: session.decreases,
            ack_frames_read: session.ack_frames_read,
            ack_frames_unread: session.ack_frames_unread,
            start_code: session.start_code,
            app_datagrams_dropped: self.dropped.load(Ordering::Relaxed),
        }
    }
}

/// A snapshot of one connection's congestion control ([`Connection::congestion_stats`]).
#[derive(Clone, Debug, PartialEq)]
pub struct CongestionStats {
    /// The controller this connection was built with.
    pub controller: CongestionControl,
    /// Whether router feedback is in use, and if not why.
    pub mode: PeerMode,
    /// The law's own mode (MI, AI, hold, …); `None` under a quinn controller
    /// (including after a fallback).
    pub law_mode: Option<Mode>,
    /// The congestion window in bytes.
    pub window: u64,
    /// The sending rate in bytes per second (the law's, or window / srtt).
    pub rate: f64,
    /// The smoothed RTT.
    pub srtt: Duration,
    /// The latest load-factor estimate of this connection's sending path, from
    /// the peer's last accepted report, or read from its ACK-ECN counts.
    pub path_load: Option<Feedback>,
    /// Packets the peer received from us per codepoint (its last report),
    /// indexed by [`crate::Ecn::bits`].
    pub peer_ecn_counts: Option<[u64; 4]>,
    /// Our presence probes the peer received unraised (its last report): no
    /// ecnq router saw them, which is why a sender runs `ClassicNoRouter`.
    pub peer_unraised_probes: Option<u64>,
    /// Our decoder's estimate of the peer's sending path (what we report).
    pub local_estimate: Option<Feedback>,
    /// Packets received from the peer per codepoint, indexed by [`crate::Ecn::bits`].
    pub ecn_received: [u64; 4],
    /// Reports sent to the peer.
    pub reports_sent: u64,
    /// Reports from the peer accepted.
    pub reports_received: u64,
    /// Reports from the peer refused (truncated, wrong version or scheme,
    /// absurd values, stale, regressing counts).
    pub reports_rejected: u64,
    /// Multiplicative decreases (and hold / recovery entries) of the law.
    pub decreases: u64,
    /// ACK frames whose ECN counts the law read ([`PeerMode::EcnqAckCounts`]).
    pub ack_frames_read: u64,
    /// ACK frames with ECN counts that could not be read.
    pub ack_frames_unread: u64,
    /// erc's start code the handshake's ACK-ECN counts told: this end's
    /// flight datagrams a router cleared; `None` before the handshake's
    /// end or without counts.
    pub start_code: Option<u8>,
    /// Application datagrams dropped because the application read too slowly.
    pub app_datagrams_dropped: u64,
}

impl CongestionStats {
    /// Whether the connection is using router feedback right now.
    pub fn uses_feedback(&self) -> bool {
        self.mode.uses_feedback()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;

    use super::*;

    /// Runs `task` for `span` of (paused, auto-advancing) tokio time.
    async fn run_for(
        task: std::pin::Pin<&mut impl std::future::Future<Output = ()>>,
        span: Duration,
    ) {
        tokio::select! {
            _ = task => unreachable!("the ask loop never ends by itself"),
            _ = tokio::time::sleep(span) => {}
        }
    }

    /// quinn is asked every millisecond while the law is under its rate;
    /// otherwise neither quinn nor the session is polled.
    #[tokio::test(start_paused = true)]
    async fn quinn_is_asked_only_while_the_law_is_under_its_rate() {
        let under = AtomicBool::new(false);
        let asks = AtomicU64::new(0);
        let checks = AtomicU64::new(0);
        let became_under = Notify::new();
        let task = ask_while(
            || {
                checks.fetch_add(1, Ordering::Relaxed);
                under
                    .load(Ordering::Relaxed)
                    .then(tokio::time::Instant::now)
            },
            || {
                asks.fetch_add(1, Ordering::Relaxed);
            },
            &became_under,
        );
        tokio::pin!(task);
        run_for(task.as_mut(), Duration::from_millis(50)).await;
        assert_eq!(asks.load(Ordering::Relaxed), 0, "not under rate");
        assert_eq!(checks.load(Ordering::Relaxed), 1, "one look, then a wait");

        under.store(true, Ordering::Relaxed);
        became_under.notify_one();
        run_for(task.as_mut(), Duration::from_millis(20)).await;
        let under_rate = asks.load(Ordering::Relaxed);
        assert!(
            (19..=21).contains(&under_rate),
            "{under_rate} asks in 20 ms"
        );

        under.store(false, Ordering::Relaxed);
        let checked = checks.load(Ordering::Relaxed);
        run_for(task.as_mut(), Duration::from_millis(100)).await;
        let after = asks.load(Ordering::Relaxed) - under_rate;
        assert!(after <= 1, "{after} asks once at the rate");
        let looks = checks.load(Ordering::Relaxed) - checked;
        assert!(looks <= 1, "{looks} looks in 100 ms at the rate");
    }

    /// A task's timer is moved only when its deadline is; it fires at
    /// its deadline, and once fired stays fired until moved.
    #[tokio::test(start_paused = true)]
    async fn a_task_timer_moves_only_with_its_deadline() {
        let start = tokio::time::Instant::now();
        let mut timer = TaskTimer::new();
        let at = start + Duration::from_millis(10);
        assert!(timer.set(at), "the first deadline");
        assert!(!timer.set(at), "the same deadline");
        timer.fired().await;
        assert_eq!(tokio::time::Instant::now(), at);
        assert!(!timer.set(at));
        timer.fired().await;
        assert_eq!(tokio::time::Instant::now(), at, "fired stays fired");
        let later = at + Duration::from_millis(5);
        assert!(timer.set(later), "a new deadline");
        timer.fired().await;
        assert_eq!(tokio::time::Instant::now(), later);
    }

    /// A connection's other feedback tasks end when its datagram reader
    /// lets its companions go.
    #[tokio::test]
    async fn the_feedback_tasks_end_with_the_connection() {
        let task = tokio::spawn(std::future::pending::<()>());
        let companions = Companions(vec![task.abort_handle()]);
        tokio::task::yield_now().await;
        assert!(!task.is_finished(), "runs while the connection lives");
        drop(companions);
        let ended = task.await.expect_err("aborted");
        assert!(ended.is_cancelled());
    }

    /// A flow whose gate opens 10 ms from now is not asked before then,
    /// and then every millisecond while it stays open.
    #[tokio::test(start_paused = true)]
    async fn quinn_is_asked_once_the_gate_opens() {
        let opens = tokio::time::Instant::now() + Duration::from_millis(10);
        let asks = AtomicU64::new(0);
        let never = Notify::new();
        let task = ask_while(
            || Some(opens),
            || {
                asks.fetch_add(1, Ordering::Relaxed);
            },
            &never,
        );
        tokio::pin!(task);
        run_for(task.as_mut(), Duration::from_millis(9)).await;
        assert_eq!(asks.load(Ordering::Relaxed), 0, "asked while shut");
        run_for(task.as_mut(), Duration::from_millis(11)).await;
        let open = asks.load(Ordering::Relaxed);
        assert!((9..=11).contains(&open), "{open} asks in 10 ms open");
    }

    #[test]
    fn an_ask_waits_for_quinn_to_read_its_window() {
        let last = AtomicU64::new(NEVER_ASKED);
        assert!(window_read_since(&last, 0), "the first ask goes");
        assert!(!window_read_since(&last, 0), "no read since: skipped");
        assert!(window_read_since(&last, 3), "read since: asked again");
        assert!(!window_read_since(&last, 3));
    }
}
