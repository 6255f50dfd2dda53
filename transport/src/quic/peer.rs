//! Per-connection state shared by the socket, the congestion controller
//! inside quinn, and the feedback tasks: the connection's sans-IO
//! [`Session`] behind a lock, its [`Published`] view that the socket's send
//! path reads without one, and the feedback task's wake-up.
//!
//! The socket finds it by connection ID (`demux.rs`); [`PeerTable`] is the
//! by-address fallback.

use std::cell::Cell;
use std::collections::HashMap;
use std::net::SocketAddr;
use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

use super::congestion::CongestionControl;
use super::header::starts_long;
pub(crate) use crate::session::quinn_view;
use crate::session::{Event, Next, PeerEvent, Progress, Published, Session};
use crate::wire::ecn::Ecn;
use crate::wire::hash::packet_hash;

/// One connection's shared state.
pub(crate) struct Peer {
    epoch: Instant,
    pub cc: CongestionControl,
    session: Mutex<Session>,
    published: Arc<Published>,
    pub notify: Notify,
    /// Whether the session is under its rate, and the wake-up of the task
    /// that asks while it is.
    pub under_rate: UnderRate,
    attached: AtomicBool,
    /// How often quinn read its window ([`Peer::quinn_window`]): the
    /// under-rate task asks again only once quinn has read it since.
    window_reads: AtomicU64,
    /// Where the session's events go besides the logs, if asked.
    #[cfg(feature = "qlog")]
    qlog: std::sync::OnceLock<Arc<super::qlog::QlogFile>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere must not take the connection down with a poisoned lock.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether a session is under its rate ([`Session::under_rate`]), as of
/// the last release of its lock, and the under-rate task's wake-up. The
/// task reads the flag without the lock, and a law's pace is computed
/// once per release, not again for every look.
#[derive(Default)]
pub(crate) struct UnderRate {
    now: AtomicBool,
    /// Notified when the flag turns true.
    pub became: Notify,
}

impl UnderRate {
    pub fn get(&self) -> bool {
        self.now.load(Ordering::Acquire)
    }

    /// Sets the flag; wakes the task if it turned true. Only the turn
    /// wakes: the task waits only after it read the flag false
    /// (`ask_while`, `quinn_is_asked_only_while_the_law_is_under_its_rate`),
    /// so a session that stays under its rate has nobody waiting, and a
    /// notification on every release cost a shared write per packet
    /// (`the_under_rate_task_is_woken_when_the_flag_turns_true`).
    fn set(&self, under: bool) {
        if under && !self.now.swap(true, Ordering::AcqRel) {
            self.became.notify_one();
        } else if !under {
            self.now.store(false, Ordering::Release);
        }
    }
}

/// The locked session, to read only ([`Peer::reading`]).
pub(crate) struct Reading<'a>(MutexGuard<'a, Session>);

impl Deref for Reading<'_> {
    type Target = Session;

    fn deref(&self) -> &Session {
        &self.0
    }
}

/// The locked session; when the lock is released, what happened inside it
/// is logged, and whether the session is left under its rate is published
/// ([`UnderRate`]). Every call that can change that goes through here.
pub(crate) struct Locked<'a> {
    session: MutexGuard<'a, Session>,
    cc: CongestionControl,
    under_rate: &'a UnderRate,
    #[cfg(feature = "qlog")]
    qlog: Option<&'a super::qlog::QlogFile>,
}

impl Deref for Locked<'_> {
    type Target = Session;

    fn deref(&self) -> &Session {
        &self.session
    }
}

impl DerefMut for Locked<'_> {
    fn deref_mut(&mut self) -> &mut Session {
        &mut self.session
    }
}

impl Drop for Locked<'_> {
    fn drop(&mut self) {
        while let Some(event) = self.session.poll_event() {
            log(self.cc, event);
            #[cfg(feature = "qlog")]
            if let Some(qlog) = self.qlog {
                qlog.log(Instant::now(), &event);
            }
        }
        self.under_rate.set(self.session.under_rate());
    }
}

fn log(cc: CongestionControl, event: Event) {
    match event {
        Event::ModeChanged { from, to } if to.is_fallback() => {
            tracing::info!(cc = %cc, from = from.name(), to = to.name(), "ecnq fallback to classic congestion control")
        }
        Event::ModeChanged { from, to } => {
            tracing::info!(cc = %cc, from = from.name(), to = to.name(), "ecnq mode change")
        }
        Event::LawReplaced { window, mode } => {
            tracing::info!(window, mode = mode.name(), "law replaced by Cubic")
        }
        Event::SchemeResumed { scheme, window } => {
            tracing::info!(window, scheme = %scheme, "router feedback resumed: the scheme's law is back")
        }
        Event::LawModeChanged {
            from,
            to,
            window,
            cause,
        } => {
            tracing::debug!(from = %from, to = %to, window, cause = cause.name(), "law mode change")
        }
        Event::Decrease {
            mode,
            from,
            to,
            cause,
        } => {
            tracing::info!(mode = %mode, from, to, cause = cause.name(), "multiplicative decrease")
        }
        Event::ReportRejected(error) => tracing::debug!(%error, "bad feedback report ignored"),
        Event::ReportIgnored => {
            tracing::debug!("report ignored: this connection runs no ecnq scheme")
        }
    }
}

impl Peer {
    /// The state of the connection with `remote`.
    pub fn new(cc: CongestionControl, mss: u64, remote: SocketAddr) -> Peer {
        let session = cc.session(mss, header_bytes(remote));
        Peer {
            epoch: Instant::now(),
            cc,
            published: session.published().clone(),
            session: Mutex::new(session),
            notify: Notify::new(),
            under_rate: UnderRate::default(),
            attached: AtomicBool::new(false),
            window_reads: AtomicU64::new(0),
            #[cfg(feature = "qlog")]
            qlog: std::sync::OnceLock::new(),
        }
    }

    /// Time since this connection's epoch: the `now` of the sans-IO core.
    pub fn since_epoch(&self, at: Instant) -> Duration {
        at.saturating_duration_since(self.epoch)
    }

    pub fn epoch(&self) -> Instant {
        self.epoch
    }

    pub fn published(&self) -> &Published {
        &self.published
    }

    /// Claims the state for one connection; false if one already has it.
    pub fn attach(&self) -> bool {
        !self.attached.swap(true, Ordering::AcqRel)
    }

    pub fn is_attached(&self) -> bool {
        self.attached.load(Ordering::Acquire)
    }

    pub fn session(&self) -> Locked<'_> {
        Locked {
            session: lock(&self.session),
            cc: self.cc,
            under_rate: &self.under_rate,
            #[cfg(feature = "qlog")]
            qlog: self.qlog.get().map(|q| &**q),
        }
    }

    /// The session for a read that changes nothing: its `&self` methods
    /// only, so there are no events to log and no rate to publish when the
    /// lock is released. quinn reads a rate law's window for every packet
    /// it sends; through [`Peer::session`] each read computed the law's
    /// pace again on release.
    pub fn reading(&self) -> Reading<'_> {
        Reading(lock(&self.session))
    }

    /// Logs the session's events into `qlog` too, from now on.
    #[cfg(feature = "qlog")]
    pub fn log_to(&self, qlog: Arc<super::qlog::QlogFile>) {
        let _ = self.qlog.set(qlog);
    }

    /// The window quinn may use at `at`: the published one, or, for a rate
    /// law, its gate's. Inside [`reading_stats`], the published one, and
    /// the read is not counted.
    pub fn quinn_window(&self, at: Instant) -> u64 {
        let published = self.published.window();
        if READING_STATS.get() {
            return published;
        }
        self.window_reads.fetch_add(1, Ordering::Relaxed);
        if !self.published.rate_gated() {
            return published;
        }
        // The law may have changed since the flag was read.
        self.reading()
            .window(self.since_epoch(at))
            .unwrap_or(published)
    }

    /// How often quinn has read its window.
    pub fn window_reads(&self) -> u64 {
        self.window_reads.load(Ordering::Relaxed)
    }

    /// The whole TOS byte for a datagram of `packets` packets (a GSO batch)
    /// quinn wants sent with `quinn_ecn`, which a controller that does not
    /// answer CE leaves Not-ECT ([`CongestionControl::ecn_capable`]). No
    /// lock: this is the send path.
    pub fn send_tos(&self, quinn_ecn: Option<quinn::udp::EcnCodepoint>, packets: u64) -> u8 {
        let quinn_ecn = quinn_ecn.filter(|_| self.cc.ecn_capable());
        let quinn_ecn = Ecn::from_bits(quinn_ecn.map_or(0, |e| e as u8));
        self.published.send_tos(quinn_ecn, packets)
    }

    /// One received datagram, or a GRO batch of `stride`-sized segments, all
    /// with TOS byte `tos`. Returns the codepoint to hand quinn. A datagram
    /// that starts with a long header (the handshake's) is counted but not
    /// decoded: routers wrote its marks a round trip before the data's, and
    /// a chain mixing the two spells neither (docs/design.md §2, Arrivals).
    pub fn on_receive(&self, at: Instant, tos: u8, payload: &[u8], stride: usize) -> Ecn {
        let now = self.since_epoch(at);
        let hashes = payload
            .chunks(stride.max(1))
            .map(|datagram| (!starts_long(datagram)).then(|| packet_hash(datagram)));
        let arrival = self.session().on_receive(now, tos, hashes);
        if arrival.wake_reporter {
            self.notify.notify_one();
        }
        arrival.quinn_ecn
    }

    /// Asks the report policy; with [`Next::Send`], also builds the report.
    pub fn poll_report(
        &self,
        at: Instant,
        srtt: Duration,
        progress: Progress,
    ) -> (Next, Option<Vec<u8>>) {
        self.session()
            .poll_report(self.since_epoch(at), srtt, progress)
    }

    /// What the peer said at `at`, whichever layer saw it: a report
    /// datagram (the connection), an ACK frame (the packet keys), or
    /// quinn's acknowledgements and congestion events (the controller).
    pub fn on_peer(&self, at: Instant, event: PeerEvent<'_>) {
        self.session().on_peer(self.since_epoch(at), event);
    }
}

/// Per-connection state by remote address, bounded.
#[derive(Default)]
pub(crate) struct PeerTable {
    map: Mutex<HashMap<SocketAddr, Arc<Peer>>>,
}

/// The table never holds more peers than this; states that no connection
/// claimed are dropped first when it is full (a flood of spoofed Initials
/// must not grow memory without bound).
const MAX_PEERS: usize = 16_384;

/// The IP and UDP header bytes of a packet to `remote`: 20 + 8 for IPv4
/// (also when a dual-stack socket names it IPv4-mapped), 40 + 8 for IPv6.
pub(crate) fn header_bytes(remote: SocketAddr) -> u64 {
    match canonical(remote) {
        SocketAddr::V4(_) => 28,
        SocketAddr::V6(_) => 48,
    }
}

/// Addresses are keyed in canonical form: a dual-stack socket sees IPv4
/// peers as IPv4-mapped IPv6 addresses.
pub(crate) fn canonical(addr: SocketAddr) -> SocketAddr {
    SocketAddr::new(addr.ip().to_canonical(), addr.port())
}

impl PeerTable {
    pub fn get(&self, addr: SocketAddr) -> Option<Arc<Peer>> {
        lock(&self.map).get(&canonical(addr)).cloned()
    }

    /// The state for `addr`, created with `cc` if there is none.
    pub fn get_or_insert(&self, addr: SocketAddr, cc: CongestionControl) -> Arc<Peer> {
        let mut map = lock(&self.map);
        if map.len() >= MAX_PEERS {
            map.retain(|_, peer| peer.is_attached());
        }
        map.entry(canonical(addr))
            .or_insert_with(|| Arc::new(Peer::new(cc, MSS, addr)))
            .clone()
    }

    /// A fresh state for `addr`, replacing any unattached one.
    pub fn insert(&self, addr: SocketAddr, peer: Arc<Peer>) {
        lock(&self.map).insert(canonical(addr), peer);
    }

    /// Removes `peer` if it is still the state for `addr`.
    pub fn remove(&self, addr: SocketAddr, peer: &Arc<Peer>) {
        let mut map = lock(&self.map);
        if map
            .get(&canonical(addr))
            .is_some_and(|p| Arc::ptr_eq(p, peer))
        {
            map.remove(&canonical(addr));
        }
    }
}

/// quinn's initial MTU (1200 bytes, RFC 9000 §14) is the laws' packet unit.
pub(crate) const MSS: u64 = 1200;

thread_local! {
    /// Set while this thread reads a connection's stats ([`reading_stats`]).
    static READING_STATS: Cell<bool> = const { Cell::new(false) };
}

/// Runs `read`, a read of quinn's connection stats: quinn fills their
/// window in by asking the controller, which is not quinn reading its
/// window to send. Inside, [`Peer::quinn_window`] gives the published
/// window, with no lock and no gate, and does not count the read: the
/// report task reads the stats for its progress counters on every wake,
/// and counted, those reads let the under-rate task ask while quinn's
/// driver had not run (`a_stats_read_is_not_a_window_read`).
pub(crate) fn reading_stats<T>(read: impl FnOnce() -> T) -> T {
    /// Clears the flag however `read` ends.
    struct Clear;
    impl Drop for Clear {
        fn drop(&mut self) {
            READING_STATS.set(false);
        }
    }
    READING_STATS.set(true);
    let _clear = Clear;
    read()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_stats_read_is_not_a_window_read() {
        let peer = Peer::new(
            CongestionControl::DEFAULT,
            MSS,
            "[::1]:4433".parse().unwrap(),
        );
        let now = Instant::now();
        let window = reading_stats(|| peer.quinn_window(now));
        assert_eq!(window, peer.published().window());
        assert_eq!(peer.window_reads(), 0, "a stats read");
        peer.quinn_window(now);
        assert_eq!(peer.window_reads(), 1, "quinn's own read, after");
    }

    /// Whether `notify` holds a wake-up.
    async fn woken(notify: &Notify) -> bool {
        tokio::time::timeout(Duration::ZERO, notify.notified())
            .await
            .is_ok()
    }

    #[tokio::test(start_paused = true)]
    async fn the_under_rate_task_is_woken_when_the_flag_turns_true() {
        let under = UnderRate::default();
        under.set(false);
        assert!(!under.get());
        assert!(!woken(&under.became).await, "at its rate");
        under.set(true);
        assert!(under.get());
        assert!(woken(&under.became).await, "turned under its rate");
        under.set(true);
        assert!(!woken(&under.became).await, "stayed under: no one to wake");
        under.set(false);
        under.set(true);
        assert!(woken(&under.became).await, "turned again");
    }
}
